"""Opening, reading and appending the files of a recording without trusting what is on disk.

Shared by the writer's streams and manifest: nothing here follows a symbolic link, opens
anything but a regular file, or reads more than it was asked for.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from rlvitals.recording import layout as fmt
from rlvitals.recording._resync import next_valid

__all__ = [
    "clean_end",
    "link_or_replace",
    "open_regular",
    "pread_all",
    "read_file",
    "write_all",
]

_TAIL_CHUNK = 1 << 16
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def write_all(fd: int, data: bytes) -> None:
    n = os.write(fd, data)
    if n == len(data):  # the usual case: one system call, no view
        return
    if n <= 0:
        raise OSError("write returned 0 bytes")
    view = memoryview(data)[n:]
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError("write returned 0 bytes")
        view = view[n:]


def link_or_replace(tmp: Path, final: Path) -> None:
    """Create ``final`` from ``tmp`` only if it does not exist (FileExistsError otherwise)."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise
    except OSError:  # no hard links here: check, then replace (a small race, rank 0 fixes it)
        if final.exists():
            raise FileExistsError(final) from None
        os.replace(tmp, final)


def clean_end(fd: int, kind: str, size: int) -> int:
    """Byte offset where the stream's last complete record ends (``size`` if it is clean).

    Only a torn or garbage *tail* is cut; a stream with a corrupt record followed by valid
    ones is left whole for the reader to report. Reads through ``fd`` (the stream already
    opened and checked), never the name again.
    """
    if kind == "groups":
        pos = 0
        while pos < size:
            head = fmt.header_at(os.pread(fd, fmt.FRAME_HEADER.size, pos), 0)
            if head is None or pos + head[1] > size:
                break
            pos += head[1]
        if pos == size:
            return size
        rest = pread_all(fd, size - pos, pos)
        return size if next_valid(rest, 0) is not None else pos
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        chunk = pread_all(fd, end - start, start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        end = start
    return 0


def pread_all(fd: int, n: int, offset: int) -> bytes:
    parts = []
    while n > 0:
        chunk = os.pread(fd, min(n, 1 << 24), offset)
        if not chunk:
            break
        parts.append(chunk)
        n -= len(chunk)
        offset += len(chunk)
    return b"".join(parts)


def open_regular(path: Path, flags: int) -> int:
    """``os.open`` that refuses what a recording never holds: a symbolic link (never followed:
    a planted link would make the recorder truncate or append to its target), anything but a
    regular file (a FIFO would block, a device swallow the records), or, to write, a file with
    other hard links (appending would change them too)."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise OSError(
                e.errno, "is a symbolic link; a recording holds regular files only"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file; a recording holds regular files only")
        if st.st_nlink > 1 and flags & (os.O_WRONLY | os.O_RDWR):  # reading one is harmless
            raise OSError(
                errno.EMLINK, f"has {st.st_nlink - 1} other hard link(s); refusing to change it"
            )
        if _NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_file(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of a regular file opened with :func:`open_regular`'s checks
    (ValueError when it is longer)."""
    fd = open_regular(path, os.O_RDONLY)
    try:
        data = pread_all(fd, limit + 1, 0)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data

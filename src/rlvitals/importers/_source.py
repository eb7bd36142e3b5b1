"""Where an importer's bytes come from: a file, a compressed file, or a stream read once.

Every importer opens the path it is given with :func:`open_input` (never ``open``), so:

- **compressed files** (gzip, and zstd when ``zstandard`` or Python 3.14's ``compression.zstd``
  is there) are recognised by their magic bytes and decompressed on the fly, for every text
  format; the sniffers see the first 64 KiB of the decompressed text;
- **streams** — ``-`` (standard input), ``/dev/stdin``, a process substitution
  (``<(cat train.log)``, a ``/dev/fd/N`` pipe) or a named FIFO — are read once: the sniffers see a
  buffered prefix and the importer continues the same stream from its first byte, so nothing
  is lost (:class:`StreamInput`, registered for the duration of :func:`input_context`);
- a FIFO never blocks the program: it is opened non-blocking and given
  :data:`FIFO_WAIT_S` seconds to get a writer, then refused; a FIFO found inside a directory
  (a TensorBoard or ``mlruns`` folder) is skipped by the walkers (:func:`is_regular`).

Memory: a stream keeps at most :data:`MAX_REPLAY_BYTES` buffered (what the sniffers asked to
see), and only until the importer has read past it.

One module, a little over 500 lines: the stream registry, the FIFO opening, the replay of a
stream's buffered prefix and decompression keep one promise together (the importer continues,
from its first byte, the input the sniffers began), so they are read together.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import os
import select
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from rlvitals.errors import InputError, MissingExtraError

__all__ = [
    "FIFO_WAIT_S",
    "STDIN",
    "STDIN_NAME",
    "RawReader",
    "StreamInput",
    "compression_of",
    "decompress_errors",
    "file_mode",
    "input_bytes",
    "input_context",
    "input_size",
    "is_lenient",
    "is_regular",
    "is_stream",
    "lenient_reading",
    "open_input",
    "read_notes",
    "read_prefix",
    "walk_tree",
]

STDIN = "-"
"""The path that means standard input (``rlvitals doctor -``)."""
STDIN_NAME = "<stdin>"
"""How standard input is named in messages and in ``manifest.source``."""
FIFO_WAIT_S = 2.0
"""A FIFO without a writer after this long is refused instead of waited on."""
MAX_REPLAY_BYTES = 16 << 20
"""A stream's buffered prefix never grows past this (sniffers read 64 KiB, scans 8 MiB)."""
GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20

_STREAMS: contextvars.ContextVar[dict[str, StreamInput] | None] = contextvars.ContextVar(
    "rlvitals_streams", default=None
)


def compression_of(head: bytes) -> str | None:
    """``"gzip"``, ``"zstd"`` or None from a file's first bytes.

    >>> compression_of(b"\\x1f\\x8b\\x08"), compression_of(b'{"step": 1}')
    ('gzip', None)
    """
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def _zstd_reader(raw: BinaryIO, path: Path) -> BinaryIO:
    try:
        from compression import zstd  # Python 3.14+

        return zstd.ZstdFile(raw)  # type: ignore[return-value]
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError:
        raise MissingExtraError("reading zstd-compressed logs", "zstd", "zstandard") from None
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return io.BufferedReader(reader, buffer_size=_CHUNK)  # type: ignore[arg-type]


class RawReader(io.RawIOBase):
    """A raw byte source that says it is readable (what ``io.BufferedReader`` asks of one)."""

    def readable(self) -> bool:
        return True


class _GzipLikeGunzip(RawReader):
    """A gzip reader that ends where ``gzip -d`` ends, with a note instead of an error:

    - **trailing garbage** after complete members (a log with bytes appended, a padded
      download): the members are read, the rest ignored (``gzip -d``: "trailing garbage
      ignored");
    - **a stream cut short** (a ``.gz`` still being written, or cut): everything decompressed
      before the cut is read, so a line reader keeps the complete lines and drops the torn one.

    A CRC mismatch or corrupt deflate data stays an error (the bytes read are wrong).
    """

    def __init__(self, gz: BinaryIO, path: Path) -> None:
        self._gz = gz
        self._path = path
        self._out = 0
        self._ended = False

    def readinto(self, b) -> int:  # type: ignore[override]
        if self._ended:
            return 0
        import gzip

        try:
            # read1: one member read per call, so that an error comes on a call of its own
            # and never takes the bytes decompressed before it (readinto loops to fill b).
            data = self._gz.read1(len(b))  # type: ignore[attr-defined]
            n = len(data)
            b[:n] = data
        except EOFError:
            self._ended = True
            _note(
                self._path,
                f"the gzip data ends early after {self._out:,} bytes (a file still being "
                "written, or cut): the complete lines before the end are read",
            )
            return 0
        except gzip.BadGzipFile as e:
            if not self._out or not str(e).startswith("Not a gzipped file"):
                raise
            self._ended = True
            _note(self._path, "trailing garbage after the gzip data ignored (as gzip -d does)")
            return 0
        self._out += n
        return n

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._gz.close()
        super().close()


_NOTES: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "rlvitals_read_notes", default=None
)


def _note(path: Path, text: str) -> None:
    notes = _NOTES.get()
    line = f"{path}: {text}"
    if notes is not None and line not in notes:
        notes.append(line)


@contextlib.contextmanager
def read_notes() -> Iterator[list[str]]:
    """Collect, while the block runs, what reading noticed below the importers (a gzip file
    cut short or followed by garbage): the list the block gets fills as inputs are read."""
    notes: list[str] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def _decompress(raw: BinaryIO, kind: str | None, path: Path) -> BinaryIO:
    if kind == "gzip":
        import gzip  # on first use: the compression modules are ~1 ms of every start-up

        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        return io.BufferedReader(_GzipLikeGunzip(gz, path), buffer_size=_CHUNK)  # type: ignore[return-value]
    if kind == "zstd":
        return _zstd_reader(raw, path)
    return raw


def decompress_errors() -> tuple[type[BaseException], ...]:
    """What a damaged compressed file raises while it is read (truncated, bad data)."""
    import zlib

    errors: list[type[BaseException]] = [EOFError, zlib.error]
    gzip = sys.modules.get("gzip")  # imported by the first gzip file opened, if any
    if gzip is not None:
        errors.append(gzip.BadGzipFile)
    zstandard = sys.modules.get("zstandard")
    if zstandard is not None:
        errors.append(zstandard.ZstdError)
    zstd = sys.modules.get("compression.zstd")
    if zstd is not None:
        errors.append(zstd.ZstdError)
    return tuple(errors)


def file_mode(path: str | os.PathLike, follow: bool = True) -> int:
    """``st_mode`` of ``path`` (of the link itself unless ``follow``), or 0 when it cannot be
    looked at: an unreadable directory (a ``lost+found``, another user's run) is then skipped
    by the walkers, never a PermissionError."""
    try:
        return (os.stat if follow else os.lstat)(path).st_mode
    except (OSError, ValueError):
        return 0


def is_regular(path: str | os.PathLike) -> bool:
    """True for a regular file (not a FIFO, a socket or a device); never opens it."""
    return stat.S_ISREG(file_mode(path))


def _is_nonregular_file(path: Path) -> bool:
    mode = file_mode(path)
    return bool(mode) and not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _open_fifo(path: Path) -> BinaryIO:
    """Open a FIFO or a pipe for reading without ever blocking on a missing writer.

    A character or block device (``/dev/zero``, ``/dev/urandom``, a disk; a log symlinked to
    one) is refused before it is opened: it never ends, so no budget but time would stop it.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "character" if stat.S_ISCHR(mode) else "block"
        real = os.path.realpath(path)
        shown = f" ({real})" if real != os.fspath(path) else ""
        raise InputError(
            path,
            f"is a {kind} device{shown}, not a log (a device may never end); copy what you want "
            "read into a file, or pipe it in: CMD | rlvitals doctor -",
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    first = b""
    deadline = time.monotonic() + FIFO_WAIT_S
    try:
        while True:
            try:
                first = os.read(fd, 65536)
            except BlockingIOError:
                break  # a writer is there: read on, blocking, as from any pipe
            if first or not stat.S_ISFIFO(os.fstat(fd).st_mode):
                break
            if time.monotonic() >= deadline:  # no writer: nothing will ever come
                raise InputError(
                    path,
                    "is a FIFO with no writer (nothing to read); start the writer first, "
                    "or pipe the log in: cat LOG | rlvitals doctor -",
                )
            select.select([fd], [], [], 0.05)
        os.set_blocking(fd, True)
        f = os.fdopen(fd, "rb", buffering=_CHUNK)
    except BaseException:
        os.close(fd)
        raise
    return _Prefixed(first, f) if first else f  # type: ignore[return-value]


class _Prefixed(RawReader):
    """Bytes already read, then the rest of a file object."""

    def __init__(self, first: bytes, rest: BinaryIO):
        self._first = memoryview(first)
        self._rest = rest

    def readinto(self, b) -> int:  # type: ignore[override]
        if self._first:
            n = min(len(b), len(self._first))
            b[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        return self._rest.readinto(b)  # type: ignore[attr-defined]

    def close(self) -> None:
        self._rest.close()
        super().close()


class StreamInput:
    """A stream read once: a growing buffered prefix for the sniffers, then the stream itself.

    :meth:`prefix` reads ahead (and keeps) up to ``n`` bytes; :meth:`reader` returns a file
    object that starts at byte 0 — the buffer, then the rest of the stream. After a reader has
    gone past the buffer, no new reader can start (the bytes are gone): :class:`InputError`.
    """

    def __init__(self, name: Path, src: BinaryIO):
        self.name = name
        self._src = src
        self._buf = bytearray()
        self._eof = False
        self.consumed = False

    def prefix(self, n: int) -> bytes:
        """The first ``min(n, MAX_REPLAY_BYTES)`` bytes of the stream (fewer at its end)."""
        if self.consumed:
            raise InputError(self.name, "a stream can be read only once")
        n = min(n, MAX_REPLAY_BYTES)
        while len(self._buf) < n and not self._eof:
            chunk = self._src.read(min(n - len(self._buf), _CHUNK))
            if not chunk:
                self._eof = True
                break
            self._buf += chunk
        return bytes(self._buf[:n])

    def reader(self) -> BinaryIO:
        if self.consumed:
            raise InputError(self.name, "a stream can be read only once")
        return io.BufferedReader(_Replay(self), buffer_size=_CHUNK)  # type: ignore[return-value]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._src.close()


class _Replay(RawReader):
    def __init__(self, stream: StreamInput):
        self._s = stream
        self._pos = 0

    def readinto(self, b) -> int:  # type: ignore[override]
        s = self._s
        buf = s._buf
        if self._pos < len(buf):
            n = min(len(b), len(buf) - self._pos)
            b[:n] = buf[self._pos : self._pos + n]
            self._pos += n
            return n
        if s._eof:
            return 0
        if not s.consumed:
            s.consumed = True
            buf.clear()  # the importer is past the prefix: free it
        return s._src.readinto(b) or 0  # type: ignore[attr-defined]


def _registered(path: str | os.PathLike) -> StreamInput | None:
    streams = _STREAMS.get()
    if not streams:
        return None
    return streams.get(os.fspath(path))


def is_stream(path: str | os.PathLike) -> bool:
    """True when ``path`` stands for a stream being read once (stdin, a pipe, a FIFO): it
    has no size, no siblings and no second reading."""
    return _registered(path) is not None


@contextlib.contextmanager
def input_context(path: str | os.PathLike) -> Iterator[Path]:
    """Make ``path`` readable by :func:`open_input` while the block runs; yields the path to
    use (``<stdin>`` for ``-``).

    A regular file or directory needs nothing. Standard input, a pipe, a device or a FIFO is
    opened here, once (a FIFO never blocks: :data:`FIFO_WAIT_S`), decompressed when its first
    bytes say so, and registered so that every :func:`open_input` of the path replays it.
    """
    raw_name = os.fspath(path)
    if raw_name == STDIN:
        name = Path(STDIN_NAME)
        if sys.stdin is None or sys.stdin.closed:
            raise InputError(name, "no standard input to read")
        try:
            tty = sys.stdin.isatty()
        except (AttributeError, ValueError):
            tty = False
        if tty:
            raise InputError(
                name, "standard input is a terminal; pipe a log in: cat LOG | rlvitals doctor -"
            )
        src: BinaryIO = getattr(sys.stdin, "buffer", sys.stdin)  # type: ignore[assignment]
    else:
        name = Path(path)
        if _registered(name) is not None or not _is_nonregular_file(name):
            yield name
            return
        src = _open_fifo(name)
    raw = StreamInput(name, src)
    stream = raw
    kind = compression_of(raw.prefix(4))
    if kind is not None:
        stream = StreamInput(name, _decompress(raw.reader(), kind, name))
    streams = dict(_STREAMS.get() or {})
    streams[os.fspath(name)] = stream
    token = _STREAMS.set(streams)
    try:
        yield name
    finally:
        _STREAMS.reset(token)
        if raw_name != STDIN:
            stream.close()
            raw.close()


def read_prefix(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of ``path``'s content (decompressed; a stream's buffered prefix)."""
    s = _registered(path)
    if s is not None:
        return s.prefix(n)
    with open_input(path) as f:
        return f.read(n)


def open_input(path: str | os.PathLike) -> BinaryIO:
    """A binary file object over the content of ``path`` from its first byte.

    Compressed files are decompressed; a registered stream (:func:`input_context`) is
    replayed; a FIFO is opened without blocking on a missing writer.
    """
    s = _registered(path)
    if s is not None:
        return s.reader()
    p = Path(path)
    if _is_nonregular_file(p):
        return _open_fifo(p)
    f = open(p, "rb", buffering=_CHUNK)  # noqa: SIM115 - returned to the caller
    try:
        kind = compression_of(f.peek(4)[:4])
        if kind is None:
            return f
        return _decompress(f, kind, p)
    except BaseException:
        f.close()
        raise


def input_size(path: str | os.PathLike) -> int | None:
    """Bytes of content for progress reports: the file size for a plain regular file, None for
    a stream or a compressed file (whose decompressed size is not known in advance)."""
    if _registered(path) is not None:
        return None
    try:
        size = os.stat(path).st_size
        with open(path, "rb") as f:
            if compression_of(f.read(4)) is not None:
                return None
    except OSError:
        return None
    return size


_WALK_ENTRIES = 20_000
"""Directory entries :func:`input_bytes` looks at (the memory budget of a huge tree is then
the size of its first entries, still far more than a run's logs)."""


WALK_DEPTH = 64
"""Folder levels :func:`walk_tree` goes below its root (a run's files sit a few levels down)."""


def walk_tree(
    root: str | os.PathLike, max_entries: int, max_depth: int = WALK_DEPTH
) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(root)`` top down in name order, iterative (a folder 1,000 levels deep is no
    ``RecursionError``), never following links to folders, skipping unreadable folders, and
    ending after ``max_entries`` entries or below ``max_depth`` levels. The caller may prune
    ``dirnames`` in place, as with ``os.walk``."""
    stack: list[tuple[str, int]] = [(os.fspath(root), 0)]
    seen = 0
    while stack:
        top, depth = stack.pop()
        try:
            with os.scandir(top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        dirs, files = [], []
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            (dirs if is_dir else files).append(e.name)
        seen += len(entries)
        yield top, dirs, files
        if seen > max_entries:
            return
        if depth < max_depth:
            stack.extend((os.path.join(top, d), depth + 1) for d in reversed(dirs))


def input_bytes(path: str | os.PathLike) -> int:
    """Size of what reading ``path`` may read, for the memory budget
    (:mod:`rlvitals.recording.memory`): a file's size, the regular files under a directory
    (symbolic links not followed), 0 for a stream (its bytes count as they are read)."""
    if _registered(path) is not None:
        return 0
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size if stat.S_ISREG(st.st_mode) else 0
    total = 0
    for dirpath, _dirnames, filenames in walk_tree(path, _WALK_ENTRIES):
        for name in filenames:
            try:
                lst = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(lst.st_mode):
                total += lst.st_size
    return total


_LENIENT: contextvars.ContextVar[bool] = contextvars.ContextVar("rlvitals_lenient", default=False)


@contextlib.contextmanager
def lenient_reading(on: bool = True) -> Iterator[None]:
    """While the block runs, importers skip damaged records they would otherwise refuse
    (:func:`is_lenient`), saying each skip in ``Run.warnings``."""
    token = _LENIENT.set(bool(on))
    try:
        yield
    finally:
        _LENIENT.reset(token)


def is_lenient() -> bool:
    """True inside :func:`lenient_reading` (``rlvitals doctor --lenient``, ``load(lenient=True)``)."""
    return _LENIENT.get()

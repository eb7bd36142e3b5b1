"""Where a command's ``-o`` may write, and how: never into an input, always whole.

Two rules, shared by ``doctor``, ``scan``, ``compare`` and every command's ``-o``
(:func:`check_output` and :func:`emit` apply them):

1. :func:`refuse_input_target` refuses an output that *is* an input — by path, through a symlink,
   or as a hard link (same ``(st_dev, st_ino)``) — or that lies inside an input folder.
2. :func:`write_replacing` writes the whole output to a temporary file in the output's folder and
   ``os.replace``\\ s it into place. A rename swaps the directory entry, never the old file's
   bytes, so even a hard link that the first rule could not see (a link made after the check)
   keeps the input's contents, and a reader never sees half a report.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from rlvitals.errors import InputError

__all__ = ["check_output", "emit", "refuse_input_target", "write_replacing"]


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def refuse_input_target(output: str | os.PathLike, inputs: Iterable[str | os.PathLike]) -> None:
    """Raise :class:`InputError` when writing ``output`` would replace or land inside an input.

    Args:
        output: the ``-o`` the user gave.
        inputs: the files or folders the command reads (``-`` for stdin is ignored).

    >>> refuse_input_target("report.html", ["-"])
    """
    out = os.fspath(output)
    out_real = os.path.realpath(out)
    out_id = _identity(out)
    for src in inputs:
        src = os.fspath(src)
        if src == "-":
            continue
        real = os.path.realpath(src)
        if out_real == real or (out_id is not None and out_id == _identity(src)):
            how = "" if os.path.abspath(out) == os.path.abspath(src) else " (the same file)"
            raise InputError(out, f"-o names the input {src}{how}; the output would replace it")
        if os.path.isdir(real) and out_real.startswith(real.rstrip(os.sep) + os.sep):
            raise InputError(
                out, f"-o lies inside the input folder {src}; rlvitals never writes into a run"
            )


def write_replacing(output: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``output`` through a temporary file and an atomic rename.

    The new file gets the mode an ordinary ``open(..., "w")`` would (the umask applies), or the
    mode of the file it replaces. Raises :class:`InputError` naming ``output`` when the folder
    cannot be written; the temporary file is removed on any failure.
    """
    out = Path(output)
    if out.is_dir():
        raise InputError(out, "-o names a folder; give a file name")
    import tempfile  # only when writing: it imports random and shutil

    data = text.encode("utf-8")
    tmp: str | None = None
    try:
        try:
            mode = os.stat(out).st_mode & 0o7777
        except OSError:
            umask = os.umask(0)  # read the umask: it has no getter
            os.umask(umask)
            mode = 0o666 & ~umask
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.replace(tmp, out)
    except OSError as e:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise InputError(out, f"cannot write: {e.strerror or e}") from None


def check_output(
    output: str | None,
    inputs: Iterable[str | os.PathLike],
    fmt: str | None,
    suffix_format: Callable[[str], str | None],
    suffixes: str,
    what: str = "format",
) -> str:
    """The output format of a command: ``fmt`` (its ``--format``), else the one the suffix of
    ``output`` names, else ``text``. An ``output`` is first refused when it would replace or land
    inside one of ``inputs`` (:func:`refuse_input_target`), then when ``fmt`` is None and its
    suffix names no format (``suffixes`` lists those that do, for the message)."""
    if output is None:
        return fmt or "text"
    refuse_input_target(output, inputs)
    fmt = fmt or suffix_format(output)
    if fmt is None:
        raise InputError(output, f"-o: no {what} for this file name ({suffixes}; or pass --format)")
    return fmt


def emit(text: str, output: str | os.PathLike | None, said: str = "") -> None:
    """Print ``text`` on stdout, or write it whole to ``output`` (:func:`write_replacing`) and
    say so on stderr: ``rlvitals: wrote FILE`` and ``said``."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rlvitals.report.common import one_line  # the file name comes from the user

    write_replacing(output, text)
    print(f"rlvitals: wrote {one_line(output)}{said}", file=sys.stderr)

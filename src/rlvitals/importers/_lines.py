"""Streaming line readers shared by the text importers.

A file being written by a live run may end in a torn line (no trailing newline, invalid JSON):
it is dropped with a warning. Any other bad line is an :class:`InputError` naming the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError

__all__ = ["MAX_LINE_BYTES", "MAX_STEP", "iter_json_lines", "iter_lines", "json_step"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line is an error rather than a memory blow-up."""
MAX_STEP = 2**63 - 1
"""Steps are stored as int64; a larger step number is bad input."""
_CHUNK = 1 << 20
_PROGRESS_EVERY = 8 << 20


def iter_lines(path: Path, progress=None) -> Iterator[tuple[int, bytes, bool]]:
    """Yield ``(lineno, line_without_newline, complete)`` in bounded memory.

    ``complete`` is False only for a last line with no trailing newline.
    """
    total = os.path.getsize(path)
    done = 0
    next_report = _PROGRESS_EVERY
    lineno = 0
    with open(path, "rb") as f:
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            lineno += 1
            done += len(line)
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                raise InputError(path, f"line longer than {MAX_LINE_BYTES} bytes", f"line {lineno}")
            if progress is not None and done >= next_report:
                progress(done, total)
                next_report = done + _PROGRESS_EVERY
            if line.endswith(b"\n"):
                yield lineno, line.rstrip(b"\r\n"), True
            else:
                yield lineno, line, False
    if progress is not None:
        progress(total, total)


def iter_json_lines(path: Path, warnings: list[str], progress=None) -> Iterator[tuple[int, Any]]:
    """Yield ``(lineno, parsed)`` for each non-blank line of a JSONL file.

    Bare ``NaN``/``Infinity`` are accepted (Python's json does). A torn last line is dropped
    with a message appended to ``warnings``.
    """
    loads = json.loads
    for lineno, line, complete in iter_lines(path, progress):
        if not line.strip():
            continue
        try:
            yield lineno, loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            if not complete:
                warnings.append(
                    f"{path}: line {lineno}: torn last line ignored (file still being written?)"
                )
                return
            msg = e.msg if isinstance(e, json.JSONDecodeError) else type(e).__name__
            raise InputError(path, f"invalid JSON: {msg}", f"line {lineno}") from None


def json_step(path: Path, obj: dict[str, Any], key: str, where: str) -> int:
    """``obj[key]`` as a step: an integer in int64 range, else InputError naming the place."""
    step = obj.get(key)
    if isinstance(step, bool) or not isinstance(step, int):
        raise InputError(path, f"'{key}' must be an integer, got {str(step)[:40]!r}", where)
    if not -MAX_STEP <= step <= MAX_STEP:
        raise InputError(path, f"step number {str(step)[:24]} is out of range", where)
    return step

"""Streaming line readers shared by the text importers.

A file being written by a live run may end in a torn line (no trailing newline, invalid JSON):
it is dropped with a warning. Any other bad line is an :class:`InputError` naming the line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlvitals._orjson import orjson_function
from rlvitals.errors import InputError
from rlvitals.importers._source import input_size, is_lenient, is_stream, open_input, read_prefix
from rlvitals.recording.memory import JSON_CHECK_BYTES, check_json, note_read

__all__ = [
    "MAX_BLANK_RUN",
    "MAX_LINE_BYTES",
    "MAX_STEP",
    "blank_run_error",
    "check_file",
    "is_number",
    "iter_json_array",
    "iter_json_lines",
    "iter_lines",
    "json_float",
    "json_step",
]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer line is an error rather than a memory blow-up."""
MAX_BLANK_RUN = 1_000_000
"""More blank lines in a row than this is an error, not minutes of reading nothing: a
"newline bomb" (a gzip of a gigabyte of newlines is one megabyte) ends in a fraction of a
second. No logger writes a million empty lines."""
MAX_STEP = 2**63 - 1
"""Steps are stored as int64; a larger step number is bad input."""
_CHUNK = 1 << 20
FAST_JSON_BYTES = 512 << 10
"""Files at least this large (or of unknown size) are parsed with orjson when it is there."""
_PROGRESS_EVERY = 8 << 20


def blank_run_error(path: Path, lineno: int) -> InputError:
    """The error of a run of :data:`MAX_BLANK_RUN` blank lines ending at ``lineno``."""
    return InputError(
        path,
        f"more than {MAX_BLANK_RUN:,} blank lines in a row (a newline bomb?); not read further",
        f"line {lineno}",
    )


def check_file(path: Path, fmt: str) -> None:
    """InputError unless ``path`` is a non-empty file (plain messages for forced formats);
    a stream or a compressed file counts as a file."""
    if is_stream(path):
        if not read_prefix(path, 1):
            raise InputError(path, "file is empty")
        return
    if path.is_dir():
        raise InputError(path, f"is a directory; the {fmt} format reads one file")
    if path.stat().st_size == 0 or not read_prefix(path, 1):
        raise InputError(path, "file is empty")


def fast_loads() -> Callable[[bytes], Any] | None:
    """``orjson.loads`` when orjson is installed (a dependency; ~2.5x faster than ``json.loads``
    on metric lines) and ``RLVITALS_JSON`` is not ``stdlib``; else None.

    orjson refuses what Python's json accepts and loggers write (bare ``NaN``/``Infinity``,
    numbers beyond float range, lone surrogates): callers retry such a line with ``json.loads``,
    so what a file parses into never depends on which parser read it. The one difference
    left: an integer beyond 64 bits becomes a float under orjson (the same float the builder
    would store; a step that large is refused either way).
    """
    return orjson_function("loads")


def iter_lines(path: Path, progress=None, size: Any = ...) -> Iterator[tuple[int, bytes, bool]]:
    """Yield ``(lineno, line_without_newline, complete)`` in bounded memory.

    ``complete`` is False only for a last line with no trailing newline. ``path`` may be
    compressed or a stream (:func:`rlvitals.importers._source.open_input`); its total size is
    then unknown and progress reports the bytes read so far as the total. ``size``:
    :func:`~rlvitals.importers._source.input_size` of ``path`` when the caller has it.
    """
    if size is ...:
        size = input_size(path)
    total = size or 0
    done = 0
    next_report = _PROGRESS_EVERY
    lineno = 0
    blank = 0
    with open_input(path) as f:
        while True:
            line = f.readline(MAX_LINE_BYTES + 1)
            if not line:
                break
            lineno += 1
            if len(line) <= 2 and not line.strip():
                blank += 1
                if blank > MAX_BLANK_RUN:
                    raise blank_run_error(path, lineno)
            else:
                blank = 0
            done += len(line)
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                raise InputError(
                    path,
                    f"line longer than {MAX_LINE_BYTES} bytes (the limit of one line)",
                    f"line {lineno}",
                )
            if done >= next_report:
                note_read(done)  # a stream or a decompressed file: the memory budget grows
                if progress is not None:
                    progress(done, max(total, done))
                next_report = done + _PROGRESS_EVERY
            if line.endswith(b"\n"):
                yield lineno, line.rstrip(b"\r\n"), True
            else:
                yield lineno, line, False
    if progress is not None:
        progress(max(total, done), max(total, done))


def iter_json_lines(
    path: Path, warnings: list[str], progress=None, *, objects: bool = False
) -> Iterator[tuple[int, Any]]:
    """Yield ``(lineno, parsed)`` for each non-blank line of a JSONL file; with ``objects``,
    a line that is not a JSON object is an :class:`InputError` naming it.

    Bare ``NaN``/``Infinity`` are accepted (Python's json does). A torn last line is dropped
    with a message appended to ``warnings``. A line that would parse into far more memory than
    its size is refused (:func:`rlvitals.recording.memory.check_json`). Under
    :func:`~rlvitals.importers._source.lenient_reading`, an invalid line in the middle is
    skipped and counted in one warning instead of raising.
    """
    loads = json.loads
    size = input_size(path)
    # Importing orjson costs ~12 M instructions (~2.5 ms): more than it saves on a small file.
    fast = (fast_loads() if size is None or size >= FAST_JSON_BYTES else None) or loads
    lenient = is_lenient()
    skipped, first_bad = 0, ""
    for lineno, line, complete in iter_lines(path, progress, size):
        if not line.strip():
            continue
        if len(line) >= JSON_CHECK_BYTES:
            check_json(path, line, f"line {lineno}")
        try:
            obj = fast(line)
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            err: BaseException | None = e
            if fast is not loads:  # orjson's refusals (see fast_loads): Python's json decides
                try:
                    obj, err = loads(line), None
                except (ValueError, UnicodeDecodeError, RecursionError) as e2:
                    err = e2
            if err is not None:
                if not complete:
                    warnings.append(
                        f"{path}: line {lineno}: torn last line ignored (file still being written?)"
                    )
                    break
                msg = err.msg if isinstance(err, json.JSONDecodeError) else type(err).__name__
                if not lenient:
                    raise InputError(path, f"invalid JSON: {msg}", f"line {lineno}") from None
                skipped += 1
                first_bad = first_bad or f"line {lineno} ({msg})"
                continue
        if objects and type(obj) is not dict:
            raise InputError(path, "expected a JSON object per line", f"line {lineno}")
        yield lineno, obj
    if skipped:
        warnings.append(
            f"{path}: {skipped} invalid JSON line(s) skipped (--lenient); the first: {first_bad}"
        )


def is_number(text: str) -> bool:
    """Whether a cell's text reads as a number (``float`` takes it: ``nan``, `` 1e3 ``).

    >>> is_number(" 1e3 "), is_number("nan"), is_number("12/500")
    (True, True, False)
    """
    try:
        float(text)
    except ValueError:
        return False
    return True


def json_float(v: Any) -> float | None:
    """A JSON number as float (an integer beyond float range is ±inf, as JSON allows any size);
    None for anything else, booleans included.

    >>> json_float(10**400), json_float(2), json_float(True), json_float("1")
    (inf, 2.0, None, None)
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def json_step(path: Path, obj: dict[str, Any], key: str, where: str) -> int:
    """``obj[key]`` as a step: an integer in int64 range, else InputError naming the place."""
    step = obj.get(key)
    if isinstance(step, float) and step.is_integer() and abs(step) > MAX_STEP:
        # orjson reads an integer beyond 64 bits as a float: still a step out of range
        raise InputError(path, f"step number {step:.0f}"[:36] + " is out of range", where)
    if isinstance(step, bool) or not isinstance(step, int):
        raise InputError(path, f"'{key}' must be an integer, got {str(step)[:40]!r}", where)
    if not -MAX_STEP <= step <= MAX_STEP:
        raise InputError(path, f"step number {str(step)[:24]} is out of range", where)
    return step


def iter_json_array(
    path: Path, progress=None, max_item_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, int, Any]]:
    """Yield ``(array_number, item_number, item)`` for the items of the JSON array(s) in ``path``,
    streamed: memory is bounded by the largest item, not the file.

    ``json.dump(a, f); json.dump(b, f)`` writes two arrays back to back: their items come with
    array numbers 0 and 1. Whitespace (any indent) and a UTF-8 BOM are fine; bare ``NaN`` is
    read as Python's json reads it.

    Raises:
        InputError: not a JSON array, invalid JSON (naming the item and byte), a torn end.
    """
    import codecs

    dec = json.JSONDecoder()
    decode = codecs.getincrementaldecoder("utf-8-sig")("strict").decode
    size = input_size(path)
    buf = ""
    pos = 0
    base = 0  # characters dropped from the front of buf
    done = 0
    eof = False
    array = -1
    item = 0
    in_array = False
    with open_input(path) as f:

        def more() -> bool:
            nonlocal buf, pos, base, done, eof
            if eof:
                return False
            chunk = f.read(_CHUNK)
            done += len(chunk)
            note_read(done)
            if progress is not None:
                progress(done, max(size or 0, done))
            try:
                text = decode(chunk, final=not chunk)
            except UnicodeDecodeError as e:
                raise InputError(
                    path, "not UTF-8 text", f"byte {done - len(chunk) + e.start}"
                ) from None
            if pos > _CHUNK:
                base += pos
                buf, pos = buf[pos:], 0
            buf += text
            if not chunk:
                eof = True
            return True

        while True:
            while True:  # skip blanks (and the comma between items)
                while pos < len(buf) and buf[pos] in " \t\r\n":
                    pos += 1
                if pos < len(buf) or not more():
                    break
            if pos >= len(buf):
                if in_array:
                    raise InputError(
                        path, "JSON array is not closed (a torn file?)", f"item {item}"
                    )
                if array < 0:
                    raise InputError(path, "file is empty")
                return
            ch = buf[pos]
            if not in_array:
                if ch != "[":
                    raise InputError(
                        path, "expected a JSON array of log rows", f"character {base + pos}"
                    )
                in_array, array, pos = True, array + 1, pos + 1
                expect_item = True
                continue
            if ch == "]":
                in_array, pos = False, pos + 1
                continue
            if ch == ",":
                if expect_item:
                    raise InputError(path, "invalid JSON: unexpected ','", f"item {item}")
                pos += 1
                expect_item = True
                continue
            if not expect_item:
                raise InputError(path, "invalid JSON: expected ',' or ']'", f"item {item}")
            while True:
                try:
                    obj, end = dec.raw_decode(buf, pos)
                    if end == len(buf) and not eof and buf[pos] not in '{["':
                        raise ValueError  # a number may continue in the next chunk
                    break
                except (ValueError, RecursionError) as e:
                    if len(buf) - pos > max_item_bytes:
                        raise InputError(
                            path, f"an item longer than {max_item_bytes} characters", f"item {item}"
                        ) from None
                    if not more():
                        msg = e.msg if isinstance(e, json.JSONDecodeError) else type(e).__name__
                        raise InputError(path, f"invalid JSON: {msg}", f"item {item}") from None
            pos = end
            expect_item = False
            yield array, item, obj
            item += 1

"""Generic per-step logs: JSONL (one JSON object per line) and CSV (a header row).

Both formats hold one logged row per line. The step is the first of :data:`STEP_KEYS` the row
has (matched case-insensitively); a row without one gets its line number as its step, with a
warning. Keys map to canonical names through :mod:`rlvitals.recording.metrics`; unknown keys are
kept under their raw names.

JSONL: nested objects are flattened with ``/`` (``{"actor": {"kl": 0.1}}`` → ``actor/kl``, at
most :data:`MAX_DEPTH` levels); lists and strings that are not numbers are ignored (counted in
a warning); a torn last line (a file still being written) is dropped with a warning. veRL's
``file`` logger lines (``{"step": N, "data": {...}}``) have their own importer, so the sniffer
gives way to it.

CSV: comma- or tab-separated, a header row naming the columns; an empty cell is a missing value;
``nan``/``inf`` are read as such. A torn last row is dropped with a warning.
"""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._lines import check_file, is_number, iter_json_lines, iter_lines
from rlvitals.importers._steps import as_step
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["MAX_DEPTH", "STEP_KEYS", "flatten", "load_csv", "load_jsonl"]

STEP_KEYS = ("step", "global_step", "_step", "iteration", "iter")
"""Keys that hold the step, in order of preference (matched case-insensitively)."""
MAX_DEPTH = 16
"""Nested JSON objects deeper than this are ignored (with a warning)."""
_SNIFF_LINES = 20
_MIN_SAME_WIDTH = 0.8
"""Share of sniffed CSV rows that must have the header's width."""
_MIN_NUMERIC = 0.5
"""Share of sniffed CSV cells that must be numbers (metric logs are mostly numbers)."""
_INT64 = (-(1 << 63), 1 << 63)
_DIGITS = re.compile(r"-?[0-9]{1,19}")

WALK_CONFIDENCE = 0.5
"""A generic JSONL / CSV file met in a folder walk (``rlvitals scan``) is a run only when the
sniffer is at least this sure (it found a step column); named on the command line it is read
whatever the score."""


def _as_step(v: Any) -> int | None:
    """An integer step from ``v`` (int, integral float or digit string), else None."""
    if type(v) is str:
        s = v.strip()
        if _DIGITS.fullmatch(s):  # ASCII digits only: "²".isdigit() is True, int("²") fails
            return as_step(int(s))
        try:
            return as_step(float(s))
        except ValueError:
            return None
    return as_step(v) if type(v) in (int, float) else None


def _find_step_key(keys: Any) -> str | None:
    lower = {k.lower(): k for k in keys if isinstance(k, str)}
    for k in STEP_KEYS:
        if k in lower:
            return lower[k]
    return None


def flatten(obj: dict[str, Any], max_depth: int = MAX_DEPTH) -> tuple[dict[str, Any], bool]:
    """Flatten nested dicts with ``/``; returns ``(flat, truncated)``.

    >>> flatten({"a": 1, "b": {"c": 2, "d": {"e": 3}}})
    ({'a': 1, 'b/c': 2, 'b/d/e': 3}, False)
    """
    out: dict[str, Any] = {}
    truncated = False
    stack: list[tuple[str, dict[str, Any], int]] = [("", obj, 0)]
    while stack:
        prefix, d, depth = stack.pop()
        for k, v in d.items():
            key = f"{prefix}{k}"
            if type(v) is dict:
                if depth + 1 >= max_depth:
                    truncated = True
                else:
                    stack.append((key + "/", v, depth + 1))
            else:
                out[key] = v
    return out, truncated


# ---------------------------------------------------------------------------------------- JSONL


def _parse_head_objects(head: bytes) -> list[Any]:
    """JSON values of the complete non-blank lines at the start of ``head``."""
    lines = head.split(b"\n")
    if not head.endswith(b"\n"):
        lines = lines[:-1] or lines  # drop a line cut by the sniff window
    out = []
    for line in lines:
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except (ValueError, RecursionError):
            return out if out else [None]
        if len(out) >= _SNIFF_LINES:
            break
    return out


def _sniff_jsonl(path: Path, head: bytes) -> float:
    if not head or path.is_dir():
        return 0.0
    objs = _parse_head_objects(head)
    if not objs or not all(isinstance(o, dict) for o in objs):
        return 0.0
    first = objs[0]
    if isinstance(first.get("data"), dict) and "step" in first:
        return 0.2  # veRL file logger: its own importer reads it
    if isinstance(first.get("rewards"), list):
        return 0.2  # per-group rewards: groups_jsonl
    flat, _ = flatten(first)
    numeric = sum(
        1 for v in flat.values() if isinstance(v, (int, float)) and not isinstance(v, bool)
    )
    if numeric == 0:
        return 0.1
    texty = any(isinstance(v, str) and len(v) > 40 for v in flat.values())
    score = 0.55 if _find_step_key(flat) is not None else 0.4
    return score - 0.2 if texty else score


_BLOCK_ROWS = 32768
"""Rows of one key set collected before they go to the builder as columns (~5 MiB of values
for 20 keys; fewer, larger pieces make the columns cheaper to build)."""
_SMALL_BLOCK = 16
"""Fewer rows than this go to the builder row by row (columns cost more for a few rows)."""


class _Block:
    """Consecutive rows with the same keys in the same order, every value a number: their
    values row after row in one ``array('d')``, handed to :meth:`RunBuilder.add_block`. What
    ``add_row`` per row would store, at a fraction of its per-value work."""

    __slots__ = ("builder", "keys", "steps", "values")

    def __init__(self, builder: RunBuilder):
        self.builder = builder
        self.keys: tuple[str, ...] | None = None
        self.steps = array("q")
        self.values = array("d")

    def flush(self) -> None:
        if self.steps:
            self.builder.add_block(self.keys or (), self.steps, self.values, min_rows=_SMALL_BLOCK)
            self.steps, self.values = array("q"), array("d")
        self.keys = None


def load_jsonl(path: Path, progress: Progress | None = None) -> Run:
    """Read a JSONL file of per-step dicts into a ``Run``."""
    check_file(path, "jsonl")
    builder = RunBuilder(Manifest(source=str(path)))
    add_row = builder.add_row
    block = _Block(builder)
    step_key: str | None = None
    no_step = 0
    deep = 0
    n = 0
    # The hot loop of a million-line import. The usual row (the step under the key the rows so
    # far used, the same keys as the row before, numbers only) costs a tuple of its keys and
    # one C-level extend of an array; any other row goes through add_row.
    for lineno, obj in iter_json_lines(path, builder.warnings, progress, objects=True):
        n += 1
        if step_key is not None and step_key in obj:
            step = _pop_step(path, obj, step_key, lineno)
            keys = tuple(obj)
            if keys != block.keys:
                block.flush()
                block.keys = keys
            values = block.values
            k0 = len(values)
            try:
                values.extend(obj.values())
            except (TypeError, OverflowError):  # None, text, a list, a nested object, 10**400
                del values[k0:]
                block.flush()
                if dict in map(type, obj.values()):
                    obj, truncated = flatten(obj)
                    deep += truncated
                add_row(step, obj)
                continue
            block.steps.append(step)
            if len(block.steps) >= _BLOCK_ROWS:
                block.flush()
            continue
        block.flush()
        if dict in map(type, obj.values()):
            obj, truncated = flatten(obj)
            deep += truncated
        if step_key is None or step_key not in obj:
            step_key = _find_step_key(obj)
        if step_key is None:
            no_step += 1
            step = lineno
        else:
            step = _pop_step(path, obj, step_key, lineno)
        add_row(step, obj)
    block.flush()
    if n == 0:
        raise InputError(path, "no JSON objects found")
    builder.manifest.step_key = step_key or "line number (no step key)"
    _finish_warnings(builder, path, no_step, deep)
    return builder.build(release=True)


def _pop_step(path: Path, obj: dict[str, Any], key: str, lineno: int) -> int:
    """Take the step out of a parsed row (the row is ours: parsed from this line)."""
    raw = obj.pop(key)
    step = raw if type(raw) is int and _INT64[0] <= raw < _INT64[1] else _as_step(raw)
    if step is None:
        raise InputError(path, f"'{key}' is not an integer step: {raw!r:.40}", f"line {lineno}")
    return step


def _finish_warnings(builder: RunBuilder, path: Path, no_step: int, deep: int) -> None:
    if no_step:
        keys = ", ".join(STEP_KEYS)
        builder.warn(
            f"{path}: {no_step} rows have no step key ({keys}); their line numbers "
            "were used as steps"
        )
    if deep:
        builder.warn(
            f"{path}: {deep} rows nest deeper than {MAX_DEPTH} levels; the deeper "
            "values were ignored"
        )
    warn_skipped(builder, path)


# ------------------------------------------------------------------------------------------ CSV


def _decode_head_lines(head: bytes) -> list[str] | None:
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    lines = head.split(b"\n")
    if not head.endswith(b"\n") and len(lines) > 1:
        lines = lines[:-1]
    try:
        return [ln.decode("utf-8").rstrip("\r") for ln in lines if ln.strip()][:_SNIFF_LINES]
    except UnicodeDecodeError:
        return None


def _delimiter(header: str) -> str:
    return "\t" if header.count("\t") > header.count(",") else ","


def _header_ok(cells: list[str]) -> bool:
    if len(cells) < 2:
        return False
    for c in cells:
        c = c.strip()
        if not c or any(ch in c for ch in "{}[]'\"") or c.startswith("#"):
            return False
        if is_number(c):
            return False
    return True


def _sniff_csv(path: Path, head: bytes) -> float:
    if not head or path.is_dir() or head.lstrip()[:1] in (b"{", b"["):
        return 0.0
    lines = _decode_head_lines(head)
    if not lines:
        return 0.0
    delim = _delimiter(lines[0])
    import csv  # here, not at the top: a JSONL log need not pay for it

    try:
        rows = list(csv.reader(lines, delimiter=delim))
    except csv.Error:
        return 0.0
    header = rows[0]
    if not _header_ok(header):
        return 0.0
    data = rows[1:]
    if not data:
        return 0.3
    same = [r for r in data if len(r) == len(header)]
    if len(same) < _MIN_SAME_WIDTH * len(data):
        return 0.0
    cells = [c for r in same for c in r if c.strip()]
    numeric = sum(is_number(c) for c in cells) / max(len(cells), 1)
    if numeric < _MIN_NUMERIC:
        return 0.0
    return 0.6 if _find_step_key(header) is not None else 0.45


def _csv_lines(path: Path, progress: Progress | None) -> Any:
    """Yield ``(lineno, text, complete)``; text keeps no newline; InputError on bad UTF-8."""
    for lineno, raw, complete in iter_lines(path, progress):
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(path, "not UTF-8 text", f"line {lineno} byte {e.start}") from None
        yield lineno, text.rstrip("\r"), complete


def load_csv(path: Path, progress: Progress | None = None) -> Run:
    """Read a CSV (or TSV) file of per-step rows with a header into a ``Run``."""
    check_file(path, "csv")
    builder = RunBuilder(Manifest(source=str(path)))
    lines = _csv_lines(path, progress)
    header: list[str] | None = None
    delim = ","
    step_col = -1
    no_step = 0
    n = 0
    for lineno, text, complete in lines:
        if not text.strip():
            continue
        if header is None:
            delim = _delimiter(text)
            header = _parse_csv_line(path, lineno, text, delim)
            if not _header_ok(header):
                raise InputError(path, "first line is not a header of column names", "line 1")
            key = _find_step_key(header)
            step_col = header.index(key) if key is not None else -1
            continue
        cells = _parse_csv_line(path, lineno, text, delim)
        if len(cells) != len(header):
            if not complete:
                builder.warn(
                    f"{path}: line {lineno}: torn last line ignored (file still being written?)"
                )
                break
            raise InputError(
                path, f"{len(cells)} cells, but the header has {len(header)}", f"line {lineno}"
            )
        n += 1
        if step_col < 0:
            step, no_step = lineno, no_step + 1
        else:
            step = _as_step(cells[step_col])
            if step is None:
                raise InputError(
                    path,
                    f"'{header[step_col]}' is not an integer step: {cells[step_col]!r:.40}",
                    f"line {lineno}",
                )
        builder.add_row(
            step, {h: c for i, (h, c) in enumerate(zip(header, cells)) if i != step_col and c}
        )
    if header is None:
        raise InputError(path, "no header row")
    builder.manifest.step_key = (
        header[step_col] if step_col >= 0 else "line number (no step column)"
    )
    if n == 0:
        builder.warn(f"{path}: header only, no data rows")
    _finish_warnings(builder, path, no_step, 0)
    return builder.build()


def _parse_csv_line(path: Path, lineno: int, text: str, delim: str) -> list[str]:
    import csv

    try:
        return next(csv.reader([text], delimiter=delim, strict=True), [])
    except csv.Error as e:
        raise InputError(path, f"bad CSV: {e}", f"line {lineno}") from None


register(
    Importer(
        name="jsonl",
        description="JSONL of per-step dicts (step/global_step/_step/iteration key)",
        sniff=_sniff_jsonl,
        load=load_jsonl,
        precheck=Precheck(starts=b"{["),
        files=(".jsonl", ".ndjson", ".json"),
        walk_confidence=WALK_CONFIDENCE,
    )
)
register(
    Importer(
        name="csv",
        description="CSV/TSV of per-step rows with a header (step/global_step/... column)",
        sniff=_sniff_csv,
        load=load_csv,
        precheck=Precheck(text=True),
        files=(".csv", ".tsv"),
        walk_confidence=WALK_CONFIDENCE,
    )
)

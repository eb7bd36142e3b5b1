"""CSV rows streamed from any input (a file, a compressed file, a stream), for the importers of
CSV exports (W&B chart and run-history exports).

One :func:`csv.reader` over the decoded stream (the C parser does the splitting and the quoting,
quoted fields may span lines), with the byte count for progress and whether the input ended
with a newline: a last row without one is reported as not complete (a file still being
written), so the importer can drop it instead of failing. A column of cells is then read as
steps (:func:`step_cells`) or numbers (:func:`number_cells`) at once, not cell by cell.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterator, Sequence
from itertools import compress, islice
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers._lines import MAX_BLANK_RUN, MAX_LINE_BYTES, blank_run_error
from rlvitals.importers._source import RawReader, input_size, open_input
from rlvitals.importers._steps import as_step
from rlvitals.recording.run import RunBuilder

__all__ = [
    "BATCH_ROWS",
    "MAX_BATCH_CELLS",
    "NO_STEP",
    "Batch",
    "checked_rows",
    "header_at",
    "iter_csv_batches",
    "number_cells",
    "step_cells",
]

_CHUNK = 1 << 20
BATCH_ROWS = 1024
"""Rows per :func:`iter_csv_batches` batch. Small on purpose: a batch of lists of strings is
that many containers alive at once, and the cyclic garbage collector's passes over them grow
with it (8,192-row batches made splitting twice as slow as 1,024-row ones)."""
_PROGRESS_EVERY = 8 << 20
MAX_BATCH_CELLS = 1 << 20
"""A batch ends early once it holds this many cells: a cell is a Python string (~50 bytes
however short its text), so rows of many tiny cells would otherwise hold ~30x their bytes."""
_EXTRA_CELLS = 4096
"""A row may hold this many cells more than four times the header's before it is refused
unparsed (quoted commas in text cells stay well inside that)."""


def _bounded_lines(text, path: Path, cap: list[int | None]) -> Iterator[str]:
    """The lines of ``text``, each read with the JSONL path's bound
    (:data:`~rlvitals.importers._lines.MAX_LINE_BYTES` characters: a file of no newlines,
    ``/dev/zero`` forced as a CSV, is refused at the bound instead of growing without one),
    and no more than :data:`~rlvitals.importers._lines.MAX_BLANK_RUN` blank lines in a row.
    A line longer than ``cap[0]`` characters holding more than ``cap[0]`` commas is refused
    before the C parser splits it (``cap`` is set once the header is known: ``[None]`` until
    then)."""
    readline = text.readline
    n = blank = 0
    while True:
        line = readline(MAX_LINE_BYTES + 1)
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE_BYTES and line[-1] not in "\r\n":
            raise InputError(
                path,
                f"line longer than {MAX_LINE_BYTES} characters (the limit of one line)",
                f"line {n}",
            )
        if len(line) <= 2 and not line.strip():
            blank += 1
            if blank > MAX_BLANK_RUN:
                raise blank_run_error(path, n)
        else:
            blank = 0
        limit = cap[0]
        if limit is not None and len(line) > limit and line.count(",") > limit:
            raise InputError(
                path,
                f"memory limit: a row of {line.count(',') + 1:,} cells, over {limit:,} for a "
                f"header of {cap[1]} columns",
                f"line {n}",
            )
        yield line


def _set_cap(cap: list, width: int) -> None:
    cap[0], cap[1] = 4 * max(width, 1) + _EXTRA_CELLS, width


class _Counting(RawReader):
    """Passes bytes through, counting them (progress) and remembering the last one."""

    def __init__(self, f, progress, total: int) -> None:
        self._f = f
        self._progress = progress
        self._total = total
        self.done = 0
        self.last = b""
        self._next = _PROGRESS_EVERY

    def readinto(self, b) -> int:  # type: ignore[override]
        n = self._f.readinto(b) or 0
        if n:
            self.done += n
            self.last = bytes(b[n - 1 : n])
            if self._progress is not None and self.done >= self._next:
                self._progress(self.done, max(self._total, self.done))
                self._next = self.done + _PROGRESS_EVERY
        return n


class Batch(NamedTuple):
    """Rows of a CSV input read at once (:func:`iter_csv_batches`)."""

    rows: list[list[str]]
    first: int | None
    """Line number of the first row; None when a quoted field of the batch spans lines."""
    end: int
    """Line number the batch ends on."""
    torn: bool
    """True only for the final batch of an input that does not end with a newline: its last
    row may be cut off (a file still being written)."""

    def line_of(self, i: int) -> int:
        """The line number of row ``i`` (exact, or the batch's last line; see :attr:`first`)."""
        return self.first + i if self.first is not None else self.end


def iter_csv_batches(path: Path, progress=None, size: int = BATCH_ROWS) -> Iterator[Batch]:
    """Yield the rows of a CSV input in :class:`Batch` es of up to ``size``, split by the C
    parser with no Python step per row beyond counting cells. Blank lines come as empty rows; a UTF-8 BOM is skipped.

    Raises:
        InputError: not UTF-8 text, or bad CSV (naming the line).
    """
    total = input_size(path) or 0
    with open_input(path) as raw:
        counting = _Counting(raw, progress, total)
        text = io.TextIOWrapper(
            io.BufferedReader(counting, _CHUNK), encoding="utf-8-sig", newline=""
        )
        cap: list = [None, 0]
        reader = csv.reader(_bounded_lines(text, path, cap), strict=True)
        pending: Batch | None = None
        while True:
            before = reader.line_num
            rows: list[list[str]] = []
            try:
                if cap[0] is None:  # the header alone first: it sets the bound of the rows
                    rows = list(islice(reader, 1))
                    if rows and rows[0]:
                        _set_cap(cap, len(rows[0]))
                else:
                    cells = 0
                    for row in islice(reader, size):
                        rows.append(row)
                        cells += len(row)
                        if cells > MAX_BATCH_CELLS:
                            break
            except csv.Error as e:
                raise InputError(path, f"bad CSV: {e}", f"line {reader.line_num}") from None
            except UnicodeDecodeError:
                raise InputError(
                    path, "not UTF-8 text", f"near line {reader.line_num + 1}"
                ) from None
            after = reader.line_num
            if pending is not None:
                torn = not rows and counting.last not in (b"\n", b"\r")
                yield pending._replace(torn=torn)
            if not rows:
                break
            pending = Batch(rows, before + 1 if after - before == len(rows) else None, after, False)
    if progress is not None:
        progress(max(total, counting.done), max(total, counting.done))


def header_at(rows: list[list[str]]) -> int | None:
    """The index of the first row that is not blank (the header), or None."""
    return next((i for i, r in enumerate(rows) if r and (len(r) > 1 or r[0].strip())), None)


def checked_rows(
    path: Path, batch: Batch, width: int, start: int = 0
) -> tuple[list[list[str]], Sequence[int], int | None]:
    """The rows of ``batch`` from ``start`` on that hold ``width`` cells, their line numbers,
    and the line of a torn last row that was dropped (else None). Blank rows are skipped; a row
    of another width is an :class:`InputError` naming its line, unless it is the torn last row.
    """
    rows = batch.rows[start:] if start else batch.rows
    if set(map(len, rows)) == {width}:  # the usual batch: no Python step per row
        if batch.first is not None:
            return rows, range(batch.first + start, batch.first + start + len(rows)), None
        return rows, [batch.end] * len(rows), None
    keep: list[list[str]] = []
    lines: list[int] = []
    for i, cells in enumerate(rows):
        if not cells or (len(cells) == 1 and not cells[0].strip()):
            continue
        line = batch.line_of(start + i)
        if len(cells) != width:
            if batch.torn and i == len(rows) - 1:
                return keep, lines, line
            raise InputError(
                path, f"{len(cells)} cells, but the header has {width}", f"line {line}"
            )
        keep.append(cells)
        lines.append(line)
    return keep, lines, None


NO_STEP = np.iinfo(np.int64).min
"""The step of a cell that holds none (:func:`step_cells`)."""


def step_cells(cells: tuple[Any, ...]) -> np.ndarray:
    """Step cells (strings from CSV, numbers or None from parquet) as int64, :data:`NO_STEP`
    where a cell is not an integral number within int64."""
    n = len(cells)
    out = np.full(n, NO_STEP, dtype=np.int64)
    if set(map(type, cells)) == {str}:  # CSV: parse the filled cells at once
        filled = np.fromiter(map(bool, cells), bool, n)
        at = np.flatnonzero(filled)
        try:
            x = np.array(list(map(float, compress(cells, filled))), dtype=np.float64)
        except ValueError:
            pass
        else:
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(x) & (x == np.floor(x)) & (np.abs(x) < 2.0**63)
            out[at[ok]] = x[ok].astype(np.int64)
            return out
    for i, c in enumerate(cells):
        s = as_step(_num(c))
        if s is not None and s != NO_STEP:
            out[i] = s
    return out


def number_cells(
    cells: tuple[Any, ...], builder: RunBuilder, text: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, values, present)`` of one column: the rows holding a number and their values,
    and which rows held anything (an empty cell or None is not logged; text is counted in
    ``builder.skipped_values``)."""
    n = len(cells)
    present = np.fromiter(map(bool if text else _filled, cells), bool, n)
    at = np.flatnonzero(present)
    if not at.size:
        return at, np.zeros(0), present
    picked = list(compress(cells, present))
    try:
        values = np.array(list(map(float, picked)), dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        conv = [_to_float(c) for c in picked]
        good = np.fromiter((x is not None for x in conv), bool, len(conv))
        builder.skipped_values += int((~good).sum())
        values = np.array([x for x in conv if x is not None], dtype=np.float64)
        at = at[good]
    return at, values, present


def _filled(cell: Any) -> bool:
    return cell is not None and cell != ""


def _to_float(v: Any) -> float | None:
    """A cell as float the way ``RunBuilder.add_row`` reads values (``nan``/``none``/``null``
    are NaN, ints beyond float range are ±inf), None for anything else."""
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, str):
        t = v.strip().lower()
        if t in ("nan", "none", "null"):
            return math.nan
        try:
            return float(t)
        except ValueError:
            return None
    return None


def _num(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v

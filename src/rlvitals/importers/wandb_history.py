"""W&B run-history exports: ``run.history()`` / ``scan_history()`` saved as CSV or parquet.

The writer: the user, through the public API (wandb 0.31.0 ``apis/public/runs.py``,
``Run.history(samples=500, pandas=True)``, sampled to 500 rows by default; ``scan_history()``
for every row) and pandas (``df.to_csv`` writes a leading unnamed index column unless
``index=False``; ``df.to_parquet``). Columns: the logged keys plus ``_step``, ``_runtime``,
``_timestamp``; a key a row did not log is an empty cell (NaN).

- **Step**: the trainer's own step column when there is one (:mod:`rlvitals.importers._steps`:
  ``train/global_step``, ``rollout/step``, ``training_step``, ...), else ``_step``; rows
  without the trainer's step (TRL's profiling timers) join the next row that has it;
  ``manifest.step_key`` names the column.
- Columns starting with ``_`` and the pandas index are not metrics; the run's config is not in
  the export, so the trainer is recognised from its keys only when they are unmistakable.
- parquet needs ``pyarrow`` (``pip install 'rlvitals[parquet]'``); read one batch at a time.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._csv import (
    NO_STEP,
    checked_rows,
    header_at,
    iter_csv_batches,
    number_cells,
    step_cells,
)
from rlvitals.importers._source import read_prefix
from rlvitals.importers._steps import SIDE_AXES, TRAINER_STEP_KEYS
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import trainer_from_keys

__all__ = ["load_wandb_history"]

CONF = 0.75
_WB_COLS = ("_runtime", "_timestamp")
_BATCH = 8192


def _is_history_header(cols: list[str]) -> bool:
    return "_step" in cols and any(c in cols for c in _WB_COLS)


def _sniff(path: Path, head: bytes) -> float:
    if head.startswith(b"PAR1"):
        return CONF if _parquet_columns(path) is not None else 0.0
    if not head:
        return 0.0
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    if first.startswith(b'"') or b"_step" not in first:
        return 0.0
    try:
        cols = next(csv.reader([first.decode("utf-8-sig")]))
    except (UnicodeDecodeError, csv.Error, StopIteration):
        return 0.0
    return CONF if _is_history_header(cols) else 0.0


def _parquet_columns(path: Path) -> list[str] | None:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        return None
    try:
        names = pq.ParquetFile(path).schema_arrow.names
    except Exception:  # not a parquet file pyarrow can read: not ours
        return None
    return names if _is_history_header(names) else None


class _Columns:
    """Rows of an export gathered into columns and handed to the builder a batch at a time
    (:meth:`RunBuilder.add_columns`): per row, only list work; numbers are parsed per column.

    The step of a row is the trainer's step column when the export has one (rows without it
    join the next row that has it, trailing ones the last), else ``_step``.
    """

    def __init__(self, path: Path, builder: RunBuilder, header: list[str], text: bool) -> None:
        self.path = path
        self.builder = builder
        self.key = next((k for k in TRAINER_STEP_KEYS if k in header), None)
        self.step_col = header.index(self.key) if self.key else header.index("_step")
        self.metrics = [
            (i, h)
            for i, h in enumerate(header)
            if h and not h.startswith("_") and h not in SIDE_AXES and h != self.key
        ]
        self.text = text
        self.header = header
        self.rows: list[Any] = []
        self.where: list[Any] = []  # line numbers (CSV) or "row N" (parquet)
        self.n = 0
        self.last: int | None = None

    def flush(self, final: bool) -> None:
        rows = self.rows
        if not rows:
            return
        cols = list(zip(*rows))
        steps = step_cells(cols[self.step_col])
        if self.key is None:
            bad = np.flatnonzero(steps == NO_STEP)
            if bad.size:
                i = int(bad[0])
                raise InputError(
                    self.path,
                    f"'_step' is not an integer step: {str(rows[i][self.step_col])[:30]!r}",
                    self.where[i] if isinstance(self.where[i], str) else f"line {self.where[i]}",
                )
            keep = len(rows)
        else:
            have = np.flatnonzero(steps != NO_STEP)
            keep = int(have[-1]) + 1 if have.size else 0
            if final:
                keep = len(rows)
            if keep == 0:
                return  # no trainer step yet: these rows wait for the next that has one
            steps = _back_fill(steps[:keep], self.last)
            cols = [c[:keep] for c in cols]
        columns: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        logged = np.zeros(keep, dtype=bool)
        for i, h in self.metrics:
            at, values, _present = number_cells(cols[i], self.builder, self.text)
            logged[at] = True
            if at.size:
                columns[h] = (at, values)
        ok = steps != NO_STEP
        if not ok.all():  # only trailing rows before any trainer step, at the very end
            columns = {h: (at[ok[at]], v[ok[at]]) for h, (at, v) in columns.items()}
            logged &= ok
        self.n += int(logged.sum())
        self.builder.add_columns(steps, columns)
        if ok.any():
            self.last = int(steps[ok][-1])
        del rows[:keep]
        del self.where[:keep]


def _back_fill(steps: np.ndarray, last: int | None) -> np.ndarray:
    """Rows without a step take the next row's step; trailing ones the last step seen."""
    miss = steps == NO_STEP
    if not miss.any():
        return steps
    idx = np.where(~miss, np.arange(len(steps)), len(steps))
    nxt = np.minimum.accumulate(idx[::-1])[::-1]
    filled = steps.copy()
    inside = nxt < len(steps)
    filled[miss & inside] = steps[nxt[miss & inside]]
    tail = miss & ~inside
    if tail.any():
        before = np.flatnonzero(~miss)
        fill = steps[before[-1]] if before.size else (last if last is not None else NO_STEP)
        filled[tail] = fill
    return filled


def _csv_rows(path: Path, progress: Progress | None, columns) -> None:
    cols = None
    for batch in iter_csv_batches(path, progress):
        start = 0
        if cols is None:
            start = header_at(batch.rows)
            if start is None:
                continue
            header = batch.rows[start]
            if not _is_history_header(header):
                raise InputError(
                    path, "no W&B history header (_step with _runtime/_timestamp)", "line 1"
                )
            cols = columns(header)
            start += 1
        rows, lines, _torn = checked_rows(path, batch, len(cols.header), start)
        cols.rows.extend(rows)
        cols.where.extend(lines)
        cols.flush(final=False)
    if cols is not None:
        cols.flush(final=True)


def _parquet_rows(path: Path, progress: Progress | None, columns) -> None:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("reading W&B history parquet", "parquet", "pyarrow") from None
    try:
        f = pq.ParquetFile(path)
        total = f.metadata.num_rows
        done = 0
        names = [n for n in f.schema_arrow.names if not n.startswith("__index_level")]
        cols = columns(names)
        for batch in f.iter_batches(batch_size=_BATCH, columns=names):
            data = [batch.column(n).to_pylist() for n in names]
            cols.rows.extend(zip(*data))
            cols.where.extend(f"row {done + i}" for i in range(batch.num_rows))
            cols.flush(final=False)
            done += batch.num_rows
            if progress is not None:
                progress(done, total)
        cols.flush(final=True)
    except (OSError, ValueError) as e:
        raise InputError(path, f"cannot read parquet: {str(e).splitlines()[0][:200]}") from None


def load_wandb_history(path: Path, progress: Progress | None = None) -> Run:
    """Read a W&B run-history export (CSV or parquet) into a ``Run`` (module docstring)."""
    parquet = read_prefix(path, 4) == b"PAR1"
    builder = RunBuilder(Manifest(source=str(path)))
    made: list[_Columns] = []

    def columns(header: list[str]) -> _Columns:
        made.append(_Columns(path, builder, header, text=not parquet))
        return made[-1]

    (_parquet_rows if parquet else _csv_rows)(path, progress, columns)
    if not made or made[0].n == 0:
        raise InputError(path, "no history rows with numbers")
    key = made[0].key
    builder.manifest.step_key = key or "_step (wandb.log call count; no trainer step column)"
    builder.manifest.trainer = trainer_from_keys(made[0].header)
    warn_skipped(builder, path)
    return builder.build()


register(
    Importer(
        name="wandb_history",
        description="W&B run history exported as CSV or parquet (_step, _runtime, metric columns)",
        sniff=_sniff,
        load=load_wandb_history,
        precheck=Precheck(text=True, marks=(b"_step",), within=8192, magic=(b"PAR1",)),
        files=(".csv", ".parquet"),
    )
)

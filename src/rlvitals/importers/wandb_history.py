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
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Importer, Progress, register
from rlvitals.importers._lines import iter_lines
from rlvitals.importers._source import read_prefix
from rlvitals.importers._steps import SIDE_AXES, TRAINER_STEP_KEYS, as_step
from rlvitals.recording.run import Manifest, Run, RunBuilder

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


def _csv_rows(path: Path, progress: Progress | None) -> Iterator[tuple[str, dict[str, Any]]]:
    header = None
    for lineno, raw, complete in iter_lines(path, progress):
        try:
            text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise InputError(path, "not UTF-8 text", f"line {lineno} byte {e.start}") from None
        if not text.strip():
            continue
        try:
            cells = next(csv.reader([text], strict=True))
        except (csv.Error, StopIteration) as e:
            raise InputError(path, f"bad CSV: {e}", f"line {lineno}") from None
        if header is None:
            header = cells
            if not _is_history_header(header):
                raise InputError(
                    path, "no W&B history header (_step with _runtime/_timestamp)", "line 1"
                )
            yield "header", dict.fromkeys(header)
            continue
        if len(cells) != len(header):
            if not complete:
                return
            raise InputError(
                path, f"{len(cells)} cells, but the header has {len(header)}", f"line {lineno}"
            )
        yield f"line {lineno}", {h: c for h, c in zip(header, cells) if c != "" and h}


def _parquet_rows(path: Path, progress: Progress | None) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("reading W&B history parquet", "parquet", "pyarrow") from None
    try:
        f = pq.ParquetFile(path)
        total = f.metadata.num_rows
        done = 0
        yield "header", dict.fromkeys(f.schema_arrow.names)
        for batch in f.iter_batches(batch_size=_BATCH):
            cols = batch.to_pydict()
            names = [n for n in cols if not n.startswith("__index_level")]
            for i in range(batch.num_rows):
                yield f"row {done + i}", {n: cols[n][i] for n in names if cols[n][i] is not None}
            done += batch.num_rows
            if progress is not None:
                progress(done, total)
    except (OSError, ValueError) as e:
        raise InputError(path, f"cannot read parquet: {str(e).splitlines()[0][:200]}") from None


def load_wandb_history(path: Path, progress: Progress | None = None) -> Run:
    """Read a W&B run-history export (CSV or parquet) into a ``Run`` (module docstring)."""
    parquet = read_prefix(path, 4) == b"PAR1"
    rows = _parquet_rows(path, progress) if parquet else _csv_rows(path, progress)
    builder = RunBuilder(Manifest(source=str(path)))
    key = None
    held: list[dict[str, Any]] = []
    last = None
    n = 0
    for where, row in rows:
        if where == "header":
            key = next((k for k in TRAINER_STEP_KEYS if k in row), None)
            continue
        raw = row.pop(key, None) if key else None
        wb = row.pop("_step", None)
        metrics = {k: v for k, v in row.items() if not k.startswith("_") and k not in SIDE_AXES}
        if key is not None:
            step = as_step(_num(raw))
            if step is None:
                if metrics:
                    held.append(metrics)
                continue
            for h in held:
                builder.add_row(step, h)
            held.clear()
            last = step
        else:
            step = as_step(_num(wb))
            if step is None:
                raise InputError(path, f"'_step' is not an integer step: {str(wb)[:30]!r}", where)
        if metrics:
            builder.add_row(step, metrics)
            n += 1
    for h in held:
        if last is not None:
            builder.add_row(last, h)
    if n == 0:
        raise InputError(path, "no history rows with numbers")
    builder.manifest.step_key = key or "_step (wandb.log call count; no trainer step column)"
    if builder.skipped_values:
        builder.warn(f"{path}: {builder.skipped_values} non-numeric values ignored")
    return builder.build()


def _num(v: Any) -> Any:
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


register(
    Importer(
        name="wandb_history",
        description="W&B run history exported as CSV or parquet (_step, _runtime, metric columns)",
        sniff=_sniff,
        load=load_wandb_history,
    )
)

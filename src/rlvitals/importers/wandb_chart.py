"""W&B chart exports: a line plot's "Download → CSV" (``wandb_export_<time>.csv``).

The shape (verified on a committed export, ``ChemRxnEngLab/nRTD``
``Plots/wandb_export_2024-12-27T01_42_23.467+01_00.csv`` @ cec23f8a)::

    "Step","brisk-pond-1 - train/reward","brisk-pond-1 - train/reward__MIN","brisk-pond-1 - train/reward__MAX"
    "0","0.25","0.25","0.25"

Every field double-quoted, missing values ``""``; the first column is the chart's x axis
(``Step`` = W&B's ``_step``, or a custom key such as ``train/global_step``); per run and metric
three columns ``<run> - <metric>``, ``__MIN``, ``__MAX`` (the bucket's extremes: they differ
from the value when W&B sampled the line).

- **Step**: the x column (``manifest.step_key`` names it). With ``Step``, it is W&B's
  ``_step`` (a log-call count unless the trainer logged with ``step=``): said in a warning.
- **Runs**: one chart may hold several runs (``<run> - ...``): listed in a ``runs`` event; the
  first is read unless ``run="NAME"`` (``--run``) names one, with a warning naming the others.
- Values are the chart's points, possibly sampled: a warning says so when ``__MIN`` and
  ``__MAX`` differ from the value.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, note_runs, register, warn_skipped
from rlvitals.importers._csv import (
    NO_STEP,
    checked_rows,
    header_at,
    iter_csv_batches,
    number_cells,
    step_cells,
)
from rlvitals.importers._lines import is_number
from rlvitals.importers._steps import TRAINER_STEP_KEYS
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import trainer_from_keys

__all__ = ["load_wandb_chart"]

CONF = 0.92
_HEADER = re.compile(rb'\A(?:\xef\xbb\xbf)?"[^"\n]+"(?:,"[^"\n]+ - [^"\n]+")+\r?\n')
_MINMAX = ("__MIN", "__MAX")


def _sniff(path: Path, head: bytes) -> float:
    if not head or not _HEADER.match(head):
        return 0.0
    first = head.split(b"\n", 1)[0]
    return CONF if b'__MIN"' in first or b'__MAX"' in first else 0.7


def _columns(header: list[str]) -> dict[str, dict[str, int]]:
    """``{run: {metric: column}}`` of the value columns (not ``__MIN``/``__MAX``)."""
    runs: dict[str, dict[str, int]] = {}
    for i, name in enumerate(header[1:], 1):
        if name.endswith(_MINMAX) or " - " not in name:
            continue
        run, _, metric = name.rpartition(" - ")
        runs.setdefault(run, {})[metric] = i
    return runs


def load_wandb_chart(
    path: Path, progress: Progress | None = None, *, run: str | None = None
) -> Run:
    """Read a W&B chart CSV export into a ``Run`` (module docstring)."""
    header = None
    builder = RunBuilder(Manifest(source=str(path)))
    cols: dict[str, int] = {}
    minmax: list[tuple[int, int, int]] = []
    sampled = 0  # points whose __MIN/__MAX differ from the value
    for batch in iter_csv_batches(path, progress):
        start = 0
        if header is None:
            start = header_at(batch.rows)
            if start is None:
                continue
            header = batch.rows[start]
            cols, minmax = _choose(path, header, run, builder)
            start += 1
        rows, lines, torn = checked_rows(path, batch, len(header), start)
        if torn is not None:
            builder.warn(f"{path}: line {torn}: torn last line ignored")
        sampled += _flush(path, rows, lines, cols, minmax, builder)
    if header is None:
        raise InputError(path, "file is empty")
    if sampled:
        builder.warn(
            f"{path}: {sampled} points are W&B chart buckets (__MIN/__MAX differ from the value): "
            "the chart was sampled, not every logged step is here"
        )
    warn_skipped(builder, path)
    return builder.build()


def _choose(
    path: Path, header: list[str], run: str | None, builder: RunBuilder
) -> tuple[dict[str, int], list[tuple[int, int, int]]]:
    """The chosen run's ``{metric: column}`` and its ``(value, __MIN, __MAX)`` columns."""
    runs = _columns(header)
    if not runs:
        raise InputError(path, "no '<run> - <metric>' columns", "line 1")
    names = list(runs)
    chosen = names[0] if run is None else run
    if chosen not in runs:
        raise InputError(path, f"no run {run!r} in this chart (runs: {', '.join(names)})")
    note_runs(builder, [{"name": r, "read": r == chosen} for r in names])
    if len(names) > 1 and run is None:
        builder.warn(
            f"{path}: {len(names)} runs in this chart ({', '.join(names)}); read the "
            f"first, {chosen}; choose one with --run NAME"
        )
    cols = runs[chosen]
    pos = {h: i for i, h in enumerate(header)}
    minmax = []
    for i in cols.values():
        lo = pos.get(header[i] + "__MIN")
        hi = pos.get(header[i] + "__MAX")
        if lo is not None and hi is not None:
            minmax.append((i, lo, hi))
    builder.manifest.config["run"] = chosen
    x = header[0]
    builder.manifest.step_key = f"the chart's x axis {x!r}"
    builder.manifest.trainer = trainer_from_keys([x, *cols])
    if x == "Step":
        builder.warn(
            f"{path}: the chart's x axis is W&B's Step (_step: a wandb.log call count, "
            "not the trainer's step unless it logged with step=); export the chart "
            f"against {' or '.join(TRAINER_STEP_KEYS[:2])} to get the optimizer step"
        )
    return cols, minmax


def _flush(
    path: Path,
    batch: list[list[str]],
    lines: Sequence[int],
    cols: dict[str, int],
    minmax: list[tuple[int, int, int]],
    builder: RunBuilder,
) -> int:
    """Hand a batch of rows to the builder column by column (``RunBuilder.add_columns``); how
    many of its points are sampled chart buckets."""
    if not batch:
        return 0
    t = list(zip(*batch))
    n = len(batch)
    parsed = {m: number_cells(t[i], builder, text=True) for m, i in cols.items()}
    has = np.zeros(n, dtype=bool)
    for _, _, present in parsed.values():
        has |= present
    rows = np.flatnonzero(has)  # rows holding a value of this run
    steps = step_cells(t[0])
    bad = rows[steps[rows] == NO_STEP]
    if bad.size:
        x = t[0][int(bad[0])]
        what = "an integer step" if is_number(x) else "a number"
        raise InputError(path, f"x value {x[:30]!r} is not {what}", f"line {lines[int(bad[0])]}")
    steps[~has] = 0
    sampled = np.zeros(n, dtype=bool)
    for i, lo, hi in minmax:
        sampled |= parsed[_metric_of(cols, i)][2] & (
            np.fromiter(map(operator.ne, t[lo], t[i]), bool, n)
            | np.fromiter(map(operator.ne, t[hi], t[i]), bool, n)
        )
    columns = {m: (at, values) for m, (at, values, _) in parsed.items() if at.size}
    builder.add_columns(steps, columns)
    return int(sampled[has].sum())


def _metric_of(cols: dict[str, int], i: int) -> str:
    return next(m for m, j in cols.items() if j == i)


register(
    Importer(
        name="wandb_chart",
        description="W&B chart CSV export ('Step', '<run> - <metric>', __MIN/__MAX columns)",
        sniff=_sniff,
        load=load_wandb_chart,
        multi_run=True,
        precheck=Precheck(starts=b'"'),
        files=(".csv",),
    )
)

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

import csv
import math
import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Progress, note_runs, register
from rlvitals.importers._lines import iter_lines
from rlvitals.importers._steps import TRAINER_STEP_KEYS
from rlvitals.recording.run import Manifest, Run, RunBuilder

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
    lines = iter_lines(path, progress)
    header = None
    builder = RunBuilder(Manifest(source=str(path)))
    cols: dict[str, int] = {}
    minmax: list[tuple[int, int, int]] = []
    sampled = n = 0
    for lineno, raw, complete in lines:
        try:
            text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
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
            for _metric, i in cols.items():
                lo = pos.get(header[i] + "__MIN")
                hi = pos.get(header[i] + "__MAX")
                if lo is not None and hi is not None:
                    minmax.append((i, lo, hi))
            builder.manifest.config["run"] = chosen
            x = header[0]
            builder.manifest.step_key = f"the chart's x axis {x!r}"
            if x == "Step":
                builder.warn(
                    f"{path}: the chart's x axis is W&B's Step (_step: a wandb.log call count, "
                    "not the trainer's step unless it logged with step=); export the chart "
                    f"against {' or '.join(TRAINER_STEP_KEYS[:2])} to get the optimizer step"
                )
            continue
        if len(cells) != len(header):
            if not complete:
                builder.warn(f"{path}: line {lineno}: torn last line ignored")
                break
            raise InputError(
                path, f"{len(cells)} cells, but the header has {len(header)}", f"line {lineno}"
            )
        row = {m: cells[i] for m, i in cols.items() if cells[i] != ""}
        if not row:
            continue
        try:
            xv = float(cells[0])
        except ValueError:
            raise InputError(
                path, f"x value {cells[0][:30]!r} is not a number", f"line {lineno}"
            ) from None
        if not math.isfinite(xv) or xv != int(xv) or abs(xv) >= 2**63:
            raise InputError(
                path, f"x value {cells[0][:30]!r} is not an integer step", f"line {lineno}"
            )
        for i, lo, hi in minmax:
            if cells[i] != "" and (cells[lo] != cells[i] or cells[hi] != cells[i]):
                sampled += 1
                break
        builder.add_row(int(xv), row)
        n += 1
    if header is None:
        raise InputError(path, "file is empty")
    if sampled:
        builder.warn(
            f"{path}: {sampled} points are W&B chart buckets (__MIN/__MAX differ from the value): "
            "the chart was sampled, not every logged step is here"
        )
    if builder.skipped_values:
        builder.warn(f"{path}: {builder.skipped_values} non-numeric values ignored")
    return builder.build()


register(
    Importer(
        name="wandb_chart",
        description="W&B chart CSV export ('Step', '<run> - <metric>', __MIN/__MAX columns)",
        sniff=_sniff,
        load=load_wandb_chart,
        multi_run=True,
    )
)

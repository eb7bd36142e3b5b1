"""What both MLflow readers share (the stores, :mod:`rlvitals.importers.mlflow`, and the
tracking server, :mod:`rlvitals.importers._mlflow_server`): which run of several is read, how
``(key, value, step, is_nan)`` rows sorted by step become a run's rows, and what a run's params
and its name add to the run read.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Progress, note_runs
from rlvitals.importers._steps import as_step
from rlvitals.recording.run import Event, Run, RunBuilder
from rlvitals.trainers import apply_facts, facts_from_config

__all__ = ["RunInfo", "add_params", "add_sorted_rows", "choose", "finish"]

_MAX_LISTED_RUNS = 5
_PROGRESS_ROWS = 100_000
_MAX_FLOAT = sys.float_info.max


@dataclass(eq=False)
class RunInfo:
    """One run of a store or server: ``where`` is what reads it (a row id, a folder)."""

    run_id: str
    name: str | None
    start: int
    active: bool
    where: Any

    def label(self) -> str:
        return f"{self.run_id} ({self.name})" if self.name else self.run_id

    def entry(self) -> dict[str, Any]:
        """The run as the readers list it: ``{"name", "id", "active"}``."""
        return {"name": self.name or self.run_id, "id": self.run_id, "active": self.active}


def choose(
    path: Path | str, runs: list[RunInfo], run_id: str | None, builder: RunBuilder
) -> RunInfo:
    """The run to read: ``run_id`` (an id or a unique name), else the most recently started
    active one, with a warning naming the others. All are listed in a ``runs`` event."""
    if not runs:
        raise InputError(path, "holds no MLflow runs")
    listing = [{**r.entry(), "read": False} for r in runs]
    note_runs(builder, listing)
    if run_id is not None:
        hits = [r for r in runs if run_id in (r.run_id, r.name)]
        if len(hits) == 1:
            listing[runs.index(hits[0])]["read"] = True
            return hits[0]
        ids = ", ".join(r.label() for r in runs[:_MAX_LISTED_RUNS])
        if hits:
            raise InputError(
                path, f"{len(hits)} MLflow runs are named {run_id!r}; choose by id ({ids})"
            )
        raise InputError(path, f"no run {run_id!r} among its MLflow runs ({ids}...)")
    pool = [r for r in runs if r.active] or runs
    pool.sort(key=lambda r: (r.start, r.run_id))
    chosen = pool[-1]
    listing[runs.index(chosen)]["read"] = True
    if len(runs) > 1:
        others = [r.label() for r in runs if r is not chosen]
        listed = ", ".join(others[:_MAX_LISTED_RUNS])
        more = (
            f" and {len(others) - _MAX_LISTED_RUNS} more" if len(others) > _MAX_LISTED_RUNS else ""
        )
        builder.warn(
            f"{path}: {len(runs)} MLflow runs; read the most recent, {chosen.label()} "
            f"(others: {listed}{more}; choose one with --run NAME_OR_ID)"
        )
    return chosen


def add_params(builder: RunBuilder, params: dict[str, Any]) -> None:
    """A run's params into ``manifest.config`` (keys already there win), and the trainer facts
    they reveal."""
    builder.manifest.config = {**params, **builder.manifest.config}
    apply_facts(builder.manifest, facts_from_config(params))


def finish(builder: RunBuilder, where: Path | str, run: RunInfo, n: int) -> Run:
    """The run read from ``n`` metric rows of ``run``, with a note naming it; InputError naming
    ``where`` when it has none."""
    builder.add_event(Event(None, "note", f"MLflow run {run.label()}", {"run_id": run.run_id}))
    if n == 0:
        raise InputError(where, f"MLflow run {run.run_id} has no metrics")
    return builder.build()


def _metric_value(value: Any, is_nan: Any) -> float | None:
    if is_nan:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    v = float(value)
    if abs(v) >= _MAX_FLOAT:  # how MLflow stores ±inf
        return math.copysign(math.inf, v)
    return v


def add_sorted_rows(
    builder: RunBuilder, rows, progress: Progress | None = None, total: int = 0
) -> int:
    """Feed ``(key, value, step, is_nan)`` rows sorted by step into ``builder``, one row per step."""
    current: int | None = None
    row: dict[str, float] = {}
    n = 0
    for key, value, step, is_nan in rows:
        n += 1
        if progress is not None and n % _PROGRESS_ROWS == 0:
            progress(n, total)
        s = as_step(step)
        v = _metric_value(value, is_nan)
        if s is None or v is None or not isinstance(key, str):
            builder.skipped_values += 1
            continue
        if s != current:
            if row:
                builder.add_row(current, row)
            current, row = s, {}
        row[key] = v
    if row:
        builder.add_row(current, row)
    if progress is not None:
        progress(total, total)
    return n

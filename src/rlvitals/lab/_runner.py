"""Run many lab runs: in worker processes (one torch thread each), resumable, with a progress bar.

A run whose ``result.json`` already exists with the same settings is read back instead of
trained again, so an interrupted experiment continues where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from rlvitals.lab.train import Args

__all__ = ["map_jobs", "read_json", "run_all"]


def _job(args_dict: dict[str, Any], base_dict: dict[str, Any] | None) -> dict[str, Any]:
    """One run in a worker: rebuild the Args and the base policy, train, return the result."""
    from rlvitals.lab.policy import BasePolicy
    from rlvitals.lab.train import train

    base = BasePolicy.from_dict(base_dict) if base_dict is not None else None
    return train(Args(**args_dict), base=base)


def _cached(args: Args) -> dict[str, Any] | None:
    if args.out is None:
        return None
    result = read_json(Path(args.out) / args.name / "result.json")
    if result is None:
        return None
    want = json.loads(json.dumps(dataclasses.asdict(args)))
    stored = result.get("args")
    if not isinstance(stored, dict):
        return None
    # a field added to Args after the run was written counts as its default (same run)
    defaults = json.loads(json.dumps(dataclasses.asdict(Args())))
    stored = {**{k: v for k, v in defaults.items() if k not in stored}, **stored}
    return result if stored == want else None


def read_json(path: Path) -> Any:
    """The JSON document in ``path``; None when it is missing or unreadable (a run to redo)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def run_all(
    runs: Sequence[Args],
    *,
    base: Any = None,
    workers: int = 1,
    label: str = "runs",
    show: bool | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every run (or read it back); results in the order of ``runs``.

    Args:
        runs: the settings of each run (distinct names under one ``out``).
        base: the prepared :class:`~rlvitals.lab.policy.BasePolicy` every run starts from.
        workers: processes training at once (1 = in this process).
        label: the progress bar's label.
        show: draw the progress bar (None: when stderr is a terminal, or RLVITALS_PROGRESS=1).
        on_result: called with each result as it arrives.
    """
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise ValueError("run names must be distinct")
    results: list[dict[str, Any] | None] = [None] * len(runs)
    todo = []
    for i, args in enumerate(runs):
        hit = _cached(args)
        if hit is not None:
            results[i] = {**hit, "from_cache": True}
        else:
            todo.append(i)
    base_dict = base.to_dict() if base is not None else None
    jobs = {i: (dataclasses.asdict(runs[i]), base_dict) for i in todo}
    done = len(runs) - len(todo)
    with PhaseBar("", show, timed=True) as bar:
        bar.update(label, done, len(runs))
        for i, result in map_jobs(_job, jobs, workers):
            results[i] = result
            done += 1
            bar.update(label, done, len(runs), last=runs[i].name)
            if on_result:
                on_result(result)
    return [r for r in results if r is not None]


def map_jobs(
    job: Callable[..., dict[str, Any]], jobs: dict[int, tuple], workers: int
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(i, job(*jobs[i]))`` for every job, as each finishes: in this process when ``workers``
    <= 1 or there is one job, else in ``workers`` spawned processes (``job`` and its arguments
    must pickle). The lab's runs and the failure zoo's share it."""
    if workers <= 1 or len(jobs) <= 1:
        for i, job_args in jobs.items():
            yield i, job(*job_args)
        return
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(job, *job_args): i for i, job_args in jobs.items()}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()


class PhaseBar:
    """Progress of one or more phases on stderr, one bar per phase (``update(phase, done,
    total)``): the base policy's preparation (warm start, measurement), a run's completions,
    and (``timed``: with the time elapsed and left and the ``last`` item done) an experiment's
    runs. Drawn when ``show``, or when None and stderr is a terminal (or RLVITALS_PROGRESS=1)."""

    def __init__(self, label: str, show: bool | None, transient: bool = False, timed: bool = False):
        from rlvitals.progress import progress_enabled

        self.show = progress_enabled(show)
        self.label = label
        self.transient = transient
        self.timed = timed
        self._p: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> PhaseBar:
        if self.show:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            timing = (TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[last]}"))
            self._p = Progress(
                TextColumn((f"{self.label}: " if self.label else "") + "{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                *(timing if self.timed else ()),
                console=Console(file=sys.stderr),
                transient=self.transient,
            )
            self._p.start()
        return self

    def update(self, phase: str, done: int, total: int, last: str = "") -> None:
        if self._p is None:
            return
        if phase not in self._tasks:
            self._tasks[phase] = self._p.add_task(phase, total=total, last=last)
        self._p.update(self._tasks[phase], completed=done, last=last)

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.stop()

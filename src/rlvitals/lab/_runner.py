"""Run many lab runs: in worker processes (one torch thread each), resumable, with a progress bar.

A run whose ``result.json`` already exists with the same settings is read back instead of
trained again, so an interrupted experiment continues where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from rlvitals.lab.train import Args

__all__ = ["run_all"]


def _job(args_dict: dict[str, Any], base_dict: dict[str, Any] | None) -> dict[str, Any]:
    """One run in a worker: rebuild the Args and the base policy, train, return the result."""
    from rlvitals.lab.policy import BasePolicy
    from rlvitals.lab.train import train

    base = BasePolicy.from_dict(base_dict) if base_dict is not None else None
    return train(Args(**args_dict), base=base)


def _cached(args: Args) -> dict[str, Any] | None:
    if args.out is None:
        return None
    path = Path(args.out) / args.name / "result.json"
    if not path.is_file():
        return None
    try:
        result = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    want = json.loads(json.dumps(dataclasses.asdict(args)))
    stored = result.get("args")
    if not isinstance(stored, dict):
        return None
    # a field added to Args after the run was written counts as its default (same run)
    defaults = json.loads(json.dumps(dataclasses.asdict(Args())))
    stored = {**{k: v for k, v in defaults.items() if k not in stored}, **stored}
    return result if stored == want else None


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
    from rlvitals.progress import progress_enabled

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
    with _Bar(label, len(runs), len(runs) - len(todo), progress_enabled(show)) as bar:
        if workers <= 1 or len(todo) <= 1:
            for i in todo:
                results[i] = _job(dataclasses.asdict(runs[i]), base_dict)
                bar.advance(runs[i].name)
                if on_result:
                    on_result(results[i])
        else:
            ctx = multiprocessing.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                futures = {
                    pool.submit(_job, dataclasses.asdict(runs[i]), base_dict): i for i in todo
                }
                for fut in as_completed(futures):
                    i = futures[fut]
                    results[i] = fut.result()
                    bar.advance(runs[i].name)
                    if on_result:
                        on_result(results[i])
    return [r for r in results if r is not None]


class _Bar:
    """A rich progress bar over runs on stderr (a no-op when not shown)."""

    def __init__(self, label: str, total: int, done: int, show: bool):
        self.show = show
        self.label, self.total, self.done = label, total, done
        self._progress: Any = None

    def __enter__(self) -> _Bar:
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

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[last]}"),
                console=Console(file=sys.stderr),
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(
                self.label, total=self.total, completed=self.done, last=""
            )
        return self

    def advance(self, name: str) -> None:
        self.done += 1
        if self._progress is not None:
            self._progress.update(self._task, advance=1, last=name)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


class PhaseBar:
    """Progress of one or more phases on stderr, one bar per phase (``update(phase, done,
    total)``): the base policy's preparation (warm start, measurement), a run's completions."""

    def __init__(self, label: str, show: bool | None, transient: bool = False):
        from rlvitals.progress import progress_enabled

        self.show = progress_enabled(show)
        self.label = label
        self.transient = transient
        self._p: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> PhaseBar:
        if self.show:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._p = Progress(
                TextColumn(f"{self.label}: " + "{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=Console(file=sys.stderr),
                transient=self.transient,
            )
            self._p.start()
        return self

    def update(self, phase: str, done: int, total: int) -> None:
        if self._p is None:
            return
        if phase not in self._tasks:
            self._tasks[phase] = self._p.add_task(phase, total=total)
        self._p.update(self._tasks[phase], completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.stop()

"""Where the scan's jobs run: in this process, in a process pool, or as Ray tasks.

No scheduler of our own: :class:`concurrent.futures.ProcessPoolExecutor` or Ray does the
scheduling; this module only submits :func:`rlvitals.scan._row.scan_one` for each job, lets a
finished job add more (a store's other runs), and hands every result back in completion order.

- ``serial``: one job after the other, here (``--jobs 1``).
- ``process``: a pool of ``jobs`` worker processes (forked on Linux, so they start with the
  importers and detectors already imported). At most :data:`IN_FLIGHT_PER_WORKER` jobs per
  worker are submitted at a time, so memory is bounded by the workers, not by the number of
  runs. A worker that dies (the kernel's out-of-memory killer, a crash in a C library) breaks
  the pool: the jobs that were in it are run again one by one, each in a fresh process, so the
  culprit gets a row saying its reader died and the others are read normally.
- ``ray``: one Ray task per run (``num_cpus=1`` each) on the cluster ``address`` names (or
  ``$RAY_ADDRESS``), else on a local Ray instance with ``jobs`` CPUs, started and stopped here.
  A task whose worker dies is a row with the error. Needs the ``ray`` extra (``pip install -e '.[ray]'``, docs/install.md).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool

from rlvitals.errors import MissingExtraError
from rlvitals.scan._row import Job, ScanRow, error_row, scan_one

__all__ = ["ENGINES", "IN_FLIGHT_PER_WORKER", "run_jobs"]

ENGINES = ("process", "ray", "serial")
IN_FLIGHT_PER_WORKER = 2
"""Jobs submitted ahead per worker process (enough to keep it busy, few enough to re-run)."""

Result = tuple[ScanRow, list[dict] | None]
More = Callable[[Job, Result], list[Job]]
"""``more(job, result)``: the jobs a finished one adds (a store's other runs)."""

_DIED = (
    "the process reading it died (killed, out of memory, or a crash in a C library); "
    "try 'rlvitals doctor' on it alone"
)


def run_jobs(
    first: list[Job],
    more: More,
    *,
    engine: str = "process",
    jobs: int = 1,
    ray_address: str | None = None,
) -> Iterator[tuple[Job, Result]]:
    """Run ``first`` and whatever ``more`` adds; yield ``(job, result)`` as each finishes."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    if engine == "ray":
        yield from _ray(first, more, jobs, ray_address)
    elif engine == "serial" or jobs <= 1:
        yield from _serial(first, more)
    else:
        yield from _pool(first, more, jobs)


def _serial(first: list[Job], more: More) -> Iterator[tuple[Job, Result]]:
    todo = deque(first)
    while todo:
        job = todo.popleft()
        res = scan_one(job)
        todo.extend(more(job, res))
        yield job, res


def _context():
    # fork: workers inherit the imported importers and detectors (and importers registered by
    # the caller); elsewhere the platform's default (spawn on macOS, where fork is unsafe)
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def _isolated(job: Job) -> Result:
    """``job`` in a process of its own: a crash there is this job's row, no one else's."""
    with ProcessPoolExecutor(1, mp_context=_context()) as ex:
        try:
            return ex.submit(scan_one, job).result()
        except BrokenProcessPool:
            return error_row(job, f"{job.path}: {_DIED}"), None


def _pool(first: list[Job], more: More, jobs: int) -> Iterator[tuple[Job, Result]]:
    todo = deque(first)
    ahead = max(1, jobs * IN_FLIGHT_PER_WORKER)
    ex = ProcessPoolExecutor(jobs, mp_context=_context())
    running: dict[Future, Job] = {}
    try:
        while todo or running:
            while todo and len(running) < ahead:
                job = todo.popleft()
                running[ex.submit(scan_one, job)] = job
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            broken: list[Job] = []
            for fut in done:
                job = running.pop(fut)
                try:
                    res = fut.result()
                except BrokenProcessPool:
                    broken.append(job)
                    continue
                except Exception as e:  # a result that would not come back (pickling)
                    res = (
                        error_row(job, f"{job.path}: internal error: {type(e).__name__}: {e}"),
                        None,
                    )
                todo.extend(more(job, res))
                yield job, res
            if broken:
                # every job still in the dead pool is suspect: re-run each alone
                broken += list(running.values())
                running.clear()
                ex.shutdown(wait=False, cancel_futures=True)
                for job in broken:
                    res = _isolated(job)
                    todo.extend(more(job, res))
                    yield job, res
                ex = ProcessPoolExecutor(jobs, mp_context=_context())
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


def _ray_module():
    try:
        import ray
    except ImportError:
        raise MissingExtraError("the ray engine (--engine ray)", "ray", "ray") from None
    return ray


def _ray(
    first: list[Job], more: More, jobs: int, address: str | None
) -> Iterator[tuple[Job, Result]]:
    ray = _ray_module()
    started = False
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS")
        if address:
            where = {"address": address}
        else:
            where = {"num_cpus": max(1, jobs), "include_dashboard": False}
        ray.init(**where, log_to_driver=False, configure_logging=False)
        started = True
    task = ray.remote(num_cpus=1, max_retries=0)(scan_one)
    pending: dict = {}
    try:
        for job in first:
            pending[task.remote(job)] = job
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except Exception as e:  # the task's worker died, or the task raised
                    why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    res = error_row(job, f"{job.path}: Ray task failed: {why}"), None
                for nxt in more(job, res):
                    pending[task.remote(nxt)] = nxt
                yield job, res
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()

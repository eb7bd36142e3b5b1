"""The scan: find the runs, expand the stores, take what the cache has, read the rest.

1. :func:`rlvitals.scan._discover.discover` finds the targets (files, folders, stores).
2. A store is expanded into its runs: with its importer's ``list_runs`` when it has one (MLflow,
   W&B, trackio: listed here, without reading any run), else by reading its default run, which
   also says which others it holds (logs with runs back to back, a W&B chart export, NeMo-RL
   experiments); MLflow runs that were deleted are left out.
3. Each run's row comes from the cache when its files are unchanged
   (:mod:`rlvitals.scan._cache`), else from a job run by the engine
   (:mod:`rlvitals.scan._engines`).

The table is in walk order (a store's runs in the store's order), whatever order the jobs
finished in, so every engine gives the same table. A run found twice (two formats of one run)
is one row (:mod:`rlvitals.scan._merge`), and paths are shown relative to the scan's root.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rlvitals.errors import InputError
from rlvitals.scan._cache import ScanCache, fingerprint, row_key
from rlvitals.scan._discover import Discovery, Target, discover
from rlvitals.scan._engines import run_jobs
from rlvitals.scan._merge import merge_duplicates, scan_root, set_relative
from rlvitals.scan._row import Job, ScanRow, _selector, error_row

if TYPE_CHECKING:
    from rlvitals.doctor import DoctorConfig
    from rlvitals.scan._stats import Correlation

__all__ = ["ScanResult", "scan"]

_LISTING = "__runs__"
"""Cache key part under which a store's list of runs is kept."""


@dataclass
class ScanResult:
    """What :func:`scan` found.

    Attributes:
        rows: one per run, in walk order (a store's runs in its order).
        skipped: files looked at that no importer claimed.
        notes: what the scan noticed (the cache turned off, ...).
        cached: rows that came from the cache; ``read``: rows read now.
        seconds: wall time of the scan.
        engine, jobs: how it ran.
        root: the folder paths are shown relative to (:func:`rlvitals.scan._merge.scan_root`).
        merged: rows folded into another because they were the same run.
    """

    rows: list[ScanRow] = field(default_factory=list)
    skipped: int = 0
    notes: list[str] = field(default_factory=list)
    cached: int = 0
    read: int = 0
    seconds: float = 0.0
    engine: str = "process"
    jobs: int = 1
    root: str | None = None
    merged: int = 0

    @property
    def errors(self) -> list[ScanRow]:
        return [r for r in self.rows if r.error]

    def failing(self, fail_on: str, allow_unjudged: bool = False) -> list[ScanRow]:
        """The rows that fail ``fail_on`` (:meth:`ScanRow.fails`)."""
        return [r for r in self.rows if r.fails(fail_on, allow_unjudged)]

    def correlation(self, against: str = "auto") -> Correlation | None:
        """ACR_100 against the final metric (:func:`rlvitals.scan._stats.correlate_rows`)."""
        from rlvitals.scan._stats import correlate_rows

        return correlate_rows(self.rows, against)

    def table(self) -> list[dict[str, Any]]:
        """The rows as dicts (what the JSON and CSV outputs hold)."""
        return [r.to_dict() for r in self.rows]


def _settings(config: DoctorConfig | None, eval_key: str | None) -> str:
    from dataclasses import asdict

    from rlvitals.doctor import DoctorConfig

    d = asdict(config if config is not None else DoctorConfig())
    # What decides the exit code, not the rows: a re-scan with another --fail-on is served
    # from the cache (the rows are judged against it when rendered).
    for k in ("source", "fail_on", "allow_unjudged", "group_size_source"):
        d.pop(k, None)
    return repr(sorted(d.items())) + f"|eval_key={eval_key!r}"


class _Scan:
    """The scan's bookkeeping: rows by (target, position), the cache, the jobs to run."""

    def __init__(self, targets: list[Target], config, eval_key, cache: ScanCache | None, progress):
        self.targets = targets
        self.config, self.eval_key, self.cache = config, eval_key, cache
        self.settings = _settings(config, eval_key)
        self.progress = progress
        self.rows: dict[tuple[int, int], ScanRow] = {}
        self.fps: dict[int, str | None] = {}
        self.total = 0
        self.cached = 0

    def _job(self, i: int, pos: int = 0, run=None, name=None, probe=False) -> Job:
        t = self.targets[i]
        return Job(i, pos, t.path, t.fmt, run, name, probe, self.config, self.eval_key)

    def _key(self, i: int, run: str | None) -> str | None:
        fp = self.fps.get(i)
        if fp is None or self.cache is None:
            return None
        return row_key(self.settings, self.targets[i].fmt, self.targets[i].path, run, fp)

    def _add(self, job: Job, row: ScanRow) -> None:
        self.rows[(job.target, job.position)] = row
        if self.progress is not None:
            self.progress(len(self.rows), self.total)

    def _put(self, i: int, run: str | None, value: Any) -> None:
        key = self._key(i, run)
        if key is not None:
            self.cache.put(key, value)

    def _listing(self, i: int, imp) -> tuple[list[dict] | None, str | None]:
        """The target's runs from the cache or its importer's lister: ``(runs, None)``,
        ``(None, None)`` when only reading a run tells (a probe), or ``(None, error)``."""
        key = self._key(i, _LISTING)
        hit = self.cache.get(key) if key is not None else None
        if isinstance(hit, list) and all(isinstance(e, dict) for e in hit):
            return hit, None
        if hit is not None:
            self.cache.damaged += 1  # a miss: listed again, and the listing rewritten
        if imp.list_runs is None:
            return None, None
        path = self.targets[i].path
        try:
            runs = [dict(e) for e in imp.list_runs(path)]
        except InputError as e:
            return None, " ".join(str(e).split())
        except Exception as e:  # a bug in a lister: said, and the scan goes on
            return None, f"{path}: internal error listing its runs: {type(e).__name__}: {e}"
        runs = [e for e in runs if e.get("active", True) is not False]  # MLflow's deleted runs
        self._put(i, _LISTING, runs)
        return runs, None

    def plan(self) -> list[Job]:
        """The jobs to run; rows the cache has (and rows of unreadable targets) are added."""
        from rlvitals.importers import IMPORTERS

        wanted: list[Job] = []
        for i, t in enumerate(self.targets):
            if t.fmt is not None and self.cache is not None:
                self.fps[i] = fingerprint(t.path, t.fmt, t.is_dir)
        for i, t in enumerate(self.targets):
            if t.fmt is None:
                self.total += 1
                self._add(self._job(i), error_row(self._job(i), t.error or "unreadable"))
                continue
            imp = IMPORTERS.get(t.fmt)
            if not imp.multi_run:
                wanted.append(self._job(i))
                continue
            runs, error = self._listing(i, imp)
            if error is not None:
                self.total += 1
                self._add(self._job(i), error_row(self._job(i), error))
            elif runs is None:
                wanted.append(self._job(i, probe=True))
            elif not runs or (len(runs) == 1 and imp.list_runs is None):
                wanted.append(self._job(i))  # one run (or none: reading it says so)
            else:
                wanted += [
                    self._job(i, pos, _selector(e), str(e.get("name")))
                    for pos, e in enumerate(runs)
                ]
        self.total += len(wanted)
        return self._uncached(wanted)

    def _uncached(self, wanted: list[Job]) -> list[Job]:
        keys = {id(j): self._key(j.target, j.run) for j in wanted if not j.probe}
        got = self.cache.get_many(k for k in keys.values() if k) if self.cache else {}
        todo = []
        for j in wanted:
            hit = got.get(keys.get(id(j)) or "")
            row = None
            if hit is not None:
                try:
                    row = ScanRow.from_cache(hit)
                except (TypeError, ValueError):
                    self.cache.damaged += 1  # a miss: the run is read, the row rewritten
            if row is not None:
                self.cached += 1
                self._add(j, row)
            else:
                todo.append(j)
        return todo

    def more(self, job: Job, result: tuple[ScanRow, list[dict] | None]) -> list[Job]:
        """Record a finished job's row; after a probe, the jobs of the store's other runs."""
        row, listing = result
        if job.probe and listing:
            pos = next((k for k, e in enumerate(listing) if e.get("read")), 0)
            job = Job(job.target, pos, job.path, job.fmt, row.run_id, row.run, False)
        self._add(job, row)
        if row.error:
            return []  # not cached: the next scan tries again
        if self.cache is not None:
            self._put(job.target, row.run_id, row.to_dict())
            if listing is not None:
                self._put(job.target, _LISTING, listing)
        if not listing:
            return []
        others = [
            self._job(job.target, pos, _selector(e), str(e.get("name")))
            for pos, e in enumerate(listing)
            if not e.get("read")
        ]
        self.total += len(others)
        return self._uncached(others)


def scan(
    paths: Sequence[str | os.PathLike],
    *,
    jobs: int | None = None,
    engine: str = "process",
    config: DoctorConfig | None = None,
    cache: bool = True,
    cache_dir: str | os.PathLike | None = None,
    eval_key: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    ray_address: str | None = None,
    discovery: Discovery | None = None,
    follow_links: bool = False,
) -> ScanResult:
    """Find every run under ``paths`` and diagnose each: one :class:`ScanRow` per run.

    Args:
        paths: files, folders and globs (:mod:`rlvitals.scan._discover`).
        jobs: worker processes (or Ray CPUs for a local Ray); default: the CPUs available.
        engine: ``process`` (a process pool; ``jobs=1`` reads here), ``serial`` or ``ray``.
        config: the doctor's configuration for every run.
        cache: use the scan cache (:mod:`rlvitals.scan._cache`); ``cache_dir`` is where.
        eval_key: the eval series to report as each run's final metric (default: chosen
            per run, :func:`rlvitals.scan._row.choose_eval_key`).
        progress: ``progress(rows_done, rows_known)`` as rows arrive.
        ray_address: the Ray cluster for ``engine="ray"`` (default ``$RAY_ADDRESS``, else a
            local instance).
        discovery: targets already found (skips the walk).
        follow_links: follow symbolic links to files outside the folders walked.

    Raises:
        InputError: a path that does not exist or a glob that matches nothing (a run that
            cannot be read is a row with its error, never an exception).
    """
    t0 = time.perf_counter()
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        jobs = max(1, jobs or 1)
    store = ScanCache(cache_dir) if cache else None
    skip = [store.directory] if store is not None else []
    found = (
        discovery
        if discovery is not None
        else discover(paths, skip=skip, follow_links=follow_links)
    )
    live = store if store is not None and store.enabled else None
    state = _Scan(found.targets, config, eval_key, live, progress)
    notes: list[str] = []
    read = 0
    try:
        first = state.plan()
        for _ in run_jobs(first, state.more, engine=engine, jobs=jobs, ray_address=ray_address):
            read += 1
    finally:
        if store is not None:
            store.close()
            if store.note:
                notes.append(store.note)
            if store.damaged:
                notes.append(
                    f"scan cache {store.path}: {store.damaged} damaged or foreign row(s) "
                    "ignored; those runs were read again and their rows rewritten"
                )
        notes += found.notes
    rows = [state.rows[k] for k in sorted(state.rows)]
    root = scan_root(paths)
    set_relative(rows, root)
    kept = merge_duplicates(rows)
    if len(kept) < len(rows):
        notes.append(
            f"{len(rows) - len(kept)} row(s) were the same run found in another format "
            "(the same steps and rewards): one row each, the others named in it"
        )
    return ScanResult(
        rows=kept,
        root=root,
        merged=len(rows) - len(kept),
        skipped=found.skipped,
        notes=notes,
        cached=state.cached,
        read=read,
        seconds=time.perf_counter() - t0,
        engine=engine if jobs > 1 or engine == "ray" else "serial",
        jobs=jobs,
    )

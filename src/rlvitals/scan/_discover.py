"""Finding the runs under the paths ``rlvitals scan`` is given.

A path is a file, a folder, or a glob (``runs/*/trainer_state.json``, ``sweep/**/*.log``).
A **file named on the command line** is a run: the importers sniff its format, and one they
cannot read is a row with its error. A **folder** is walked top down:

1. the folder itself is asked first (content sniffing, :func:`rlvitals.importers.sniff`): when
   an importer claims it *as a whole* — a recording, a TRL output folder (``trainer_state.json``,
   ``checkpoint-N/``), a folder holding TensorBoard event files, an ``mlruns/`` file store, a
   W&B folder of runs or one run's folder, a NeMo-RL log folder, veRL rollout dumps — it is one
   target and the walk does not go inside (a TRL output folder's ``runs/`` TensorBoard log is
   the same training run, listed once). A claim a folder only gets from something deeper in it
   (a TensorBoard log two levels down, a ``wandb/`` or ``mlruns/`` subfolder, an ``mlflow.db``
   or trackio ``.db`` beside other things) is declined: the walk goes on and claims that thing
   itself, so a sweep folder is never read as one run;
2. otherwise its files whose names could be logs (:data:`CANDIDATE_SUFFIXES`, TensorBoard
   event files, ``.wandb``; compressed too) are sniffed, and each one an importer claims is a
   target. A generic JSONL or CSV file found this way needs a step column (sniff confidence
   :data:`WALK_CONFIDENCE`): a model's ``config.json`` is not a run. Files no importer claims
   are skipped (counted, not reported);
3. then its subfolders, in name order; hidden ones (``.git``, ``.venv``) and symbolic links to
   folders are not entered.

A companion file (ms-swift's
``completions.jsonl`` beside its ``logging.jsonl``, which reads it) is not a run of its own.
Glob matches are walked the same way (a matching file is sniffed whatever its name, and
skipped when no importer claims it). Every
target is listed once: two paths reaching the same file (a symbolic link, overlapping
arguments) count once, and a target inside another target (a run folder inside an ``mlruns/``
store named too) is left to the one that holds it. Stores holding several runs (MLflow, W&B,
trackio, logs with runs back to back) are expanded into their runs later, by the scan
(:mod:`rlvitals.scan._core`).
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rlvitals.errors import InputError

__all__ = ["CANDIDATE_SUFFIXES", "WALK_CONFIDENCE", "Discovery", "Target", "discover"]

WALK_CONFIDENCE = 0.5
"""A generic JSONL / CSV file met in a walk is a run only when the sniffer is at least this
sure (it found a step column); named on the command line it is read whatever the score."""
CANDIDATE_SUFFIXES = frozenset(
    {
        ".json",
        ".jsonl",
        ".ndjson",
        ".csv",
        ".tsv",
        ".log",
        ".txt",
        ".out",
        ".err",
        ".db",
        ".sqlite",
        ".sqlite3",
        ".parquet",
        ".wandb",
    }
)
"""Suffixes of files a walk sniffs (after ``.gz`` / ``.zst`` / ``.zstd``); other files (weights,
code, images) are never opened."""
COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd")
_GENERIC = frozenset({"jsonl", "csv"})
_GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class Target:
    """A file or folder one importer reads (a run, or a store of several).

    Attributes:
        path: as found (relative paths stay relative, for the table).
        fmt: the importer that claimed it, or None when none could (``error`` says why).
        error: why it cannot be read, for a path named on the command line.
        is_dir: a folder.
    """

    path: str
    fmt: str | None
    error: str | None = None
    is_dir: bool = False


@dataclass
class Discovery:
    """What :func:`discover` found: the targets in walk order and how many files it skipped."""

    targets: list[Target] = field(default_factory=list)
    skipped: int = 0
    entries: int = 0


def _is_glob(p: str) -> bool:
    return any(c in _GLOB_CHARS for c in p) and not os.path.lexists(p)


def _candidate(name: str) -> bool:
    if "tfevents" in name:
        return True
    low = name.lower()
    for c in COMPRESSED_SUFFIXES:
        if low.endswith(c):
            low = low[: -len(c)]
            break
    return os.path.splitext(low)[1] in CANDIDATE_SUFFIXES


def _has_event_files(d: Path) -> bool:
    try:
        return any("tfevents" in e.name and e.is_file() for e in os.scandir(d))
    except OSError:
        return False


def _mlflow_root(d: Path) -> bool:
    from rlvitals.importers.mlflow import find_mlflow_store

    found = find_mlflow_store(d)
    return found is not None and found[0] == "file" and found[1] == d


def _wandb_own(d: Path) -> bool:
    from rlvitals.importers.wandb import find_wandb_runs

    return find_wandb_runs(d)[1] in (0, 1)


def _parquet_here(d: Path) -> bool:
    try:
        return any(e.name.endswith(".parquet") for e in os.scandir(d))
    except OSError:
        return False


_DIR_RULES: dict[str, Callable[[Path], bool]] = {
    "tensorboard": _has_event_files,
    "mlflow": _mlflow_root,
    "wandb": _wandb_own,
    "trackio": lambda d: False,
    "trl_completions": _parquet_here,
}
"""Importer → whether its claim on a folder is on the folder itself (True) or only on something
inside it (False: the walk goes in and claims that). Importers absent here claim folders only
as a whole."""


def _claim_dir(d: Path) -> str | None:
    from rlvitals.importers import sniff

    try:
        imp = sniff(d)
    except InputError:
        return None
    rule = _DIR_RULES.get(imp.name)
    if rule is not None and not rule(d):
        return None
    return imp.name


def _claim_file(p: Path, walked: bool) -> tuple[str | None, str | None]:
    """``(format, None)``, or ``(None, why)`` when no importer reads ``p`` (or, in a walk, a
    generic one is not sure enough)."""
    from rlvitals.importers import SNIFF_BYTES, sniff
    from rlvitals.importers._source import read_prefix

    try:
        imp = sniff(p)
    except InputError as e:
        return None, " ".join(str(e).split())
    if walked and imp.name in _GENERIC:
        try:
            score = imp.sniff(p, read_prefix(p, SNIFF_BYTES))
        except Exception:  # a sniffer is a guess; an unsure one is "not mine"
            score = 0.0
        if score < WALK_CONFIDENCE:
            return None, "not sure it is a run"
    return imp.name, None


class _Walker:
    def __init__(self, skip: Iterable[Path], on_entry: Callable[[int, int], None] | None):
        self.out = Discovery()
        self.skip = {os.path.realpath(p) for p in skip}
        self.on_entry = on_entry

    def _tick(self) -> None:
        self.out.entries += 1
        if self.on_entry is not None and self.out.entries % 256 == 0:
            self.on_entry(self.out.entries, len(self.out.targets))

    def explicit(self, p: str) -> None:
        path = Path(p)
        if path.is_dir():
            self.walk(p)
            return
        fmt, why = _claim_file(path, walked=False)
        self.out.targets.append(Target(p, fmt, None if fmt else why))

    def file(self, p: str) -> None:
        self._tick()
        fmt, _ = _claim_file(Path(p), walked=True)
        if fmt is None:
            self.out.skipped += 1
        else:
            self.out.targets.append(Target(p, fmt))

    def walk(self, d: str) -> None:
        self._tick()
        if os.path.realpath(d) in self.skip:
            return
        fmt = _claim_dir(Path(d))
        if fmt is not None:
            self.out.targets.append(Target(d, fmt, is_dir=True))
            return
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return  # an unreadable folder (another user's, a lost+found) holds nothing we read
        subdirs = []
        for e in entries:
            try:
                mode = e.stat(follow_symlinks=True).st_mode
                is_link = e.is_symlink()
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if not is_link and not e.name.startswith(".") and e.name != "__pycache__":
                    subdirs.append(e.path)
            elif stat.S_ISREG(mode) and _candidate(e.name):
                self.file(e.path)
            else:
                self._tick()
        for s in subdirs:
            self.walk(s)


_COMPANIONS = {"ms_swift_completions": "ms_swift"}
"""A file of the first format is part of the run a file of the second format in the same folder
stands for (ms-swift's ``logging.jsonl`` reads the ``completions.jsonl`` beside it)."""


def _dedupe(targets: list[Target]) -> list[Target]:
    """Each target once: same real path, inside a folder target, or a companion file of
    another target (:data:`_COMPANIONS`) counts once."""
    real = [os.path.realpath(t.path) for t in targets]
    dirs = {r for r, t in zip(real, targets) if t.is_dir and t.fmt}
    claimed = {(os.path.dirname(r), t.fmt) for r, t in zip(real, targets) if not t.is_dir}
    out, seen = [], set()
    for r, t in zip(real, targets):
        if r in seen:
            continue
        lead = _COMPANIONS.get(t.fmt or "")
        if lead is not None and (os.path.dirname(r), lead) in claimed:
            continue
        parent, inside = r, False
        while True:
            up = os.path.dirname(parent)
            if up == parent:
                break
            parent = up
            if parent in dirs:
                inside = True
                break
        if inside:
            continue
        seen.add(r)
        out.append(t)
    return out


def discover(
    paths: Iterable[str | os.PathLike],
    *,
    skip: Iterable[str | os.PathLike] = (),
    on_entry: Callable[[int, int], None] | None = None,
) -> Discovery:
    """The targets under ``paths`` (see the module docstring), each once, in walk order.

    Args:
        paths: files, folders and globs.
        skip: folders never entered (the scan's own cache).
        on_entry: ``on_entry(entries_seen, targets_found)`` now and then, for a progress line.

    Raises:
        InputError: a path that does not exist, a glob that matches nothing, or ``-``.
    """
    w = _Walker([Path(s) for s in skip], on_entry)
    for raw in paths:
        p = os.fspath(raw)
        if p == "-":
            raise InputError("-", "scan reads files and folders; for standard input use doctor")
        if _is_glob(p):
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise InputError(p, "no file or folder matches this pattern")
            for m in matches:
                if os.path.isdir(m):
                    w.walk(m)
                elif os.path.isfile(m):  # the pattern named it: sniffed whatever its suffix
                    w.file(m)
            continue
        if not os.path.exists(p):
            raise InputError(p, "no such file or directory")
        w.explicit(p)
    w.out.targets = _dedupe(w.out.targets)
    return w.out

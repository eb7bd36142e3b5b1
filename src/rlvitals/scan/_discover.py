"""Finding the runs under the paths ``rlvitals scan`` is given.

A path is a file, a folder, or a glob (``runs/*/trainer_state.json``, ``sweep/**/*.log``), or
an MLflow tracking server's URL (``mlflow://HOST:PORT/experiments/NAME``: one target, the
``mlflow`` importer lists its runs; :mod:`rlvitals.importers._mlflow_server`).
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
2. otherwise its files whose names could be logs (the ``files`` each importer declares:
   ``.log``, ``.jsonl``, TensorBoard's ``tfevents``, ``.wandb``, ...; compressed too:
   :func:`rlvitals.importers.candidate_file`) are sniffed, and each one an importer claims is
   a target. A generic JSONL or CSV file found this way needs a step column (its importer's
   ``walk_confidence``): a model's ``config.json`` is not a run. Files no importer claims
   are skipped (counted, not reported);
3. then its subfolders, in name order; hidden ones (``.git``, ``.venv``) and symbolic links to
   folders are not entered. The walk is iterative, with budgets: :data:`MAX_DEPTH` levels
   below a folder given, :data:`MAX_ENTRIES` entries in all; what is past them is a row
   saying so (an error row, so ``--fail-on`` fails).

A symbolic link to a file **outside** the scanned folder is not followed (counted in a note)
unless ``follow_links`` (``rlvitals scan --follow-links``). A folder that cannot be listed, a
candidate file that cannot be opened and an SQLite file whose schema cannot be read are rows
with their error ("could not be read"), never skipped in silence.

A companion file (an importer's ``companion_of``: ms-swift's
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

import errno
import glob
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rlvitals.errors import InputError

__all__ = ["Discovery", "Target", "discover"]

MAX_DEPTH = 64
"""Folder levels a walk goes below each folder it is given; deeper ones are a row that says so
(a folder 800 levels deep took 49 s, 1,000 levels a RecursionError)."""
MAX_ENTRIES = 2_000_000
"""Entries a walk looks at in all; past this it stops, with a row that says so."""
_UNREADABLE = "unreadable: "
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
    links_out: int = 0
    """File links that lead out of the scanned folder, not followed (``follow_links``)."""

    @property
    def notes(self) -> list[str]:
        """What the walk left out on purpose, said once."""
        if not self.links_out:
            return []
        return [
            f"{self.links_out} file link(s) leading out of the scanned folder not followed "
            "(--follow-links follows them)"
        ]


def _is_glob(p: str) -> bool:
    return any(c in _GLOB_CHARS for c in p) and not os.path.lexists(p)


def _claim_dir(d: Path) -> str | None:
    """The format claiming folder ``d`` itself, or None: none does, or the claim is only on
    something inside it (the importer's ``folder_claim`` says which)."""
    from rlvitals.importers import sniff

    try:
        imp = sniff(d)
    except InputError:
        return None
    if imp.folder_claim is not None and not imp.folder_claim(d):
        return None
    return imp.name


def _unreadable_db(p: Path) -> bool:
    """True for an SQLite file (by its magic) whose schema cannot be read: damaged, locked, or
    encrypted; a store of runs that cannot be listed, not a file to skip."""
    import sqlite3

    from rlvitals.importers import connect_sqlite, is_sqlite

    try:
        if not is_sqlite(p):
            return False
        with connect_sqlite(p, copy=False) as con:
            con.execute("SELECT name FROM sqlite_master").fetchall()
    except OSError:
        return True
    except (sqlite3.Error, UnicodeDecodeError):
        return True
    return False


def _claim_file(p: Path, walked: bool) -> tuple[str | None, str | None]:
    """``(format, None)``, or ``(None, why)`` when no importer reads ``p`` (or, in a walk, a
    generic one is not sure enough)."""
    from rlvitals.importers import SNIFF_BYTES, read_prefix, sniff

    try:
        imp = sniff(p)
    except InputError as e:
        why = " ".join(str(e).split())
        if walked and (e.problem.startswith("cannot") or _unreadable_db(p)):
            return None, _UNREADABLE + e.problem  # a run may be in there: a row, not a skip
        return None, why
    if walked and imp.walk_confidence > 0:
        try:
            score = imp.sniff(p, read_prefix(p, SNIFF_BYTES))
        except Exception:  # a sniffer is a guess; an unsure one is "not mine"
            score = 0.0
        if score < imp.walk_confidence:
            return None, "not sure it is a run"
    return imp.name, None


class _Walker:
    def __init__(
        self,
        skip: Iterable[Path],
        on_entry: Callable[[int, int], None] | None,
        follow_links: bool = False,
        max_depth: int = MAX_DEPTH,
        max_entries: int = MAX_ENTRIES,
    ):
        self.out = Discovery()
        self.skip = {os.path.realpath(p) for p in skip}
        self.on_entry = on_entry
        self.follow_links = follow_links
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.stopped = False

    def _tick(self) -> None:
        self.out.entries += 1
        if self.on_entry is not None and self.out.entries % 256 == 0:
            self.on_entry(self.out.entries, len(self.out.targets))

    def _unreadable(self, p: str, why: str, is_dir: bool) -> None:
        self.out.targets.append(Target(p, None, why, is_dir=is_dir))

    def explicit(self, p: str) -> None:
        path = Path(p)
        if path.is_dir():
            self.walk(p)
            return
        fmt, why = _claim_file(path, walked=False)
        self.out.targets.append(Target(p, fmt, None if fmt else why))

    def file(self, p: str) -> None:
        self._tick()
        fmt, why = _claim_file(Path(p), walked=True)
        if fmt is not None:
            self.out.targets.append(Target(p, fmt))
        elif why is not None and why.startswith(_UNREADABLE):
            self._unreadable(p, why[len(_UNREADABLE) :], False)
        else:
            self.out.skipped += 1

    def walk(self, root: str) -> None:
        """Walk ``root`` top down, in name order, with an explicit stack (no recursion): at
        most :attr:`max_depth` levels below it and :attr:`max_entries` entries in all."""
        from rlvitals.importers import candidate_file

        top = os.path.realpath(root)
        stack: list[tuple[str, int]] = [(root, 0)]
        while stack and not self.stopped:
            d, depth = stack.pop()
            self._tick()
            if self.out.entries > self.max_entries:
                self.stopped = True
                self._unreadable(
                    d,
                    f"not read: the walk stopped after {self.max_entries:,} entries (its budget); "
                    "scan the folders one by one",
                    True,
                )
                return
            if os.path.realpath(d) in self.skip:
                continue
            fmt = _claim_dir(Path(d))
            if fmt is not None:
                self.out.targets.append(Target(d, fmt, is_dir=True))
                continue
            try:
                with os.scandir(d) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:  # said, so that --fail-on fails: a run may be in there
                self._unreadable(d, f"cannot read this folder: {e.strerror or e}", True)
                continue
            subdirs = []
            for e in entries:
                try:
                    is_link = e.is_symlink()
                    mode = e.stat(follow_symlinks=True).st_mode
                except OSError as err:
                    if candidate_file(e.name) and err.errno not in (errno.ENOENT, None):
                        self._unreadable(e.path, f"cannot read: {err.strerror or err}", False)
                    else:
                        self._tick()
                    continue
                if stat.S_ISDIR(mode):
                    if not is_link and not e.name.startswith(".") and e.name != "__pycache__":
                        subdirs.append(e.path)
                elif stat.S_ISREG(mode) and candidate_file(e.name):
                    if is_link and not self.follow_links and not _inside(e.path, top):
                        self.out.skipped += 1  # a link out of the folder: --follow-links
                        self.out.links_out += 1
                        self._tick()
                    else:
                        self.file(e.path)
                else:
                    self._tick()
            if subdirs and depth >= self.max_depth:
                self._unreadable(
                    subdirs[0] if len(subdirs) == 1 else d,
                    f"not entered: {len(subdirs)} folder(s) deeper than {self.max_depth} levels "
                    "below the scanned folder (the walk's depth budget); scan them directly",
                    True,
                )
                continue
            stack.extend((s, depth + 1) for s in reversed(subdirs))


def _inside(path: str, top: str) -> bool:
    real = os.path.realpath(path)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _companion_of(fmt: str | None) -> str | None:
    """The format whose file in the same folder reads a file of ``fmt`` (its importer's
    ``companion_of``)."""
    from rlvitals.importers import get_importer

    return get_importer(fmt).companion_of if fmt else None


def _dedupe(targets: list[Target]) -> list[Target]:
    """Each target once: same real path, inside a folder target, or a companion file of
    another target (:func:`_companion_of`) counts once."""
    from rlvitals.importers import is_url

    real = [t.path if is_url(t.path) else os.path.realpath(t.path) for t in targets]
    dirs = {r for r, t in zip(real, targets) if t.is_dir and t.fmt}
    claimed = {(os.path.dirname(r), t.fmt) for r, t in zip(real, targets) if not t.is_dir}
    out, seen = [], set()
    for r, t in zip(real, targets):
        if r in seen:
            continue
        lead = _companion_of(t.fmt)
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
    follow_links: bool = False,
    max_depth: int = MAX_DEPTH,
    max_entries: int = MAX_ENTRIES,
) -> Discovery:
    """The targets under ``paths`` (see the module docstring), each once, in walk order.

    Args:
        paths: files, folders and globs.
        skip: folders never entered (the scan's own cache).
        on_entry: ``on_entry(entries_seen, targets_found)`` now and then, for a progress line.
        follow_links: follow symbolic links to files outside the folder being walked.
        max_depth, max_entries: the walk's budgets (:data:`MAX_DEPTH`, :data:`MAX_ENTRIES`).

    Raises:
        InputError: a path that does not exist, a glob that matches nothing, or ``-``.
    """
    from rlvitals.importers import is_url

    w = _Walker([Path(s) for s in skip], on_entry, follow_links, max_depth, max_entries)
    for raw in paths:
        p = os.fspath(raw)
        if p == "-":
            raise InputError("-", "scan reads files and folders; for standard input use doctor")
        if is_url(p):  # an MLflow server's runs (mlflow://HOST:PORT/experiments/NAME)
            w.out.targets.append(Target(p, "mlflow"))
            continue
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

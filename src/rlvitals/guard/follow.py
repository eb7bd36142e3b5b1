"""Follow a run while it is being written: a recording directory or a growing log of any format.

:class:`RunFollower` re-reads its input when it changed, through the importers (so every format
``rlvitals doctor`` reads can be followed), and survives what live files do:

- a **torn last line** (the writer is in the middle of a record): only the complete lines are
  read (a copy of the file up to its last newline), and the importers' lenient reading skips
  a damaged record instead of failing the whole refresh;
- **rotation** (``train.log`` moved to ``train.log.1`` and a new ``train.log`` begun) and
  **truncation** (``copytruncate``): the steps read before are kept, and the new file's steps
  are added to them (a step in both is the new file's);
- a **binary** file (an SQLite store, parquet, a compressed log, an event file) is handed whole
  to its importer, which reads a file being written on its own terms;
- an unreadable file, or one that vanishes between two looks, is an :class:`InputError`
  naming it (kept in :attr:`RunFollower.error`), never an ``OSError``;
- a file that cannot be read yet (a ``trainer_state.json`` rewritten right now, a recording
  whose manifest is not there yet): the last good run is kept, and the next change is tried.

A re-read costs a full read of the input; the caller paces polls (``rlvitals watch`` waits at
least three times as long as the last read took).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError
from rlvitals.recording.run import Run

__all__ = ["RunFollower", "merge_runs"]


@dataclass(frozen=True)
class _Stamp:
    """What a poll compares to see a change: identity and size of every file read."""

    files: tuple[tuple[str, int, int, int], ...]  # (name, inode, size, mtime_ns)


class RunFollower:
    """Re-read ``path`` when it changed (module docstring).

    Args:
        path: a recording directory, a log file, or a directory an importer reads.
        fmt: force the input format (as ``rlvitals doctor --input-format``).
        run: which run of a store holding several.

    Attributes:
        run: the last run read (None before the first good read).
        error: why the last read failed (an :class:`InputError`), or None.
        reads: successful reads; ``rotations``: rotations or truncations seen.
        read_seconds: how long the last read took.
    """

    def __init__(self, path: str | os.PathLike, fmt: str | None = None, run: str | None = None):
        self.path = Path(path)
        self.fmt = fmt
        self.select = run
        self.run: Run | None = None
        self.error: InputError | None = None
        self.reads = 0
        self.rotations = 0
        self.read_seconds = 0.0
        self._stamp: _Stamp | None = None
        self._history: Run | None = None  # what earlier files (before a rotation) held
        self._inode: int | None = None
        self._offset = 0

    def poll(self) -> bool:
        """Read the input again if it changed; True when :attr:`run` is new."""
        stamp = self._stamp_now()
        if stamp is None:
            if self.run is None:
                self.error = InputError(self.path, "no such file or directory (yet)")
            return False
        if stamp == self._stamp:
            return False
        start = time.perf_counter()
        try:
            run = self._read()
        except InputError as err:
            self.error = err
            self._stamp = stamp  # try again at the next change, not at every poll
            return False
        finally:
            self.read_seconds = time.perf_counter() - start
        self._stamp = stamp
        self.error = None
        self.run = run if self._history is None else merge_runs(self._history, run)
        self.reads += 1
        return True

    # -- reading ---------------------------------------------------------------------------

    def _read(self) -> Run:
        try:
            return self._read_once()
        except OSError as e:  # unreadable, or gone between the stat and the read
            raise InputError(self.path, f"cannot read: {e.strerror or e}") from None

    def _read_once(self) -> Run:
        from rlvitals.importers import load

        p = self.path
        if p.is_dir() or self.fmt == "recording":
            return load(p, self.fmt, run=self.select, lenient=True)
        st = os.stat(p)
        if not stat.S_ISREG(st.st_mode):  # a FIFO or a device: read as it is, once per change
            return load(p, self.fmt, run=self.select, lenient=True)
        if self._inode is not None and (st.st_ino != self._inode or st.st_size < self._offset):
            # rotated or truncated: what was read stays, the new file's steps come on top
            self._history = (
                self.run if self._history is None else merge_runs(self._history, self.run)
            )
            self.rotations += 1
        self._inode = st.st_ino
        if not _is_text(p):
            # A database, a parquet file, a compressed log, a binary event file: its importer
            # gets it whole (a cut at a newline byte would make it unreadable); each reads a
            # file being written on its own terms (a live SQLite WAL, a torn last record).
            self._offset = st.st_size
            return load(p, self.fmt, run=self.select, lenient=True)
        cut = _last_newline(p, st.st_size)
        self._offset = cut
        if cut == st.st_size:
            return load(p, self.fmt, run=self.select, lenient=True)
        if cut == 0:
            raise InputError(p, "no complete line yet")
        with tempfile.TemporaryDirectory(prefix="rlvitals-watch-") as tmp:
            copy = Path(tmp) / p.name  # same name: some importers look at it
            with open(p, "rb") as src, open(copy, "wb") as dst:
                shutil.copyfileobj(_Limited(src, cut), dst)
            try:
                run = load(copy, self.fmt, run=self.select, lenient=True)
            except InputError as e:  # name the user's file, never our copy
                raise InputError(p, _renamed(e.problem, copy, p), e.where) from None
        m = replace(run.manifest, source=str(p))
        warnings = [_renamed(w, copy, p) for w in run.warnings]
        return replace(run, manifest=m, warnings=warnings)

    def _stamp_now(self) -> _Stamp | None:
        p = self.path
        try:
            if p.is_dir():
                files = []
                for root, _dirs, names in os.walk(p):
                    for name in names:
                        st = os.stat(os.path.join(root, name))
                        files.append(
                            (os.path.join(root, name), st.st_ino, st.st_size, st.st_mtime_ns)
                        )
                return _Stamp(tuple(sorted(files)))
            st = os.stat(p)
        except OSError:
            return None
        return _Stamp(((str(p), st.st_ino, st.st_size, st.st_mtime_ns),))


class _Limited:
    """The first ``n`` bytes of a binary file object."""

    def __init__(self, f: Any, n: int):
        self.f, self.left = f, n

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        size = self.left if size is None or size < 0 else min(size, self.left)
        data = self.f.read(size)
        self.left -= len(data)
        return data


_TEXT_PROBE = 1 << 16


def _is_text(p: Path) -> bool:
    """True for a file that is read line by line: no compression magic, no NUL byte in its
    first 64 KiB (SQLite, parquet, TFRecord, W&B and recording files all have some)."""
    from rlvitals.importers import compression_of

    with open(p, "rb") as f:
        head = f.read(_TEXT_PROBE)
    return compression_of(head) is None and b"\0" not in head


def _renamed(text: str, copy: Path, p: Path) -> str:
    return text.replace(str(copy), str(p))


def _last_newline(p: Path, size: int, chunk: int = 1 << 16) -> int:
    """Offset just past the last ``\\n`` of the file (0 when it has none)."""
    with open(p, "rb") as f:
        end = size
        while end > 0:
            start = max(0, end - chunk)
            f.seek(start)
            block = f.read(end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            end = start
    return 0


def merge_runs(old: Run, new: Run) -> Run:
    """``old`` and ``new`` on one step index; where both have a step, ``new``'s values win.

    Events are concatenated, per-group rewards and the manifest are ``new``'s (a rotated log
    starts over; its groups, if any, cover its own steps).

    >>> from rlvitals.recording import RunBuilder
    >>> a, b = RunBuilder(), RunBuilder()
    >>> for s in (1, 2, 3):
    ...     a.add_row(s, {"loss": 1.0})
    >>> for s in (3, 4):
    ...     b.add_row(s, {"loss": 2.0})
    >>> merge_runs(a.build(), b.build()).series["loss"].tolist()
    [1.0, 1.0, 2.0, 2.0]
    """

    def merge(s_old, c_old, s_new, c_new):
        steps = np.union1d(s_old, s_new).astype(np.int64)
        out = {}
        for name in set(c_old) | set(c_new):
            col = np.full(steps.shape[0], np.nan)
            if name in c_old:
                col[np.searchsorted(steps, s_old)] = c_old[name]
            if name in c_new:
                pos = np.searchsorted(steps, s_new)
                keep = np.isfinite(c_new[name])
                col[pos[keep]] = c_new[name][keep]
            out[name] = col
        return steps, out

    steps, series = merge(old.steps, old.series, new.steps, new.series)
    esteps, eseries = merge(old.eval_steps, old.eval_series, new.eval_steps, new.eval_series)
    return replace(
        new,
        steps=steps,
        series=series,
        eval_steps=esteps,
        eval_series=eseries,
        groups=new.groups if new.groups is not None else old.groups,
        events=[*old.events, *new.events],
        unknown_keys=list(dict.fromkeys([*old.unknown_keys, *new.unknown_keys])),
        warnings=list(dict.fromkeys([*old.warnings, *new.warnings])),
    )

"""The scan cache: a re-scan of unchanged runs reads none of them again.

A row is stored under a key made of the rlvitals source (:func:`source_version`: the version
and the bytes of the package's code), the scan's settings (the doctor's
configuration, ``--eval-key``), the importer, the target's real path, the run within a store,
and a **fingerprint** of every file the importer may read for it: path, size and modification
time (nanoseconds), inode and ctime of

- a file target, plus SQLite's ``-wal`` / ``-journal`` beside it; for a recording stream, the
  whole recording folder; for the TRL and ms-swift files (:data:`BESIDE_FORMATS`), the JSON /
  YAML files and completions beside it (their importers read an arguments file and
  completion tables next to them);
- every file under a folder target (a store is re-read whole when any of its files changed).

A folder with more than :data:`MAX_FINGERPRINT_FILES` files is not cached (read every time).
Rows of runs that failed to read are not cached (the next scan tries again), and neither are
store listings that failed.

The cache is one SQLite file, ``scan.sqlite3``, in ``--cache-dir`` or
``$XDG_CACHE_HOME/rlvitals`` (``~/.cache/rlvitals``): never inside the scanned folders (the
walk skips it if it is there). Only the scanning process writes it; a cache that cannot be
opened or written turns itself off with a note, and the scan goes on without it; so does one
whose file (or ``-wal`` / ``-shm`` / ``-journal``) is a symbolic link or not a regular file: the
cache never writes through a link planted there. A row that cannot be decoded (a damaged or
foreign row) is a miss: the run is read again and its row rewritten. It keeps the
:data:`MAX_ROWS` most recently used rows.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import stat
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "CACHE_NAME",
    "MAX_FINGERPRINT_FILES",
    "MAX_ROWS",
    "ScanCache",
    "default_cache_dir",
    "fingerprint",
]

CACHE_NAME = "scan.sqlite3"
MAX_FINGERPRINT_FILES = 100_000
"""A folder target with more files than this is read on every scan (its fingerprint would cost
about as much as reading it)."""
MAX_ROWS = 200_000
"""Rows kept; the least recently used beyond this are dropped."""
BESIDE_FORMATS = frozenset({"trl_state", "trl_completions", "ms_swift", "ms_swift_completions"})
"""File formats whose importer also reads files beside the file: a JSON / YAML arguments file
(:data:`BESIDE_SUFFIXES`), ``completions.jsonl`` or a ``completions/`` folder, next to the file
or next to its ``checkpoint-N`` folder."""
BESIDE_SUFFIXES = (".json", ".yaml", ".yml")
SCHEMA = 1
_SIDECARS = ("-wal", "-journal")
_TIMEOUT_S = 10.0
_BATCH = 500


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/rlvitals``, else ``~/.cache/rlvitals``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rlvitals"


def _stat(p: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    # The inode and ctime too: a file replaced by another of the same size and mtime (a
    # restore, `touch -r`, a rename over it) is a new file.
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns


_SOURCE: str | None = None


def source_version() -> str:
    """A digest of the rlvitals code that makes the rows: the version and the bytes of every
    ``.py`` file of the installed package (an editable install's rows are not reused across
    edits or commits of the source tree). Computed once per process (~3 ms)."""
    global _SOURCE
    if _SOURCE is None:
        import rlvitals
        from rlvitals._version import __version__

        h = hashlib.sha256(__version__.encode())
        root = Path(rlvitals.__file__).parent
        for f in sorted(root.rglob("*.py")):
            h.update(str(f.relative_to(root)).encode() + b"\0")
            with contextlib.suppress(OSError):
                h.update(f.read_bytes())
        _SOURCE = h.hexdigest()
    return _SOURCE


def _walk_stats(root: str, out: list, limit: int) -> bool:
    from rlvitals.importers import walk_tree

    for dirpath, _dirnames, filenames in walk_tree(root, 2 * limit + 2):
        for name in filenames:
            p = os.path.join(dirpath, name)
            s = _stat(p)
            if s is not None:
                out.append((os.path.relpath(p, root), *s))
        if len(out) > limit:
            return False
    return True


def fingerprint(path: str, fmt: str | None, is_dir: bool) -> str | None:
    """A digest of the files the importer ``fmt`` may read for ``path`` (module docstring), or
    None when it cannot be taken (a file that vanished, a folder too large)."""
    stats: list[Any] = []
    if is_dir:
        if not _walk_stats(path, stats, MAX_FINGERPRINT_FILES):
            return None
    else:
        own = _stat(path)
        if own is None:
            return None
        stats.append(("", *own))
        for suffix in _SIDECARS:
            s = _stat(path + suffix)
            if s is not None:
                stats.append((suffix, *s))
        parent = os.path.dirname(path) or "."
        if fmt == "recording":
            near: list[Any] = []
            if not _walk_stats(parent, near, MAX_FINGERPRINT_FILES):
                return None
            stats.append(("recording", near))
        elif fmt in BESIDE_FORMATS:
            dirs = [parent]
            if re.match(r"checkpoint-\d+$", os.path.basename(os.path.abspath(parent))):
                dirs.append(os.path.dirname(os.path.abspath(parent)))
            for d in dirs:
                stats.append(("beside", d, _beside(d)))
    return hashlib.sha256(json.dumps(stats).encode()).hexdigest()


def _beside(d: str) -> list[Any]:
    try:
        names = sorted(
            e.name
            for e in os.scandir(d)
            if e.name.lower().endswith(BESIDE_SUFFIXES) or e.name == "completions.jsonl"
        )
    except OSError:
        names = []
    out: list[Any] = [(n, _stat(os.path.join(d, n))) for n in names]
    comp: list[Any] = []
    if os.path.isdir(os.path.join(d, "completions")):
        _walk_stats(os.path.join(d, "completions"), comp, MAX_FINGERPRINT_FILES)
    out.append(("completions", comp))
    return out


def row_key(settings: str, fmt: str | None, path: str, run: str | None, fp: str) -> str:
    """The cache key of one run's row (the module docstring says what goes in)."""
    blob = json.dumps([SCHEMA, source_version(), settings, fmt, os.path.realpath(path), run, fp])
    return hashlib.sha256(blob.encode()).hexdigest()


def _refuse_links(directory: Path, path: Path) -> None:
    """OSError unless the cache folder is a folder and its file and side files are regular
    files or absent (never links: SQLite would write through them); creates the file with
    ``O_NOFOLLOW`` so that no link can be planted between this check and the open."""
    if os.path.islink(directory):
        raise OSError(f"{directory} is a symbolic link; not followed")
    for suffix in ("", *_SIDECARS, "-shm"):
        try:
            st = os.lstat(f"{path}{suffix}")
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}{suffix} is not a regular file (a link?); not followed")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    os.close(fd)


class ScanCache:
    """Rows and store listings by key, in one SQLite file (see the module docstring).

    Every method swallows the cache's own errors (a full disk, a read-only home, a locked or
    damaged file): the cache turns off, :attr:`note` says why, and the scan reads the runs.
    """

    def __init__(self, directory: str | os.PathLike | None = None):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        self.path = self.directory / CACHE_NAME
        self.note: str | None = None
        self.hits = 0
        self.damaged = 0
        """Rows found but not usable (damaged, foreign): read again and rewritten."""
        self._pending: list[tuple[str, str, float]] = []
        self._con: sqlite3.Connection | None = None
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            _refuse_links(self.directory, self.path)
            con = sqlite3.connect(self.path, timeout=_TIMEOUT_S, isolation_level=None)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last rows is fine
            con.execute(
                "CREATE TABLE IF NOT EXISTS entries "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, used REAL NOT NULL)"
            )
            self._con = con
        except (OSError, sqlite3.Error) as e:
            self._off(e)

    @property
    def enabled(self) -> bool:
        return self._con is not None

    def _off(self, e: BaseException) -> None:
        self.note = f"scan cache {self.path} turned off: {e}"
        if self._con is not None:
            with contextlib.suppress(sqlite3.Error):
                self._con.close()
        self._con = None

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        """The stored values of those ``keys`` that are there (decoded JSON)."""
        keys = list(dict.fromkeys(keys))
        out: dict[str, Any] = {}
        if self._con is None:
            return out
        try:
            for i in range(0, len(keys), _BATCH):
                chunk = keys[i : i + _BATCH]
                marks = ",".join("?" * len(chunk))
                for k, v in self._con.execute(
                    f"SELECT key, value FROM entries WHERE key IN ({marks})", chunk
                ):
                    try:
                        out[k] = json.loads(v)
                    except (TypeError, ValueError, RecursionError):
                        self.damaged += 1  # a miss: the run is read and the row rewritten
            if out:
                now = time.time()
                self._con.execute("BEGIN")
                self._con.executemany(
                    "UPDATE entries SET used = ? WHERE key = ?", [(now, k) for k in out]
                )
                self._con.execute("COMMIT")
        except (sqlite3.Error, ValueError) as e:
            self._off(e)
            return {}
        self.hits += len(out)
        return out

    def get(self, key: str) -> Any | None:
        return self.get_many([key]).get(key)

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-ready) under ``key``; written in batches and by :meth:`close`."""
        if self._con is None:
            return
        self._pending.append((key, json.dumps(value), time.time()))
        if len(self._pending) >= _BATCH:
            self.flush()

    def flush(self) -> None:
        if self._con is None or not self._pending:
            self._pending.clear()
            return
        try:
            self._con.execute("BEGIN")
            self._con.executemany(
                "INSERT OR REPLACE INTO entries (key, value, used) VALUES (?, ?, ?)",
                self._pending,
            )
            self._con.execute("COMMIT")
        except sqlite3.Error as e:
            self._off(e)
        self._pending.clear()

    def close(self) -> None:
        """Write what is pending, drop the least recently used rows past :data:`MAX_ROWS`."""
        self.flush()
        if self._con is None:
            return
        try:
            (n,) = self._con.execute("SELECT COUNT(*) FROM entries").fetchone()
            if n > MAX_ROWS:
                self._con.execute(
                    "DELETE FROM entries WHERE key IN "
                    "(SELECT key FROM entries ORDER BY used LIMIT ?)",
                    (n - MAX_ROWS,),
                )
            self._con.close()
        except sqlite3.Error as e:
            self._off(e)
        self._con = None

    def __enter__(self) -> ScanCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

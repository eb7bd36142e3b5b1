"""Opening someone else's SQLite database (an MLflow or trackio store) without touching it.

``mode=ro`` alone is not enough: SQLite opens a WAL-mode database read-only by creating ``-shm``
and ``-wal`` files next to it, and leaves them behind. :func:`connect` creates nothing there:

- a database with no pending log beside it is opened ``immutable=1``: no locks, no side
  files, the main file is all there is;
- a **live** WAL-mode database (a ``-wal`` holding committed data and the ``-shm`` index of a
  writer beside it) is opened ``mode=ro`` in place, inside one read transaction: SQLite reads
  the log through the writer's index, so every query sees one consistent snapshot while the
  writer goes on (copying the two files one after the other raced the writer: 23 of 269
  reads said "database disk image is malformed"); nothing new is created beside it;
- one whose ``-wal`` has no index (a writer that was killed) or whose ``-journal`` is hot is
  copied, with its log, into a temporary directory and read there, so that committed data is
  not missed; the copy is removed afterwards. When ``$TMPDIR`` has no room for the copy, the
  main file is read alone (``immutable=1``) and a note says what was not read.

Only regular files count as logs: a ``-journal`` or ``-wal`` that is a symbolic link, a FIFO or a
device (a ``-journal`` linked to ``/dev/zero`` filled ``$TMPDIR``) is never copied nor read.

Text is decoded with replacement characters: invalid UTF-8 in a name or a key (a damaged or
foreign file) is never a ``UnicodeDecodeError`` out of the cursor. SQLite's own error messages
may quote such bytes too: :func:`problem` turns either into a message.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import stat
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ERRORS", "MAGIC", "columns", "connect", "is_sqlite", "problem", "tables", "uri"]

MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""
BUSY_TIMEOUT_S = 5.0
ERRORS = (sqlite3.Error, UnicodeDecodeError)
"""What reading a damaged database raises: SQLite's errors, and a UnicodeDecodeError when
SQLite's message about a damaged schema quotes invalid UTF-8."""
_LOGS = ("-wal", "-journal")
_COPY_MARGIN = 64 << 20
"""Free space left in ``$TMPDIR`` beyond a copy of a store with a pending log."""


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _logs(db: str | os.PathLike) -> dict[str, int]:
    """The non-empty regular ``-wal`` / ``-journal`` files beside ``db``: suffix -> size."""
    out = {}
    for suffix in _LOGS:
        try:
            st = os.lstat(f"{os.fspath(db)}{suffix}")
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_size > 0:
            out[suffix] = st.st_size
    return out


def _quoted(db: str | os.PathLike) -> str:
    return "file:" + urllib.parse.quote(str(Path(db).resolve()))


def uri(db: str | os.PathLike) -> str:
    """The URI that opens ``db`` read-only creating nothing beside it, when it has no pending
    log (:func:`connect` reads the log otherwise)."""
    return _quoted(db) + "?mode=ro&immutable=1"


def _open(u: str) -> sqlite3.Connection:
    con = sqlite3.connect(u, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    con.text_factory = _text
    con.execute("PRAGMA query_only = 1")
    return con


def _live(db: str | os.PathLike) -> sqlite3.Connection | None:
    """A ``mode=ro`` connection to a live WAL database, inside a read transaction (one
    snapshot for every query), or None when SQLite cannot read it in place."""
    try:
        if not stat.S_ISREG(os.lstat(f"{os.fspath(db)}-shm").st_mode):
            return None
    except OSError:
        return None
    try:
        con = _open(_quoted(db) + "?mode=ro")
    except sqlite3.Error:
        return None
    try:
        con.execute("BEGIN")
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the snapshot starts
    except sqlite3.Error:
        con.close()
        return None
    return con


def _room_for(tmp: str, size: int) -> bool:
    try:
        return shutil.disk_usage(tmp).free > size + _COPY_MARGIN
    except OSError:
        return True


def _note(db: str | os.PathLike, text: str) -> None:
    from rlvitals.importers._source import _note as note  # the notes of the current load()

    note(Path(db), text)


@contextlib.contextmanager
def connect(db: str | os.PathLike, *, copy: bool = True) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``db`` that creates nothing next to it (see the module doc).

    ``copy=False`` (sniffing: cheap, and the schema is in the main file) never copies; a live
    WAL database is still read in place (its main file may be mid-checkpoint).
    """
    logs = _logs(db)
    con = _live(db) if "-wal" in logs else None
    if not copy:
        logs = {}
    if con is None and logs:
        tmp = tempfile.gettempdir()
        size = os.stat(db).st_size + sum(logs.values())
        if not _room_for(tmp, size):
            _note(
                db,
                f"its pending {'/'.join(logs)} log ({sum(logs.values()):,} bytes) was not read: "
                f"no room in {tmp} for a {size:,}-byte copy (set TMPDIR to a larger disk)",
            )
            logs = {}
    if con is not None or not logs:
        con = con or _open(uri(db))
        try:
            yield con
        finally:
            con.close()
        return
    with tempfile.TemporaryDirectory(prefix="rlvitals-sqlite-") as tmp:
        local = Path(tmp) / "db.sqlite"
        shutil.copyfile(db, local)
        for suffix in logs:  # regular files only (_logs): never a link to a device
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(f"{os.fspath(db)}{suffix}", f"{local}{suffix}")
        # Our copy: opened writable so that SQLite may recover the log into it.
        con = _open("file:" + urllib.parse.quote(str(local)) + "?mode=rw")
        try:
            yield con
        finally:
            con.close()


def is_sqlite(path: str | os.PathLike) -> bool:
    """Whether the file ``path`` starts as an SQLite database does (OSError when it cannot be
    read)."""
    with open(path, "rb") as f:
        return f.read(len(MAGIC)) == MAGIC


def tables(con: sqlite3.Connection) -> set[str]:
    """The names of the tables of an open database."""
    return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def columns(con: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table`` (none when there is no such table)."""
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def problem(e: BaseException) -> str:
    """A one-line message for an :data:`ERRORS` exception."""
    if isinstance(e, UnicodeDecodeError):
        return bytes(e.object).decode("utf-8", "replace")
    return str(e) or type(e).__name__

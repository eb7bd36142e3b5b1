"""Opening someone else's SQLite database (an MLflow or trackio store) without touching it.

``mode=ro`` is not enough: SQLite opens a WAL-mode database read-only by creating ``-shm`` and
``-wal`` files next to it, and leaves them behind. :func:`connect` creates nothing there:

- a database with no pending log beside it is opened ``immutable=1``: no locks, no side
  files, the main file is all there is;
- one whose ``-wal`` or hot ``-journal`` still holds committed data (a live server, or one
  that was killed) is copied, with its log, into a temporary directory and read there, so
  that data is not missed; the copy is removed afterwards.

Text is decoded with replacement characters: invalid UTF-8 in a name or a key (a damaged or
foreign file) is never a ``UnicodeDecodeError`` out of the cursor. SQLite's own error messages
may quote such bytes too: :func:`problem` turns either into a message.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

__all__ = ["ERRORS", "connect", "pending_log", "problem", "uri"]

BUSY_TIMEOUT_S = 5.0
ERRORS = (sqlite3.Error, UnicodeDecodeError)
"""What reading a damaged database raises: SQLite's errors, and a UnicodeDecodeError when
SQLite's message about a damaged schema quotes invalid UTF-8."""
_LOGS = ("-wal", "-journal")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def pending_log(db: str | os.PathLike) -> bool:
    """True when a non-empty ``-wal`` or ``-journal`` lies beside ``db``: committed data not
    yet in the main file."""
    for suffix in _LOGS:
        try:
            if os.lstat(f"{os.fspath(db)}{suffix}").st_size > 0:
                return True
        except OSError:
            pass
    return False


def uri(db: str | os.PathLike) -> str:
    """The URI that opens ``db`` read-only creating nothing beside it, when it has no pending
    log (:func:`connect` copies it otherwise)."""
    return "file:" + urllib.parse.quote(str(Path(db).resolve())) + "?mode=ro&immutable=1"


def _open(u: str) -> sqlite3.Connection:
    con = sqlite3.connect(u, uri=True, timeout=BUSY_TIMEOUT_S)
    con.text_factory = _text
    con.execute("PRAGMA query_only = 1")
    return con


@contextlib.contextmanager
def connect(db: str | os.PathLike, *, copy: bool = True) -> Iterator[sqlite3.Connection]:
    """A read-only connection to ``db`` that creates nothing next to it (see the module doc).

    ``copy=False`` (sniffing: cheap, and the schema is in the main file) never copies.
    """
    if not copy or not pending_log(db):
        con = _open(uri(db))
        try:
            yield con
        finally:
            con.close()
        return
    with tempfile.TemporaryDirectory(prefix="rlvitals-sqlite-") as tmp:
        local = Path(tmp) / "db.sqlite"
        shutil.copyfile(db, local)
        for suffix in _LOGS:
            with contextlib.suppress(FileNotFoundError):
                shutil.copyfile(f"{os.fspath(db)}{suffix}", f"{local}{suffix}")
        # Our copy: opened writable so that SQLite may recover the log into it.
        con = _open("file:" + urllib.parse.quote(str(local)) + "?mode=rw")
        try:
            yield con
        finally:
            con.close()


def problem(e: BaseException) -> str:
    """A one-line message for an :data:`ERRORS` exception."""
    if isinstance(e, UnicodeDecodeError):
        return bytes(e.object).decode("utf-8", "replace")
    return str(e) or type(e).__name__

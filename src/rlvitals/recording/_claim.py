"""Who writes a rank: a claim file that keeps a second writer out without relying on ``flock``.

``flock`` fails silently on some network file systems (NFS mounted ``nolock``, Lustre without
``flock``), and there two writers on one rank would mix their records. So each writer also
claims its rank with a small file, ``.writer.rank<r>``, created with ``O_EXCL`` (atomic on local
file systems and NFSv3+) and holding a random writer id, the pid, the host and the start time.

- **On open**, a second writer finds the claim and is refused (``RuntimeError``) before it
  touches anything: no stream, no manifest. A claim left by a writer that died (SIGKILL, a lost
  node) is taken over: on the same host when its pid no longer runs (or is a zombie, or is
  another process that reused the pid, or the machine rebooted since); from another host when
  its heartbeat (the file's modification time) is older than :data:`CLAIM_STALE_S`.
- **While writing**, the owner re-reads its claim and refreshes the heartbeat at most every
  :data:`CLAIM_CHECK_S` seconds, and checks that no one else appended to its streams; if
  another writer took the claim over, this one stops writing (and says so) rather than mix.
- **On close**, the claim is removed if it is still this writer's.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

__all__ = ["CLAIM_CHECK_S", "CLAIM_STALE_S", "Claim", "Claimed", "claim_name"]

CLAIM_CHECK_S = 30.0
"""A writer re-reads its claim (and refreshes its heartbeat) at most this often while writing."""
CLAIM_STALE_S = 600.0
"""A claim from another host is stale when its heartbeat is older than this (on this host, the
claiming process is looked up instead)."""
_MAX_CLAIM_BYTES = 4096
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_ATTEMPTS = 3


def claim_name(rank: int) -> str:
    """File name of a rank's claim.

    >>> claim_name(2)
    '.writer.rank2'
    """
    return f".writer.rank{rank}"


class Claimed(Exception):
    """The rank is claimed by a live writer; ``args[0]`` describes it."""


def _host() -> str:
    try:
        return socket.gethostname()
    except OSError:  # pragma: no cover - no hostname
        return "?"


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read(4096)
    except OSError:
        return None


def _boot_id() -> str | None:
    """This boot's id (Linux): a claim from an earlier boot is stale whatever its pid."""
    text = _read_small("/proc/sys/kernel/random/boot_id")
    return text.strip() if text else None


def _proc_start(pid: int) -> tuple[str, str] | None:
    """``(state, start time in clock ticks since boot)`` of a process (Linux ``/proc``)."""
    text = _read_small(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after "pid (comm)": state is field 3
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _pid_alive(pid: Any, started: Any = None) -> bool:
    """Does the claiming process still run? A zombie does not; nor does a process that reuses
    the pid but started at another time (``started``: its start in ticks since boot)."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if pid == os.getpid():
        return True  # another Recorder of this very process holds the rank
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as another user
        pass
    info = _proc_start(pid)
    if info is not None:
        state, start = info
        if state == "Z" or (isinstance(started, str) and started != start):
            return False
    return True


def _read(path: Path) -> tuple[dict[str, Any] | None, float]:
    """``(claim document or None if unreadable, mtime)``; FileNotFoundError when absent."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK)
    try:
        st = os.fstat(fd)
        data = os.read(fd, _MAX_CLAIM_BYTES) if st.st_size <= _MAX_CLAIM_BYTES else b""
    finally:
        os.close(fd)
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, st.st_mtime
    return (doc if isinstance(doc, dict) else None), st.st_mtime


class Claim:
    """This writer's claim on one rank of one recording directory (see the module doc).

    Attributes:
        id: the random writer id written into the claim.
        replaced: the stale claim this one took over (its document), or None.
    """

    def __init__(self, directory: Path, rank: int):
        self.path = directory / claim_name(rank)
        self.rank = rank
        self.id = secrets.token_hex(8)
        self.host = _host()
        self.pid = os.getpid()
        self.held = False
        self.replaced: dict[str, Any] | None = None
        self.last_check = time.monotonic()

    def describe(self, doc: dict[str, Any] | None) -> str:
        if not doc:
            return "an unknown writer"
        started = doc.get("started")
        when = ""
        if isinstance(started, (int, float)) and not isinstance(started, bool):
            when = f", started {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(started))}"
        return f"pid {doc.get('pid', '?')} on host {doc.get('host', '?')}{when}"

    def _live(self, doc: dict[str, Any] | None, mtime: float) -> bool:
        if doc is None:
            return False  # junk where a claim should be (a planted file, a torn write)
        if doc.get("host") == self.host:
            boot = doc.get("boot")
            if isinstance(boot, str) and boot != _boot_id():
                return False  # written before this machine last booted
            return _pid_alive(doc.get("pid"), doc.get("proc_start"))
        return time.time() - mtime < CLAIM_STALE_S

    def acquire(self) -> None:
        """Claim the rank. Raises :class:`Claimed` when a live writer holds it; OSError when
        the directory cannot hold a claim (the caller counts it and goes on unclaimed)."""
        own = _proc_start(self.pid)
        doc = {
            "id": self.id,
            "pid": self.pid,
            "host": self.host,
            "started": time.time(),
            "boot": _boot_id(),
            "proc_start": own[1] if own else None,
        }
        data = (json.dumps(doc) + "\n").encode()
        for _ in range(_ATTEMPTS):
            try:
                fd = os.open(
                    self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644
                )
            except FileExistsError:
                try:
                    owner, mtime = _read(self.path)
                except FileNotFoundError:
                    continue  # released meanwhile: try again
                except OSError:  # a symlink or something unreadable planted there
                    owner, mtime = None, 0.0
                if self._live(owner, mtime):
                    raise Claimed(
                        f"{self.path}: rank {self.rank} is being written by {self.describe(owner)}"
                    ) from None
                self._take_over(owner)
                continue
            try:
                os.write(fd, data)
            except OSError:
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                raise
            os.close(fd)
            self.held = True
            self.last_check = time.monotonic()
            return
        raise Claimed(f"{self.path}: rank {self.rank} is being claimed by another writer")

    def _take_over(self, stale: dict[str, Any] | None) -> None:
        """Move a stale claim aside (atomically: of two writers taking it over, one wins)."""
        aside = self.path.with_name(f"{self.path.name}.{self.id}.stale")
        try:
            os.rename(self.path, aside)
        except FileNotFoundError:
            return
        try:
            moved, _ = _read(aside)
        except OSError:
            moved = None
        if moved is not None and stale is not None and moved.get("id") != stale.get("id"):
            # A live writer claimed the rank between our look and the move: give it back.
            with contextlib.suppress(OSError):
                os.rename(aside, self.path)
            raise Claimed(f"{self.path}: rank {self.rank} was just claimed by another writer")
        with contextlib.suppress(OSError):
            os.unlink(aside)
        self.replaced = stale or {}

    def check(self) -> bool:
        """True while the claim is still this writer's (and refresh its heartbeat)."""
        self.last_check = time.monotonic()
        if not self.held or os.getpid() != self.pid:
            return True  # a forked child neither judges nor refreshes its parent's claim
        try:
            doc, _ = _read(self.path)
        except FileNotFoundError:
            doc = None
        except OSError:
            return True  # cannot tell (a flaky mount): keep writing, the streams will say
        if doc is None or doc.get("id") != self.id:
            self.held = False
            return False
        with contextlib.suppress(OSError):
            os.utime(self.path)
        return True

    def owner_now(self) -> str:
        """Who holds the rank now, for messages."""
        try:
            doc, _ = _read(self.path)
        except OSError:
            return "no one (the claim file is gone)"
        return self.describe(doc)

    def release(self) -> None:
        """Remove the claim if it is still this writer's (never from a forked child)."""
        if not self.held or os.getpid() != self.pid:
            return
        self.held = False
        try:
            doc, _ = _read(self.path)
        except OSError:
            return
        if doc is not None and doc.get("id") == self.id:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

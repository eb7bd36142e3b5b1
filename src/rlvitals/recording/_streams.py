"""Files, counters and the optional background thread behind :class:`Recorder`.

Kept apart from the ``Recorder`` facade (which validates and encodes records) so that a
finalizer can close the files without keeping the Recorder alive. Records arrive here as bytes,
already framed; this module only appends them, counts what it could not write, and reports it.

One module, a little over 500 lines: :class:`StreamWriter` is one state machine (open, append,
the background thread, back-pressure, close) whose steps share one lock and one set of loss
counters; split, its invariants would be spread over files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import queue
import secrets
import threading
import time
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

from rlvitals._version import __version__
from rlvitals.recording import _files
from rlvitals.recording import layout as fmt
from rlvitals.recording._claim import CLAIM_CHECK_S, Claim, Claimed
from rlvitals.recording.run import Manifest

try:  # POSIX only; elsewhere streams are not locked.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["KINDS", "StreamWriter"]

KINDS = ("scalars", "groups", "events")
DROP_REPORT_EVERY_S = 10.0
"""Losses are reported as a ``dropped`` event at the first chance, then at most this often
(and at flush/close), so a stream that stays broken does not flood the events."""
_MAX_MANIFEST_BYTES = 16 << 20
_MANIFEST_FIELDS = {f.name for f in dc_fields(Manifest)} - {"schema", "config"}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
logger = logging.getLogger("rlvitals.recording")


class _Stream:
    __slots__ = ("fd", "kind", "last_sync", "path", "size")

    def __init__(self, kind: str, path: Path, fd: int, size: int):
        self.kind, self.path, self.fd, self.size = kind, path, fd, size
        self.last_sync = time.monotonic()


class StreamWriter:
    """The files of one rank of one recording: claims the rank, opens (and repairs) the
    streams, appends framed records synchronously or from a background thread, writes the
    manifest atomically, and counts and reports every record it could not write.

    Nothing on disk is trusted: every file is opened without following symbolic links and
    must be a regular file with no other hard links; a second writer on the rank is refused
    before anything is touched (:mod:`rlvitals.recording._claim`), even where ``flock`` does
    not work."""

    def __init__(
        self,
        path: Path,
        rank: int,
        world_size: int,
        max_pending: int,
        flush_every: float | None,
        manifest: Manifest | None,
    ):
        self.path, self.rank, self.world_size = path, rank, world_size
        self.flush_every = flush_every
        self.lock = threading.RLock()
        # The loss counters have their own lock: a record dropped because the queue is full
        # must not wait for ``lock``, which the writer thread holds while a write is stuck
        # (a stalled disk would otherwise stall the training loop that logs). Order: ``lock``
        # then ``count_lock``, never the reverse.
        self.count_lock = threading.Lock()
        self.streams: dict[str, _Stream] = {}
        self.counts = {"records": 0, "bytes": 0, "errors": 0, "skipped_values": 0}
        self.dropped = dict.fromkeys(KINDS, 0)
        self.unreported = dict.fromkeys(KINDS, 0)
        self.drop_reasons: dict[str, None] = {}
        self.last_report = -math.inf
        self.warned: set[str] = set()
        self.closed = False
        self.stopped: str | None = None  # why this writer stopped writing (lost its claim)
        self.created = time.time()
        self.manifest = Manifest()
        if manifest is not None:
            for key in _MANIFEST_FIELDS:
                setattr(self.manifest, key, Manifest.check_field(key, getattr(manifest, key)))
            self.manifest.config = dict(manifest.config)  # ours to update, not the caller's
        self.claim: Claim | None = Claim(path, rank)
        try:
            path.mkdir(parents=True, exist_ok=True)
            self.claim.acquire()
        except Claimed as e:
            raise _refused(e.args[0]) from None
        except OSError as e:
            self.claim = None
            self._io_error(f"cannot claim rank {rank} in {path}: {_why(e)}")
        if self.claim is not None and self.claim.replaced is not None:
            self._warn(
                "claim",
                f"rlvitals recorder: {path}: took over rank {rank} from a writer that is no "
                f"longer running ({self.claim.describe(self.claim.replaced)})",
                level=logging.INFO,
            )
        for kind in KINDS:
            try:
                self.streams[kind] = self._open_stream(kind)
            except _Locked as e:
                self._close_fds()
                if self.claim is not None:
                    self.claim.release()
                raise _refused(
                    f"{e.args[0]}: rank {rank} is locked (flock) by another process"
                ) from None
            except OSError as e:
                self._io_error(f"cannot open {fmt.stream_name(kind, rank)} in {path}: {_why(e)}")
        try:  # the rank is ours now: only now may the manifest be touched
            if manifest is None:
                self._adopt_existing_manifest()
            self._write_manifest()
        except OSError as e:
            self._io_error(f"cannot write the manifest of {path}: {_why(e)}")
        self.queue: queue.Queue | None = None
        self.thread: threading.Thread | None = None
        if max_pending > 0:
            self.max_pending = max_pending
            self.queue = queue.Queue(maxsize=max_pending)
            self.thread = threading.Thread(
                target=self._drain, name=f"rlvitals-recorder-rank{rank}", daemon=True
            )
            self.thread.start()

    # -- opening ---------------------------------------------------------------------------

    def _adopt_existing_manifest(self) -> None:
        try:
            raw = _files.read_file(self.path / fmt.MANIFEST_NAME, _MAX_MANIFEST_BYTES)
            doc = json.loads(raw)
            self.manifest = Manifest.from_dict(doc["manifest"])
            self.created = float(doc.get("created", self.created))
        except (FileNotFoundError, NotADirectoryError):
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
            self._warn(
                "manifest",
                f"rlvitals recorder: ignoring unreadable {self.path / fmt.MANIFEST_NAME}: "
                f"{_why(e) if isinstance(e, OSError) else e}",
            )

    def _open_stream(self, kind: str) -> _Stream:
        p = self.path / fmt.stream_name(kind, self.rank)
        fd = _files.open_regular(p, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise _Locked(str(p)) from None
                except OSError:
                    pass  # filesystem without locks (some network mounts): the claim guards
            size = os.fstat(fd).st_size
            if size:
                good = _files.clean_end(fd, kind, size)
                if good < size:
                    os.ftruncate(fd, good)
                    self._warn(
                        f"repair-{kind}",
                        f"rlvitals recorder: {p}: cut {size - good} bytes of a torn last record "
                        "left by a writer that was killed",
                        level=logging.INFO,
                    )
                    size = good
        except BaseException:
            os.close(fd)
            raise
        self._sync_dir()
        return _Stream(kind, p, fd, size)

    # -- writing ---------------------------------------------------------------------------

    def submit(self, kind: str, data: bytes) -> None:
        if self.queue is not None and not self.closed:
            try:
                self.queue.put_nowait((kind, data))
            except queue.Full:
                self._drop(kind, f"queue full (max_pending={self.max_pending})")
            return
        with self.lock:
            if self.closed:
                self._drop(kind, "recorder closed", report=False)
                return
            if self._write(kind, data):
                self._report_drops()

    def _drain(self) -> None:
        q = self.queue
        assert q is not None
        while True:
            item = q.get()
            try:
                if item is None:
                    return
                with self.lock:
                    if self._write(*item):
                        self._report_drops()
            except Exception as e:  # never let the thread die: count and go on
                self.counts["errors"] += 1
                self._warn("thread", f"rlvitals recorder: writer thread error: {e!r}")
            finally:
                q.task_done()

    def _write(self, kind: str, data: bytes) -> bool:
        if self.stopped is not None:
            self._drop(kind, self.stopped, report=False)
            return False
        if self.claim is not None and time.monotonic() - self.claim.last_check >= CLAIM_CHECK_S:
            self._check_ownership()
            if self.stopped is not None:
                self._drop(kind, self.stopped, report=False)
                return False
        st = self.streams.get(kind)
        if st is None:
            self._drop(kind, "stream not open (see the earlier warning)")
            return False
        try:
            _files.write_all(st.fd, data)
        except OSError as e:
            try:  # cut a partial write so the next record starts on a clean boundary
                os.ftruncate(st.fd, st.size)
            except OSError:
                self.streams.pop(kind, None)
                _quiet_close(st.fd)
            self._io_error(f"cannot write {st.path}: {_why(e)}")
            self._drop(kind, f"I/O error: {_why(e)}")
            return False
        st.size += len(data)
        self.counts["records"] += 1
        self.counts["bytes"] += len(data)
        if self.flush_every is not None:
            now = time.monotonic()
            if now - st.last_sync >= self.flush_every:
                self._fsync(st)
                st.last_sync = now
        return True

    def _check_ownership(self) -> None:
        """Is the rank still ours, and did anyone else write into our streams? (Caller holds
        the lock.) Another writer that took the claim over stops this one; one that appended
        without a claim (an old rlvitals, a copy of the run) is reported as a conflict."""
        assert self.claim is not None
        if not self.claim.check():
            self.stopped = (
                f"rank {self.rank} was taken over by another writer "
                f"({self.claim.owner_now()}); this one stopped rather than mix records"
            )
            self._close_fds()
            self.counts["errors"] += 1
            self._warn("lost-claim", f"rlvitals recorder: {self.path}: {self.stopped}")
            return
        foreign = {}
        for kind, st in self.streams.items():
            try:
                size = os.fstat(st.fd).st_size
            except OSError:
                continue
            if size != st.size:
                foreign[kind] = size - st.size
                st.size = size
        if foreign:
            what = ", ".join(
                f"{fmt.stream_name(k, self.rank)} ({n:+d} bytes)" for k, n in foreign.items()
            )
            message = (
                f"another process wrote into rank {self.rank}'s streams: {what}; records of "
                "two writers may be mixed (give each process its own rank= or directory)"
            )
            self.counts["errors"] += 1
            self._warn("foreign", f"rlvitals recorder: {self.path}: {message}")
            events = self.streams.get("events")
            if events is not None:
                line = fmt.encode_event(
                    None, "writer_conflict", message, {"rank": self.rank, "bytes": foreign}
                )
                with contextlib.suppress(OSError):
                    _files.write_all(events.fd, line)
                    events.size += len(line)

    def _fsync(self, st: _Stream) -> None:
        try:
            os.fsync(st.fd)
        except OSError as e:
            self._io_error(f"cannot fsync {st.path}: {_why(e)}")

    def _sync_dir(self) -> None:
        if self.flush_every is None or not hasattr(os, "O_DIRECTORY"):
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    # -- losses ----------------------------------------------------------------------------

    def _drop(self, kind: str, reason: str, report: bool = True) -> None:
        with self.count_lock:
            self.dropped[kind] += 1
            if report:
                self.unreported[kind] += 1
                self.drop_reasons[reason] = None
        self._warn(
            f"drop-{reason.split(':')[0]}",
            f"rlvitals recorder: dropping records ({reason}); they are counted in "
            "Recorder.stats and reported as a 'dropped' event",
        )

    def _report_drops(self, force: bool = False) -> None:
        """Write one ``dropped`` event for losses not reported yet (caller holds the lock)."""
        if not any(self.unreported.values()):  # every write asks: most often nothing to tell
            return
        with self.count_lock:
            if not any(self.unreported.values()) or self.stopped is not None:
                return
            now = time.monotonic()
            if not force and now - self.last_report < DROP_REPORT_EVERY_S:
                return
            self.last_report = now
            told = dict(self.unreported)
            told_reasons = list(self.drop_reasons)
        n = sum(told.values())
        reasons = "; ".join(told_reasons)
        data = {"rank": self.rank, "records": n, **told, "reasons": told_reasons}
        line = fmt.encode_event(
            None, "dropped", f"rank {self.rank} dropped {n} records ({reasons})", data
        )
        ok = self._write("events", line)
        with self.count_lock:
            if ok:  # losses counted while the report was written are told next time
                for k, v in told.items():
                    self.unreported[k] -= v
                for r in told_reasons:
                    self.drop_reasons.pop(r, None)
            else:  # the report itself was counted as a dropped event; do not count it twice
                self.dropped["events"] -= 1
                self.unreported["events"] -= 1

    def skipped_value(self, key: object) -> None:
        with self.lock:
            self.counts["skipped_values"] += 1
        self._warn("skip", f"rlvitals recorder: skipping non-numeric scalar {key!r} (counted)")

    def _io_error(self, message: str) -> None:
        """Count an I/O error; report it once per distinct ``message``."""
        self.counts["errors"] += 1
        self._warn(
            f"io:{message}",  # once per distinct problem (a path and a reason: a bounded set)
            f"rlvitals recorder: {message}; recording continues, losses are counted",
        )

    def _warn(self, key: str, message: str, level: int = logging.WARNING) -> None:
        """Report ``message`` once per ``key`` on the ``rlvitals.recording`` logger.

        Logging, not ``warnings.warn``: this runs inside training hooks, where a warning filter
        of ``error`` (``-W error``, pytest's ``filterwarnings = error``) would turn a contained
        I/O error into an exception that stops training. Logging never raises."""
        if key in self.warned:
            return
        self.warned.add(key)
        with contextlib.suppress(Exception):
            logger.log(level, "%s", message)

    # -- manifest --------------------------------------------------------------------------

    def update_manifest(self, updates: dict[str, Any]) -> None:
        with self.lock:
            m = self.manifest
            for key, value in updates.items():
                if key == "config":
                    if not isinstance(value, dict):
                        raise TypeError(f"config must be a dict, got {type(value).__name__}")
                    m.config.update(value)
                elif key in _MANIFEST_FIELDS:
                    setattr(m, key, Manifest.check_field(key, value))
                else:
                    m.config[key] = value
            if self.stopped is not None:
                return  # the rank is someone else's now: so is the manifest
            try:
                self._write_manifest()
            except OSError as e:
                self._io_error(f"cannot write {self.path / fmt.MANIFEST_NAME}: {_why(e)}")

    def _write_manifest(self) -> None:
        doc = {
            "format": fmt.FORMAT_NAME,
            "version": fmt.FORMAT_VERSION,
            "world_size": self.world_size,
            "writer": f"rlvitals {__version__}",
            "created": self.created,
            "manifest": self.manifest.to_dict(),
        }
        text = json.dumps(doc, indent=1, default=fmt.jsonable) + "\n"
        data = text.encode("utf-8", "surrogatepass")
        final = self.path / fmt.MANIFEST_NAME
        tmp = self.path / f".{fmt.MANIFEST_NAME}.rank{self.rank}.{secrets.token_hex(6)}.tmp"
        # O_EXCL never follows a link and never reuses a file someone planted at the name.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
        try:
            try:
                _files.write_all(fd, data)
                if self.flush_every is not None:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if self.rank == 0:
                os.replace(tmp, final)  # atomic: readers see the old or the new manifest
            else:  # other ranks only create a missing manifest; rank 0's wins
                with contextlib.suppress(FileExistsError):
                    _files.link_or_replace(tmp, final)
        finally:  # a full disk must not leave the temp file behind
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._sync_dir()

    # -- ending ----------------------------------------------------------------------------

    def flush(self) -> None:
        if self.queue is not None and self.thread is not None and self.thread.is_alive():
            self.queue.join()
        with self.lock:
            self._report_drops(force=True)
            if self.flush_every is not None:
                for st in self.streams.values():
                    self._fsync(st)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True  # from now on records are refused (and counted)
        if self.queue is not None and self.thread is not None:
            self.queue.put(None)
            self.thread.join()
        with self.lock:
            if self.claim is not None and self.stopped is None:
                self._check_ownership()  # a last look: a conflict is reported before the end
            self._report_drops(force=True)
            if self.flush_every is not None:
                for st in self.streams.values():
                    self._fsync(st)
            self._close_fds()
            if self.claim is not None:
                self.claim.release()

    def _close_fds(self) -> None:
        for st in self.streams.values():
            _quiet_close(st.fd)
        self.streams = {}

    def stats(self) -> dict[str, int]:
        with self.lock, self.count_lock:
            out = dict(self.counts)
            out["dropped"] = sum(self.dropped.values())
            for k, v in self.dropped.items():
                out[f"dropped_{k}"] = v
            out["pending"] = 0 if self.queue is None else self.queue.qsize()
            return out


class _Locked(Exception):
    pass


# ------------------------------------------------------------------------------------------
# Helpers.


def _quiet_close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _refused(why: str) -> RuntimeError:
    return RuntimeError(
        f"{why}; give each process its own rank= (or directory). Nothing was written; if that "
        "writer is gone, delete its claim file (.writer.rank<r>) and try again"
    )


def _why(e: OSError) -> str:
    return e.strerror or str(e)

"""Files, counters and the optional background thread behind :class:`Recorder`.

Kept apart from the ``Recorder`` facade (which validates and encodes records) so that a
finalizer can close the files without keeping the Recorder alive. Records arrive here as bytes,
already framed; this module only appends them, counts what it could not write, and reports it.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import threading
import time
import warnings
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

from rlvitals._version import __version__
from rlvitals.recording import _format as fmt
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
_TAIL_CHUNK = 1 << 16
_MANIFEST_FIELDS = {f.name for f in dc_fields(Manifest)} - {"schema", "config"}


class _Stream:
    __slots__ = ("fd", "kind", "last_sync", "path", "size")

    def __init__(self, kind: str, path: Path, fd: int, size: int):
        self.kind, self.path, self.fd, self.size = kind, path, fd, size
        self.last_sync = time.monotonic()


class StreamWriter:
    """The files of one rank of one recording: opens (and repairs) the streams, appends framed
    records synchronously or from a background thread, writes the manifest atomically, and
    counts and reports every record it could not write."""

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
        self.streams: dict[str, _Stream] = {}
        self.counts = {"records": 0, "bytes": 0, "errors": 0, "skipped_values": 0}
        self.dropped = dict.fromkeys(KINDS, 0)
        self.unreported = dict.fromkeys(KINDS, 0)
        self.drop_reasons: dict[str, None] = {}
        self.last_report = -math.inf
        self.warned: set[str] = set()
        self.closed = False
        self.created = time.time()
        self.manifest = Manifest()
        if manifest is not None:
            for key in _MANIFEST_FIELDS:
                setattr(self.manifest, key, check_manifest_field(key, getattr(manifest, key)))
            self.manifest.config = dict(manifest.config)  # ours to update, not the caller's
        try:
            path.mkdir(parents=True, exist_ok=True)
            if manifest is None:
                self._adopt_existing_manifest()
            self._write_manifest()
        except OSError as e:
            self.counts["errors"] += 1
            self._io_error(f"cannot write the manifest of {path}: {_why(e)}")
        for kind in KINDS:
            try:
                self.streams[kind] = self._open_stream(kind)
            except _Locked as e:
                self._close_fds()
                raise RuntimeError(
                    f"{e.args[0]}: rank {rank} of this recording is already being written by "
                    "another Recorder; give each process its own rank="
                ) from None
            except OSError as e:
                self.counts["errors"] += 1
                self._io_error(f"cannot open {fmt.stream_name(kind, rank)} in {path}: {_why(e)}")
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
            with open(self.path / fmt.MANIFEST_NAME, "rb") as f:
                doc = json.loads(f.read())
            self.manifest = Manifest.from_dict(doc["manifest"])
            self.created = float(doc.get("created", self.created))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as e:
            self._warn(
                "manifest", f"rlvitals recorder: ignoring unreadable {fmt.MANIFEST_NAME}: {e}"
            )

    def _open_stream(self, kind: str) -> _Stream:
        p = self.path / fmt.stream_name(kind, self.rank)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(p, flags, 0o644)
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise _Locked(str(p)) from None
                except OSError:
                    pass  # filesystem without locks (some network mounts): go on unlocked
            size = os.fstat(fd).st_size
            if size:
                good = _clean_end(p, kind, size)
                if good < size:
                    os.ftruncate(fd, good)
                    self._warn(
                        f"repair-{kind}",
                        f"rlvitals recorder: {p}: cut {size - good} bytes of a torn last record "
                        "left by a writer that was killed",
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
        st = self.streams.get(kind)
        if st is None:
            self._drop(kind, "stream not open (see the earlier warning)")
            return False
        try:
            _write_all(st.fd, data)
        except OSError as e:
            self.counts["errors"] += 1
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

    def _fsync(self, st: _Stream) -> None:
        try:
            os.fsync(st.fd)
        except OSError as e:
            self.counts["errors"] += 1
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
        with self.lock:
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
        if not any(self.unreported.values()):
            return
        now = time.monotonic()
        if not force and now - self.last_report < DROP_REPORT_EVERY_S:
            return
        self.last_report = now
        n = sum(self.unreported.values())
        reasons = "; ".join(self.drop_reasons)
        data = {
            "rank": self.rank,
            "records": n,
            **{k: v for k, v in self.unreported.items()},
            "reasons": list(self.drop_reasons),
        }
        line = fmt.encode_event(
            None, "dropped", f"rank {self.rank} dropped {n} records ({reasons})", data
        )
        if self._write("events", line):
            self.unreported = dict.fromkeys(KINDS, 0)
            self.drop_reasons = {}
        else:  # the report itself was counted as a dropped event; do not count it twice
            self.dropped["events"] -= 1
            self.unreported["events"] -= 1

    def skipped_value(self, key: object) -> None:
        with self.lock:
            self.counts["skipped_values"] += 1
        self._warn("skip", f"rlvitals recorder: skipping non-numeric scalar {key!r} (counted)")

    def _io_error(self, message: str) -> None:
        self._warn("io", f"rlvitals recorder: {message}; recording continues, losses are counted")

    def _warn(self, key: str, message: str) -> None:
        if key not in self.warned:
            self.warned.add(key)
            warnings.warn(message, RuntimeWarning, stacklevel=4)

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
                    setattr(m, key, check_manifest_field(key, value))
                else:
                    m.config[key] = value
            try:
                self._write_manifest()
            except OSError as e:
                self.counts["errors"] += 1
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
        final = self.path / fmt.MANIFEST_NAME
        tmp = self.path / f".{fmt.MANIFEST_NAME}.rank{self.rank}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
            f.flush()
            if self.flush_every is not None:
                os.fsync(f.fileno())
        try:
            if self.rank == 0:
                os.replace(tmp, final)  # atomic: readers see the old or the new manifest
            else:  # other ranks only create a missing manifest; rank 0's wins
                with contextlib.suppress(FileExistsError):
                    _link_or_replace(tmp, final)
        finally:
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
            self._report_drops(force=True)
            if self.flush_every is not None:
                for st in self.streams.values():
                    self._fsync(st)
            self._close_fds()

    def _close_fds(self) -> None:
        for st in self.streams.values():
            _quiet_close(st.fd)
        self.streams = {}

    def stats(self) -> dict[str, int]:
        with self.lock:
            out = dict(self.counts)
            out["dropped"] = sum(self.dropped.values())
            for k, v in self.dropped.items():
                out[f"dropped_{k}"] = v
            out["pending"] = 0 if self.queue is None else self.queue.qsize()
            return out


def check_manifest_field(key: str, value: Any) -> Any:
    """``value`` as the type the reader requires for manifest field ``key`` (TypeError if not)."""
    return Manifest.check_field(key, value)


class _Locked(Exception):
    pass


# ------------------------------------------------------------------------------------------
# Helpers.


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError("write returned 0 bytes")
        view = view[n:]


def _quiet_close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _link_or_replace(tmp: Path, final: Path) -> None:
    """Create ``final`` from ``tmp`` only if it does not exist (FileExistsError otherwise)."""
    try:
        os.link(tmp, final)
    except FileExistsError:
        raise
    except OSError:  # no hard links here: check, then replace (a small race, rank 0 fixes it)
        if final.exists():
            raise FileExistsError(final) from None
        os.replace(tmp, final)


def _clean_end(path: Path, kind: str, size: int) -> int:
    """Byte offset where the stream's last complete record ends (``size`` if it is clean).

    Only a torn or garbage *tail* is cut; a stream with a corrupt record followed by valid
    ones is left whole for the reader to report.
    """
    with open(path, "rb") as f:
        if kind == "groups":
            pos = 0
            while pos < size:
                f.seek(pos)
                head = fmt.header_at(f.read(fmt.FRAME_HEADER.size), 0)
                if head is None or pos + head[1] > size:
                    break
                pos += head[1]
            if pos == size:
                return size
            f.seek(pos)
            rest = f.read()
            return size if fmt.next_valid(rest, 0) is not None else pos
        end = size
        while end > 0:
            start = max(0, end - _TAIL_CHUNK)
            f.seek(start)
            chunk = f.read(end - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                return start + i + 1
            end = start
        return 0


def _why(e: OSError) -> str:
    return e.strerror or str(e)

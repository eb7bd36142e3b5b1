"""The flight recorder: writes a crash-safe recording directory while a run trains.

A recording directory holds ``manifest.json`` (written atomically) and, per rank, three
append-only streams: ``scalars.rank<r>.jsonl``, ``events.rank<r>.jsonl`` and
``groups.rank<r>.bin`` (framed binary, length + CRC-32). ``docs/recording.md`` is the format.

Guarantees (synchronous mode, the default):

- every ``log_*`` call hands its record to the OS with complete ``write`` calls before it
  returns, so a process killed at any instant loses at most the record being written;
  ``flush_every`` adds ``fsync`` for power loss;
- the recorder never raises an I/O error into the training loop: it warns once, counts the
  error and the records it could not write, and reports the loss as a ``dropped`` event as soon
  as it can write again;
- bad arguments (wrong shapes, a non-integer step) raise ``ValueError``/``TypeError`` at the
  call, because they are bugs in the caller, not accidents of the disk.

A ``Recorder`` re-opened on an existing directory appends: it cuts a torn last record left by a
killed writer, so the reader sees one clean stream. Two writers on one rank of one directory
are refused (the streams are locked with ``flock`` where the platform has it).
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
import weakref
from dataclasses import fields as dc_fields
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals._version import __version__
from rlvitals.recording import _format as fmt
from rlvitals.recording.run import Manifest

try:  # POSIX only; elsewhere streams are not locked.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["Recorder"]

KINDS = ("scalars", "groups", "events")
_TAIL_CHUNK = 1 << 16
_MANIFEST_FIELDS = {f.name for f in dc_fields(Manifest)} - {"schema", "config"}


class Recorder:
    """Record a training run into a crash-safe directory, one rank at a time.

    Args:
        path: the recording directory (created with its parents if missing; an existing
            recording is appended to).
        manifest: what is known about the run (trainer, group size, reward range, config).
            None keeps the manifest already in ``path``, if any.
        rank: this process's rank; each rank writes its own streams.
        world_size: number of ranks writing into ``path`` (stored in the manifest).
        max_pending: 0 (default) writes synchronously: each ``log_*`` call returns once its
            record is handed to the OS (back-pressure). ``> 0`` hands records to a background
            thread through a queue of at most this many records; when it is full the record is
            dropped, counted in :attr:`stats` and reported as a ``dropped`` event.
        flush_every: seconds between ``fsync`` of each stream, for durability across power loss
            or an OS crash; 0 syncs every record; None (default) never syncs. Records are
            handed to the OS as they are logged whatever this is.

    Use as a context manager, or call :meth:`close` (it also runs at interpreter exit).

    >>> import tempfile, numpy as np
    >>> from rlvitals.recording import read_recording
    >>> with tempfile.TemporaryDirectory() as d:
    ...     with Recorder(d, Manifest(trainer="demo", group_size=2)) as rec:
    ...         rec.log_scalars(1, {"loss": 0.5})
    ...         rec.log_groups(1, np.array([1.0, 1.0, 0.0, 1.0]), np.array([0, 0, 1, 1]))
    ...     read_recording(d).groups.sizes().tolist()
    [2, 2]
    >>> rec.stats["records"], rec.stats["dropped"]
    (2, 0)
    """

    def __init__(
        self,
        path: str | os.PathLike,
        manifest: Manifest | None = None,
        *,
        rank: int = 0,
        world_size: int = 1,
        max_pending: int = 0,
        flush_every: float | None = None,
    ):
        rank = _check_int(rank, "rank", 0)
        world_size = _check_int(world_size, "world_size", 1)
        if rank >= world_size:
            raise ValueError(f"rank must be < world_size ({world_size}), got {rank}")
        max_pending = _check_int(max_pending, "max_pending", 0)
        if flush_every is not None and (
            isinstance(flush_every, bool)
            or not isinstance(flush_every, (int, float))
            or not flush_every >= 0
        ):
            raise ValueError(f"flush_every must be None or seconds >= 0, got {flush_every!r}")
        self.path = Path(path)
        self.rank = rank
        self.world_size = world_size
        self._writer = _Writer(self.path, rank, world_size, max_pending, flush_every, manifest)
        self._finalizer = weakref.finalize(self, self._writer.close)

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- records ---------------------------------------------------------------------------

    def log_scalars(self, step: int, values: dict[str, float]) -> None:
        """Record one row of per-step scalars.

        Args:
            step: training step.
            values: metric name (raw trainer key or canonical name) → number. Python, numpy or
                0-d torch numbers; NaN and inf are kept. Values that are not numbers are
                skipped and counted in ``stats["skipped_values"]``.
        """
        step = _check_step(step)
        clean: dict[str, float] = {}
        for key, v in values.items():
            x = _to_float(v)
            if x is None:
                self._writer.skipped_value(key)
                continue
            clean[str(key)] = x
        if not clean:
            return
        line = json.dumps(
            {"step": step, "time": round(time.time(), 3), "values": clean},
            separators=(",", ":"),
        )
        self._writer.submit("scalars", (line + "\n").encode("utf-8", "surrogatepass"))

    def log_groups(
        self,
        step: int,
        rewards: Any,
        group_ids: Any,
        *,
        prompts: Any = None,
        lengths: Any = None,
        advantages: Any = None,
    ) -> None:
        """Record one step's per-group rewards.

        Args:
            step: training step.
            rewards: ``(n,)`` rewards, numpy or torch (any device), float32 or float64 kept as
                is (other dtypes become float64); NaN = unscorable.
            group_ids: ``(n,)`` group of each reward (ints, or anything sortable); groups may
                be ragged and need not be contiguous. They are stored in sorted-id order.
            prompts: one prompt id or hash per distinct group, in sorted-group-id order
                (``len == number of distinct group ids``): ints, str or bytes; or None.
            lengths: ``(n,)`` completion lengths, or None.
            advantages: ``(n,)`` advantages the trainer used, or None.

        Raises:
            ValueError: shapes disagree, or ``prompts`` has the wrong length.
        """
        step = _check_step(step)
        r = _float_rows(_host_array(rewards, "rewards"))
        n = r.shape[0]
        g = _host_array(group_ids, "group_ids")
        if g.shape != (n,):
            raise ValueError(f"group_ids must have shape ({n},) like rewards, got {g.shape}")
        extra = {}
        for name, arr in (("lengths", lengths), ("advantages", advantages)):
            if arr is not None:
                a = _numeric_rows(_host_array(arr, name))
                if a.shape != (n,):
                    raise ValueError(f"{name} must have shape ({n},) like rewards, got {a.shape}")
                extra[name] = a
        if n == 0:
            return
        if n > 1 and bool((g[1:] < g[:-1]).any()):
            order = np.argsort(g, kind="stable")
            g, r = g[order], r[order]
            extra = {k: v[order] for k, v in extra.items()}
        starts = np.flatnonzero(g[1:] != g[:-1]) + 1
        sizes = np.diff(np.concatenate(([0], starts, [n])))
        encoded_prompts = None
        if prompts is not None:
            plist = _prompt_ids(prompts)
            if len(plist) != sizes.shape[0]:
                raise ValueError(
                    f"prompts must hold one id per distinct group ({sizes.shape[0]}), "
                    f"got {len(plist)}"
                )
            encoded_prompts = fmt.encode_prompts(plist)
        payload = fmt.encode_groups(
            step, sizes, r, extra.get("lengths"), extra.get("advantages"), encoded_prompts
        )
        self._writer.submit("groups", fmt.encode_frame(payload))

    def log_event(self, step: int | None, kind: str, message: str, **data: Any) -> None:
        """Record an event: an alert, a halt, a note. ``data`` must be JSON-like; numpy and
        torch values become numbers or lists, anything else its ``repr``."""
        step = None if step is None else _check_step(step)
        self._writer.submit("events", _event_line(step, str(kind), str(message), data))

    def update_manifest(self, **fields: Any) -> None:
        """Update manifest fields (e.g. ``group_size=16`` once known) and rewrite it atomically.

        Names of :class:`Manifest` fields set them; ``config={...}`` merges into the config;
        any other name goes into the config under that name.
        """
        self._writer.update_manifest(fields)

    def flush(self) -> None:
        """Wait until every queued record is handed to the OS (and fsync'ed if enabled)."""
        self._writer.flush()

    def close(self) -> None:
        """Flush, report anything dropped, and close the streams. Idempotent."""
        self._finalizer()

    @property
    def stats(self) -> dict[str, int]:
        """Counters: ``records``, ``bytes`` written; ``dropped`` (and ``dropped_scalars``,
        ``dropped_groups``, ``dropped_events``); ``errors`` (I/O errors); ``skipped_values``;
        ``pending`` (records queued, async mode)."""
        return self._writer.stats()

    @property
    def manifest(self) -> Manifest:
        """The manifest as last written (a copy)."""
        return Manifest.from_dict(self._writer.manifest.to_dict())


# ------------------------------------------------------------------------------------------
# Files, counters and the optional background thread. Kept apart from ``Recorder`` so that a
# finalizer can close it without holding the Recorder alive.


class _Stream:
    __slots__ = ("fd", "kind", "last_sync", "path", "size")

    def __init__(self, kind: str, path: Path, fd: int, size: int):
        self.kind, self.path, self.fd, self.size = kind, path, fd, size
        self.last_sync = time.monotonic()


class _Writer:
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
        self.warned: set[str] = set()
        self.closed = False
        self.created = time.time()
        self.manifest = Manifest() if manifest is None else Manifest.from_dict(manifest.to_dict())
        self.manifest.config = dict(self.manifest.config)  # ours to update, not the caller's
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
            self._warn("manifest", f"rlvitals recorder: ignoring unreadable {fmt.MANIFEST_NAME}: {e}")

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

    def _report_drops(self) -> None:
        """Write one ``dropped`` event for losses not reported yet (caller holds the lock)."""
        if not any(self.unreported.values()):
            return
        n = sum(self.unreported.values())
        reasons = "; ".join(self.drop_reasons)
        data = {"rank": self.rank, "records": n, **{k: v for k, v in self.unreported.items()},
                "reasons": list(self.drop_reasons)}
        line = _event_line(None, "dropped", f"rank {self.rank} dropped {n} records ({reasons})", data)
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
                    setattr(m, key, value)
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
        text = json.dumps(doc, indent=1, default=_jsonable) + "\n"
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
            self._report_drops()
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
            self._report_drops()
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


def _check_int(v: Any, name: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    if v < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")
    return int(v)


def _check_step(step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        if _is_torch(step) and getattr(step, "ndim", 1) == 0 and not step.is_floating_point():
            return int(step)
        raise TypeError(f"step must be an integer, got {step!r}")
    return int(step)


def _to_float(v: Any) -> float | None:
    if isinstance(v, float):
        return v
    if v is None:
        return math.nan
    if isinstance(v, (str, bytes)):
        return None
    try:
        return float(v)
    except (TypeError, ValueError, RuntimeError):
        return None


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _host_array(x: Any, name: str) -> np.ndarray:
    """A numpy view or copy of ``x`` on the host; torch tensors are detached and copied."""
    if _is_torch(x):
        t = x.detach().cpu()
        try:
            a = t.numpy()
        except TypeError:  # bfloat16 and friends have no numpy dtype
            a = t.float().numpy()
    else:
        a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional (n,), got shape {a.shape}")
    return a


def _float_rows(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.float32 or a.dtype == np.float16:
        return a.astype("<f4", copy=False)
    try:
        return a.astype("<f8", copy=False)
    except (TypeError, ValueError):
        raise TypeError(f"rewards must be numbers, got dtype {a.dtype}") from None


def _numeric_rows(a: np.ndarray) -> np.ndarray:
    """lengths / advantages: float32/float64 kept, small ints → int32, other ints → int64."""
    k = a.dtype.kind
    if k == "f":
        return a.astype("<f4" if a.dtype.itemsize <= 4 else "<f8", copy=False)
    if k == "b" or (k in "iu" and a.dtype.itemsize < 4) or (k == "i" and a.dtype.itemsize == 4):
        return a.astype("<i4", copy=False)
    if k in "iu":
        return a.astype("<i8", copy=False)
    try:
        return a.astype("<f8")
    except (TypeError, ValueError):
        raise TypeError(f"expected numbers, got dtype {a.dtype}") from None


def _prompt_ids(x: Any) -> list | np.ndarray:
    """Per-group prompt ids as a 1-D numpy array (kept for fast encoding) or a list."""
    if _is_torch(x):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        if x.ndim != 1:
            raise ValueError(f"prompts must be one-dimensional, got shape {x.shape}")
        return x
    if isinstance(x, (str, bytes)):
        raise TypeError("prompts must be a sequence with one id per group, not a single string")
    return list(x)


def _jsonable(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if _is_torch(o) and hasattr(o, "tolist"):
        return o.detach().cpu().tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    return repr(o)


def _event_line(step: int | None, kind: str, message: str, data: dict[str, Any]) -> bytes:
    rec = {"step": step, "time": round(time.time(), 3), "kind": kind, "message": message}
    try:
        line = json.dumps({**rec, "data": data}, separators=(",", ":"), default=_jsonable)
    except (TypeError, ValueError):  # non-string keys deep inside, cycles: keep what we can
        safe = {str(k): _jsonable(v) if not isinstance(v, (int, float, str)) else v
                for k, v in data.items()}
        try:
            line = json.dumps({**rec, "data": safe}, separators=(",", ":"), default=_jsonable)
        except (TypeError, ValueError):
            line = json.dumps({**rec, "data": {k: repr(v) for k, v in safe.items()}})
    return (line + "\n").encode("utf-8", "surrogatepass")

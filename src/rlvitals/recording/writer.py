"""The flight recorder: writes a crash-safe recording directory while a run trains.

A recording directory holds ``manifest.json`` (written atomically) and, per rank, three
append-only streams: ``scalars.rank<r>.jsonl``, ``events.rank<r>.jsonl`` and
``groups.rank<r>.bin`` (framed binary, length + CRC-32). ``docs/recording.md`` is the format.

Guarantees (synchronous mode, the default):

- every ``log_*`` call hands its record to the OS with complete ``write`` calls before it
  returns, so a process killed at any instant loses at most the record being written;
  ``flush_every`` adds ``fsync`` for power loss;
- the recorder never raises an I/O error into the training loop: it reports it once on the
  ``rlvitals.recording`` logger (never ``warnings.warn``, which ``-W error`` would turn into an
  exception), counts the error and the records it could not write, and reports the loss as a
  ``dropped`` event as soon as it can write again (then at most every 10 s, and at
  ``flush``/``close``);
- bad arguments (wrong shapes, a non-integer step) raise ``ValueError``/``TypeError`` at the
  call, because they are bugs in the caller, not accidents of the disk.

A ``Recorder`` re-opened on an existing directory appends: it cuts a torn last record left by a
killed writer, so the reader sees one clean stream. Two writers on one rank of one directory
are refused before the second touches anything: each writer claims its rank with a claim file
(checked on open and while writing, so it holds where ``flock`` silently does not, e.g. NFS
``nolock``) and the streams are also locked with ``flock``. Nothing on disk is trusted: a
symbolic link, a FIFO or a hard-linked file where a stream should be is refused, never
followed.
"""

from __future__ import annotations

import math
import os
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals._array import is_torch
from rlvitals.recording import layout as fmt
from rlvitals.recording._streams import StreamWriter
from rlvitals.recording.run import Manifest

__all__ = ["Recorder"]


class Recorder:
    """Record a training run into a crash-safe directory, one rank at a time.

    Args:
        path: the recording directory (created with its parents if missing; an existing
            recording is appended to).
        manifest: what is known about the run (trainer, group size, reward range, config).
            None keeps the manifest already in ``path``, if any. Rank 0 owns the manifest;
            other ranks only write one when the directory has none yet.
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
        self._writer = StreamWriter(self.path, rank, world_size, max_pending, flush_every, manifest)
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
        if clean:
            self._writer.submit("scalars", fmt.encode_scalars(step, clean))

    def _log_floats(self, step: int, values: dict[Any, float]) -> None:
        """:meth:`log_scalars` of an int step and values already converted to floats (the live
        monitor's :func:`~rlvitals.guard.window.plain_scalars` did it)."""
        if not all(type(k) is str for k in values):
            values = {str(k): v for k, v in values.items()}
        if values:
            self._writer.submit("scalars", fmt.encode_scalars(step, values))

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
        rows = []  # lengths, advantages
        for name, arr in (("lengths", lengths), ("advantages", advantages)):
            a = None if arr is None else _numeric_rows(_host_array(arr, name))
            if a is not None and a.shape != (n,):
                raise ValueError(f"{name} must have shape ({n},) like rewards, got {a.shape}")
            rows.append(a)
        self._log_host_groups(step, r, g, prompts, *rows)

    def _log_host_groups(
        self,
        step: int,
        r: np.ndarray,
        g: np.ndarray,
        prompts: Any,
        lengths: np.ndarray | None,
        advantages: np.ndarray | None,
    ) -> None:
        """:meth:`log_groups` of arguments already checked: an int step, ``(n,)`` host numpy
        arrays of one length, ``r`` float32 or float64 (the live monitor checked them)."""
        n = r.shape[0]
        if n == 0:
            return
        if r.dtype.byteorder == ">":
            r = _float_rows(r)
        rows = [None if a is None else _numeric_rows(a) for a in (lengths, advantages)]
        order, sizes = _layout(g)
        if order is not None:
            r = r[order]
            rows = [None if a is None else a[order] for a in rows]
        encoded_prompts = None
        if prompts is not None:
            plist = _prompt_ids(prompts)
            if len(plist) != sizes.shape[0]:
                raise ValueError(
                    f"prompts must hold one id per distinct group ({sizes.shape[0]}), "
                    f"got {len(plist)}"
                )
            encoded_prompts = fmt.encode_prompts(plist)
        payload = fmt.encode_groups(step, sizes, r, *rows, encoded_prompts)
        self._writer.submit("groups", fmt.encode_frame(payload))

    def log_event(self, step: int | None, kind: str, message: str, **data: Any) -> None:
        """Record an event: an alert, a halt, a note. ``data`` must be JSON-like; numpy and
        torch values become numbers or lists, anything else its ``repr``."""
        step = None if step is None else _check_step(step)
        self._writer.submit("events", fmt.encode_event(step, str(kind), str(message), data))

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
# Argument checks and conversions.


def _check_int(v: Any, name: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} must be an integer, got {v!r}")
    if v < lo:
        raise ValueError(f"{name} must be >= {lo}, got {v}")
    return int(v)


def _check_step(step: Any) -> int:
    if is_torch(step) and getattr(step, "ndim", 1) == 0 and not step.is_floating_point():
        step = int(step)
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"step must be an integer, got {step!r}")
    if not -(1 << 63) <= step < (1 << 63):
        raise ValueError(f"step must fit in 64 bits, got {step}")
    return int(step)


def _to_float(v: Any) -> float | None:
    if type(v) is float:
        return v
    if isinstance(v, float):  # np.float64 and other subclasses: a plain float for the encoder
        return float(v)
    if v is None:
        return math.nan
    if isinstance(v, (str, bytes)):
        return None
    try:
        return float(v)
    except OverflowError:  # an integer beyond float range (10**400): as JSON readers take it
        return math.inf if v > 0 else -math.inf
    except (TypeError, ValueError, RuntimeError):
        return None


def _host_array(x: Any, name: str) -> np.ndarray:
    """A numpy view or copy of ``x`` on the host; torch tensors are detached and copied."""
    if is_torch(x):
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


_LAYOUTS: dict[tuple[str, bytes], tuple[np.ndarray | None, np.ndarray]] = {}
_LAYOUTS_MAX = 64
_LAYOUT_KEY_BYTES = 1 << 17


def _layout(g: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """``(order, sizes)`` of group ids ``g`` (n >= 1): the stable sort that puts them in
    sorted-id order (None when they already are) and the size of each run of one id after it.
    Memoised on the ids' bytes (up to 128 KiB of them): a trainer sends the same ids every step.
    """
    key = None
    if g.dtype.kind in "iub" and g.nbytes <= _LAYOUT_KEY_BYTES:
        key = (g.dtype.str, g.tobytes())
        hit = _LAYOUTS.get(key)
        if hit is not None:
            return hit
    order = None
    if g.shape[0] > 1 and bool((g[1:] < g[:-1]).any()):
        order = np.argsort(g, kind="stable")
        g = g[order]
    starts = np.flatnonzero(g[1:] != g[:-1]) + 1
    sizes = np.diff(np.concatenate(([0], starts, [g.shape[0]]))).astype("<u4")
    if key is not None:
        if len(_LAYOUTS) >= _LAYOUTS_MAX:
            _LAYOUTS.clear()
        for a in (order, sizes):
            if a is not None:
                a.flags.writeable = False  # shared by every step with these ids
        _LAYOUTS[key] = (order, sizes)
    return order, sizes


def _prompt_ids(x: Any) -> list | np.ndarray:
    """Per-group prompt ids as a 1-D numpy array (kept for fast encoding) or a list."""
    if is_torch(x):
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        if x.ndim != 1:
            raise ValueError(f"prompts must be one-dimensional, got shape {x.shape}")
        return x
    if isinstance(x, (str, bytes)):
        raise TypeError("prompts must be a sequence with one id per group, not a single string")
    return list(x)

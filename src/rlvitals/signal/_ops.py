"""Segment reductions over the groups of one step, for one batch layout and backend.

Two layouts, decided once per batch: *dense* (n = k * G rows in G-sized runs of strictly
increasing ids, viewed as ``(k, G)``; the usual trainer layout, reduced along axis 1) and
*ragged* (any other: each row carries its group position and reductions bin by it, with
``np.bincount`` for compact integer ids and ``np.unique`` otherwise). Group order is sorted-id
order either way. Sums accumulate in float64 (see :meth:`Ops.sum`).

Large dense numpy batches are worked through in blocks of whole rows (:data:`BLOCK`), so the
per-row temporaries (the centred rows, their squares) stay in cache: every group's reduction
runs over its own row exactly as on the whole array, so blocking never changes a result.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._array import wide_dtype

__all__ = ["Ops"]

_COMPACT_SPAN = 4
"""Integer ids spanning at most this many slots per row are binned directly (no sort)."""
_DENSE_PROBE = 4096
"""Rows of ids read first when deciding whether a batch is dense."""
BLOCK = 1 << 15
"""Elements per block of a large dense numpy batch (128 KiB of float32: well inside L2)."""


class Ops:
    """Segment reductions for one batch layout and backend.

    ``dense``: n = k * G rows in G-sized runs of strictly increasing ids; arrays are viewed as
    ``(k, G)`` and per-group values broadcast as ``(k, 1)``. Otherwise rows carry a group
    position ``index`` (n,) and reductions bin by it. Group order is sorted-id order either way.
    """

    def __init__(self, group_ids: Any, torch_in: bool):
        self.torch = torch_in
        self.n = int(group_ids.shape[0])
        self.G: int | None = None
        self.index: Any = None
        self.k = 0
        self._sizes: Any = None
        g = self._dense_size(group_ids)
        if g is not None:
            self.G, self.k = g, self.n // g
        elif torch_in:
            import torch

            _, inv = torch.unique(group_ids, return_inverse=True)
            self.index, self.k = inv, int(inv.max()) + 1
        else:
            self._numpy_index(group_ids)

    def _dense_size(self, ids: Any) -> int | None:
        """G when the ids come in G-sized runs of strictly increasing values, else None.

        G is read from a prefix, and the layout is checked on a prefix of whole rows before the
        whole array, so a shuffled batch is turned down without a full pass over its ids.
        """
        n = self.n
        if not self.torch and ids.dtype.kind not in "iub":
            return None
        g = self._first_run(ids[:_DENSE_PROBE]) or self._first_run(ids) or n
        if n % g:
            return None
        probe = ids[: max(1, _DENSE_PROBE // g) * g]
        for part in (probe, ids) if probe.shape[0] < n else (ids,):
            if not self._runs(part, g):
                return None
        return g

    def _runs(self, ids: Any, g: int) -> bool:
        """Whether ``ids`` is g-sized runs of equal values, the runs strictly increasing.

        numpy counts the changes between neighbours, block by block (a broadcast comparison
        with each row's first id costs three times as much): the runs are equal and increasing
        exactly when every run boundary is an increase and there is no other change.
        """
        if self.torch:
            rows = ids.reshape(-1, g)
            return bool((rows == rows[:, :1]).all() and (rows[1:, 0] > rows[:-1, 0]).all())
        step = max(1, BLOCK // g) * g
        for s in range(0, ids.shape[0], step):
            a = ids[s : s + step]
            rows = a.shape[0] // g
            if np.count_nonzero(a[1:] != a[:-1]) != rows - 1:
                return False
            if rows > 1 and not (a[g::g] > a[g - 1 : -1 : g]).all():
                return False
            if s and not ids[s] > ids[s - 1]:
                return False
        return True

    def _first_run(self, ids: Any) -> int | None:
        """Length of the leading run of equal ids, or None when every id is the same."""
        diff = ids[1:] != ids[:-1]
        change = diff.nonzero(as_tuple=True)[0] if self.torch else diff.nonzero()[0]
        return int(change[0]) + 1 if change.shape[0] else None

    def _numpy_index(self, ids: np.ndarray) -> None:
        if ids.dtype.kind in "iub":
            lo, hi = int(ids.min()), int(ids.max())
            span = hi - lo + 1
            if span <= _COMPACT_SPAN * self.n + 1024:
                if lo == 0 and ids.dtype == np.intp:
                    slot = ids  # already the slots: no (n,) subtraction
                else:  # widened first: int8 ids -100 and 100 differ by 200 (wraps in int8)
                    slot = ids.astype(np.intp, copy=False) - lo
                counts = np.bincount(slot, minlength=span)
                present = counts > 0
                if present.all():
                    self.index, self.k, self._sizes = slot, span, counts
                else:
                    pos = np.cumsum(present) - 1
                    self.index, self.k = pos[slot], int(present.sum())
                    self._sizes = counts[present]
                return
        _, inv = np.unique(ids, return_inverse=True)
        self.index = inv.reshape(-1)
        self.k = int(self.index.max()) + 1

    # -- views ---------------------------------------------------------------------------------
    def view(self, x: Any) -> Any:
        return x.reshape(self.k, self.G) if self.G is not None else x

    def flat(self, x: Any) -> Any:
        return x.reshape(-1) if self.G is not None else x

    def spread(self, per_group: Any) -> Any:
        """A ``(k,)`` per-group value, broadcastable against :meth:`view` arrays."""
        if self.G is not None:
            return per_group[:, None]
        if self.torch:
            return per_group[self.index]
        return np.take(per_group, self.index)  # the same gather as indexing, ~15% faster

    @property
    def blocked(self) -> bool:
        """A dense numpy batch larger than one :data:`BLOCK`: rows are worked in blocks."""
        return self.G is not None and not self.torch and self.n > BLOCK

    def blocks(self) -> range:
        """Start rows (groups) of the blocks of a dense numpy batch; see :data:`BLOCK`."""
        return range(0, self.k, max(1, BLOCK // self.G))

    def deviations(self, rows: Any, mean: Any) -> tuple[Any, Any]:
        """``(ss, centred)``: each group's float64 sum of squared deviations of its ``rows``
        (:meth:`view`) from its ``mean`` (:meth:`sum_squares`), and the centred rows; None for
        them when the batch is :attr:`blocked` (they are centred block by block, and again
        when needed: :meth:`centred_scaled`)."""
        if not self.blocked:
            dev = rows - self.spread(mean)
            return self.sum_squares(dev), dev
        ss = np.empty(self.k)
        step = max(1, BLOCK // self.G)
        buf = np.empty((step, self.G), dtype=rows.dtype)
        for s in self.blocks():
            rb = rows[s : s + step]
            dev = buf[: rb.shape[0]]
            np.subtract(rb, mean[s : s + step, None], out=dev)
            np.einsum("ij,ij->i", dev, dev, dtype=np.float64, out=ss[s : s + step])
        return ss, None

    def centred_scaled(self, rewards: np.ndarray, mean: Any, scale: Any) -> np.ndarray:
        """``(n,)`` rows ``(r - mean_j) * scale_j`` of a blocked dense batch, block by block."""
        r = self.view(rewards)
        out = np.empty(r.shape, dtype=np.result_type(rewards.dtype, mean.dtype, scale.dtype))
        step = max(1, BLOCK // self.G)
        for s in self.blocks():
            ob = out[s : s + step]
            np.subtract(r[s : s + step], mean[s : s + step, None], out=ob)
            np.multiply(ob, scale[s : s + step, None], out=ob)
        return out.reshape(-1)

    # -- reductions over views -------------------------------------------------------------------
    def sum(self, v: Any, *, wide: bool = False) -> Any:
        """Per-group sums ``(k,)``, accumulated in float64.

        numpy and torch sum in different orders; in float32 that moves a group mean by an ulp,
        and centring on it turns into a visible difference in the advantages. Accumulated in
        float64 and rounded once, both give the same float32 statistics. Returned in ``v``'s
        dtype, or in the accumulation dtype when ``wide``.
        """
        if self.torch:
            import torch

            acc = wide_dtype(v)
            if self.G is not None:
                out = v.sum(dim=1, dtype=acc)
            else:
                out = torch.zeros(self.k, dtype=acc, device=v.device)
                out.index_add_(0, self.index, v.to(acc))
            return out if wide else out.to(v.dtype)
        if self.G is not None:
            out = np.einsum("ij->i", v, dtype=np.float64)  # faster than sum(dtype=) here
        else:
            out = np.bincount(self.index, weights=v, minlength=self.k)
        return out if wide else out.astype(v.dtype, copy=False)

    def sum_squares(self, v: Any) -> Any:
        """Per-group sums of ``v * v`` ``(k,)`` in the accumulation dtype (see :meth:`sum`)."""
        if self.G is not None and not self.torch:
            return np.einsum("ij,ij->i", v, v, dtype=np.float64)  # no (n,) temporary
        return self.sum(v * v, wide=True)

    def extreme(self, v: Any, how: str) -> Any:
        if self.G is not None:
            if self.torch:
                return v.amax(dim=1) if how == "amax" else v.amin(dim=1)
            return v.max(axis=1) if how == "amax" else v.min(axis=1)
        if self.torch:
            import torch

            out = torch.empty(self.k, dtype=v.dtype, device=v.device)
            return out.scatter_reduce_(0, self.index, v, reduce=how, include_self=False)
        fill = -np.inf if how == "amax" else np.inf
        out = np.full(self.k, fill, dtype=v.dtype)
        (np.maximum if how == "amax" else np.minimum).at(out, self.index, v)
        return out

    def sizes(self, like: Any) -> Any:
        """Rows per group, ``(k,)`` in the float dtype of ``like``."""
        if self.torch:
            import torch

            if self.G is not None:
                return torch.full((self.k,), float(self.G), dtype=like.dtype, device=like.device)
            return self.sum(torch.ones_like(like))
        if self.G is not None:
            return np.full(self.k, float(self.G), dtype=like.dtype)
        if self._sizes is None:
            self._sizes = np.bincount(self.index, minlength=self.k)
        return self._sizes.astype(like.dtype)

"""The math of group statistics: group mean/std, the Advantage Collapse Rate, advantages.

Definitions follow DESIGN.md section 3 (normative) and He et al., "Advantage Collapse in Group
Relative Policy Optimization: Diagnosis and Mitigation" (ICML 2026, arXiv 2605.21125).

Every function takes a flat rewards array ``(n,)`` plus group ids ``(n,)``; groups may be ragged
and need not be contiguous. Inputs may be numpy arrays or torch tensors (any device; no copies to
the host), float32 or float64; outputs have the input's kind, device and float dtype.

Conventions, said once:

- ``std`` is the unbiased (N - 1) standard deviation unless ``ddof=0`` is passed.
- A NaN reward means "unscorable": it is left out of its group's statistics and its advantage is
  0 (TRL's convention). A group with no finite reward is *unscorable* and is left out of ACR.
- A group is collapsed when its unbiased std is ``<= tau * max(1, |mean|)``: an absolute
  tolerance for rewards in [-1, 1], relative above, so float32 round-off (``0.6f + 0.1f`` vs
  ``0.7f``) never splits a group that is really homogeneous. A group with one scorable reward is
  collapsed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "ADVANTAGE_METHODS",
    "ADV_ZERO_ATOL",
    "DEFAULT_EPS",
    "DEFAULT_TAU",
    "CollapseSplit",
    "GroupStats",
    "acr_100",
    "acr_volatility",
    "advantage_stats",
    "advantages",
    "collapse_mask",
    "collapse_rate",
    "collapse_split",
    "cumulative_acr",
    "excess_collapse",
    "expected_acr",
    "expected_collapse",
    "group_stats",
    "stall_spans",
    "windowed_acr",
]

DEFAULT_TAU = 1e-6
"""Collapse tolerance on a group's reward std (DESIGN.md 3.1)."""
DEFAULT_EPS = 1e-4
"""GRPO denominator epsilon, as TRL (veRL uses 1e-6)."""
ADV_ZERO_ATOL = 1e-8
"""An advantage with ``|A| <= ADV_ZERO_ATOL`` counts as zero in adv_zero_frac."""
DEFAULT_WINDOW = 25
"""Window W for windowed ACR and ACR volatility (paper)."""
STALL_ACR = 0.35
"""Stall rule: ACR above this ..."""
STALL_STEPS = 50
"""... for more than this many consecutive steps (paper)."""
ADVANTAGE_METHODS = ("grpo", "dr_grpo", "batch", "rloo")


# --------------------------------------------------------------------------------------------
# Array backend: the handful of operations we need, for numpy and torch alike.


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _check_tau(tau: float) -> float:
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau):
        raise ValueError(f"tau must be a finite number >= 0, got {tau!r}")
    if tau < 0:
        raise ValueError(f"tau must be >= 0, got {tau!r}")
    return float(tau)


def _check_inputs(rewards: Any, group_ids: Any) -> tuple[Any, Any, bool, bool]:
    """Validate shapes and dtypes; return ``(rewards, group_ids, is_torch, has_nan)``."""
    torch_in = _is_torch(rewards)
    if torch_in:
        import torch

        if not _is_torch(group_ids):
            group_ids = torch.as_tensor(np.asarray(group_ids), device=rewards.device)
        if not rewards.is_floating_point():
            rewards = rewards.double()
        if group_ids.is_floating_point() or group_ids.is_complex():
            raise ValueError(f"group_ids must be integers for torch input, got {group_ids.dtype}")
    else:
        rewards = np.asarray(rewards)
        group_ids = np.asarray(group_ids)
        if rewards.dtype.kind not in "fiub":
            raise ValueError(f"rewards must be numeric, got dtype {rewards.dtype}")
        if rewards.dtype.kind != "f":
            rewards = rewards.astype(np.float64)
        if group_ids.dtype.kind == "f":
            if not np.all(np.isfinite(group_ids)) or np.any(group_ids != np.round(group_ids)):
                raise ValueError("group_ids must be integers or strings, got non-integral floats")
            group_ids = group_ids.astype(np.int64)
        elif group_ids.dtype.kind not in "iubUSO":
            raise ValueError(f"group_ids must be integers or strings, got dtype {group_ids.dtype}")
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D (n,), got shape {tuple(rewards.shape)}")
    if group_ids.ndim != 1:
        raise ValueError(f"group_ids must be 1-D (n,), got shape {tuple(group_ids.shape)}")
    if rewards.shape[0] != group_ids.shape[0]:
        raise ValueError(
            f"rewards and group_ids differ in length: {rewards.shape[0]} != {group_ids.shape[0]}"
        )
    if rewards.shape[0] == 0:
        raise ValueError("rewards is empty: a step needs at least one completion")
    # One pass answers the common case (all finite); only then look closer.
    if torch_in:
        import torch

        if bool(torch.isfinite(rewards).all()):
            return rewards, group_ids, True, False
        if bool(torch.isinf(rewards).any()):
            raise ValueError("rewards contain +/-inf; use NaN for unscorable completions")
        return rewards, group_ids, True, True
    if np.isfinite(rewards).all():
        return rewards, group_ids, False, False
    if np.isinf(rewards).any():
        raise ValueError("rewards contain +/-inf; use NaN for unscorable completions")
    return rewards, group_ids, False, True


_COMPACT_SPAN = 4
"""Integer ids spanning at most this many slots per row are binned directly (no sort)."""
_DENSE_PROBE = 4096
"""Rows of ids read first when deciding whether a batch is dense."""


class _Ops:
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
            rows = part.reshape(-1, g)
            if not bool((rows == rows[:, :1]).all() and (rows[1:, 0] > rows[:-1, 0]).all()):
                return None
        return g

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
                slot = (ids - lo).astype(np.intp, copy=False)
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
        return per_group[:, None] if self.G is not None else per_group[self.index]

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

            acc = _wide_dtype(v)
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


def _wide_dtype(v: Any) -> Any:
    """float64 to accumulate torch sums in, except on devices without it (Apple MPS)."""
    import torch

    return v.dtype if v.device.type == "mps" else torch.float64


def _cast(x: Any, like: Any, torch_in: bool) -> Any:
    """``x`` in the dtype of ``like``."""
    return x.to(like.dtype) if torch_in else x.astype(like.dtype, copy=False)


def _where(c: Any, a: Any, b: float, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.where(c, a, torch.as_tensor(b, dtype=a.dtype, device=a.device))
    return np.where(c, a, a.dtype.type(b))


# --------------------------------------------------------------------------------------------
# Group statistics


@dataclass(frozen=True)
class GroupStats:
    """Per-group statistics of one step; every array is ``(k,)`` in sorted-group-id order.

    Attributes:
        count: scorable (finite) rewards per group.
        size: rows per group, NaN rewards included.
        mean: over scorable rewards (NaN when count == 0).
        std: over scorable rewards with the ``ddof`` used (NaN when count <= ddof).
        collapsed: the group's rewards agree within the tolerance (see :func:`group_stats`);
            False for unscorable groups.
        scorable: count > 0.
        index: ``(n,)`` group position of each row, or None when the batch was dense.
    """

    count: Any
    size: Any
    mean: Any
    std: Any
    collapsed: Any
    scorable: Any
    index: Any
    _ops: Any = None
    _rewards: Any = None
    _dev: Any = None
    """Rows minus their group mean (0 for NaN rows), kept for :func:`advantages`; valid only
    while ``mean`` is the object it was computed from (``dataclasses.replace`` may swap it)."""
    _dev_mean: Any = None

    @property
    def n_groups(self) -> int:
        return int(self.count.shape[0])

    def spread(self, per_group: Any) -> Any:
        """Broadcast a ``(k,)`` per-group array back to the ``(n,)`` rows."""
        ops = self._ops
        out = ops.spread(per_group)
        if ops.G is not None:
            out = out.expand(ops.k, ops.G) if ops.torch else np.broadcast_to(out, (ops.k, ops.G))
        return ops.flat(out)

    def group_sum(self, x: Any) -> Any:
        """Sum an ``(n,)`` row array within each group -> ``(k,)`` (same backend as the rows)."""
        return self._ops.sum(self._ops.view(x))

    def group_max(self, x: Any) -> Any:
        """Largest value of an ``(n,)`` row array within each group -> ``(k,)``."""
        return self._ops.extreme(self._ops.view(x), "amax")

    @property
    def max(self) -> Any:
        """Largest scorable reward per group (NaN when none); computed on demand."""
        return self._extreme("amax")

    @property
    def min(self) -> Any:
        """Smallest scorable reward per group (NaN when none); computed on demand."""
        return self._extreme("amin")

    def _extreme(self, how: str) -> Any:
        ops, t = self._ops, self._ops.torch
        r = ops.view(self._rewards)
        fill = -math.inf if how == "amax" else math.inf
        nan = r.isnan() if t else np.isnan(r)
        out = ops.extreme(_where(~nan, r, fill, t), how)
        return _where(self.scorable, out, math.nan, t)


def group_stats(
    rewards: Any, group_ids: Any, *, ddof: int = 1, tau: float = DEFAULT_TAU
) -> GroupStats:
    """Mean, std and collapse flag of every group.

    A group is collapsed when its unbiased std satisfies ``std_j <= tau * max(1, |mean_j|)``
    (DESIGN.md 3.1): an absolute tolerance for rewards in [-1, 1], relative above, because
    float32 round-off grows with the reward's magnitude. A group with a single scorable reward is
    collapsed (it teaches nothing). ``<=`` makes ``tau=0`` mean exact equality.

    Args:
        rewards: ``(n,)`` float; NaN = unscorable.
        group_ids: ``(n,)`` integer (or, for numpy, string) group keys; ragged groups allowed.
        ddof: 1 for the unbiased std (default, as TRL and veRL), 0 for the population std.
        tau: collapse tolerance.

    >>> s = group_stats(np.array([1.0, 1.0, 1.0, 0.0, 0.5, 0.5]), np.array([0, 0, 0, 0, 1, 1]))
    >>> s.mean.tolist(), s.collapsed.tolist()
    ([0.75, 0.5], [False, True])
    """
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population) or 1 (unbiased), got {ddof!r}")
    tau = _check_tau(tau)
    rewards, group_ids, t, has_nan = _check_inputs(rewards, group_ids)
    ops = _Ops(group_ids, t)
    r = ops.view(rewards)
    size = ops.sizes(rewards)
    if has_nan:
        valid = ~(r.isnan() if t else np.isnan(r))
        filled = _where(valid, r, 0.0, t)
        count = ops.sum(valid.to(rewards.dtype) if t else valid.astype(rewards.dtype))
    else:
        valid, filled, count = None, r, size
    scorable = count > 0
    # Statistics in float64 (see _Ops.sum), rounded once to the rewards' dtype.
    sums = ops.sum(filled, wide=True)
    cnt = _cast(count, sums, t)
    mean_w = sums / _where(scorable, cnt, 1.0, t)
    mean = _cast(mean_w, rewards, t)
    dev = filled - ops.spread(mean)
    if valid is not None:
        dev = _where(valid, dev, 0.0, t)
    ss = ops.sum_squares(dev)
    # The collapse test always uses the unbiased std, whatever ddof the caller reports.
    n1 = cnt - 1
    unbiased = (ss / _where(n1 > 0, n1, 1.0, t)) ** 0.5
    amean = abs(mean_w)
    collapsed = (unbiased <= tau * _where(amean > 1.0, amean, 1.0, t)) & scorable
    if ddof == 1:
        std = _where(n1 > 0, unbiased, math.nan, t)
    else:
        std = _where(scorable, (ss / _where(scorable, cnt, 1.0, t)) ** 0.5, math.nan, t)
    std = _cast(std, rewards, t)
    mean = _where(scorable, mean, math.nan, t)
    return GroupStats(
        count=count,
        size=size,
        mean=mean,
        std=std,
        collapsed=collapsed,
        scorable=scorable,
        index=ops.index,
        _ops=ops,
        _rewards=rewards,
        _dev=dev,
        _dev_mean=mean,
    )


def collapse_mask(rewards: Any, group_ids: Any, tau: float = DEFAULT_TAU) -> Any:
    """``(k,)`` bool: which groups (in sorted-id order) are collapsed.

    >>> collapse_mask(np.array([1.0, 1.0, 0.0, 1.0]), np.array([7, 7, 3, 3])).tolist()
    [False, True]
    """
    return group_stats(rewards, group_ids, tau=tau).collapsed


@dataclass(frozen=True)
class CollapseSplit:
    """ACR of one step and its split; the three parts sum to ``acr``.

    ``n_groups`` counts scorable groups (the ACR denominator); ``n_collapsed`` the collapsed ones.
    """

    acr: float
    solve_all: float
    solve_none: float
    flat: float
    n_groups: int
    n_collapsed: int


def collapse_split(
    rewards: Any,
    group_ids: Any,
    tau: float = DEFAULT_TAU,
    *,
    r_min: float = 0.0,
    r_max: float = 1.0,
    stats: GroupStats | None = None,
) -> CollapseSplit:
    """ACR and its split into solve_all (common value r_max), solve_none (r_min) and flat.

    A collapsed group's common value (its mean) is compared with ``r_max``/``r_min`` using the
    collapse tolerance. Pass ``stats`` to reuse a :func:`group_stats` result.

    >>> s = collapse_split(np.array([1., 1, 0, 0, .5, .5, 1, 0]), np.array([0, 0, 1, 1, 2, 2, 3, 3]))
    >>> (s.acr, s.solve_all, s.solve_none, s.flat)
    (0.75, 0.25, 0.25, 0.25)
    """
    if not (math.isfinite(r_min) and math.isfinite(r_max)) or r_max <= r_min:
        raise ValueError(f"need finite r_min < r_max, got r_min={r_min!r}, r_max={r_max!r}")
    tau = _check_tau(tau)
    if stats is None:
        stats = group_stats(rewards, group_ids, tau=tau)
    n = int(stats.scorable.sum())
    if n == 0:
        raise ValueError("no group has a finite reward: ACR is undefined for this step")
    col, value = stats.collapsed, stats.mean
    at_max = col & (abs(value - r_max) <= tau * max(1.0, abs(r_max)))
    at_min = col & (abs(value - r_min) <= tau * max(1.0, abs(r_min))) & ~at_max
    n_col, n_all, n_none = int(col.sum()), int(at_max.sum()), int(at_min.sum())
    return CollapseSplit(
        acr=n_col / n,
        solve_all=n_all / n,
        solve_none=n_none / n,
        flat=(n_col - n_all - n_none) / n,
        n_groups=n,
        n_collapsed=n_col,
    )


def collapse_rate(rewards: Any, group_ids: Any, tau: float = DEFAULT_TAU) -> float:
    """Advantage Collapse Rate of one step: the fraction of scorable groups that are collapsed.

    >>> collapse_rate([1.0, 1.0, 0.0, 0.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1])
    0.5
    """
    stats = group_stats(rewards, group_ids, tau=tau)
    n = int(stats.scorable.sum())
    if n == 0:
        raise ValueError("no group has a finite reward: ACR is undefined for this step")
    return int(stats.collapsed.sum()) / n


# --------------------------------------------------------------------------------------------
# Advantages


def advantages(
    rewards: Any,
    group_ids: Any,
    method: str = "grpo",
    eps: float = DEFAULT_EPS,
    *,
    ddof: int = 1,
    tau: float = DEFAULT_TAU,
    stats: GroupStats | None = None,
) -> Any:
    """Per-completion advantages ``(n,)``, same kind, device and dtype as ``rewards``.

    Methods:
        ``grpo``: ``(r - mean_j) / (std_j + eps)``.
        ``dr_grpo``: ``r - mean_j`` (Dr. GRPO, no std division).
        ``batch``: ``(r - mean_j) / (std_batch + eps)``, TRL ``scale_rewards="batch"``.
        ``rloo``: ``r - mean of the other scorable members``, i.e. ``c/(c-1) (r - mean_j)``.

    NaN rewards are left out of every statistic and get advantage 0. A group with a single
    scorable member gets 0 (its std is undefined; it teaches nothing), and so does every
    collapsed group (:func:`group_stats`, tolerance ``tau``): its reward differences are
    round-off, and centring them on a mean rounded differently by numpy and torch would give
    GRPO advantages of ~3e-4 (1 ulp / eps) that depend on the backend and count as signal.
    With ``tau=0`` only exactly equal rewards are zeroed, which matches TRL and veRL bit for bit
    where their means round alike. Pass ``stats`` (from :func:`group_stats` on the same inputs,
    ``ddof`` and ``tau``) to skip recomputing them.

    >>> advantages(np.array([1.0, 1.0, 1.0, 0.0]), np.zeros(4, dtype=int)).round(3).tolist()
    [0.5, 0.5, 0.5, -1.5]
    """
    if method not in ADVANTAGE_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(ADVANTAGE_METHODS)}")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    if stats is None:
        stats = group_stats(rewards, group_ids, ddof=ddof, tau=tau)
    ops = stats._ops
    t = ops.torch
    rewards = stats._rewards
    r = ops.view(rewards)
    count = stats.count
    teaches = (count > 1) & ~stats.collapsed  # lone members and collapsed groups get 0
    if method == "grpo":
        std = _where(teaches, stats.std, 0.0, t)
        scale = 1.0 / (std + eps) if eps > 0 else 1.0 / _where(std > 0, std, 1.0, t)
    elif method == "dr_grpo":
        scale = _full_like(count, 1.0)
    elif method == "rloo":
        scale = count / _where(teaches, count - 1, 1.0, t)
    else:  # batch: one std over every scorable reward of the step
        ok = ~(rewards.isnan() if t else np.isnan(rewards))
        valid = rewards[ok]
        m = int(valid.shape[0])
        v64 = valid.double() if t else valid.astype(np.float64)
        bstd = float((((v64 - v64.mean()) ** 2).sum() / (m - ddof)) ** 0.5) if m > ddof else 0.0
        denom = bstd + eps
        scale = _full_like(count, 1.0 / denom if denom > 0 else 0.0)
    scale = _where(teaches, scale, 0.0, t)
    if stats._dev is not None and stats._dev_mean is stats.mean:
        dev = stats._dev  # computed by group_stats: saves a pass (and a gather when ragged)
    else:
        dev = r - ops.spread(stats.mean)
    adv = ops.flat(dev * ops.spread(scale))
    if bool((count != stats.size).any()):  # NaN rewards (and all-NaN groups) get 0
        adv = _where(~(adv.isnan() if t else np.isnan(adv)), adv, 0.0, t)
    return adv


def _full_like(like: Any, value: float) -> Any:
    """A ``like``-shaped array filled with ``value`` (same backend, dtype, device)."""
    if _is_torch(like):
        import torch

        return torch.full_like(like, value)
    return np.full_like(like, value)



def advantage_stats(adv: Any, rewards: Any = None) -> tuple[float, float]:
    """``(adv_std, adv_zero_frac)`` of one step.

    adv_std is the population std of the advantages of scorable completions (NaN rewards, when
    ``rewards`` is given, are left out); adv_zero_frac the fraction with ``|A| <= 1e-8``.

    >>> advantage_stats(np.array([0.0, 0.0, 1.0, -1.0]))
    (0.7071067811865476, 0.5)
    """
    t = _is_torch(adv)
    a = adv if t else np.asarray(adv)
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"advantages must be a non-empty 1-D array, got shape {tuple(a.shape)}")
    if rewards is not None:
        r = rewards if t else np.asarray(rewards)
        if r.shape != a.shape:
            raise ValueError(f"rewards shape {tuple(r.shape)} != advantages {tuple(a.shape)}")
        nan = r.isnan() if t else np.isnan(r)
        if bool(nan.any()):  # a boolean gather is the dearest op here (torch: ~5x a reduction)
            a = a[~nan]
            if a.shape[0] == 0:
                return math.nan, math.nan
    a64 = a.double() if t else a.astype(np.float64)
    mu = a64.mean()
    std = float(((a64 - mu) ** 2).mean() ** 0.5)
    zero = float((abs(a64) <= ADV_ZERO_ATOL).sum()) / a64.shape[0]
    return std, zero


# --------------------------------------------------------------------------------------------
# Expected collapse (DESIGN.md 3.3)


def expected_collapse(pass_rate: Any, group_size: Any) -> Any:
    """P0(p, G) = p^G + (1 - p)^G: chance that a binary-reward group of size G is collapsed.

    Works elementwise on arrays; returns a float for scalars.

    >>> round(expected_collapse(0.5, 4), 4)
    0.125
    """
    p = np.asarray(pass_rate, dtype=np.float64)
    g = np.asarray(group_size, dtype=np.float64)
    if np.any((p < 0) | (p > 1)):
        raise ValueError("pass rates must lie in [0, 1]")
    if np.any(g < 1):
        raise ValueError("group sizes must be >= 1")
    out = p**g + (1.0 - p) ** g
    return float(out) if out.ndim == 0 else out


def expected_acr(pass_rates: Any, group_sizes: Any) -> float:
    """Expected ACR: the mean of P0 over groups.

    ``pass_rates`` ``(k,)`` per group (or a scalar batch mean), ``group_sizes`` ``(k,)`` or scalar.
    NaN pass rates (unscorable groups) are left out.

    >>> round(expected_acr([0.5, 1.0], 4), 4)
    0.5625
    """
    p = np.atleast_1d(np.asarray(pass_rates, dtype=np.float64))
    g = np.broadcast_to(np.asarray(group_sizes, dtype=np.float64), p.shape)
    keep = ~np.isnan(p)
    if not keep.any():
        return math.nan
    return float(np.mean(expected_collapse(p[keep], g[keep])))


def excess_collapse(observed: Any, expected: Any) -> Any:
    """Excess collapse = observed ACR - expected ACR (elementwise).

    >>> excess_collapse(0.6, 0.25)
    0.35
    """
    out = np.asarray(observed, dtype=np.float64) - np.asarray(expected, dtype=np.float64)
    return float(out) if out.ndim == 0 else out


# --------------------------------------------------------------------------------------------
# Helpers over a step series of ACR values (numpy; series are short)


def _series(x: Any, name: str = "acr") -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D series, got shape {a.shape}")
    return a


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    return int(window)


def cumulative_acr(n_collapsed: Any, n_groups: Any) -> np.ndarray:
    """Cumulative ACR: collapsed groups seen so far / groups seen so far.

    >>> cumulative_acr([1, 0, 3], [2, 2, 4]).tolist()
    [0.5, 0.25, 0.5]
    """
    c = _series(n_collapsed, "n_collapsed")
    n = _series(n_groups, "n_groups")
    if c.shape != n.shape:
        raise ValueError(f"n_collapsed and n_groups differ in length: {c.shape} != {n.shape}")
    c = np.where(np.isnan(c), 0.0, c)
    n = np.where(np.isnan(n), 0.0, n)
    total = np.cumsum(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, np.cumsum(c) / np.where(total > 0, total, 1), np.nan)


def _rolling_sums(a: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trailing-window count, sum and sum of squares of the finite values of ``a``."""
    ok = ~np.isnan(a)
    v = np.where(ok, a, 0.0)

    def trail(x: np.ndarray) -> np.ndarray:
        c = np.cumsum(np.r_[0.0, x])
        return c[1:] - c[np.maximum(np.arange(1, len(x) + 1) - window, 0)]

    return trail(ok.astype(np.float64)), trail(v), trail(v * v)


def windowed_acr(acr: Any, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Trailing mean of ACR over the last ``window`` steps (fewer at the start); NaN-aware.

    >>> windowed_acr([0.0, 1.0, 1.0, 0.0], window=2).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    a = _series(acr)
    window = _check_window(window)
    n, s, _ = _rolling_sums(a, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.where(n > 0, n, 1), np.nan)


def acr_100(acr: Any, steps: Any = None, *, first: int = 100) -> float:
    """Mean ACR over the first ``first`` steps (the paper's early predictor of final accuracy).

    With ``steps`` given, rows whose step lies within ``first`` steps of the first logged step
    are used, so sparse logging still covers steps 1..100.

    >>> acr_100([0.5] * 100 + [1.0] * 50)
    0.5
    """
    a = _series(acr)
    if steps is None:
        head = a[:first]
    else:
        s = _series(steps, "steps")
        if s.shape != a.shape:
            raise ValueError(f"steps and acr differ in length: {s.shape} != {a.shape}")
        if a.size == 0:
            return math.nan
        head = a[s < np.nanmin(s) + first]
    head = head[~np.isnan(head)]
    return float(head.mean()) if head.size else math.nan


def acr_volatility(acr: Any, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Population std of ACR over each trailing ``window``-step window; NaN until a window fills.

    The paper associates a volatility above 0.15 with a 2.3x higher chance of divergence.

    >>> acr_volatility([0.0, 1.0, 0.0, 1.0], window=2).tolist()
    [nan, 0.5, 0.5, 0.5]
    """
    a = _series(acr)
    window = _check_window(window)
    n, s, ss = _rolling_sums(a, window)
    full = n >= window
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s / np.where(n > 0, n, 1)
        var = np.maximum(ss / np.where(n > 0, n, 1) - mean * mean, 0.0)
    out = np.sqrt(var)
    out[~full] = np.nan
    return out


def stall_spans(
    acr: Any, steps: Any = None, *, threshold: float = STALL_ACR, min_steps: int = STALL_STEPS
) -> list[tuple[int, int]]:
    """Spans where ACR stays above ``threshold`` for more than ``min_steps`` consecutive steps.

    Returns ``[(first_step, last_step), ...]`` (inclusive). With ``steps`` the span length is
    measured in training steps, so sparse logging is handled; NaN entries break no span.

    >>> stall_spans([0.1] * 5 + [0.5] * 60 + [0.1] * 5)
    [(5, 64)]
    """
    a = _series(acr)
    s = np.arange(a.size, dtype=np.float64) if steps is None else _series(steps, "steps")
    if s.shape != a.shape:
        raise ValueError(f"steps and acr differ in length: {s.shape} != {a.shape}")
    keep = ~np.isnan(a)
    a, s = a[keep], s[keep]
    # Runs of consecutive points above the threshold, found with one diff (no Python loop).
    edges = np.diff(np.r_[0, (a > threshold).astype(np.int8), 0])
    first, last = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1) - 1
    long = s[last] - s[first] + 1 > min_steps
    return [(int(s[i]), int(s[j])) for i, j in zip(first[long], last[long])]

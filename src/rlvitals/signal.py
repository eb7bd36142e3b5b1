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
- A group is collapsed when ``max - min <= tau * max(1, max|r|)``: an absolute tolerance for
  rewards in [-1, 1], relative above, so float32 round-off (``0.1 + 0.2`` vs ``0.3``) never splits
  a group that is really homogeneous. A group with one scorable reward is collapsed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_EPS",
    "DEFAULT_TAU",
    "ADV_ZERO_ATOL",
    "ADVANTAGE_METHODS",
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
"""Collapse tolerance on a group's reward range (DESIGN.md 3.1)."""
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


def _check_inputs(rewards: Any, group_ids: Any) -> tuple[Any, Any, bool]:
    """Validate shapes and dtypes; return (rewards, group_ids, is_torch)."""
    torch_in = _is_torch(rewards)
    if torch_in:
        if not _is_torch(group_ids):
            import torch

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
    if torch_in:
        import torch

        if bool(torch.isinf(rewards).any()):
            raise ValueError("rewards contain +/-inf; use NaN for unscorable completions")
    elif np.isinf(rewards).any():
        raise ValueError("rewards contain +/-inf; use NaN for unscorable completions")
    return rewards, group_ids, torch_in


@dataclass(frozen=True)
class _Layout:
    """How rows map to groups: ``dense`` (n = k * G, rows in order) or by ``index`` (n,)."""

    k: int
    size: int | None  # G when dense
    index: Any  # (n,) group position of each row, or None when dense


def _layout(group_ids: Any, torch_in: bool) -> _Layout:
    n = int(group_ids.shape[0])
    if torch_in:
        import torch

        # Dense fast path: equal-size contiguous runs with strictly increasing ids.
        if n > 1:
            change = torch.nonzero(group_ids[1:] != group_ids[:-1])
            g = int(change[0, 0]) + 1 if change.numel() else n
        else:
            g = 1
        if n % g == 0:
            rows = group_ids.reshape(-1, g)
            if bool((rows == rows[:, :1]).all()) and bool((rows[1:, 0] > rows[:-1, 0]).all()):
                return _Layout(k=n // g, size=g, index=None)
        _, inv = torch.unique(group_ids, return_inverse=True)
        return _Layout(k=int(inv.max()) + 1, size=None, index=inv)
    if n > 1 and group_ids.dtype.kind in "iub":
        change = np.flatnonzero(group_ids[1:] != group_ids[:-1])
        g = int(change[0]) + 1 if change.size else n
        if n % g == 0:
            rows = group_ids.reshape(-1, g)
            if (rows == rows[:, :1]).all() and (np.diff(rows[:, 0]) > 0).all():
                return _Layout(k=n // g, size=g, index=None)
    elif n == 1:
        return _Layout(k=1, size=1, index=None)
    _, inv = np.unique(group_ids, return_inverse=True)
    inv = inv.reshape(-1)
    return _Layout(k=int(inv.max()) + 1, size=None, index=inv)


class _Ops:
    """Segment reductions over a layout, for one backend."""

    def __init__(self, layout: _Layout, torch_in: bool, like: Any):
        self.lay = layout
        self.torch = torch_in
        self.like = like
        if not torch_in and layout.index is not None:
            # Sort once; reduceat over contiguous runs is much faster than ufunc.at.
            self.order = np.argsort(layout.index, kind="stable")
            sorted_idx = layout.index[self.order]
            self.starts = np.flatnonzero(np.r_[True, sorted_idx[1:] != sorted_idx[:-1]])

    def sum(self, x: Any) -> Any:
        lay = self.lay
        if lay.size is not None:
            return x.reshape(lay.k, lay.size).sum(**self._axis1())
        if self.torch:
            import torch

            out = torch.zeros(lay.k, dtype=x.dtype, device=x.device)
            return out.index_add_(0, lay.index, x)
        return np.add.reduceat(x[self.order], self.starts)

    def max(self, x: Any) -> Any:
        return self._extreme(x, "amax")

    def min(self, x: Any) -> Any:
        return self._extreme(x, "amin")

    def _extreme(self, x: Any, how: str) -> Any:
        lay = self.lay
        if lay.size is not None:
            m = x.reshape(lay.k, lay.size)
            if self.torch:
                return m.amax(dim=1) if how == "amax" else m.amin(dim=1)
            return m.max(axis=1) if how == "amax" else m.min(axis=1)
        if self.torch:
            import torch

            out = torch.empty(lay.k, dtype=x.dtype, device=x.device)
            return out.scatter_reduce_(0, lay.index, x, reduce=how, include_self=False)
        ufunc = np.maximum if how == "amax" else np.minimum
        return ufunc.reduceat(x[self.order], self.starts)

    def spread(self, per_group: Any) -> Any:
        """Broadcast a ``(k,)`` per-group value back to rows ``(n,)``."""
        lay = self.lay
        if lay.size is not None:
            if self.torch:
                return per_group.repeat_interleave(lay.size)
            return np.repeat(per_group, lay.size)
        return per_group[lay.index]

    def _axis1(self) -> dict:
        return {"dim": 1} if self.torch else {"axis": 1}


def _xp_isnan(x: Any, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.isnan(x)
    return np.isnan(x)


def _xp_where(c: Any, a: Any, b: Any, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.where(c, a, torch.as_tensor(b, dtype=a.dtype, device=a.device))
    return np.where(c, a, b)


def _any(x: Any) -> bool:
    return bool(x.any())


# --------------------------------------------------------------------------------------------
# Group statistics


@dataclass(frozen=True)
class GroupStats:
    """Per-group statistics of one step; every array is ``(k,)`` in group order (sorted ids).

    Attributes:
        count: scorable (finite) rewards per group.
        size: rows per group, NaN rewards included.
        mean, std: over scorable rewards; std with the ``ddof`` used (NaN when count <= ddof).
        max, min: over scorable rewards (NaN when count == 0).
        collapsed: ``max - min <= tau * max(1, max|r|)``; False for unscorable groups.
        scorable: count > 0.
        index: ``(n,)`` group position of each row, or None when the layout was dense.
    """

    count: Any
    size: Any
    mean: Any
    std: Any
    max: Any
    min: Any
    collapsed: Any
    scorable: Any
    index: Any
    _ops: Any = None

    @property
    def n_groups(self) -> int:
        return int(self.count.shape[0])

    def spread(self, per_group: Any) -> Any:
        """Broadcast a ``(k,)`` per-group array back to the ``(n,)`` rows."""
        return self._ops.spread(per_group)

    def group_sum(self, x: Any) -> Any:
        """Sum an ``(n,)`` row array within each group -> ``(k,)`` (same backend as the rows)."""
        return self._ops.sum(x)

    def group_max(self, x: Any) -> Any:
        """Largest value of an ``(n,)`` row array within each group -> ``(k,)``."""
        return self._ops.max(x)


def group_stats(
    rewards: Any, group_ids: Any, *, ddof: int = 1, tau: float = DEFAULT_TAU
) -> GroupStats:
    """Mean, std, extremes and collapse flags of every group.

    Args:
        rewards: ``(n,)`` float; NaN = unscorable.
        group_ids: ``(n,)`` integer (or, for numpy, string) group keys; ragged groups allowed.
        ddof: 1 for the unbiased std (default, as TRL and veRL), 0 for the population std.
        tau: collapse tolerance (see the module docstring).

    >>> s = group_stats(np.array([1.0, 1.0, 1.0, 0.0, 0.5, 0.5]), np.array([0, 0, 0, 0, 1, 1]))
    >>> s.mean.tolist(), s.collapsed.tolist()
    ([0.75, 0.5], [False, True])
    """
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population) or 1 (unbiased), got {ddof!r}")
    tau = _check_tau(tau)
    rewards, group_ids, t = _check_inputs(rewards, group_ids)
    lay = _layout(group_ids, t)
    ops = _Ops(lay, t, rewards)
    nan = _xp_isnan(rewards, t)
    has_nan = _any(nan)
    if t:
        import torch

        ones = torch.ones_like(rewards)
    else:
        ones = np.ones_like(rewards)
    if has_nan:
        valid = ~nan
        filled = _xp_where(valid, rewards, 0.0, t)
        count = ops.sum(_xp_where(valid, ones, 0.0, t))
        hi = ops.max(_xp_where(valid, rewards, -math.inf, t))
        lo = ops.min(_xp_where(valid, rewards, math.inf, t))
    else:
        valid = None
        filled = rewards
        count = ops.sum(ones)
        hi = ops.max(rewards)
        lo = ops.min(rewards)
    size = ops.sum(ones)
    scorable = count > 0
    mean = ops.sum(filled) / _xp_where(scorable, count, 1.0, t)
    dev = filled - ops.spread(mean)
    if valid is not None:
        dev = _xp_where(valid, dev, 0.0, t)
    ss = ops.sum(dev * dev)
    denom = count - ddof
    var = ss / _xp_where(denom > 0, denom, 1.0, t)
    std = _xp_where(denom > 0, var**0.5, math.nan, t)
    mean = _xp_where(scorable, mean, math.nan, t)
    hi = _xp_where(scorable, hi, math.nan, t)
    lo = _xp_where(scorable, lo, math.nan, t)
    # Tolerance: absolute for |r| <= 1, relative above (float32 round-off scales with |r|).
    ahi, alo = abs(_xp_where(scorable, hi, 0.0, t)), abs(_xp_where(scorable, lo, 0.0, t))
    scale = _xp_where(ahi > alo, ahi, alo, t)
    scale = _xp_where(scale > 1.0, scale, 1.0, t)
    collapsed = ((hi - lo) <= tau * scale) & scorable
    return GroupStats(
        count=count,
        size=size,
        mean=mean,
        std=std,
        max=hi,
        min=lo,
        collapsed=collapsed,
        scorable=scorable,
        index=lay.index,
        _ops=ops,
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

    A collapsed group's common value is compared with ``r_max``/``r_min`` using the same
    tolerance as the collapse test. Pass ``stats`` to reuse a :func:`group_stats` result.

    >>> s = collapse_split(np.array([1., 1, 0, 0, .5, .5, 1, 0]), np.array([0, 0, 1, 1, 2, 2, 3, 3]))
    >>> (s.acr, s.solve_all, s.solve_none, s.flat)
    (0.75, 0.25, 0.25, 0.25)
    """
    if not (math.isfinite(r_min) and math.isfinite(r_max)) or r_max <= r_min:
        raise ValueError(f"need finite r_min < r_max, got r_min={r_min!r}, r_max={r_max!r}")
    if stats is None:
        stats = group_stats(rewards, group_ids, tau=tau)
    tau = _check_tau(tau)
    col = stats.collapsed
    n = int(stats.scorable.sum())
    if n == 0:
        raise ValueError("no group has a finite reward: ACR is undefined for this step")
    value = stats.max
    tol_all = tau * max(1.0, abs(r_max))
    tol_none = tau * max(1.0, abs(r_min))
    at_max = col & (abs(value - r_max) <= tol_all)
    at_min = col & (abs(stats.min - r_min) <= tol_none) & ~at_max
    n_col = int(col.sum())
    n_all = int(at_max.sum())
    n_none = int(at_min.sum())
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

    >>> collapse_rate([1.0, 1.0, 1.0, 0.0, 0.0, 0.0], [0, 0, 0, 1, 1, 1])
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
    stats: GroupStats | None = None,
) -> Any:
    """Per-completion advantages ``(n,)``, same kind and dtype as ``rewards``.

    Methods:
        ``grpo``: ``(r - mean_j) / (std_j + eps)``.
        ``dr_grpo``: ``r - mean_j`` (Dr. GRPO, no std division).
        ``batch``: ``(r - mean_j) / (std_batch + eps)``, TRL ``scale_rewards="batch"``.
        ``rloo``: ``r - mean of the other scorable members``, i.e. ``c/(c-1) (r - mean_j)``.

    NaN rewards are left out of every statistic and get advantage 0. A group with a single
    scorable member gets 0 (its std is undefined; it teaches nothing).

    >>> advantages(np.array([1.0, 1.0, 1.0, 0.0]), np.zeros(4, dtype=int)).round(3).tolist()
    [0.5, 0.5, 0.5, -1.5]
    """
    if method not in ADVANTAGE_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(ADVANTAGE_METHODS)}")
    if not isinstance(eps, (int, float)) or not math.isfinite(eps) or eps < 0:
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    rewards, group_ids, t = _check_inputs(rewards, group_ids)
    if stats is None:
        stats = group_stats(rewards, group_ids, ddof=ddof)
    nan = _xp_isnan(rewards, t)
    centred = rewards - stats.spread(stats.mean)
    if method == "grpo":
        std = _xp_where(stats.count > 1, stats.std, 0.0, t)
        adv = centred / stats.spread(std + eps)
    elif method == "dr_grpo":
        adv = centred
    elif method == "rloo":
        c = stats.count
        factor = _xp_where(c > 1, c / _xp_where(c > 1, c - 1, 1.0, t), 0.0, t)
        adv = centred * stats.spread(factor)
    else:  # batch
        valid = rewards[~nan]
        m = valid.shape[0]
        if m > 1:
            mu = valid.mean()
            bstd = float((((valid - mu) ** 2).sum() / (m - ddof)) ** 0.5)
        else:
            bstd = 0.0
        adv = centred / (bstd + eps)
    single = stats.spread(stats.count <= 1)
    return _xp_where(~(nan | single), adv, 0.0, t)


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
        a = a[~_xp_isnan(r, t)]
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
    above = a > threshold
    spans: list[tuple[int, int]] = []
    i = 0
    while i < a.size:
        if not above[i]:
            i += 1
            continue
        j = i
        while j + 1 < a.size and above[j + 1]:
            j += 1
        if s[j] - s[i] + 1 > min_steps:
            spans.append((int(s[i]), int(s[j])))
        i = j + 1
    return spans

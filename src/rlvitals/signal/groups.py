"""Group statistics of one step, the collapse test, ACR and its split, expected collapse.

DESIGN.md 3.1-3.3. Every function takes rewards ``(n,)`` plus group ids ``(n,)`` (or a
:class:`GroupStats` already computed from them).

:func:`group_stats` is the one body of the statistics, for numpy and torch, dense and ragged
batches, with and without NaN rewards (:mod:`rlvitals.signal._ops` holds the layout-specific
reductions it calls).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvitals._array import (
    all_finite,
    cast,
    check_tau,
    fmax,
    isnan,
    scan_nan,
    sqrt,
    validate,
    where,
)
from rlvitals.signal._ops import Ops

__all__ = [
    "DEFAULT_TAU",
    "ROUNDOFF_ULPS",
    "CollapseSplit",
    "GroupStats",
    "collapse_mask",
    "collapse_rate",
    "collapse_split",
    "excess_collapse",
    "expected_acr",
    "expected_collapse",
    "group_stats",
    "split_masks",
]

DEFAULT_TAU = 1e-6
"""Collapse tolerance on a group's reward std (DESIGN.md 3.1): decides ACR, never advantages."""
ROUNDOFF_ULPS = 4
"""Rewards whose std is within this many machine epsilons of their magnitude are equal."""


def _eps(rewards: Any, t: bool) -> float:
    """Machine epsilon of the rewards' float dtype."""
    if t:
        import torch

        return float(torch.finfo(rewards.dtype).eps)
    return float(np.finfo(rewards.dtype).eps)


@dataclass(frozen=True)
class GroupStats:
    """Per-group statistics of one step; every per-group array is ``(k,)`` in sorted-id order.

    Made by :func:`group_stats` (or :meth:`with_virtual`), never by hand: the centred rows it
    keeps for :func:`~rlvitals.signal.advantages_from_stats` always belong to its ``mean``.

    Attributes:
        count: scorable (finite) rewards per group.
        size: rows per group, NaN rewards included.
        mean: over scorable rewards (NaN when count == 0).
        std: over scorable rewards with ``ddof`` (NaN when count <= ddof).
        collapsed: the group's rewards agree within the tolerance ``tau`` (see
            :func:`group_stats`): what ACR counts. False for unscorable groups.
        equal: the group's rewards are equal up to floating-point round-off (or it has one
            scorable member): what gets zero advantages. ``equal`` implies ``collapsed``.
        scorable: count > 0.
        index: ``(n,)`` group position of each row, or None when the batch was dense.
        rewards: the validated ``(n,)`` rewards (float; the input's backend, device, dtype).
        ddof: 1 (unbiased) or 0 (population): the std form of ``std``.
        virtual: ``(k,)`` virtual samples in each group's ``mean`` and ``std`` (AVSPO), or None.
        has_nan: whether any reward was NaN.
    """

    count: Any
    size: Any
    mean: Any
    std: Any
    collapsed: Any
    equal: Any
    scorable: Any
    index: Any
    rewards: Any
    ddof: int = 1
    virtual: Any = None
    has_nan: bool = False
    _ops: Any = None
    _centered: Any = None

    @property
    def n_groups(self) -> int:
        return int(self.count.shape[0])

    @property
    def torch(self) -> bool:
        """True when the arrays are torch tensors."""
        return self._ops.torch

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

    def count_true(self, mask: Any) -> Any:
        """``(k,)`` number of True rows of an ``(n,)`` bool mask in each group."""
        t = self.torch
        ops = self._ops
        if ops.G is not None:
            return ops.view(mask).sum(1)
        if t:
            import torch

            out = torch.zeros(ops.k, dtype=torch.int64, device=mask.device)
            return out.index_add_(0, ops.index, mask.to(torch.int64))
        return np.bincount(ops.index, weights=mask, minlength=ops.k)

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
        r = ops.view(self.rewards)
        fill = -math.inf if how == "amax" else math.inf
        out = ops.extreme(where(~isnan(r, t), r, fill, t), how)
        return where(self.scorable, out, math.nan, t)

    def batch_mean(self) -> float:
        """Mean of the step's scorable rewards (O(k), one scalar sync); NaN when none."""
        total = float(self.count.sum())
        if not total:
            return math.nan
        weighted = where(self.scorable, self.count * self.mean, 0.0, self.torch)
        return float(weighted.sum()) / total

    def with_virtual(self, augment: Any, k: Any, mean_v: Any, ss_v: Any) -> GroupStats:
        """The statistics of the groups in ``augment`` joined by ``k`` virtual rewards.

        Virtual rewards enter a group's mean and std only (AVSPO, DESIGN.md 3.5): they are
        given by their count ``k``, mean ``mean_v`` and sum of squared deviations ``ss_v``
        (scalars or ``(k,)`` arrays) and combined with the real rewards by the parallel-variance
        formula, so no virtual value becomes a row. Augmented groups are no longer collapsed
        (they have a spread now); every other group keeps its statistics exactly.

        Args:
            augment: ``(k,)`` bool, the groups to augment (sorted-id order).
            k, mean_v, ss_v: the virtual samples of each group.
        """
        t, ddof = self.torch, self.ddof
        augment = augment & self.scorable
        c = self.count
        real_ss = where(c > ddof, self.std * self.std * (c - ddof), 0.0, t)
        n = c + k
        mean = (c * self.mean + k * mean_v) / n
        gap = self.mean - mean_v
        ss = real_ss + ss_v + c * k / n * gap * gap
        std = (ss / (n - ddof)) ** 0.5
        mean = cast(where(augment, mean, self.mean, t), self.mean, t)
        std = cast(where(augment, std, self.std, t), self.std, t)
        virtual = where(augment, k + 0.0 * c, 0.0 * c, t)
        return GroupStats(
            count=self.count,
            size=self.size,
            mean=mean,
            std=std,
            collapsed=self.collapsed & ~augment,
            equal=self.equal & ~augment,
            scorable=self.scorable,
            index=self.index,
            rewards=self.rewards,
            ddof=ddof,
            virtual=virtual,
            has_nan=self.has_nan,
            _ops=self._ops,
            _centered=_centre(self._ops, self.rewards, mean, self.has_nan),
        )


def _centre(ops: Ops, rewards: Any, mean: Any, has_nan: bool) -> Any:
    """Rows minus their group mean, in the :meth:`Ops.view` shape; 0 on NaN rows.

    None for a :attr:`~Ops.blocked` batch without NaN: the advantages centre its rows on
    ``GroupStats.mean`` block by block instead (:meth:`Ops.centred_scaled`).
    """
    t = ops.torch
    r = ops.view(rewards)
    if not has_nan:
        return None if ops.blocked else r - ops.spread(mean)
    valid = ~isnan(r, t)
    return where(valid, where(valid, r, 0.0, t) - ops.spread(mean), 0.0, t)


def group_stats(
    rewards: Any, group_ids: Any, *, ddof: int = 1, tau: float = DEFAULT_TAU
) -> GroupStats:
    """Mean, std and collapse flag of every group.

    Two tests, two purposes (DESIGN.md 3.1):

    - *collapsed* (what ACR counts): the unbiased std is ``<= tau``, or the rewards are equal up
      to round-off. ``tau`` (1e-6) is absolute; ``<=`` makes ``tau=0`` mean exact equality.
    - *equal* (what gets zero advantages): the unbiased std is within :data:`ROUNDOFF_ULPS`
      machine epsilons of the rewards' magnitude, ``std_j <= 4 eps(dtype) max(1, |mean_j|)``:
      differences that are float round-off (``0.6f + 0.1f`` vs ``0.7f``; the ulp of 1e6 in
      float32), which numpy and torch could otherwise turn into backend-dependent signal. A
      real spread at any magnitude (``[1e6, 1e6 + 1]``) keeps the advantages TRL gives it.

    A group with a single scorable reward is collapsed and equal (it teaches nothing).

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
    tau = check_tau(tau)
    rewards, group_ids, t, _ = validate(rewards, group_ids, scan=False)
    ops = Ops(group_ids, t)
    r = ops.view(rewards)
    size = ops.sizes(rewards)
    # 1. Each group's sum, in float64 (Ops.sum). A NaN or inf reward makes its group's sum
    #    non-finite, and only then are the rewards read for one (an inf raises).
    sums = ops.sum(r, wide=True)
    has_nan = not all_finite(sums, t) and scan_nan(rewards, t)
    # 2. The scorable rewards of each group: all of them, or those that are not NaN.
    count = size
    if has_nan:
        valid = ~isnan(r, t)
        r = where(valid, r, 0.0, t)
        count = ops.sum(valid.to(rewards.dtype) if t else valid.astype(rewards.dtype))
        sums = ops.sum(r, wide=True)
    scorable = count > 0
    if not has_nan and ops.G is not None and ops.G > 1:  # dense: every group holds G rewards
        cnt, lone, n1 = float(ops.G), False, ops.G - 1.0
    else:
        cnt = cast(count, sums, t)
        lone = cnt <= 1
        n1 = where(lone, 1.0, cnt - 1, t)
    per = where(scorable, cnt, 1.0, t) if has_nan else cnt  # what a group's sums divide by
    mean_w = sums / per
    # 3. Mean (in float64, rounded once to the rewards' dtype) and sum of squared deviations.
    mean = cast(mean_w, rewards, t)
    if has_nan:
        dev = where(valid, r - ops.spread(mean), 0.0, t)
        ss = ops.sum_squares(dev)
    else:
        ss, dev = ops.deviations(r, mean)  # dev None: a blocked batch, centred when needed
    # 4. The std the caller asked for (ddof) and the unbiased one, which the collapse test
    #    always uses. In place where the array is this function's own: a dense step of a
    #    million groups spends as long on fresh (k,) arrays as on the arithmetic.
    if ddof == 0:
        std = sqrt(ss / per, t)
    ss /= n1
    unbiased = sqrt(ss, t, inplace=True)
    roundoff = fmax(abs(mean_w), 1.0, t, inplace=True)
    roundoff *= ROUNDOFF_ULPS * _eps(rewards, t)
    equal = unbiased <= roundoff
    if lone is not False:  # (a dense batch of G > 1 has no lone group)
        equal |= lone
    collapsed = unbiased <= tau
    collapsed |= equal
    if has_nan:
        equal &= scorable
        collapsed &= scorable
    if ddof == 1:
        std = unbiased if lone is False else where(lone, math.nan, unbiased, t)
    elif has_nan:
        std = where(scorable, std, math.nan, t)
    return GroupStats(
        count=count,
        size=size,
        mean=where(scorable, mean, math.nan, t) if has_nan else mean,
        std=cast(std, rewards, t),
        collapsed=collapsed,
        equal=equal,
        scorable=scorable,
        index=ops.index,
        rewards=rewards,
        ddof=ddof,
        has_nan=has_nan,
        _ops=ops,
        _centered=dev,
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


def check_range(r_min: float, r_max: float) -> None:
    """ValueError unless ``r_min < r_max`` are finite numbers."""
    ok = all(
        isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)
        for x in (r_min, r_max)
    )
    if not (ok and math.isfinite(r_min) and math.isfinite(r_max)) or r_max <= r_min:
        raise ValueError(f"need finite r_min < r_max, got r_min={r_min!r}, r_max={r_max!r}")


def split_masks(
    stats: GroupStats, *, r_min: float = 0.0, r_max: float = 1.0, tau: float = DEFAULT_TAU
) -> tuple[Any, Any]:
    """``(at_max, at_min)`` ``(k,)`` bool: collapsed groups whose common value is r_max / r_min.

    The common value (the mean) is compared with the bound using the collapse tolerance,
    relative above magnitude 1. A collapsed group in neither is flat.
    """
    check_range(r_min, r_max)
    col, value = stats.collapsed, stats.mean
    at_max = col & (abs(value - r_max) <= tau * max(1.0, abs(r_max)))
    at_min = col & (abs(value - r_min) <= tau * max(1.0, abs(r_min))) & ~at_max
    return at_max, at_min


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

    Pass ``stats`` (with ``rewards`` and ``group_ids`` None) to reuse a :func:`group_stats`
    result.

    >>> s = collapse_split(np.array([1., 1, 0, 0, .5, .5, 1, 0]), np.array([0, 0, 1, 1, 2, 2, 3, 3]))
    >>> (s.acr, s.solve_all, s.solve_none, s.flat)
    (0.75, 0.25, 0.25, 0.25)
    """
    check_range(r_min, r_max)
    tau = check_tau(tau)
    if stats is None:
        stats = group_stats(rewards, group_ids, tau=tau)
    n = int(stats.scorable.sum())
    if n == 0:
        raise ValueError("no group has a finite reward: ACR is undefined for this step")
    at_max, at_min = split_masks(stats, r_min=r_min, r_max=r_max, tau=tau)
    n_col, n_all, n_none = int(stats.collapsed.sum()), int(at_max.sum()), int(at_min.sum())
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
    return collapse_split(rewards, group_ids, tau).acr


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

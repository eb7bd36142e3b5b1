"""Advantages of one step from its group statistics, and their spread (DESIGN.md 3.4)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlvitals._array import full_like, is_torch, isnan, where
from rlvitals.signal.groups import DEFAULT_TAU, GroupStats, group_stats

__all__ = [
    "ADVANTAGE_METHODS",
    "DEFAULT_EPS",
    "ZERO_ATOL",
    "advantage_stats",
    "advantage_stats_by",
    "advantages",
    "advantages_from_stats",
]

DEFAULT_EPS = 1e-4
"""GRPO denominator epsilon, as TRL (veRL uses 1e-6)."""
ZERO_ATOL = 1e-8
"""An advantage (or a loss, a gradient norm) with ``|x| <= ZERO_ATOL`` counts as zero."""
ADVANTAGE_METHODS = ("grpo", "dr_grpo", "batch", "rloo")


def _check_eps(eps: Any) -> float:
    if (
        isinstance(eps, bool)
        or not isinstance(eps, (int, float))
        or not math.isfinite(eps)
        or eps < 0
    ):
        raise ValueError(f"eps must be a finite number >= 0, got {eps!r}")
    return float(eps)


def advantages(
    rewards: Any,
    group_ids: Any,
    method: str = "grpo",
    eps: float = DEFAULT_EPS,
    *,
    ddof: int = 1,
    tau: float = DEFAULT_TAU,
) -> Any:
    """Per-completion advantages ``(n,)``, same kind, device and dtype as ``rewards``.

    Methods:
        ``grpo``: ``(r - mean_j) / (std_j + eps)``.
        ``dr_grpo``: ``r - mean_j`` (Dr. GRPO, no std division).
        ``batch``: ``(r - mean_j) / (std_batch + eps)``, TRL ``scale_rewards="batch"``.
        ``rloo``: ``r - mean of the other scorable members``, i.e. ``c/(c-1) (r - mean_j)``.

    See :func:`advantages_from_stats` for NaN rewards, lone members and collapsed groups.

    >>> advantages(np.array([1.0, 1.0, 1.0, 0.0]), np.zeros(4, dtype=int)).round(3).tolist()
    [0.5, 0.5, 0.5, -1.5]
    """
    if method not in ADVANTAGE_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(ADVANTAGE_METHODS)}")
    eps = _check_eps(eps)
    return advantages_from_stats(group_stats(rewards, group_ids, ddof=ddof, tau=tau), method, eps)


def advantages_from_stats(stats: GroupStats, method: str = "grpo", eps: float = DEFAULT_EPS) -> Any:
    """``(n,)`` advantages of the rewards ``stats`` was computed from (see :func:`advantages`).

    NaN rewards are left out of every statistic and get advantage 0. A group with a single
    scorable member gets 0 (its std is undefined; it teaches nothing), and so does every group
    whose rewards are equal up to round-off (``GroupStats.equal``): centring round-off on a
    mean rounded differently by numpy and torch would give GRPO advantages of ~3e-4
    (1 ulp / eps) that depend on the backend and count as signal. Any real spread, however
    small or at whatever magnitude, gets the formula's advantages (as TRL and veRL give it):
    the collapse tolerance ``tau`` decides ACR only. Groups that carry virtual samples
    (:meth:`GroupStats.with_virtual`) are centred and scaled by their augmented mean and std,
    lone members included.

    >>> s = group_stats(np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1]))
    >>> advantages_from_stats(s, "dr_grpo").tolist()
    [0.5, -0.5, 0.0, 0.0]
    """
    if method not in ADVANTAGE_METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(ADVANTAGE_METHODS)}")
    eps = _check_eps(eps)
    ops = stats._ops
    t = ops.torch
    count = stats.count
    if stats.virtual is None and ops.G is not None and not stats.has_nan:
        # Dense without NaN: every group has G members, so only ``equal`` decides.
        teaches = ~stats.equal if ops.G > 1 else stats.equal & False
    else:
        members = count if stats.virtual is None else count + stats.virtual
        teaches = (members > 1) & ~stats.equal  # lone members and equal rewards get 0
    if method == "grpo" and eps > 0 and not t:
        # 1 / (std + eps) where the group teaches, 0 elsewhere: the where()s below, in one go.
        scale = np.zeros_like(stats.std)
        np.divide(1.0, stats.std + eps, out=scale, where=teaches)
    elif method == "grpo":
        std = where(teaches, stats.std, 0.0, t)
        scale = 1.0 / (std + eps) if eps > 0 else 1.0 / where(std > 0, std, 1.0, t)
    elif method == "dr_grpo":
        scale = full_like(count, 1.0)
    elif method == "rloo":
        scale = count / where(teaches, count - 1, 1.0, t)
    else:  # batch: one std over every scorable reward of the step
        rewards = stats.rewards
        valid = rewards[~isnan(rewards, t)] if stats.has_nan else rewards
        m = int(valid.shape[0])
        v64 = valid.double() if t else valid.astype(np.float64)
        ddof = stats.ddof
        bstd = float((((v64 - v64.mean()) ** 2).sum() / (m - ddof)) ** 0.5) if m > ddof else 0.0
        denom = bstd + eps
        scale = full_like(count, 1.0 / denom if denom > 0 else 0.0)
    if method != "grpo" or eps == 0 or t:
        scale = where(teaches, scale, 0.0, t)
    if stats._centered is None:  # a blocked dense batch: centre and scale block by block
        adv = ops.centred_scaled(stats.rewards, stats.mean, scale)
    else:
        adv = ops.flat(stats._centered * ops.spread(scale))
    if eps == 0 and method in ("grpo", "batch"):
        adv = _nan_to_zero(adv, t)  # TRL applies nan_to_num after its division as well
    return adv


def _nan_to_zero(adv: Any, t: bool) -> Any:
    """NaN advantages (0/0 when eps is 0) as 0, TRL's ``nan_to_num``."""
    return where(isnan(adv, t), 0.0 * adv, adv, t)


def advantage_stats(adv: Any, rewards: Any = None) -> tuple[float, float]:
    """``(adv_std, adv_zero_frac)`` of one step.

    adv_std is the population std of the advantages of scorable completions (NaN rewards, when
    ``rewards`` is given, are left out); adv_zero_frac the fraction with ``|A| <= 1e-8``.

    >>> advantage_stats(np.array([0.0, 0.0, 1.0, -1.0]))
    (0.7071067811865476, 0.5)
    """
    t = is_torch(adv)
    a = adv if t else np.asarray(adv)
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"advantages must be a non-empty 1-D array, got shape {tuple(a.shape)}")
    if rewards is not None:
        r = rewards if t else np.asarray(rewards)
        if r.shape != a.shape:
            raise ValueError(f"rewards shape {tuple(r.shape)} != advantages {tuple(a.shape)}")
        nan = isnan(r, t)
        if bool(nan.any()):  # a boolean gather is the dearest op here (torch: ~5x a reduction)
            a = a[~nan]
            if a.shape[0] == 0:
                return math.nan, math.nan
    if not t:
        std, zero, _ = spread_and_zeros(a)
        return std, zero
    a64 = a.double()
    mu = a64.mean()
    std = float(((a64 - mu) ** 2).mean() ** 0.5)
    zero = float((abs(a64) <= ZERO_ATOL).sum()) / a64.shape[0]
    return std, zero


def spread_and_zeros(adv: np.ndarray) -> tuple[float, float, np.ndarray]:
    """``(adv_std, adv_zero_frac, zero)`` of numpy advantages ``(n,)``, every row counted.

    ``zero`` ``(n,)`` bool: ``|A| <= ZERO_ATOL``. For float32 and float64 advantages without
    NaN, ``~zero`` is exactly ``abs(adv) > ZERO_ATOL`` in the advantages' own dtype: no float32
    lies between ``float32(1e-8)`` and ``1e-8``.
    """
    a64 = adv.astype(np.float64, copy=False)
    mu = a64.mean()
    sq = a64 - mu
    np.multiply(sq, sq, out=sq)  # the ** 2 of advantage_stats
    zero = np.abs(a64) <= ZERO_ATOL
    return float(sq.mean() ** 0.5), int(np.count_nonzero(zero)) / a64.shape[0], zero


def advantage_stats_by(
    adv: np.ndarray, segment: np.ndarray, n_segments: int, rewards: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`advantage_stats` of every segment (e.g. every step of a run) at once (numpy).

    Args:
        adv: ``(m,)`` advantages; NaN ones (and those of NaN ``rewards``) are left out.
        segment: ``(m,)`` int segment of each row, in ``[0, n_segments)``.

    Returns ``(adv_std (S,), adv_zero_frac (S,))``; NaN for a segment without a value.

    >>> s, z = advantage_stats_by(np.array([0.0, 0.0, 1.0, -1.0]), np.array([0, 0, 1, 1]), 2)
    >>> s.tolist(), z.tolist()
    ([0.0, 1.0], [1.0, 0.0])
    """
    a = np.asarray(adv, dtype=np.float64)
    if rewards is not None:
        a = np.where(np.isnan(rewards), np.nan, a)
    ok = ~np.isnan(a)
    seg, a = segment[ok], a[ok]
    cnt = np.bincount(seg, minlength=n_segments).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        den = np.where(cnt > 0, cnt, np.nan)
        mean = np.bincount(seg, weights=a, minlength=n_segments) / den
        sq = np.bincount(seg, weights=a * a, minlength=n_segments) / den
        std = np.sqrt(np.maximum(sq - mean * mean, 0.0))
        zero = np.bincount(seg, weights=np.abs(a) <= ZERO_ATOL, minlength=n_segments) / den
    return std, zero

"""Exact per-step collapse series from recorded per-group rewards (DESIGN.md 3.2-3.3)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvitals.recording.run import GroupTable
from rlvitals.signal import (
    DEFAULT_TAU,
    advantage_stats_by,
    advantages_from_stats,
    expected_collapse,
    group_stats,
    split_masks,
)

__all__ = ["GroupSeries", "group_series"]


@dataclass(frozen=True)
class GroupSeries:
    """Per-step series derived from a :class:`GroupTable`; every array is ``(T,)``.

    ``acr`` and its split use scorable groups as the denominator; ``pass_rate`` is the mean
    reward rescaled to [0, 1] by the reward range; ``expected_acr`` is the mean over the step's
    groups of P0(p, G_j) with p the step's pass rate (prompts assumed alike: an optimistic
    baseline, so ``excess = acr - expected_acr`` is an upper bound on pipeline collapse).
    ``adv_std`` / ``adv_zero_frac`` are of GRPO advantages recomputed from the rewards (or of the
    recorded advantages when present).
    """

    steps: np.ndarray
    n_groups: np.ndarray
    n_collapsed: np.ndarray
    acr: np.ndarray
    acr_solve_all: np.ndarray
    acr_solve_none: np.ndarray
    acr_flat: np.ndarray
    reward_mean: np.ndarray
    pass_rate: np.ndarray
    expected_acr: np.ndarray
    adv_std: np.ndarray
    adv_zero_frac: np.ndarray
    group_size: np.ndarray


def group_series(
    table: GroupTable,
    *,
    tau: float = DEFAULT_TAU,
    r_min: float = 0.0,
    r_max: float = 1.0,
) -> GroupSeries:
    """Compute ACR, its split, expected collapse and advantage spread for every step at once.

    >>> t = GroupTable.from_lists([0, 0, 1], [[1, 1], [0, 1], [0, 0]])
    >>> s = group_series(t)
    >>> s.steps.tolist(), s.acr.tolist(), s.acr_solve_none.tolist()
    ([0, 1], [0.5, 1.0], [0.0, 1.0])
    """
    gid = table.row_group()
    st = group_stats(table.rewards, gid, tau=tau)
    steps, sinv = np.unique(table.step, return_inverse=True)
    sinv = sinv.reshape(-1)
    T = steps.shape[0]
    scorable = st.scorable
    col = st.collapsed
    at_max, at_min = split_masks(st, r_min=r_min, r_max=r_max, tau=tau)

    def per_step(x: np.ndarray) -> np.ndarray:
        return np.bincount(sinv, weights=x.astype(np.float64), minlength=T)

    n = per_step(scorable)
    rstep = np.repeat(sinv, table.sizes())
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = np.where(n > 0, n, np.nan)
        acr = per_step(col) / denom
        solve_all = per_step(at_max) / denom
        solve_none = per_step(at_min) / denom
        flat = acr - solve_all - solve_none
        # Reward mean per step over scorable rows.
        ok = ~np.isnan(table.rewards)
        rsum = np.bincount(rstep[ok], weights=table.rewards[ok], minlength=T)
        rcnt = np.bincount(rstep[ok], minlength=T).astype(np.float64)
        rmean = rsum / np.where(rcnt > 0, rcnt, np.nan)
        p = np.clip((rmean - r_min) / (r_max - r_min), 0.0, 1.0)
        # Expected collapse: each group's P0 at its step's pass rate (prompts assumed alike).
        p_g = np.nan_to_num(p[sinv])
        p0 = np.where(scorable, expected_collapse(p_g, np.where(scorable, st.count, 1.0)), 0.0)
        expected = per_step(p0) / denom
        gs = per_step(np.where(scorable, st.size, 0.0)) / denom
    adv = table.advantages
    if adv is None:
        adv = advantages_from_stats(st, "grpo")
    adv_std, adv_zero = advantage_stats_by(adv, rstep, T, table.rewards)
    return GroupSeries(
        steps=steps.astype(np.int64),
        n_groups=n,
        n_collapsed=per_step(col),
        acr=acr,
        acr_solve_all=solve_all,
        acr_solve_none=solve_none,
        acr_flat=flat,
        reward_mean=rmean,
        pass_rate=p,
        expected_acr=expected,
        adv_std=adv_std,
        adv_zero_frac=adv_zero,
        group_size=gs,
    )

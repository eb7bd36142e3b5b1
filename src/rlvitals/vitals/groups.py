"""Exact per-step collapse series from recorded per-group rewards (DESIGN.md 3.2-3.3)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._record import record
from rlvitals.recording.run import GroupTable
from rlvitals.signal import (
    DEFAULT_TAU,
    advantage_stats_by,
    advantages_from_stats,
    expected_collapse,
    group_stats,
    split_masks,
)

__all__ = ["NEIGHBOURS", "GroupSeries", "StepCollapse", "collapse_by_step", "group_series"]

NEIGHBOURS = 2
"""A group's prompt pass rate comes from up to this many of the prompt's other steps before the
group's step and as many after (rows of groups, nearest first)."""


@record(frozen=True)
class GroupSeries:
    """Per-step series derived from a :class:`GroupTable`; every array is ``(T,)``.

    ``acr`` and its split use scorable groups as the denominator; ``pass_rate`` is the mean
    reward rescaled to [0, 1] by the reward range; ``expected_acr`` is the mean over the step's
    groups of P0(p_j, G_j). With prompt ids, p_j is the prompt's own pass rate from its nearest
    other steps (:data:`NEIGHBOURS` before and after; the group's own step left out), so a prompt set that mixes always-solved and never-solved prompts
    is expected to collapse; a group whose prompt has no other step, or a table without prompt
    ids, takes the step's pass rate (prompts assumed alike: an optimistic baseline, so
    ``excess = acr - expected_acr`` is then an upper bound on pipeline collapse).
    A reward logged as +/-inf is read as unscorable (NaN) and counted in ``n_infinite``.
    ``expected_from`` says which: ``per-prompt`` (every group), ``mixed`` (some groups fell
    back), ``batch`` (none had a per-prompt estimate); ``per_prompt_share`` the share of groups
    with one.
    ``adv_std`` / ``adv_zero_frac`` are of GRPO advantages recomputed from the rewards (or of the
    recorded advantages when present). ``group_std_mean`` is the mean over scorable groups of
    the group's reward std (unbiased; a one-member group counts as 0): TRL's ``reward_std``
    before 0.27.
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
    group_std_mean: np.ndarray
    expected_from: str = "batch"
    per_prompt_share: float = 0.0
    n_infinite: int = 0


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
    rewards = table.rewards
    infinite = np.isinf(rewards)
    n_infinite = int(infinite.sum())
    if n_infinite:  # a logged +/-inf is no reward: unscorable, like NaN (and counted)
        rewards = np.where(infinite, np.nan, rewards)
    st = group_stats(rewards, gid, tau=tau)
    steps, sinv = np.unique(table.step, return_inverse=True)
    sinv = sinv.reshape(-1)
    T = steps.shape[0]
    rstep = np.repeat(sinv, table.sizes())
    with np.errstate(invalid="ignore", divide="ignore"):
        # Reward mean per step over scorable rows.
        ok = ~np.isnan(rewards)
        rsum = np.bincount(rstep[ok], weights=rewards[ok], minlength=T)
        rcnt = np.bincount(rstep[ok], minlength=T).astype(np.float64)
        rmean = rsum / np.where(rcnt > 0, rcnt, np.nan)
    own = _prompt_pass_rates(table.prompt, sinv, st, st.scorable, r_min, r_max)
    c = collapse_by_step(st, sinv, T, rmean, r_min=r_min, r_max=r_max, tau=tau, own=own)
    n_scorable = int(st.scorable.sum())
    share = float(c.has_own.sum()) / n_scorable if n_scorable else 0.0
    expected_from = "per-prompt" if share == 1.0 else ("mixed" if share > 0 else "batch")
    adv = table.advantages
    if adv is None:
        adv = advantages_from_stats(st, "grpo")
    elif np.isinf(adv).any():
        adv = np.where(np.isinf(adv), np.nan, adv)
    adv_std, adv_zero = advantage_stats_by(adv, rstep, T, rewards)
    return GroupSeries(
        steps=steps.astype(np.int64),
        n_groups=c.n_groups,
        n_collapsed=c.n_collapsed,
        acr=c.acr,
        acr_solve_all=c.acr_solve_all,
        acr_solve_none=c.acr_solve_none,
        acr_flat=c.acr_flat,
        reward_mean=rmean,
        pass_rate=c.pass_rate,
        expected_acr=c.expected_acr,
        adv_std=adv_std,
        adv_zero_frac=adv_zero,
        group_size=c.group_size,
        group_std_mean=c.group_std_mean,
        expected_from=expected_from,
        per_prompt_share=share,
        n_infinite=n_infinite,
    )


@record(frozen=True)
class StepCollapse:
    """The collapse rates of each step from its groups' statistics (:func:`collapse_by_step`):
    every array is ``(T,)``, but ``has_own``, ``(k,)``: the groups whose expected collapse used
    their prompt's own pass rate."""

    n_groups: np.ndarray
    n_collapsed: np.ndarray
    acr: np.ndarray
    acr_solve_all: np.ndarray
    acr_solve_none: np.ndarray
    acr_flat: np.ndarray
    pass_rate: np.ndarray
    expected_acr: np.ndarray
    group_size: np.ndarray
    group_std_mean: np.ndarray
    has_own: np.ndarray


def collapse_by_step(
    stats: Any,
    step_of: np.ndarray,
    n_steps: int,
    reward_mean: np.ndarray,
    *,
    r_min: float,
    r_max: float,
    tau: float = DEFAULT_TAU,
    own: np.ndarray | None = None,
) -> StepCollapse:
    """ACR, its split, the pass rate and expected collapse of every step from the statistics
    of its groups (DESIGN.md 3.2-3.3): what :func:`group_series` derives from a recording and
    the live monitor's window (:mod:`rlvitals.guard.window`) from each step as it arrives.

    Args:
        stats: the groups' :class:`~rlvitals.signal.GroupStats`, or anything with its ``(k,)``
            ``scorable``, ``collapsed``, ``mean``, ``count``, ``size`` and ``std``.
        step_of: ``(k,)`` int, the step (``0 .. n_steps - 1``) of each group.
        n_steps: T.
        reward_mean: ``(T,)`` each step's mean reward over its scorable completions.
        r_min, r_max: the reward range (the split's bounds; the pass rate's scale).
        own: ``(k,)`` each group's prompt pass rate in [0, 1] from other steps, NaN where
            unknown; None: every group takes its step's pass rate.

    >>> from rlvitals.signal import group_stats
    >>> st = group_stats(np.array([1.0, 1, 0, 1]), np.array([0, 0, 1, 1]))
    >>> c = collapse_by_step(st, np.array([0, 0]), 1, np.array([0.75]), r_min=0.0, r_max=1.0)
    >>> c.acr.tolist(), c.acr_solve_all.tolist(), c.pass_rate.tolist()
    ([0.5], [0.5], [0.75])
    """
    scorable = stats.scorable
    col = stats.collapsed
    at_max, at_min = split_masks(stats, r_min=r_min, r_max=r_max, tau=tau)

    def per_step(x: np.ndarray) -> np.ndarray:
        return np.bincount(step_of, weights=x.astype(np.float64), minlength=n_steps)

    n = per_step(scorable)
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = np.where(n > 0, n, np.nan)
        acr = per_step(col) / denom
        solve_all = per_step(at_max) / denom
        solve_none = per_step(at_min) / denom
        flat = acr - solve_all - solve_none
        p = np.clip((reward_mean - r_min) / (r_max - r_min), 0.0, 1.0)
        # Expected collapse: each group's P0 at its prompt's pass rate from the prompt's other
        # steps, else at its step's pass rate (prompts assumed alike).
        p_g = np.nan_to_num(p[step_of])
        if own is None:
            has_own = np.zeros(p_g.shape[0], dtype=bool)
        else:
            has_own = np.isfinite(own) & scorable
            p_g = np.where(has_own, own, p_g)
        p0 = np.where(scorable, expected_collapse(p_g, np.where(scorable, stats.count, 1.0)), 0.0)
        expected = per_step(p0) / denom
        gs = per_step(np.where(scorable, stats.size, 0.0)) / denom
        std = stats.std
        std_mean = per_step(np.where(scorable & np.isfinite(std), std, 0.0)) / denom
    return StepCollapse(
        n_groups=n,
        n_collapsed=per_step(col),
        acr=acr,
        acr_solve_all=solve_all,
        acr_solve_none=solve_none,
        acr_flat=flat,
        pass_rate=p,
        expected_acr=expected,
        group_size=gs,
        group_std_mean=std_mean,
        has_own=has_own,
    )


def _prompt_pass_rates(
    prompt: np.ndarray | None,
    sinv: np.ndarray,
    st,
    scorable: np.ndarray,
    r_min: float,
    r_max: float,
) -> np.ndarray:
    """``(k,)`` each group's prompt pass rate from the prompt's nearest other steps: up to
    :data:`NEIGHBOURS` before and as many after (a prompt's difficulty drifts as the policy
    learns, so far-away epochs say little); NaN where the prompt has no other step, or without
    prompt ids. The completions' mean reward, rescaled to [0, 1]."""
    k = sinv.shape[0]
    out = np.full(k, np.nan)
    if prompt is None or k == 0:
        return out
    ids = prompt.tolist()
    known = np.fromiter((x is not None for x in ids), dtype=bool, count=k) & scorable
    if not known.any():
        return out
    rows = np.flatnonzero(known)
    keys = np.asarray([str(ids[i]) for i in rows.tolist()], dtype=object)
    _, q = np.unique(keys, return_inverse=True)
    q = q.reshape(-1)
    t = sinv[rows]
    order = np.lexsort((t, q))  # by prompt, then step
    q, t, rows = q[order], t[order], rows[order]
    cnt = st.count[rows].astype(np.float64)
    with np.errstate(invalid="ignore"):
        succ = np.clip((st.mean[rows] - r_min) / (r_max - r_min), 0.0, 1.0) * cnt
    n = rows.shape[0]
    pos = np.arange(n)
    new_prompt = np.r_[True, q[1:] != q[:-1]]
    new_pair = new_prompt | np.r_[True, t[1:] != t[:-1]]
    b = np.maximum.accumulate(np.where(new_prompt, pos, 0))  # first row of the prompt
    last_prompt = np.r_[new_prompt[1:], True]
    e = np.minimum.accumulate(np.where(last_prompt[::-1], pos[::-1] + 1, n))[::-1]  # one past
    fs = np.maximum.accumulate(np.where(new_pair, pos, 0))  # first row of (prompt, step)
    last_pair = np.r_[new_pair[1:], True]
    ls = np.minimum.accumulate(np.where(last_pair[::-1], pos[::-1] + 1, n))[::-1]  # one past
    lo = np.maximum(b, fs - NEIGHBOURS)
    hi = np.minimum(e, ls + NEIGHBOURS)
    cs = np.r_[0.0, np.cumsum(succ)]
    cc = np.r_[0.0, np.cumsum(cnt)]
    s_other = (cs[fs] - cs[lo]) + (cs[hi] - cs[ls])
    c_other = (cc[fs] - cc[lo]) + (cc[hi] - cc[ls])
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(c_other > 0, s_other / c_other, np.nan)
    out[rows] = np.clip(rate, 0.0, 1.0)
    return out

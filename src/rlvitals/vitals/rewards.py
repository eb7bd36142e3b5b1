"""The reward range a run is judged in, and the exact per-step ACR of its per-group rewards.

Every command that splits collapsed groups into solved / failed / flat reads the range here
(the doctor's vitals and ``rlvitals acr`` alike), so they never disagree about it.
"""

from __future__ import annotations

import math

import numpy as np

from rlvitals._record import record
from rlvitals.recording.run import Run
from rlvitals.signal import DEFAULT_TAU
from rlvitals.vitals.groups import GroupSeries, group_series

__all__ = ["RewardRange", "acr_series", "reward_range"]


@record(frozen=True)
class RewardRange:
    """The reward range a run is judged in, and where it came from.

    Attributes:
        low, high: the range.
        known: stated by the source (manifest ``reward_min``/``reward_max``).
        inferred: taken from the rewards seen (they left [0, 1]).
        note: what was assumed, for the report, or "".
        source: where it came from: ``stated`` (the manifest), ``rewards`` (per-group
            rewards), ``reward min/max`` (logged extremes), ``mean reward`` (only the mean's
            own extremes: a guess, pass rates are approximate), or ``assumed`` ([0, 1]).
    """

    low: float
    high: float
    known: bool
    inferred: bool
    note: str = ""
    source: str = "assumed"


def reward_range(run: Run) -> RewardRange:
    """The reward range of ``run``: the manifest's when it states one, else [0, 1] widened to
    the rewards seen (per-group rewards, else reward min/max, else the mean rounded out) when
    they leave it. Every command that splits collapsed groups into solved / failed / flat reads
    the range here (the doctor's vitals and ``rlvitals acr`` alike).

    >>> from rlvitals.recording import GroupTable, RunBuilder
    >>> b = RunBuilder()
    >>> b.groups = GroupTable.from_lists([1, 1], [[5.0, 5.0], [0.0, 2.5]])
    >>> r = reward_range(b.build())
    >>> (r.low, r.high, r.inferred)
    (0.0, 5.0, True)
    """
    m = run.manifest
    if m.reward_min is not None and m.reward_max is not None:
        lo, hi = float(m.reward_min), float(m.reward_max)
        if hi > lo and math.isfinite(lo) and math.isfinite(hi):
            return RewardRange(lo, hi, True, False, source="stated")
        note = f"reward range [{lo}, {hi}] is empty; "
    else:
        note = ""
    lo, hi, seen = _observed_reward_range(run)
    if lo < 0.0 or hi > 1.0:
        lo, hi = min(0.0, lo), max(1.0, hi)
        how = f"taken from the {seen} seen, [{lo:g}, {hi:g}]"
        if seen == "mean reward":
            how += " (pass rates approximate: pass --reward-range MIN,MAX)"
        return RewardRange(lo, hi, False, True, note + "reward range unknown: " + how, seen)
    return RewardRange(0.0, 1.0, False, False, note + "reward range unknown: assumed [0, 1]")


def acr_series(run: Run, *, tau: float = DEFAULT_TAU) -> tuple[GroupSeries, RewardRange] | None:
    """The exact per-step ACR (and split, expected ACR) of a run with per-group rewards, in the
    run's :func:`reward_range`; None when the run has no per-group rewards."""
    if run.groups is None or run.groups.n_groups == 0:
        return None
    rr = reward_range(run)
    return group_series(run.groups, tau=tau, r_min=rr.low, r_max=rr.high), rr


def _observed_reward_range(run: Run) -> tuple[float, float, str]:
    """Smallest and largest reward the run shows, and from what: exact from per-group rewards,
    else from the logged reward min/max, else the mean reward's own extremes (tight: a mean of
    1.02 says the maximum is at least 1.02, not 2); (0, 1) when nothing is known. Non-finite
    values (a logged inf) are left out."""
    g = run.groups
    if g is not None and g.rewards.size:
        r = g.rewards[np.isfinite(g.rewards)]
        if r.size:
            return float(r.min()), float(r.max()), "rewards"
    lo_s, hi_s = (
        _finite_values(run.series.get("reward_min")),
        _finite_values(run.series.get("reward_max")),
    )
    if lo_s.size and hi_s.size:
        return float(lo_s.min()), float(hi_s.max()), "reward min/max"
    mean = _finite_values(run.series.get("reward_mean"))
    if mean.size:
        lo, hi = float(mean.min()), float(mean.max())
        return _rounded_out(lo, -0.5, math.floor), _rounded_out(hi, 1.5, math.ceil), "mean reward"
    return 0.0, 1.0, "nothing"


def _rounded_out(x: float, near: float, out) -> float:
    """A bound guessed from a mean extreme ``x``: ``x`` itself while within half a unit of
    [0, 1] (``near``: -0.5 below, 1.5 above; a mean of 1.02 says the maximum is 1.02 or a little
    more, not 2), else rounded out to a whole number with ``out`` (sums of several 0/1 reward
    functions, or rewards scaled to [-1, 4], have whole bounds)."""
    if (near < 0 and x >= near) or (near > 0 and x <= near):
        return x
    return float(out(x))


def _finite_values(x: np.ndarray | None) -> np.ndarray:
    if x is None:
        return np.zeros(0)
    return x[np.isfinite(x)]

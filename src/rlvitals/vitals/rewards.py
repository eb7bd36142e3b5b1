"""The reward range a run is judged in, and the exact per-step ACR of its per-group rewards.

Every command that splits collapsed groups into solved / failed / flat reads the range here
(the doctor's vitals and ``rlvitals acr`` alike), so they never disagree about it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvitals.recording.run import Run
from rlvitals.signal import DEFAULT_TAU
from rlvitals.vitals.groups import GroupSeries, group_series

__all__ = ["RewardRange", "acr_series", "reward_range"]


@dataclass(frozen=True)
class RewardRange:
    """The reward range a run is judged in, and where it came from.

    Attributes:
        low, high: the range.
        known: stated by the source (manifest ``reward_min``/``reward_max``).
        inferred: taken from the rewards seen (they left [0, 1]).
        note: what was assumed, for the report, or "".
    """

    low: float
    high: float
    known: bool
    inferred: bool
    note: str = ""


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
            return RewardRange(lo, hi, True, False)
        note = f"reward range [{lo}, {hi}] is empty; "
    else:
        note = ""
    lo, hi = _observed_reward_range(run)
    if lo < 0.0 or hi > 1.0:
        lo, hi = min(0.0, lo), max(1.0, hi)
        return RewardRange(
            lo,
            hi,
            False,
            True,
            note + f"reward range unknown: taken from the rewards seen, [{lo:g}, {hi:g}]",
        )
    return RewardRange(0.0, 1.0, False, False, note + "reward range unknown: assumed [0, 1]")


def acr_series(run: Run, *, tau: float = DEFAULT_TAU) -> tuple[GroupSeries, RewardRange] | None:
    """The exact per-step ACR (and split, expected ACR) of a run with per-group rewards, in the
    run's :func:`reward_range`; None when the run has no per-group rewards."""
    if run.groups is None or run.groups.n_groups == 0:
        return None
    rr = reward_range(run)
    return group_series(run.groups, tau=tau, r_min=rr.low, r_max=rr.high), rr


def _observed_reward_range(run: Run) -> tuple[float, float]:
    """Smallest and largest reward the run shows: exact from per-group rewards, else from the
    logged reward min/max, else from the mean reward rounded out to whole numbers; (0, 1) when
    nothing is known."""
    g = run.groups
    if g is not None and g.rewards.size and np.isfinite(g.rewards).any():
        return float(np.nanmin(g.rewards)), float(np.nanmax(g.rewards))
    lo_s, hi_s = run.series.get("reward_min"), run.series.get("reward_max")
    if _finite(lo_s) and _finite(hi_s):
        return float(np.nanmin(lo_s)), float(np.nanmax(hi_s))
    mean = run.series.get("reward_mean")
    if _finite(mean):
        return float(math.floor(np.nanmin(mean))), float(math.ceil(np.nanmax(mean)))
    return 0.0, 1.0


def _finite(x: np.ndarray | None) -> bool:
    return x is not None and bool(np.isfinite(x).any())

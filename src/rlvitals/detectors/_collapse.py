"""Shared machinery of the collapse family: episodes of a collapsed series, and the reward state.

An *episode* is a stretch of logged points where a series sits on the collapsed side of a
threshold for at least ``sustain`` points, preceded by a healthy stretch (a run that never had
a live signal is a setup problem, not a collapse). A run whose every logged point is totally
collapsed is one episode from its first step, however short the run.
"""

from __future__ import annotations

import math

import numpy as np

from rlvitals import advice
from rlvitals._median import median
from rlvitals._record import record
from rlvitals._text import rnd
from rlvitals._text import span_text as _span_text
from rlvitals.detectors.kit import (
    Span,
    compress,
    confidence,
    find_spans,
    long_run_sustain,
    median_in,
    median_where,
    rolling_median,
)
from rlvitals.vitals import Vitals

__all__ = [
    "GAP",
    "LOOKBACK",
    "MIN_PRE",
    "CollapseEpisode",
    "RewardState",
    "collapse_episodes",
    "episode_confidence",
    "episode_metrics",
    "episode_text",
    "median_in",
    "mitigations",
    "reward_state",
    "reward_std_ratio",
    "stretch",
]

GAP = 2
"""Largest run of off-threshold points bridged inside an episode (noise)."""
LOOKBACK = 25
"""Logged points before an onset whose median is the pre-onset level; the healthy stretch is
looked for up to twice as far back (a gradual decline may separate it from the onset)."""
MIN_PRE = 3
"""Healthy logged points (running median on the healthy side) needed before an onset."""
MAX_EPISODES = 3
"""Episodes reported per detector (the earliest ones)."""
SATURATION_MIN_PASS = 0.7
"""A collapse below this pass rate is never the run saturating (unless at the ceiling)."""
EXCESS_JUMP = 0.25
"""An excess-ACR rise into an episode below this means the pass rate explains the collapse."""
STD_RATIO_MIN = 0.7
"""reward_std / sqrt(p (1 - p)) keeping at least this share of its level: explained."""
P_FLOOR = 1e-4
"""Floor of p (1 - p) when normalising the reward std."""
KIND_SHARE = 0.6
"""Share of collapsed groups (or pass rate) that names the kind: too easy / too hard / flat."""
KIND_PASS = 0.85
"""Without the split: a pass rate at or above this is "too easy" (at or below 1 - it, "too hard")."""
MERGE_FRAC = 0.05
"""Spans separated by at most this share of the previous span's points are one episode."""
SMOOTH_PRE = 5
"""Running-median window of the healthy-stretch test before an onset."""
SMOOTH_ONSET = 3
"""Running-median window used when walking a gradual onset back to its midpoint."""


@record(frozen=True)
class CollapseEpisode:
    """One collapse episode of a series.

    Attributes:
        span: where it lies (indices into ``steps``/``x``, onset and end steps).
        steps, x: the compressed series (finite points) the span indexes.
        level: median of ``x`` inside the episode.
        pre: the level of the healthy stretch before the onset: median of the running median
            over the points on the healthy side (NaN for ``total``).
        total: True when every logged point of the run is totally collapsed.
    """

    span: Span
    steps: np.ndarray
    x: np.ndarray
    level: float
    pre: float
    total: bool = False

    @property
    def onset(self) -> int:
        return self.span.onset

    @property
    def end(self) -> int | None:
        return self.span.end

    @property
    def last_step(self) -> int:
        return int(self.steps[self.span.last])

    @property
    def n_steps(self) -> int:
        """Training steps covered by the episode (inclusive)."""
        return self.last_step - self.onset + 1

    @property
    def pre_first_step(self) -> int:
        return int(self.steps[max(0, self.span.first - LOOKBACK)])


def collapse_episodes(
    vitals: Vitals,
    name: str,
    *,
    collapsed: np.ndarray | None = None,
    low: bool,
    threshold: float,
    healthy: float,
    sustain: int,
    total_test=None,
    x: np.ndarray | None = None,
) -> list[CollapseEpisode]:
    """Collapse episodes of ``vitals.get(name)`` (or of ``x``, aligned on ``vitals.steps``).

    Args:
        low: True when collapse means *low* values (adv_std, reward_std), False for high (ACR).
        threshold: collapsed when ``x < threshold`` (low) or ``x >= threshold`` (high).
        healthy: the pre-onset median must be ``> healthy`` (low) or ``< healthy`` (high).
        sustain: logged points needed.
        total_test: ``f(x) -> bool array``, points that are *totally* collapsed; when every
            point is, the whole run is one episode (reported even for short runs).
    """
    series = vitals.get(name) if x is None else x
    steps, xs = compress(vitals.steps, series)
    n = xs.shape[0]
    if n == 0:
        return []
    if total_test is not None and bool(np.all(total_test(xs))):
        span = Span(0, n - 1, int(steps[0]), None, n)
        return [CollapseEpisode(span, steps, xs, float(median(xs)), math.nan, total=True)]
    if vitals.too_short or n < sustain + MIN_PRE:
        return []
    sustain = long_run_sustain(sustain, n)
    cond = (xs < threshold) if low else (xs >= threshold)
    out: list[CollapseEpisode] = []
    prev_end = -1
    for sp in _merge_long(find_spans(steps, cond, sustain=sustain, gap=GAP), steps):
        # The healthy stretch may lie before a gradual decline: look back twice as far and
        # take the healthiest running median there.
        lo = max(prev_end + 1, sp.first - 2 * LOOKBACK)
        pre_pts = xs[lo : sp.first]
        prev_end = sp.last
        if pre_pts.shape[0] < MIN_PRE:
            continue
        raw_good = (pre_pts > healthy) if low else (pre_pts < healthy)
        if int(raw_good.sum()) < MIN_PRE:  # cheap test first: most noise spans stop here
            continue
        sm = rolling_median(pre_pts, SMOOTH_PRE)
        good = sm > healthy if low else sm < healthy
        if int(good.sum()) < MIN_PRE:
            continue
        best = float(sm.max() if low else sm.min())
        level = float(median(xs[sp.first : sp.last + 1]))
        sp = _refine_onset(sp, steps, xs, lo, (best + level) / 2.0, low)
        pre = float(median(sm[good]))  # the healthy stretch's level
        out.append(CollapseEpisode(sp, steps, xs, level, pre))
        if len(out) >= MAX_EPISODES:
            break
    return out


def _merge_long(spans: list[Span], steps: np.ndarray) -> list[Span]:
    """Join spans separated by a short dip relative to the span before it (a long collapse
    with a few noisy points is one episode): at most ``MERGE_FRAC`` of its points."""
    out: list[Span] = []
    for sp in spans:
        if out:
            prev = out[-1]
            if sp.first - prev.last - 1 <= MERGE_FRAC * prev.n:
                out[-1] = Span(prev.first, sp.last, prev.onset, sp.end, prev.hits + sp.hits)
                continue
        out.append(sp)
    return out


def _refine_onset(
    sp: Span, steps: np.ndarray, xs: np.ndarray, lo: int, mid: float, low: bool
) -> Span:
    """Move a gradual episode's onset back to where the series crossed halfway between its
    pre-onset level and its collapsed level (an abrupt one stays where it is)."""
    sm = rolling_median(xs[lo : sp.last + 1], SMOOTH_ONSET)
    i = sp.first - lo
    while i > 0 and ((sm[i - 1] < mid) if low else (sm[i - 1] > mid)):
        i -= 1
    i0 = i + lo
    if i0 == sp.first:
        return sp
    return Span(i0, sp.last, int(steps[i0]), sp.end, sp.hits)


@record(frozen=True)
class RewardState:
    """Where the reward sat during an episode, relative to its range and to before the onset.

    Attributes:
        p_span: median pass rate (reward rescaled to [0, 1]) inside the episode; NaN if unknown.
        p_pre: median pass rate over the stretch before the onset.
        easy_share: share of collapsed groups that were solved by every completion (NaN when
            the split is unknown).
        hard_share: share solved by none; ``flat`` is the rest.
        excess_jump: rise of the excess ACR (observed - expected) into the episode; NaN when
            unknown. Near 0 when the pass rate explains the collapse.
        std_ratio: reward_std / sqrt(p (1 - p)) inside over before; NaN when unknown. Near 1
            when the reward variance shrank only because the pass rate went to an extreme.
    """

    p_span: float
    p_pre: float
    easy_share: float
    hard_share: float
    excess_jump: float = math.nan
    std_ratio: float = math.nan

    @property
    def known(self) -> bool:
        return not math.isnan(self.p_span)

    def saturated(self, ceiling: float, rise: float, easy_min: float) -> bool:
        """True when the collapse is the run saturating: mostly solved groups, the excess ACR
        (when known) not jumping, and the reward at the ceiling, or high and the collapse
        explained by the pass rate.

        Explained means: the excess ACR did not jump (when the ACR and G are known), else the
        reward std shrank no faster than sqrt(p (1 - p)), else the pass rate rose by ``rise``.
        """
        if not self.known:
            return False
        easy = self.easy_share if not math.isnan(self.easy_share) else self.p_span
        if easy < easy_min:
            return False
        if not math.isnan(self.excess_jump) and self.excess_jump >= EXCESS_JUMP:
            return False  # far more collapse than even a high pass rate explains
        if self.p_span >= ceiling:
            return True
        if self.p_span < SATURATION_MIN_PASS:
            return False
        if not math.isnan(self.excess_jump):
            return self.excess_jump < EXCESS_JUMP
        if not math.isnan(self.std_ratio):
            return self.std_ratio >= STD_RATIO_MIN
        return not math.isnan(self.p_pre) and self.p_span - self.p_pre >= rise

    def kind(self) -> str:
        """``too easy`` / ``too hard`` / ``flat`` / ``mixed`` (by the split), or by the reward."""
        e, h = self.easy_share, self.hard_share
        if not math.isnan(e):
            f = max(0.0, 1.0 - e - h)
            top = max(e, h, f)
            if top < KIND_SHARE:
                return "mixed"
            return "too easy" if top == e else ("too hard" if top == h else "flat")
        if not self.known:
            return "unknown"
        if self.p_span >= KIND_PASS:
            return "too easy"
        if self.p_span <= 1.0 - KIND_PASS:
            return "too hard"
        return "mixed"


def reward_state(vitals: Vitals, ep: CollapseEpisode) -> RewardState:
    """The :class:`RewardState` of ``ep`` from ``pass_rate``, the ACR split and excess ACR.

    Several detectors ask it of the same stretch; the answer is kept on the vitals (which do not
    change once computed), keyed by the stretch's steps.
    """
    memo = vitals.__dict__.setdefault("_reward_states", {})
    key = (ep.onset, ep.last_step, ep.pre_first_step)
    if key not in memo:
        memo[key] = _reward_state(vitals, ep)
    return memo[key]


def _reward_state(vitals: Vitals, ep: CollapseEpisode) -> RewardState:
    last = ep.last_step
    steps = vitals.steps
    inside = (steps >= ep.onset) & (steps <= last)
    before = (steps >= ep.pre_first_step) & (steps < ep.onset)
    p = vitals.get("pass_rate")
    p_span, p_pre = median_where(p, inside), median_where(p, before)
    easy = hard = math.nan
    acr, sa, sn = vitals.get("acr"), vitals.get("acr_solve_all"), vitals.get("acr_solve_none")
    if acr is not None and sa is not None and sn is not None:
        w = inside & np.isfinite(acr)
        tot = float(np.nansum(acr[w]))
        if tot > 0:
            easy = float(np.nansum(sa[w])) / tot
            hard = float(np.nansum(sn[w])) / tot
    ex = vitals.get("excess_acr")
    jump = (
        median_where(ex, inside) - median_where(ex, before)
        if vitals.evidence in ("groups", "zero_std_frac")
        else math.nan
    )
    ratio = reward_std_ratio(vitals, inside, before)
    return RewardState(p_span, p_pre, easy, hard, jump, math.nan if ratio is None else ratio)


def reward_std_ratio(vitals: Vitals, now: np.ndarray, before: np.ndarray) -> float | None:
    """The reward std normalised by the spread the pass rate allows, reward_std /
    sqrt(p (1 - p)), at steps ``now`` over steps ``before`` (medians; ``(T,)`` bool masks):
    near 1 when the reward variance shrank only because the pass rate went to an extreme.
    None when either series is missing or the level before is unknown or 0."""
    rs, p = vitals.get("reward_std"), vitals.get("pass_rate")
    if rs is None or p is None:
        return None
    span = vitals.reward_max - vitals.reward_min
    with np.errstate(invalid="ignore", divide="ignore"):
        rn = rs / (span * np.sqrt(np.clip(p * (1.0 - p), P_FLOOR, None)))
    a, b = median_where(rn, now), median_where(rn, before)
    return a / b if b > 0 else None


def stretch(vitals: Vitals, name: str, first: int, last: int) -> CollapseEpisode | None:
    """A :class:`CollapseEpisode` covering steps ``first..last`` of series ``name`` (for rules
    that find their stretches another way, like the paper's stall rule)."""
    steps, xs = compress(vitals.steps, vitals.get(name))
    idx = np.flatnonzero((steps >= first) & (steps <= last))
    if idx.size == 0:
        return None
    i0, i1 = int(idx[0]), int(idx[-1])
    end = None if i1 >= steps.shape[0] - 1 else int(steps[i1])
    sp = Span(i0, i1, int(steps[i0]), end, i1 - i0 + 1)
    pre = xs[max(0, i0 - LOOKBACK) : i0]
    return CollapseEpisode(
        sp,
        steps,
        xs,
        float(median(xs[i0 : i1 + 1])),
        float(median(pre)) if pre.size else math.nan,
    )


def episode_text(ep: CollapseEpisode) -> str:
    """``for 37 steps since step 112`` / ``from step 60 to 139 (80 steps)`` (:func:`span_text`)."""
    return _span_text(ep.onset, ep.end, ep.last_step, total=ep.total, points=ep.span.n)


def episode_confidence(ep: CollapseEpisode, sustain: int, base: float) -> float:
    """:func:`~rlvitals.detectors.kit.confidence` of an episode (``base`` when it is total)."""
    return base if ep.total else confidence(ep.span.n, sustain, base=base)


def episode_metrics(ep: CollapseEpisode) -> dict[str, float | int | None]:
    """The numbers every collapse finding carries."""
    return {
        "onset_step": ep.onset,
        "end_step": ep.end,
        "steps": ep.n_steps,
        "points": ep.span.n,
        "level": rnd(ep.level),
        "pre_level": rnd(ep.pre),
    }


def mitigations(vitals: Vitals) -> list[str]:
    """The collapse family's mitigations, in the trainer's terms, leaving out what the run
    already does (AVSPO on, zero-variance groups already filtered)."""
    t = vitals.trainer
    out = []
    if vitals.adv_scale == "virtual":
        out.append(
            "AVSPO is already on: its virtual samples keep collapsed groups teaching, so what is "
            "left to change is the prompt set or the group size"
        )
    else:
        out.append("keep collapsed groups teaching with " + advice.mitigation("avspo", t))
    if vitals.run.manifest.filters_zero_var:
        out.append(
            "zero-variance groups are already filtered out: their rollouts are generated and "
            "thrown away (wasted compute); fix the prompt set instead"
        )
    else:
        out.append(advice.mitigation("dynamic_sampling", t))
    out.append(advice.set_knob("group_size", t, "raise"))
    return out

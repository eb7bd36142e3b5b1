"""Saturation: the ACR rose because the policy solves the prompt set — success, and a hint.

## What is happening
As a run learns its prompts, more groups are solved by every completion. Those groups are
collapsed (all rewards equal) and teach nothing, so the ACR rises honestly with the reward.
This is not a failure, but every further step on this prompt set buys less: it is the moment
to add harder prompts.

## What it looks like in the recording
`reward_mean` climbs toward the maximum reward; the ACR climbs with it, and the collapsed groups
are mostly solved ones (`acr_solve_all`). The rise is gradual and matches the expected collapse
for the pass rate.

## How the detector decides
Over the last :knob:`tail` of the run's logged points (at least :knob:`min_points`), the median
pass rate (reward rescaled to [0, 1]) must be at or above :knob:`pass_rate_min`, the median
ACR at or above :knob:`acr_min`, and at least :knob:`easy_share` of the collapsed groups
solved ones (when the split is known). The rise must also be explained by the pass rate:
compared with the run's first quarter, the excess ACR (observed - expected) rose by less than
0.25, or (below a pass rate of :knob:`ceiling`, when the excess is unknown) the reward std normalised by
sqrt(p (1 - p)) kept 70% of its level — otherwise the groups collapsed faster than the reward rose, which is a collapse
(DEGENERATE_GROUPS), not saturation. The onset is the step from which the windowed ACR stayed
at or above :knob:`acr_min` to the end. Reported at info level: it never fails a CI run.

## What to try
- Add harder prompts, or filter out prompts the policy now always solves.
- Or stop: more steps on a saturated set mostly burn compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rlvitals import advice
from rlvitals.detectors._collapse import EXCESS_JUMP, P_FLOOR, STD_RATIO_MIN
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import compare, compress, rnd
from rlvitals.vitals import Vitals

TAIL = 0.2
MIN_POINTS = 10
PASS_RATE_MIN = 0.8
ACR_MIN = 0.5
EASY_SHARE = 0.6
CONFIDENCE = 0.8
CEILING = 0.9


@register
class Saturation(Detector):
    __doc__ = __doc__
    id = "SATURATION"
    severity = Severity.INFO
    family = "collapse"
    key_metrics = ("acr", "acr_solve_all", "reward_mean")

    @dataclass(frozen=True)
    class Knobs:
        #: Share of the run's logged points (its end) that is judged.
        tail: float = TAIL
        #: ... but at least this many points.
        min_points: int = MIN_POINTS
        #: Median pass rate over the tail at or above this.
        pass_rate_min: float = PASS_RATE_MIN
        #: Median ACR over the tail at or above this.
        acr_min: float = ACR_MIN
        #: Share of collapsed groups solved by every completion, when the split is known.
        easy_share: float = EASY_SHARE
        #: Pass rate at or above which the rise needs no further explanation (at the ceiling).
        ceiling: float = CEILING

    def needs(self, vitals: Vitals) -> str | None:
        if not (vitals.has("acr") and vitals.has("pass_rate")):
            return "needs the ACR and reward_mean"
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        k = self.knobs
        if not (vitals.has("acr") and vitals.has("pass_rate")) or vitals.batch_trap:
            return []
        steps, acr = compress(vitals.steps, vitals.get("acr"))
        n = acr.shape[0]
        if n < k.min_points or vitals.too_short:
            return []
        m = max(k.min_points, round(n * k.tail))
        first = int(steps[n - m])
        tail = vitals.steps >= first
        p = vitals.get("pass_rate")[tail]
        p = p[np.isfinite(p)]
        if p.size == 0:
            return []
        p_tail = float(np.median(p))
        a_tail = float(np.median(acr[n - m :]))
        if p_tail < k.pass_rate_min or a_tail < k.acr_min:
            return []
        metrics = {"acr": rnd(a_tail), "pass_rate": rnd(p_tail)}
        easy_txt = ""
        sa = vitals.get("acr_solve_all")
        if sa is not None:
            tot = float(np.nansum(vitals.get("acr")[tail]))
            easy = float(np.nansum(sa[tail])) / tot if tot > 0 else 0.0
            if easy < k.easy_share:
                return []
            metrics["easy_share"] = rnd(easy)
            easy_txt = f", {easy:.0%} of collapsed groups solved by every completion"
        if not _explained(vitals, tail, steps[n // 4], p_tail >= k.ceiling):
            return []  # the ACR rose more than the pass rate explains: a collapse, not this
        w = vitals.get("acr_windowed")
        onset = first
        if w is not None:
            ws, wv = compress(vitals.steps, w)
            below = np.flatnonzero(wv < k.acr_min)
            onset = (
                int(ws[below[-1] + 1])
                if below.size and below[-1] + 1 < ws.size
                else int(ws[0] if not below.size else first)
            )
        msg = (
            f"ACR {compare(a_tail, '>=', k.acr_min)} with pass rate "
            f"{compare(p_tail, '>=', k.pass_rate_min)} over the last {m} logged steps{easy_txt}: "
            "the run is saturating its prompt set"
        )
        return [
            self.finding(
                msg,
                onset_step=onset,
                end_step=None,
                confidence=CONFIDENCE,
                evidence=vitals.evidence,
                metrics=metrics,
                series=["acr", "pass_rate", "acr_solve_all"],
                thresholds={"acr": k.acr_min, "pass_rate": k.pass_rate_min},
                actions=[
                    "add harder prompts, or filter prompts the policy always solves ("
                    + advice.mitigation("dynamic_sampling", vitals.trainer)
                    + ")",
                    "or stop training: more steps on a saturated set mostly burn compute",
                ],
            )
        ]


def _explained(vitals: Vitals, tail: np.ndarray, early_end: int, at_ceiling: bool) -> bool:
    """True when the tail's ACR is explained by its pass rate, compared with the run's first
    quarter: the excess ACR did not jump, or (below the ceiling) the normalised reward std kept
    its level."""
    early = vitals.steps <= early_end

    def med(x: np.ndarray | None, where: np.ndarray) -> float:
        if x is None:
            return float("nan")
        w = where & np.isfinite(x)
        return float(np.median(x[w])) if w.any() else float("nan")

    ex = vitals.get("excess_acr")
    jump = med(ex, tail) - med(ex, early)
    if jump == jump:
        return jump < EXCESS_JUMP
    if at_ceiling:
        return True
    rs, p = vitals.get("reward_std"), vitals.get("pass_rate")
    if rs is not None and p is not None:
        span = vitals.reward_max - vitals.reward_min
        with np.errstate(invalid="ignore", divide="ignore"):
            rn = rs / (span * np.sqrt(np.clip(p * (1.0 - p), P_FLOOR, None)))
        a, b = med(rn, tail), med(rn, early)
        if b > 0:
            return a / b >= STD_RATIO_MIN
    return True

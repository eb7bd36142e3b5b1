"""ACR stall: the Advantage Collapse Rate stayed above 0.35 for more than 50 steps (paper rule).

## What is happening
He et al. (ICML 2026, "Advantage Collapse in Group Relative Policy Optimization") found that
when more than about a third of the groups are collapsed for more than 50 consecutive steps,
policy improvement has stalled: too little of each batch carries a learning signal to move the
policy, and the reward stops improving.

## What it looks like in the recording
The ACR (per-group rewards, TRL `frac_reward_zero_std`, or the share of zero advantages) sits
above 0.35 step after step, while `reward_mean` goes flat below the ceiling. Evaluation accuracy
stops improving over the same stretch.

## How the detector decides
The ACR is smoothed with a centred running median over :knob:`smooth` logged points (single
noisy steps neither make nor break a stall); the paper's rule (`rlvitals.signal.stall_spans`)
then finds stretches above :knob:`stall_acr` lasting more than :knob:`stall_steps` training
steps. A stretch is not a stall when the reward is still improving — the pass rate (reward
rescaled to [0, 1]) over its last fifth exceeds the first fifth by at least :knob:`improve_min`
(a too-hard start that is being learned) — or when the reward is at the ceiling (pass rate at
least :knob:`ceiling`: saturation, see SATURATION). Without a logged reward the paper's rule is
applied as is, at lower confidence.

## What to try
- Rebalance the prompt set by the split: harder prompts when groups are all solved, a curriculum
  or easier prompts when they all fail.
- Keep collapsed groups teaching with AVSPO (`rlvitals.estimators` `avspo`; TRL:
  `pip install 'rlvitals[trl]'`) — the paper reports ACR falling 58-63% relative to GRPO.
- Filter zero-variance groups and resample (DAPO dynamic sampling), or raise the group size G.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from rlvitals.detectors._collapse import fmt
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.signal import STALL_ACR, STALL_STEPS, stall_spans
from rlvitals.vitals import Vitals
from rlvitals.vitals.spans import compress, rolling_median

SMOOTH = 5
IMPROVE_MIN = 0.05
CEILING = 0.9
EDGE_FRACTION = 0.2
CONFIDENCE = 0.8
NO_REWARD_CONFIDENCE = 0.5
MAX_SPANS = 3


@register
class AcrStall(Detector):
    __doc__ = __doc__
    id = "ACR_STALL"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("acr", "reward_mean")

    @dataclass(frozen=True)
    class Knobs:
        #: ACR above this counts toward a stall (paper: 0.35).
        stall_acr: float = STALL_ACR
        #: A stall lasts more than this many training steps (paper: 50).
        stall_steps: int = STALL_STEPS
        #: Logged points of the centred running median applied to the ACR first.
        smooth: int = SMOOTH
        #: Pass-rate gain (last fifth of the stretch over the first fifth) that means "still
        #: improving", not stalled.
        improve_min: float = IMPROVE_MIN
        #: Pass rate at or above which the reward is at the ceiling (saturation, not a stall).
        ceiling: float = CEILING

    def needs(self, vitals: Vitals) -> str | None:
        if not vitals.has("acr"):
            return "needs the ACR: per-group rewards, frac_reward_zero_std or adv_zero_frac"
        return None

    def check(self, vitals: Vitals) -> list[Finding]:
        if not vitals.has("acr") or vitals.batch_trap:
            return []
        k = self.knobs
        steps, acr = compress(vitals.steps, vitals.get("acr"))
        if acr.size < 2:
            return []
        smooth = rolling_median(acr, k.smooth)
        out: list[Finding] = []
        n = int(steps.shape[0])
        for first, last in stall_spans(smooth, steps, threshold=k.stall_acr,
                                       min_steps=k.stall_steps):
            f = self._judge(vitals, steps, acr, first, last, n)
            if f is not None:
                out.append(f)
            if len(out) >= MAX_SPANS:
                break
        return out

    def _judge(self, vitals, steps, acr, first, last, n) -> Finding | None:
        k = self.knobs
        inside = (steps >= first) & (steps <= last)
        level = float(np.median(acr[inside]))
        gain, p_mid = _reward_gain(vitals, first, last)
        conf = CONFIDENCE
        if math.isnan(gain):
            conf = NO_REWARD_CONFIDENCE
        else:
            if gain >= k.improve_min or p_mid >= k.ceiling:
                return None
        ongoing = last >= int(steps[n - 1])
        length = last - first + 1
        msg = (
            f"ACR {fmt(level)} > {fmt(k.stall_acr)} for {length} steps "
            f"(> {k.stall_steps}) {'since' if ongoing else 'from'} step {first}"
            + ("" if ongoing else f" to {last}")
        )
        if not math.isnan(gain):
            msg += f"; pass rate {fmt(p_mid)}, change over the stretch {gain:+.2f}"
        metrics = {
            "acr": round(level, 4),
            "threshold": k.stall_acr,
            "steps": length,
            "min_steps": k.stall_steps,
            "pass_rate": None if math.isnan(p_mid) else round(p_mid, 4),
            "pass_rate_gain": None if math.isnan(gain) else round(gain, 4),
        }
        return self.finding(
            msg,
            onset_step=first,
            end_step=None if ongoing else last,
            confidence=conf,
            evidence=vitals.evidence,
            metrics=metrics,
            actions=[
                "rebalance the prompt set: harder prompts if groups are all solved, a "
                "curriculum if they all fail",
                "keep collapsed groups teaching with AVSPO: rlvitals.estimators 'avspo' "
                "(TRL: pip install 'rlvitals[trl]')",
                "filter zero-variance groups and resample (DAPO dynamic sampling), or raise G",
            ],
        )


def _reward_gain(vitals: Vitals, first: int, last: int) -> tuple[float, float]:
    """(pass rate of the last fifth - first fifth, median pass rate) over ``first..last``."""
    p = vitals.get("pass_rate")
    if p is None:
        return math.nan, math.nan
    keep = (vitals.steps >= first) & (vitals.steps <= last) & np.isfinite(p)
    v = p[keep]
    if v.size < 2:
        return math.nan, math.nan
    m = max(1, round(v.size * EDGE_FRACTION))
    return float(np.median(v[-m:]) - np.median(v[:m])), float(np.median(v))

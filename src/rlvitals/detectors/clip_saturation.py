"""Clip saturation: a large share of tokens hits the PPO clip range on every update.

## What is happening
The clipped surrogate objective stops the gradient of a token once its importance ratio leaves
``[1 - eps, 1 + eps]``. A few clipped tokens are normal when a rollout batch is reused for several
updates. When a large share is clipped, most tokens contribute no gradient: the policy moves so far
per update (learning rate, PPO epochs, stale rollouts, a rollout engine whose log-probabilities
disagree with the trainer's) that the trust region is binding everywhere. Learning slows to what
the few unclipped tokens carry, and the run is one step away from instability.

## What it looks like in the recording
`clip_frac` (TRL `clip_ratio/region_mean`, veRL `actor/pg_clipfrac`) climbs from near zero and
stays high; `ppo_kl` and `kl` usually grow with it. When only the lower and upper parts are logged
(`clip_frac_low`, `clip_frac_high`) their sum is used.

## How the detector decides
The clip fraction, smoothed by a centred rolling median over :knob:`smooth` points, must stay above
:knob:`saturated_above` for :knob:`sustain` consecutive logged points to start an episode; the
episode ends when it stays below :knob:`release_below` for as long. Runs with fewer than
:knob:`min_points` values are not judged.

## What to try
- Lower the learning rate, or use fewer PPO epochs / mini-batches per rollout batch.
- Check that rollout and training log-probabilities agree (same precision, same sampling
  parameters); use truncated importance sampling if an inference engine generates the rollouts.
- Widen the clip range only with care (DAPO clip-higher raises eps_high to ~0.28, not more).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import (
    Points,
    confidence,
    fmt,
    hysteresis,
    points,
    rnd,
    rolling_median,
)

SATURATED_ABOVE = 0.2
"""Smoothed clip fraction above this starts an episode. Calibrated on the corpus: 7/7 clip failures
(35% clipped) found from 0.05 to 0.3, 6/7 at 0.4, 0/7 at 0.8; silent down to 0.05 on the 48 corpus,
9 zoo dev and 1 real healthy runs (zoo dev and real logs have no clip condition to count a hit)."""
RELEASE_BELOW = 0.1
"""An episode ends when the smoothed clip fraction stays below this. Not calibrated: a design choice
(half the start gate); the corpus (7/7), zoo dev and real logs give the same findings from 0.025 to
0.4."""
SUSTAIN = 5
"""Consecutive logged points needed to start (or end) an episode. Calibrated on the corpus: 7/7
found from 1 to 10, 5/7 at 20; silent on healthy zoo dev, real and corpus runs at every value."""
SMOOTH = 3
"""Window (logged points) of the centred rolling median applied to the clip fraction. Not
calibrated: a design choice; corpus (7/7), zoo dev and real logs findings are the same from 1 to
12."""
MIN_POINTS = 10
"""Fewest logged values needed to judge a run. Not calibrated: a design choice; corpus, zoo dev and
real logs findings are the same from 2 to 40."""
MAX_EPISODES = 3


@register
class ClipSaturation(Detector):
    id = "CLIP_SATURATION"
    severity = Severity.WARN
    family = "clip"
    key_metrics = ("clip_frac", "clip_frac_low", "clip_frac_high")

    @record(frozen=True)
    class Knobs:
        #: Smoothed clip fraction above this starts an episode.
        saturated_above: float = SATURATED_ABOVE
        #: An episode ends when the smoothed clip fraction stays below this.
        release_below: float = RELEASE_BELOW
        #: Consecutive logged points needed to start (or end) an episode.
        sustain: int = SUSTAIN
        #: Window (logged points) of the centred rolling median applied to the clip fraction.
        smooth: int = SMOOTH
        #: Fewest logged values needed to judge a run.
        min_points: int = MIN_POINTS

    def needs(self, vitals) -> str | None:
        k = self.knobs
        clip = _clip_points(vitals)
        n = max(k.min_points, k.sustain)
        if clip is not None and clip.n >= n:
            return None
        what = "needs clip_frac, or clip_frac_low and clip_frac_high"
        if clip is None:
            return f"{what}: not logged"
        return f"{what}: too few points ({clip.n} logged, {n}+ needed)"

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        clip = _clip_points(vitals)
        if clip is None or clip.n < max(k.min_points, k.sustain):
            return []
        smooth = rolling_median(clip.values, k.smooth, edges="pad")
        found = hysteresis(
            clip,
            smooth > k.saturated_above,
            lambda _i: smooth < k.release_below,
            k.sustain,
            MAX_EPISODES,
        )
        out = []
        for ep in found:
            frac = ep.median(smooth)
            msg = (
                f"{clip.name} {fmt(frac)} > {fmt(k.saturated_above)} for {ep.n} logged points "
                f"since step {ep.onset}" + ("" if ep.end is None else f", until step {ep.end}")
            )
            out.append(
                self.finding(
                    msg,
                    onset_step=ep.onset,
                    end_step=ep.end,
                    confidence=confidence(ep.n, k.sustain, margin=frac / k.saturated_above - 1),
                    evidence=clip.name,
                    series=["clip_frac", "clip_frac_low", "clip_frac_high"],
                    thresholds={"clip_frac": k.saturated_above},
                    metrics={
                        "clip_frac": rnd(frac),
                        "clip_frac_threshold": k.saturated_above,
                        "points": ep.n,
                    },
                    actions=_actions(vitals.trainer),
                )
            )
        return out


def _actions(t: str | None) -> list[str]:
    return [
        f"lower {advice.knob('learning_rate', t)}, or use fewer PPO epochs / mini-batches per "
        f"rollout batch ({advice.knob('ppo_epochs', t)})",
        "check that rollout and training log-probs agree (precision, sampling parameters)",
        f"widen the clip range only with care ({advice.knob('clip_higher', t)})",
    ]


def _clip_points(vitals) -> Points | None:
    """``clip_frac``, else ``clip_frac_low + clip_frac_high`` on the steps that log both."""
    p = points(vitals, "clip_frac")
    if p is not None:
        return p
    lo, hi = vitals.get("clip_frac_low"), vitals.get("clip_frac_high")
    if lo is None or hi is None:
        return None
    total = np.asarray(lo, dtype=np.float64) + np.asarray(hi, dtype=np.float64)
    mask = np.isfinite(total)
    if not mask.any():
        return None
    return Points("clip_frac_low+clip_frac_high", np.asarray(vitals.steps)[mask], total[mask])

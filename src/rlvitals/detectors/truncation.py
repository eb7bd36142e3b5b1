"""Truncation: a large share of completions is cut off at the generation length limit.

## What is happening
Completions that hit the length limit never finish their answer, so the verifier scores an
unfinished derivation: usually a zero, sometimes a lucky partial match. When many completions are
truncated the reward measures "fits in the budget" rather than "is correct", the gradient pushes on
tokens that never reached an answer, and every truncated completion costs the full generation
budget. Truncation from the first step means the limit is too small for the task; truncation that
appears later usually follows a length explosion.

## What it looks like in the recording
`truncation_frac` (TRL `completions/clipped_ratio`, veRL `response_length/clip_ratio`) rises from
near zero to a sizeable share; `length_max` sits at the limit and `length_mean` climbs towards it.

## How the detector decides
The truncation fraction, smoothed by a centred rolling median over :knob:`smooth` points, must
stay above :knob:`max_frac` for :knob:`sustain` consecutive logged points to start an episode; the
episode ends when it stays below :knob:`release_frac` for as long. An episode that starts at the
first logged point is reported as a setup problem (the limit is too small from the start).
Runs with fewer than :knob:`min_points` values are not judged.

## What to try
- Raise the generation length limit (`max_completion_length` / `data.max_response_length`) if the
  task needs longer answers.
- Mask truncated completions out of the loss, or give them an overlong penalty (DAPO), so the
  policy is not trained on unfinished answers.
- If truncation followed a length explosion, treat that first (see LENGTH_EXPLOSION).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import (
    confidence,
    fmt,
    hysteresis,
    needs,
    points,
    rnd,
    rolling_median,
)

MAX_FRAC = 0.1
"""Smoothed truncation fraction above this starts an episode. Calibrated on the zoo dev runs and
real logs: real runs without a length condition truncate at most 2.7% (smoothed), the real runaways
51-100% at their peak, zoo RUNAWAY_LENGTH and LENGTH_LIMIT runs 80-100%, zoo healthy 0%; 16/16 zoo,
6/7 real and 3/3 corpus from 0.025 to 0.4, never a healthy or 'not' run."""
RELEASE_FRAC = 0.05
"""An episode ends when the smoothed fraction stays below this. Not calibrated: a design choice
(half the start gate); zoo dev, real logs and corpus findings are the same from 0.0125 to 0.2."""
SUSTAIN = 5
"""Consecutive logged points needed to start (or end) an episode. Calibrated on the real logs: at 1
a 'not' log fires; 2 to 10 give the same findings; at 20 the 10- and 14-row W&B runaways go
unreported (4/7)."""
SMOOTH = 3
"""Window (logged points) of the centred rolling median applied to the fraction. Not calibrated: a
design choice; zoo dev, real logs and corpus findings are the same from 1 to 12."""
MIN_POINTS = 10
"""Fewest logged values needed to judge a run. Calibrated on the real logs: the shortest real
runaway logs have 10 and 14 rows; at 15 they are not judged (4/7)."""
MAX_EPISODES = 3


@register
class Truncation(Detector):
    id = "TRUNCATION"
    severity = Severity.WARN
    family = "length"
    key_metrics = ("truncation_frac", "length_max")

    @record(frozen=True)
    class Knobs:
        #: Smoothed truncation fraction above this starts an episode.
        max_frac: float = MAX_FRAC
        #: An episode ends when the smoothed fraction stays below this.
        release_frac: float = RELEASE_FRAC
        #: Consecutive logged points needed to start (or end) an episode.
        sustain: int = SUSTAIN
        #: Window (logged points) of the centred rolling median applied to the fraction.
        smooth: int = SMOOTH
        #: Fewest logged values needed to judge a run.
        min_points: int = MIN_POINTS

    def needs(self, vitals) -> str | None:
        k = self.knobs
        return needs(vitals, ["truncation_frac"], max(k.min_points, k.sustain))

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        tr = points(vitals, "truncation_frac")
        if tr is None or tr.n < max(k.min_points, k.sustain):
            return []
        smooth = rolling_median(tr.values, k.smooth, edges="pad")
        found = hysteresis(
            tr, smooth > k.max_frac, lambda _i: smooth < k.release_frac, k.sustain, MAX_EPISODES
        )
        lmax = points(vitals, "length_max")
        limit = None if lmax is None else float(np.max(lmax.values))
        out = []
        for ep in found:
            frac = ep.median(smooth)
            from_start = ep.first == 0
            msg = (
                f"truncation_frac {fmt(frac)} > {fmt(k.max_frac)} for {ep.n} logged points "
                + (
                    "from the first step (limit too small for the task?)"
                    if from_start
                    else f"since step {ep.onset}"
                )
                + ("" if ep.end is None else f", until step {ep.end}")
            )
            metrics = {
                "truncation_frac": rnd(frac),
                "truncation_frac_threshold": k.max_frac,
                "from_start": from_start,
            }
            if limit is not None:
                msg += f"; length limit {fmt(limit)}"
                metrics["length_limit"] = rnd(limit)
            out.append(
                self.finding(
                    msg,
                    onset_step=ep.onset,
                    end_step=ep.end,
                    confidence=confidence(ep.n, k.sustain, margin=frac / k.max_frac - 1),
                    evidence="truncation_frac",
                    series=["truncation_frac", "length_max"],
                    thresholds={"truncation_frac": k.max_frac},
                    metrics=metrics,
                    actions=_actions(vitals.trainer),
                )
            )
        return out


def _actions(t: str | None) -> list[str]:
    return [
        advice.set_knob("length_limit", t, "raise") + " if the task needs longer answers",
        f"mask truncated completions out of the loss, or add an overlong penalty: "
        f"{advice.knob('mask_truncated', t)}",
        "if a length explosion came first, treat that (LENGTH_EXPLOSION)",
    ]

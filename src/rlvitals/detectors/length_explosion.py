"""Completion length exploded: completions suddenly got much longer than they had been.

## What is happening
The mean completion length jumped to well above its recent level within a few logged steps. Slow
length growth is normal in reasoning RL (the policy learns to think longer); a sudden jump is not.
It usually means the policy found that longer outputs pay (a length bias in the reward or in the
loss aggregation: sequence-mean losses reward long wrong answers less harshly), or it started
repeating itself until the length limit. Long completions cost generation time, get truncated, and
truncated completions earn noisy or zero rewards.

## What it looks like in the recording
`length_mean` (TRL `completions/mean_length`, veRL `response_length/mean`) is flat or drifting,
then jumps by half or more within a few steps; `truncation_frac` and `step_time` jump with it and
`length_max` sits at the generation limit.

## How the detector decides
Each logged mean length, smoothed by a centred rolling median over :knob:`smooth` points, is
compared with its baseline: the median of the :knob:`baseline_points` logged values before it
(fewer early in the run; a point needs :knob:`min_history` of them). An episode starts when the
smoothed length stays above :knob:`jump_ratio` times the baseline for :knob:`sustain` consecutive
points, and ends when the length falls back below :knob:`recover_ratio` times the baseline frozen
at the onset. Gradual
growth never fires: the baseline moves with it. The length limit (the largest `length_max`) and
the truncation fraction are reported beside the numbers when the run logs them.

## What to try
- Look at completions from just after the onset: repetition loops point at sampling (raise the
  repetition penalty, check the stop tokens and the EOS handling).
- Use a token-level loss aggregation (DAPO / Dr. GRPO) instead of a per-sequence mean, which
  favours long wrong answers.
- Add an overlong penalty or soft length shaping (DAPO), or mask truncated completions out of the
  loss.
- Check the reward for a length bias (e.g. partial credit for any long derivation).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._median import median
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
    trailing_median,
)

BASELINE_POINTS = 20
"""Logged points before each point whose median is its baseline length. Calibrated on the zoo dev
runs and real logs: 16/16 zoo sign runs and the real runaway (211 -> 618 tokens) from 10 to 80; at 5
the baseline follows the rise (9/16 zoo, 0/6 real)."""
MIN_HISTORY = 8
"""Logged points of history a point needs before it can start an episode. Calibrated on the zoo dev
runs: 16/16 ENTROPY_BLOWUP and RUNAWAY_LENGTH runs from 2 to 16, 8/16 at 32; corpus 5/5 up to 16."""
JUMP_RATIO = 1.5
"""Smoothed mean length above this multiple of its baseline counts as an explosion. Calibrated on
the zoo dev runs and real logs: zoo sign runs reach 2.4-2.7x (16/16 at 1.5, 8/16 at 2.25), the real
runaway 2.7x; healthy zoo runs stay within 1.01x; at 1.125 2/48 corpus healthy runs and 2 real 'not'
logs fire. One real log marked 'not' RUNAWAY_LENGTH fires at every gate up to 3x: a curriculum whose
12-13 token answers grow to 41-54 tokens (a relative gate cannot tell that from a runaway; the
differential does)."""
RECOVER_RATIO = 1.2
"""An episode ends when the length is back below this multiple of the onset's baseline. Not
calibrated: a design choice; zoo dev, real logs and corpus findings are the same from 0.3 to 4.8."""
SUSTAIN = 3
"""Consecutive logged points needed to start (or end) an episode. Calibrated on the zoo dev runs and
real logs: 16/16 zoo sign runs and 5/5 corpus runs from 1 to 6, 1/16 at 12; the real curriculum log
above fires up to 5 and goes silent at 6. Not changed to 6: that would fit one log's episode length
and delay every live finding by three steps."""
SMOOTH = 3
"""Window (logged points) of the centred rolling median applied to the length. Not calibrated: a
design choice; zoo dev, real logs and corpus findings are the same from 1 to 12."""
MAX_EPISODES = 3


@register
class LengthExplosion(Detector):
    id = "LENGTH_EXPLOSION"
    severity = Severity.WARN
    family = "length"
    key_metrics = ("length_mean", "truncation_frac", "length_max")

    @record(frozen=True)
    class Knobs:
        #: Logged points of history a point needs before it can start an episode.
        min_history: int = MIN_HISTORY
        #: Logged points before each point whose median is its baseline length.
        baseline_points: int = BASELINE_POINTS
        #: Smoothed mean length above this multiple of its baseline counts as an explosion.
        jump_ratio: float = JUMP_RATIO
        #: An episode ends when the length is back below this multiple of the onset's baseline.
        recover_ratio: float = RECOVER_RATIO
        #: Consecutive logged points needed to start (or end) an episode.
        sustain: int = SUSTAIN
        #: Window (logged points) of the centred rolling median applied to the length.
        smooth: int = SMOOTH

    def needs(self, vitals) -> str | None:
        return needs(vitals, ["length_mean"], self.knobs.min_history + self.knobs.sustain)

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        length = points(vitals, "length_mean")
        if length is None or length.n < k.min_history + k.sustain:
            return []
        smooth = rolling_median(length.values, k.smooth, edges="pad")
        base = trailing_median(length.values, k.baseline_points)
        start = (smooth > k.jump_ratio * base) & (base > 0)
        start[: k.min_history] = False
        found = hysteresis(
            length, start, lambda i: smooth < k.recover_ratio * base[i], k.sustain, MAX_EPISODES
        )
        lmax = points(vitals, "length_max")
        limit = None if lmax is None else float(np.max(lmax.values))
        trunc = points(vitals, "truncation_frac")
        out = []
        for ep in found:
            b = float(base[ep.first])
            high = ep.median(smooth)
            msg = (
                f"length_mean {fmt(high)} > {fmt(k.jump_ratio)}x its baseline {fmt(b)} "
                f"since step {ep.onset}" + ("" if ep.end is None else f" (until step {ep.end})")
            )
            metrics = {
                "length_baseline": rnd(b),
                "length_mean": rnd(high),
                "length_mean_threshold": rnd(k.jump_ratio * b),
                "jump_ratio": k.jump_ratio,
            }
            if limit is not None:
                msg += f"; length limit {fmt(limit)}"
                metrics["length_limit"] = rnd(limit)
            t = _median_between(trunc, ep.onset, length.steps[ep.last])
            if t is not None:
                msg += f"; truncated {fmt(t)}"
                metrics["truncation_frac"] = rnd(t)
            out.append(
                self.finding(
                    msg,
                    onset_step=ep.onset,
                    end_step=ep.end,
                    confidence=confidence(ep.n, k.sustain, margin=high / (k.jump_ratio * b) - 1),
                    evidence="length_mean",
                    series=["length_mean", "truncation_frac"],
                    thresholds={"length_mean": k.jump_ratio * b},
                    metrics=metrics,
                    actions=_actions(vitals.trainer),
                )
            )
        return out


def _actions(t: str | None) -> list[str]:
    return [
        "read completions from just after the onset: repetition loops point at sampling or EOS "
        "handling",
        f"aggregate the loss per token: {advice.knob('loss_agg', t)}",
        f"add an overlong penalty or soft length shaping, or mask truncated completions: "
        f"{advice.knob('mask_truncated', t)}",
        "check the reward for a length bias",
    ]


def _median_between(p, first_step: int, last_step: int) -> float | None:
    if p is None:
        return None
    inside = p.between(first_step, last_step)
    return float(median(inside)) if inside.size else None

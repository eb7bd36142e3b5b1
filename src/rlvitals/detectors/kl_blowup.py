"""KL blew up: the policy is running away from its reference far faster than it had been.

## What is happening
The KL divergence between the policy and the reference model jumped to many times its recent
level within a few logged steps. Healthy runs drift away from the reference slowly and smoothly;
a blow-up means the updates became too large (learning rate, too many PPO epochs on stale data,
a bad batch, numerical trouble in the log-probabilities) and the policy is leaving the region where
its rewards and ratios can be trusted. Reward collapse, gibberish completions and gradient spikes
usually follow.

## What it looks like in the recording
`kl` (TRL `kl`, veRL `actor/kl_loss`) creeps up slowly, then shoots up within a handful of steps,
often by an order of magnitude; `grad_norm` spikes around the same step and `reward_mean` falls
afterwards.

## How the detector decides
Each logged KL value, smoothed by a centred rolling median over :knob:`smooth` points, is compared
with its baseline: the median of the :knob:`baseline_points` logged values before it (fewer early
in the run). The first :knob:`min_history` logged values are a warm-up: the KL starts at 0 (the
policy is its own reference) and grows fast over the first updates, so they neither start an
episode nor enter a baseline, and a point needs :knob:`sustain` values of history after them. An episode starts when the smoothed KL
stays above :knob:`jump_ratio` times the baseline, and above :knob:`min_kl` in absolute terms, for
:knob:`sustain` consecutive points. It ends when the KL falls back below :knob:`recover_ratio`
times the baseline frozen at the onset. A peak at or above :knob:`critical_kl` makes the finding critical.
Slow, steady KL growth never fires: the baseline moves with it.

## What to try
- Lower the learning rate, or warm it up for longer.
- Use fewer PPO epochs / mini-batches per rollout batch, or tighten the clip range.
- Raise the KL coefficient (beta), or add a KL term if the run has none.
- Check the steps around the onset for a bad batch, and the log-probabilities for NaN or
  mismatched rollout / training precision.
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
    trailing_median,
)

BASELINE_POINTS = 20
"""Logged points before each point whose median is its baseline KL. Calibrated on the zoo dev runs:
8/8 KL_BLOWUP runs from 10 to 80, 7/8 at 5 (the baseline follows the rise); no false finding at any
value."""
MIN_HISTORY = 8
"""Logged points of history a point needs before it can start an episode. Calibrated on the zoo dev
runs and real logs: 8/8 KL_BLOWUP runs from 4 to 16, 0/8 at 32; at 2 a real log (LENGTH_LIMIT,
SMALL_GROUPS) fires at step 13 on 0.05 over a 0.006 baseline."""
JUMP_RATIO = 5.0
"""Smoothed KL above this multiple of its baseline counts as blowing up. Calibrated on the zoo dev
runs and real logs: zoo KL_BLOWUP runs reach KL 4.6-9.0 and all 8 fire from 2.5 to 10 (6/8 at 20);
real KL peaks at 2-4x its first-20-point median (12x on one run that starts near 0, peak 0.026) and
stays silent down to 2.5, 5/15 fire at 1.25 (and 2/48 corpus healthy runs)."""
MIN_KL = 0.05
"""... and only when it is also above this absolute KL. Calibrated on the real logs: real KL peaks
are 0.003-0.15 and none fires from 0.0125 to 0.2; zoo dev KL_BLOWUP peaks (4.6-9.0) are far
above."""
RECOVER_RATIO = 2.0
"""An episode ends when the KL is back below this multiple of the onset's baseline. Not calibrated:
a design choice; zoo dev, real logs and corpus findings are the same from 0.5 to 8."""
SUSTAIN = 3
"""Consecutive logged points needed to start (or end) an episode. Calibrated on the zoo dev runs and
corpus: 8/8 zoo and 4/4 corpus KL runs from 1 to 6, none at 12; no false finding at any value."""
SMOOTH = 3
"""Window (logged points) of the centred rolling median applied to the KL. Not calibrated: a design
choice; zoo dev, real logs and corpus findings are the same from 1 to 12."""
CRITICAL_KL = 1.0
"""A peak KL at or above this makes the finding critical. Not calibrated: a design choice (KL 1 nat
per token is far past any trust region); the zoo dev KL_BLOWUP peaks are 4.6-9.0 and no real log
comes near (at most 0.15)."""
MAX_EPISODES = 3


@register
class KlBlowup(Detector):
    id = "KL_BLOWUP"
    severity = Severity.WARN
    family = "kl"
    key_metrics = ("kl",)

    @record(frozen=True)
    class Knobs:
        #: Logged points of history a point needs before it can start an episode.
        min_history: int = MIN_HISTORY
        #: Logged points before each point whose median is its baseline KL.
        baseline_points: int = BASELINE_POINTS
        #: Smoothed KL above this multiple of its baseline counts as blowing up.
        jump_ratio: float = JUMP_RATIO
        #: ... and only when it is also above this absolute KL.
        min_kl: float = MIN_KL
        #: An episode ends when the KL is back below this multiple of the onset's baseline.
        recover_ratio: float = RECOVER_RATIO
        #: Consecutive logged points needed to start (or end) an episode.
        sustain: int = SUSTAIN
        #: Window (logged points) of the centred rolling median applied to the KL.
        smooth: int = SMOOTH
        #: A peak KL at or above this makes the finding critical.
        critical_kl: float = CRITICAL_KL

    def needs(self, vitals) -> str | None:
        return needs(vitals, ["kl"], self.knobs.min_history + self.knobs.sustain)

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        kl = points(vitals, "kl")
        if kl is None or kl.n < k.min_history + k.sustain:
            return []
        smooth = rolling_median(kl.values, k.smooth, edges="pad")
        # The first min_history points are a warm-up: the KL starts at 0 (the policy is its
        # reference) and grows fast at first, so they neither start an episode nor enter the
        # baseline of a later point (0.005 -> 0.05 over the first steps is not a blow-up).
        w = k.min_history
        base = np.zeros_like(kl.values)
        base[w:] = np.maximum(trailing_median(kl.values[w:], k.baseline_points), 0.0)
        base[:w] = np.inf
        start = (smooth > k.jump_ratio * base) & (smooth > k.min_kl)
        start[: w + k.sustain] = False
        found = hysteresis(
            kl, start, lambda i: smooth < k.recover_ratio * base[i], k.sustain, MAX_EPISODES
        )
        out = []
        for ep in found:
            b = float(base[ep.first])
            peak = float(np.max(kl.values[ep.first : ep.last + 1]))
            ratio = float(smooth[ep.first]) / b if b > 0 else float("inf")
            level = max(k.jump_ratio * b, k.min_kl)
            critical = peak >= k.critical_kl
            msg = (
                f"kl {fmt(float(smooth[ep.first]))} > {fmt(k.jump_ratio)}x its baseline {fmt(b)} "
                f"at step {ep.onset}; peak {fmt(peak)}"
                + (f" >= {fmt(k.critical_kl)}" if critical else "")
                + ("" if ep.end is None else f"; lasted until step {ep.end}")
            )
            out.append(
                self.finding(
                    msg,
                    severity=Severity.CRITICAL if critical else self.severity,
                    onset_step=ep.onset,
                    end_step=ep.end,
                    confidence=confidence(
                        ep.n, k.sustain, margin=min(ratio, 1e9) / k.jump_ratio - 1
                    ),
                    evidence="kl",
                    series=["kl"],
                    thresholds={"kl": level},
                    metrics={
                        "kl_baseline": rnd(b),
                        "kl_at_onset": rnd(float(smooth[ep.first])),
                        "kl_peak": rnd(peak),
                        "kl_threshold": rnd(level),
                        "jump_ratio": k.jump_ratio,
                        "critical_kl": k.critical_kl,
                    },
                    actions=_actions(vitals.trainer),
                )
            )
        return out


def _actions(t: str | None) -> list[str]:
    return [
        f"lower {advice.knob('learning_rate', t)} or lengthen {advice.knob('warmup', t)}",
        f"use fewer PPO epochs / mini-batches per rollout batch ({advice.knob('ppo_epochs', t)}), "
        "or a tighter clip range",
        advice.set_knob("kl_coef", t, "raise") + ", or add a KL term if the run has none",
        "inspect the batches around the onset step; check log-probs for NaN or precision mismatch",
    ]

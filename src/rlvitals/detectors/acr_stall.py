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
It reads the ACR (per-group rewards, the trainer's zero-variance fraction or the share of zero
advantages); a run that logs none of them but its mean reward and G is judged on the expected
ACR P0 = p^G + (1 - p)^G at its pass rate instead (binary rewards; a too-hard stall only, at
a pass rate of at most 0.5: on the easy side SATURATION judges), said to be an estimate (a
lower bound: prompts of unequal difficulty collapse more often). The ACR is smoothed with a centred running
mean over :knob:`smooth` logged points; a stretch
starts above the threshold and lasts while the smoothed ACR stays within :knob:`hysteresis` below it
(hysteresis: sampling noise neither makes nor breaks a stall); the paper's rule
(`rlvitals.signal.stall_spans`) then keeps the stretches above :knob:`stall_acr` lasting more than :knob:`stall_steps` training
steps; the stall starts at the first logged step of the stretch whose own ACR is above the
threshold (the smoothing does not move it earlier). A stretch is not a stall when the reward is still improving — the pass rate (reward
rescaled to [0, 1]) gains at least :knob:`improve_min` over it (least-squares line)
(a too-hard start that is being learned) — or when the high ACR is the run saturating: the
reward at the ceiling (pass rate at least :knob:`ceiling`), or mostly-solved groups at a high
pass rate that explains the ACR (see SATURATION). A stall is a change: the (smoothed) ACR must
have jumped into the stretch by :knob:`jump_min` over its median of the 50 logged steps before (leaving
out the last 10, where the rise may have begun; a stretch that follows another within 50 logged
steps is the same stall and keeps its reference) — by 0.3 when no reward is logged, since a
saturating run's ACR also climbs; an ACR
that was already that high (small G makes collapse common) is reported at info level, and so is
a stretch from the very start of a run, unless the run never learned its way out and the ACR
sat at least :knob:`jump_min` above the threshold (a hard or small-G set-up, not a stall after learning).
The stretch's median ACR must itself be above the threshold.

## What to try
- Rebalance the prompt set by the split: harder prompts when groups are all solved, a curriculum
  or easier prompts when they all fail.
- Keep collapsed groups teaching with AVSPO — the paper reports ACR falling 58-63% relative to
  GRPO — or filter zero-variance groups and resample (DAPO dynamic sampling), or raise the
  group size G (the finding names the setting in the run's trainer).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rlvitals._median import median
from rlvitals._record import record
from rlvitals.detectors._collapse import mitigations, reward_state, stretch
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import bool_runs, compare, compress, fmt, rnd, rolling_mean
from rlvitals.signal import STALL_ACR, STALL_STEPS, stall_spans
from rlvitals.vitals import Vitals

SMOOTH = 9
"""Logged points of the centred running mean applied to the ACR first. Not calibrated: a design
choice (a ~10-step mean takes the sampling noise of one step out); the zoo dev runs, real logs and
ci corpus give the same findings for any value from 2 to 36."""
IMPROVE_MIN = 0.08
"""Pass-rate gain over a stretch (least-squares line) that means still improving. Calibrated on the
corpus: 8/8 labelled stalls found from 0.04 to 0.32, 5/8 at 0.02 (noise reads as improvement); zoo
dev (8/8 VERIFIER_CONSTANT runs, 0/9 healthy) and the real logs (silent on all 15) do not move over
that range."""
CEILING = 0.9
"""Pass rate at or above which a high ACR is saturation, not a stall. Calibrated on the corpus: 8/8
stalls found at 0.9 or above, 7/8 at 0.675 (a stall at a 0.7 pass rate is then excused as
saturation); zoo dev and real logs unchanged from 0.225 up (the SATURATION detector owns the
saturated runs)."""
MIN_GAIN_POINTS = 4
CONFIDENCE = 0.8
NO_REWARD_CONFIDENCE = 0.5
ESTIMATE_CONFIDENCE = 0.6
ESTIMATE_MAX_PASS = 0.5
"""On the estimated ACR, only a too-hard stall (pass rate at most this) is judged."""
MAX_SPANS = 3
SATURATION_RISE = 0.1
JUMP_LOOKBACK = 50
JUMP_SKIP = 10
JUMP_MIN = 0.15
"""Rise of the smoothed ACR into a stretch (over its median of the 50 logged steps before) needed
for a warning. Calibrated on the corpus: 8/8 stalls found from 0.0375 to 0.3, 4/8 at 0.6; zoo dev
(8/8 VERIFIER_CONSTANT, 0/9 healthy) and real logs (0/15) do not move over that range."""
JUMP_MIN_NO_REWARD = 0.3
MIN_PRE_POINTS = 3
HYSTERESIS = 0.1
"""A stretch lasts while the smoothed ACR stays above stall_acr minus this. Calibrated on the
corpus: 8/8 stalls found from 0.025 to 0.2, 4/8 at 0.4 (the stretch then swallows the healthy part
before it and the jump test fails); zoo dev and real logs unchanged over the whole sweep."""
SATURATION_EASY = 0.6


@register
class AcrStall(Detector):
    __doc__ = __doc__
    id = "ACR_STALL"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("acr", "reward_mean")

    @record(frozen=True)
    class Knobs:
        #: ACR above this counts toward a stall (paper: 0.35).
        stall_acr: float = STALL_ACR
        #: A stall lasts more than this many training steps (paper: 50).
        stall_steps: int = STALL_STEPS
        #: Logged points of the centred running mean applied to the ACR first.
        smooth: int = SMOOTH
        #: Pass-rate gain over the stretch (least-squares line) that means "still improving",
        #: not stalled.
        improve_min: float = IMPROVE_MIN
        #: Pass rate at or above which the reward is at the ceiling (saturation, not a stall).
        ceiling: float = CEILING
        #: A stretch lasts while the smoothed ACR stays above stall_acr minus this (noise dips
        #: do not end it).
        hysteresis: float = HYSTERESIS
        #: The ACR must have risen by at least this into the stretch (with reward_mean logged)
        #: for a warning; a run that was this collapsed before gets an info finding.
        jump_min: float = JUMP_MIN

    def needs(self, vitals: Vitals) -> str | None:
        if _series(vitals) is not None:
            return None
        what = "needs the ACR (per-group rewards, frac_reward_zero_std or adv_zero_frac)"
        if vitals.binary_rewards is False and vitals.group_size and vitals.has("pass_rate"):
            return f"{what}: not logged, and the rewards are not binary, so G and the mean reward cannot estimate it"
        return f"{what}, or reward_mean with the group size to estimate it: not logged"

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        name = _series(vitals)
        if name is None or vitals.batch_trap:
            return []
        k = self.knobs
        steps, acr = compress(vitals.steps, vitals.get(name))
        if acr.size < 2:
            return []
        smooth = rolling_mean(acr, k.smooth)
        out: list[Finding] = []
        n = int(steps.shape[0])
        # Hysteresis before the paper's rule: a stretch starts above stall_acr and lasts while
        # the smoothed ACR stays above stall_acr - HYSTERESIS (noise dips do not end it).
        above = np.zeros(n, dtype=bool)
        enter = smooth > k.stall_acr
        starts, ends = bool_runs(smooth > k.stall_acr - k.hysteresis)
        for a, b in zip(starts.tolist(), ends.tolist()):
            hit = np.flatnonzero(enter[a : b + 1])
            if hit.size:
                above[a + hit[0] : a + hit[-1] + 1] = True
        prev_last, ref = -(1 << 62), math.nan
        spans = []
        for a, b in zip(*bool_runs(above)):  # the paper's rule, run by run (cheap)
            if steps[b] - steps[a] + 1 <= k.stall_steps:
                continue
            spans += stall_spans(
                np.ones(b - a + 1), steps[a : b + 1], threshold=0.5, min_steps=k.stall_steps
            )
        for first, last in spans:
            i0 = int(np.searchsorted(steps, first))
            if i0 - prev_last > JUMP_LOOKBACK:
                # The level before the stretch, leaving out the last JUMP_SKIP points (the
                # stretch may be found a little after the ACR started rising). A stretch that
                # follows another closely is the same stall: it keeps the first one's reference.
                # The stretch began where the ACR left the healthy side (hysteresis).
                while i0 > 0 and smooth[i0 - 1] > k.stall_acr - k.hysteresis:
                    i0 -= 1
                lo, hi = max(0, i0 - JUMP_LOOKBACK), i0 - JUMP_SKIP
                before = smooth[lo:hi] if hi - lo >= MIN_PRE_POINTS else smooth[lo:i0]
                ref = float(median(before)) if before.size >= MIN_PRE_POINTS else math.nan
            prev_last = int(np.searchsorted(steps, last))
            f = self._judge(vitals, name, steps, acr, ref, first, last, n)
            if f is not None:
                out.append(f)
            if len(out) >= MAX_SPANS:
                break
        return out

    def _judge(self, vitals, name, steps, acr, ref, first, last, n) -> Finding | None:
        k = self.knobs
        inside = (steps >= first) & (steps <= last)
        level = float(median(acr[inside]))
        if level <= k.stall_acr:
            return None  # the hysteresis stretch hovered around the threshold, not above it
        ongoing = last >= int(steps[max(0, n - 1 - k.smooth // 2)])
        # The centred smoothing widens a stretch by up to half its window at each side: it
        # starts at the first logged step whose own ACR is above the threshold (and, once it
        # ended, ends at the last one), as `rlvitals acr` and the paper's rule read it.
        raw = np.flatnonzero(inside & (acr > k.stall_acr))
        if raw.size:
            first = int(steps[raw[0]])
            if not ongoing:
                last = int(steps[raw[-1]])
        gain, p_mid = _reward_gain(vitals, first, last)
        if name != "acr" and not p_mid <= ESTIMATE_MAX_PASS:
            return None  # an estimate is high at high pass rates too: SATURATION's to judge
        conf = CONFIDENCE
        severity = self.severity
        jump = level - ref
        why = ""
        if not math.isnan(gain):
            if gain >= k.improve_min or p_mid >= k.ceiling:
                return None
            ep = stretch(vitals, name, first, last)
            if ep is not None and reward_state(vitals, ep).saturated(
                k.ceiling, SATURATION_RISE, SATURATION_EASY
            ):
                return None  # high ACR explained by a high pass rate: SATURATION's job
        else:
            conf = NO_REWARD_CONFIDENCE
        if math.isnan(jump):
            # High from the start: a stall only if the run never learned its way out.
            run_gain, _ = _reward_gain(vitals, int(steps[0]), int(steps[-1]))
            if (
                math.isnan(run_gain)
                or run_gain >= k.improve_min
                or level < k.stall_acr + k.jump_min
            ):
                severity = Severity.INFO
                why = (
                    "; the ACR was this high from the start (a hard or small-G set-up), "
                    "not a stall after learning"
                )
        elif jump < (k.jump_min if not math.isnan(gain) else JUMP_MIN_NO_REWARD):
            severity = Severity.INFO
            why = (
                f"; the ACR was already {fmt(level - jump)} before (G = "
                f"{vitals.group_size or '?'} makes collapse common): not a new stall"
            )
        length = last - first + 1
        label = "ACR" if name == "acr" else "estimated ACR"
        msg = (
            f"{label} {compare(level, '>', k.stall_acr)} for {length} steps "
            f"(> {k.stall_steps}) {'since' if ongoing else 'from'} step {first}"
            + ("" if ongoing else f" to {last}")
        )
        if not math.isnan(gain):
            msg += f"; pass rate {fmt(p_mid)}, change over the stretch {_signed(gain)}"
        metrics = {
            "acr": rnd(level),
            "threshold": k.stall_acr,
            "steps": length,
            "min_steps": k.stall_steps,
            "pass_rate": rnd(p_mid),
            "pass_rate_gain": rnd(gain),
        }
        msg += why
        if math.isnan(gain):
            msg += "; reward_mean not logged"
        if name != "acr":
            msg += (
                f" (P0 = p^G + (1-p)^G at the pass rate with G = {vitals.group_size}: an "
                "estimate, the run logs no zero-std fraction)"
            )
            conf = min(conf, ESTIMATE_CONFIDENCE)
            metrics["estimated"] = "yes"
        return self.finding(
            msg,
            severity=severity,
            onset_step=first,
            end_step=None if ongoing else last,
            confidence=conf,
            evidence=vitals.evidence,
            metrics=metrics,
            series=[name, "pass_rate"],
            thresholds={name: k.stall_acr},
            actions=[
                "rebalance the prompt set: harder prompts if groups are all solved, a "
                "curriculum if they all fail",
                *mitigations(vitals),
            ],
        )


def _signed(x: float) -> str:
    """``+0.03`` / ``-0.12``; a change that rounds to zero is ``0.00``, never ``-0.00``."""
    return "0.00" if abs(x) < 0.005 else f"{x:+.2f}"


def _series(vitals: Vitals) -> str | None:
    """The ACR series to judge: the measured one, else the estimate from pass rate and G."""
    if vitals.has("acr"):
        return "acr"
    if (
        vitals.expected_acr_from == "estimate"
        and vitals.has("expected_acr")
        and vitals.binary_rewards is not False
    ):
        return "expected_acr"
    return None


def _reward_gain(vitals: Vitals, first: int, last: int) -> tuple[float, float]:
    """(pass-rate gain over ``first..last`` from a least-squares line, median pass rate)."""
    p = vitals.get("pass_rate")
    if p is None:
        return math.nan, math.nan
    keep = (vitals.steps >= first) & (vitals.steps <= last) & np.isfinite(p)
    v = p[keep]
    if v.size < MIN_GAIN_POINTS:
        return math.nan, math.nan
    t = vitals.steps[keep].astype(np.float64)
    t = t - t.mean()
    slope = float((t * (v - v.mean())).sum() / (t * t).sum())
    return slope * float(t[-1] - t[0]), float(median(v))

"""Advantages flattened: the policy gradient has (almost) nothing left to push on.

## What is happening
GRPO turns each group's rewards into advantages, A = (r - mean) / (std + eps). When a group's
rewards are all equal its advantages are all zero, and its completions cost generation but teach
nothing. When most groups go that way, the spread of the step's advantages collapses toward 0
and the policy stops learning, whatever the loss curve says (He et al., ICML 2026, "Advantage
Collapse in Group Relative Policy Optimization").

## What it looks like in the recording
`adv_std` (the standard deviation of all advantages of the step) sits near 1 with per-group
std scaling while the signal is alive, then falls toward 0 and stays there. `adv_zero_frac`
(share of completions with a zero advantage) climbs toward 1. veRL prints
`critic/advantages/max` and `critic/advantages/min` both 0. Without a KL term, a step in which
every advantage is zero has `loss` and `grad_norm` exactly 0.

## How the detector decides
It reads the best advantage series the run has: `adv_std` (logged, or recomputed from
per-group rewards), else `adv_zero_frac`, else veRL's advantage max - min, else steps with loss
and grad_norm exactly 0. For GRPO-normalised advantages the gates are absolute: a collapse is
:knob:`sustain` consecutive logged steps with `adv_std` below :knob:`collapse_below`, after a
healthy stretch whose median was above :knob:`healthy_early` (a run that never had usable
advantages is a setup problem, not a collapse). For other estimators (Dr. GRPO advantages are
about the reward std, not 1; batch-scaled ones are smaller) both gates are multiplied by the
run's own healthy level (the highest running median). `adv_zero_frac` uses the mirrored gates
(collapsed at or above 1 - :knob:`collapse_below`, healthy below 1 - :knob:`healthy_early`) and
corroborates an `adv_std` finding. Collapses are found in any window: each episode reports its
onset and, when the advantages came back, its end. An episode during which the reward sits at
the ceiling (pass rate 0.9 or more, mostly solved groups) is the run saturating and is left to
SATURATION. A run whose every logged step has all advantages zero is reported however short it
is; other runs under 30 steps are not judged.

## What to try
- Look at reward variance first (REWARD_STD_DEATH, DEGENERATE_GROUPS): if it is alive while the
  advantages are dead, the bug is in the reward→advantage plumbing (normalisation, a scaling
  wrapper, advantages overwritten or detached).
- Keep collapsed groups teaching with AVSPO: `rlvitals.estimators` (`avspo`), or the TRL trainer
  with a pluggable estimator (`pip install 'rlvitals[trl]'`).
- Filter zero-variance groups and resample (DAPO dynamic sampling), or raise the group size G.
- Rebalance the prompt set: harder prompts when groups are all solved, a curriculum when all fail.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlvitals.detectors._collapse import (
    Episode,
    confidence,
    episode_metrics,
    episodes,
    fmt,
    median_in,
    reward_state,
    span_text,
)
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.vitals import Vitals
from rlvitals.vitals.spans import healthy_level

COLLAPSE_BELOW = 0.1
HEALTHY_EARLY = 0.5
SUSTAIN = 5
UNIT_LOW = 0.5
UNIT_HIGH = 1.6
ZERO_ATOL = 1e-8
CONFIDENCE = {"adv_std": 0.85, "adv_zero_frac": 0.85, "adv_span": 0.75, "zero_update": 0.7}
CORROBORATED = 0.95
UNIT_SCALES = ("group_std", "virtual")
SAT_CEILING = 0.9
SAT_RISE = 0.1
SAT_EASY = 0.6
SAT_ACR = 0.75
SAT_STD_RATIO = 0.5


@register
class AdvCollapse(Detector):
    __doc__ = __doc__
    id = "ADV_COLLAPSE"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("adv_std", "adv_zero_frac")

    @dataclass(frozen=True)
    class Knobs:
        #: adv_std below this (times the run's level for non-GRPO estimators) is collapsed.
        collapse_below: float = COLLAPSE_BELOW
        #: The stretch before an onset must have had adv_std above this (same scaling).
        healthy_early: float = HEALTHY_EARLY
        #: Consecutive logged steps below the threshold that make an episode (and its onset).
        sustain: int = SUSTAIN

    def needs(self, vitals: Vitals) -> str | None:
        if _source(vitals) is None:
            return (
                "needs adv_std or adv_zero_frac (rlvitals recorder, veRL critic/advantages/*), "
                "per-group rewards, or loss and grad_norm"
            )
        return None

    def check(self, vitals: Vitals) -> list[Finding]:
        src = _source(vitals)
        if src is None:
            return []
        k = self.knobs
        scale, how = 1.0, "GRPO-normalised"
        if src in ("adv_std", "adv_span"):
            x = vitals.get(src)
            ok = x[np.isfinite(x)]
            ref = healthy_level(ok, 2 * k.sustain + 1)
            if src == "adv_span" or not _unit_scaled(vitals, ref):
                scale, how = ref, f"scaled by the run's level {fmt(ref)}"
            if not scale > 0:
                scale = 1.0
            eps = episodes(
                vitals, src, low=True, threshold=k.collapse_below * scale,
                healthy=k.healthy_early * scale, sustain=k.sustain,
                total_test=lambda a: np.abs(a) <= ZERO_ATOL,
            )
        elif src == "adv_zero_frac":
            eps = episodes(
                vitals, src, low=False, threshold=1.0 - k.collapse_below,
                healthy=1.0 - k.healthy_early, sustain=k.sustain,
                total_test=lambda a: a >= 1.0 - ZERO_ATOL,
            )
        else:  # zero_update
            eps = episodes(
                vitals, src, low=False, threshold=0.5, healthy=0.5, sustain=k.sustain,
                total_test=lambda a: a >= 0.5,
            )
        out = []
        for ep in eps:
            st = reward_state(vitals, ep)
            if not ep.total and st.saturated(SAT_CEILING, SAT_RISE, SAT_EASY) and _rewards_flat(
                vitals, ep
            ):
                continue  # every group solved: the run saturating (SATURATION reports it)
            out.append(self._finding(vitals, src, ep, scale, how))
        return out

    def _finding(
        self, vitals: Vitals, src: str, ep: Episode, scale: float, how: str
    ) -> Finding:
        k = self.knobs
        where = span_text(ep, vitals.log_every)
        metrics = episode_metrics(ep)
        metrics["series"] = src
        evidence = _evidence(vitals, src)
        conf = CONFIDENCE[src]
        if src == "adv_std":
            thr = k.collapse_below * scale
            msg = f"adv_std {fmt(ep.level)} < {fmt(thr)} {where}"
            msg += "" if ep.total else f" (early mean {fmt(ep.pre)}; {how})"
            metrics.update(adv_std=round(ep.level, 4), threshold=round(thr, 4), scaling=how)
            zf = median_in(vitals, "adv_zero_frac", ep.onset_step, ep.last_step)
            if zf == zf:
                metrics["adv_zero_frac"] = round(zf, 4)
                if zf >= 1.0 - k.healthy_early:
                    conf = CORROBORATED
                    msg += f"; adv_zero_frac {fmt(zf)} agrees"
        elif src == "adv_zero_frac":
            thr = 1.0 - k.collapse_below
            msg = f"adv_zero_frac {fmt(ep.level)} >= {fmt(thr)} {where}"
            msg += "" if ep.total else f" (before: {fmt(ep.pre)})"
            metrics.update(adv_zero_frac=round(ep.level, 4), threshold=round(thr, 4))
        elif src == "adv_span":
            thr = k.collapse_below * scale
            msg = f"advantage max - min {fmt(ep.level)} < {fmt(thr)} {where}"
            msg += "" if ep.total else f" (before: {fmt(ep.pre)})"
            msg += ": every advantage of the step was 0" if ep.level <= ZERO_ATOL else ""
            metrics.update(adv_span=round(ep.level, 6), threshold=round(thr, 6))
        else:
            kl = vitals.kl_coef
            msg = f"loss and grad_norm exactly 0 {where}: every advantage was 0"
            msg += " (no KL term)" if not kl else f" (kl_coef {kl:g})"
            metrics.update(zero_update_frac=round(ep.level, 4))
        if ep.total:
            msg += "; the run never had usable advantages (setup problem)"
        actions = _actions(vitals, ep)
        return self.finding(
            msg,
            onset_step=ep.onset_step,
            end_step=ep.end_step,
            confidence=confidence(ep, k.sustain, conf),
            evidence=evidence,
            metrics=metrics,
            actions=actions,
        )


def _rewards_flat(vitals: Vitals, ep: Episode) -> bool:
    """True unless the group reward variance is known to be alive during ``ep`` (then dead
    advantages are a plumbing bug even at a high pass rate, not saturation)."""
    if vitals.has("acr") and vitals.evidence in ("groups", "zero_std_frac"):
        return median_in(vitals, "acr", ep.onset_step, ep.last_step) >= SAT_ACR
    for name in ("reward_std", "reward_range"):
        rs = vitals.get(name)
        if rs is not None and not (vitals.batch_trap and name == "reward_std"):
            during = median_in(vitals, name, ep.onset_step, ep.last_step)
            healthy = healthy_level(rs[np.isfinite(rs)], 2 * SUSTAIN + 1)
            return during < SAT_STD_RATIO * healthy
    return True


def _source(vitals: Vitals) -> str | None:
    for name in ("adv_std", "adv_zero_frac", "adv_span", "zero_update"):
        if vitals.has(name):
            return name
    return None


def _evidence(vitals: Vitals, src: str) -> str:
    if src == "zero_update":
        return "loss_grad_zero"
    if src in ("adv_std", "adv_zero_frac") and vitals.run.get(src) is None:
        g = vitals.run.groups
        if g is None or g.advantages is None:
            return "groups"  # recomputed from per-group rewards
    return "advantages"


def _unit_scaled(vitals: Vitals, ref: float) -> bool:
    """True when advantages are GRPO-normalised (per-group std), so the gates are absolute."""
    if vitals.adv_scale is not None:
        return vitals.adv_scale in UNIT_SCALES
    return UNIT_LOW <= ref <= UNIT_HIGH


def _actions(vitals: Vitals, ep: Episode) -> list[str]:
    st = reward_state(vitals, ep)
    rstd = vitals.get("reward_std")
    out = []
    if rstd is not None or vitals.has("acr"):
        out.append(
            "compare with reward variance (REWARD_STD_DEATH / DEGENERATE_GROUPS): if rewards "
            "still vary, check the reward→advantage plumbing (normalisation, scaling wrapper)"
        )
    else:
        out.append(
            "log reward_std or per-group rewards (rlvitals recorder) to tell a dead reward "
            "signal from a reward→advantage plumbing bug"
        )
    out.append(
        "mitigate with AVSPO: rlvitals.estimators 'avspo' (TRL: pip install 'rlvitals[trl]')"
    )
    out.append("filter zero-variance groups and resample (DAPO dynamic sampling), or raise G")
    kind = st.kind()
    if kind == "too easy":
        out.append("add harder prompts: most groups are solved by every completion")
    elif kind == "too hard":
        out.append("use a curriculum or easier prompts: most groups fail every completion")
    return out

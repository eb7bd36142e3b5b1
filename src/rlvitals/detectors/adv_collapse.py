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
run's own healthy level (the highest running median). The estimator's advantage scale
(`rlvitals.vocabulary`) tells the two apart; when it is unknown, a healthy level between
:knob:`unit_low` and :knob:`unit_high` is taken as GRPO-normalised. `adv_zero_frac` uses the mirrored gates
(collapsed at or above 1 - :knob:`collapse_below`, healthy below 1 - :knob:`healthy_early`) and
corroborates an `adv_std` finding. Under AVSPO (the `virtual` scale) the real members of an
augmented group share one non-zero advantage, so `adv_std` can be 0 while every completion
teaches: there the detector reads `acr_residual` (groups still all-zero after the virtual
samples) or `adv_zero_frac` only. Collapses are found in any window: each episode reports its
onset and, when the advantages came back, its end. An episode during which the reward sits at
the ceiling is the run saturating and is left to SATURATION: pass rate :knob:`ceiling` or more
(or risen by :knob:`rise` into it), at least :knob:`easy_share` of the collapsed groups solved,
and the group reward variance gone too (ACR at least :knob:`flat_acr`, or reward_std below
:knob:`std_ratio` of its healthy level). A run whose every logged step has all advantages zero is reported however short it
is; other runs under 30 steps are not judged.

## What to try
- Look at reward variance first (REWARD_STD_DEATH, DEGENERATE_GROUPS): if it is alive while the
  advantages are dead, the bug is in the reward→advantage plumbing (normalisation, a scaling
  wrapper, advantages overwritten or detached).
- Keep collapsed groups teaching with AVSPO (`rlvitals.estimators` `avspo`; in TRL the
  `RlvitalsGRPOTrainer`, in veRL `algorithm.adv_estimator=rlvitals_avspo`), filter
  zero-variance groups and resample (DAPO dynamic sampling), or raise the group size G. The
  finding names the setting in the trainer that wrote the run.
- Rebalance the prompt set: harder prompts when groups are all solved, a curriculum when all fail.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals._record import record
from rlvitals.detectors._collapse import (
    CollapseEpisode,
    collapse_episodes,
    episode_confidence,
    episode_metrics,
    episode_text,
    mitigations,
    reward_state,
)
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import compare, fmt, healthy_level, median_in, rnd
from rlvitals.signal import ZERO_ATOL
from rlvitals.vitals import Vitals

COLLAPSE_BELOW = 0.1
"""adv_std below this (times the run's level for non-GRPO estimators) is collapsed. Calibrated on
the zoo dev runs and real logs: 8/8 ADVANTAGE_PIPELINE runs and 43/43 corpus labels found from 0.025
to 0.15; at 0.2 it fires on one real log whose verdict marks ADVANTAGE_PIPELINE 'not'; 0/9 zoo and
0/48 corpus healthy runs up to 0.4."""
HEALTHY_EARLY = 0.5
"""The stretch before an onset must have had adv_std above this (same scaling). Calibrated on the
zoo dev runs and corpus: 8/8 ADVANTAGE_PIPELINE runs and 43/43 corpus labels from 0.125 to 0.5;
40/43 corpus at 0.75, 0/8 zoo at 1.0 (GRPO-normalised adv_std sits just under 1); no false finding
on any set at any value."""
SUSTAIN = 5
"""Consecutive logged steps below the threshold that make an episode. Calibrated on the real logs
and corpus: at 4 it fires on a real log whose verdict marks ADVANTAGE_PIPELINE 'not', at 2 also on
the real HEALTHY log, at 1 on a corpus healthy run; 43/43 corpus labels from 5 to 10, 39/43 at 20;
zoo dev 8/8 ADVANTAGE_PIPELINE throughout."""
UNIT_LOW = 0.5
"""With the estimator unknown, an early adv_std between unit_low and unit_high is read as
GRPO-normalised. Not calibrated: a design choice (the band around 1 that group normalisation gives);
zoo dev, real logs and corpus findings are the same from 0.125 to 2.0."""
UNIT_HIGH = 1.6
"""Upper end of that band. Not calibrated: a design choice; zoo dev, real logs and corpus findings
are the same from 0.4 to 6.4."""
CEILING = 0.9
"""Pass rate at or above which an episode's reward is at the ceiling (saturation). Not calibrated:
shared with the other collapse detectors for one story (0.9); zoo dev, real logs and corpus findings
are the same from 0.225 up."""
RISE = 0.1
"""Pass-rate gain into an episode that makes a mostly-solved collapse a saturation. Not calibrated:
shared with the other collapse detectors; zoo dev, real logs and corpus findings are the same from
0.025 to 0.4."""
EASY_SHARE = 0.6
"""Share of collapsed groups solved by every completion that makes it saturation. Not calibrated:
shared with the other collapse detectors; zoo dev, real logs and corpus findings are the same from
0.15 up."""
FLAT_ACR = 0.75
"""For saturation the ACR during the episode must be at least this. Calibrated on the corpus: 43/43
labels from 0.375 up, 41/43 at 0.1875 (a low-ACR plumbing collapse excused as saturation); zoo dev
and real logs unchanged over the sweep."""
STD_RATIO = 0.5
"""... or the reward variance below this share of its healthy level. Not calibrated: a design choice
(half); zoo dev, real logs and corpus findings are the same from 0.125 to 2.0."""
ZERO_UPDATE = 0.5
"""zero_update is 1 on a step whose loss and grad_norm were exactly 0, else 0: above a half is
a zero step."""
CONFIDENCE = {
    "adv_std": 0.85,
    "adv_zero_frac": 0.85,
    "acr_residual": 0.9,
    "adv_span": 0.75,
    "zero_update": 0.7,
}
CORROBORATED = 0.95
UNIT_SCALES = ("group_std", "virtual")
"""Advantage scales (:mod:`rlvitals.vocabulary`) with adv_std about 1 while the signal lives."""


@register
class AdvCollapse(Detector):
    __doc__ = __doc__
    id = "ADV_COLLAPSE"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("adv_std", "adv_zero_frac")

    @record(frozen=True)
    class Knobs:
        #: adv_std below this (times the run's level for non-GRPO estimators) is collapsed.
        collapse_below: float = COLLAPSE_BELOW
        #: The stretch before an onset must have had adv_std above this (same scaling).
        healthy_early: float = HEALTHY_EARLY
        #: Consecutive logged steps below the threshold that make an episode (and its onset).
        sustain: int = SUSTAIN
        #: With the estimator unknown, a healthy adv_std level between unit_low and unit_high
        #: is read as GRPO-normalised (absolute gates).
        unit_low: float = UNIT_LOW
        #: Upper end of that band.
        unit_high: float = UNIT_HIGH
        #: Pass rate at or above which an episode's reward is at the ceiling (saturation).
        ceiling: float = CEILING
        #: Pass-rate gain into an episode that makes a mostly-solved collapse a saturation.
        rise: float = RISE
        #: Share of collapsed groups solved by every completion that makes it saturation.
        easy_share: float = EASY_SHARE
        #: For saturation the ACR during the episode must be at least this ...
        flat_acr: float = FLAT_ACR
        #: ... or the reward variance below this share of its healthy level.
        std_ratio: float = STD_RATIO

    def needs(self, vitals: Vitals) -> str | None:
        if _source(vitals) is None:
            return (
                "needs adv_std or adv_zero_frac (rlvitals recorder, veRL critic/advantages/*), "
                "per-group rewards, or loss and grad_norm"
            )
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        src = _source(vitals)
        if src is None:
            return []
        k = self.knobs
        scale, how = 1.0, "GRPO-normalised"
        if src in ("adv_std", "adv_span"):
            x = vitals.get(src)
            ref = healthy_level(x[np.isfinite(x)], 2 * k.sustain + 1)
            if src == "adv_span" or not self._unit_scaled(vitals, ref):
                scale, how = ref, f"scaled by the run's level {fmt(ref)}"
            if not scale > 0:
                scale = 1.0
            eps = collapse_episodes(
                vitals,
                src,
                low=True,
                threshold=k.collapse_below * scale,
                healthy=k.healthy_early * scale,
                sustain=k.sustain,
                total_test=lambda a: np.abs(a) <= ZERO_ATOL,
            )
        elif src == "adv_zero_frac":
            eps = collapse_episodes(
                vitals,
                src,
                low=False,
                threshold=1.0 - k.collapse_below,
                healthy=1.0 - k.healthy_early,
                sustain=k.sustain,
                total_test=lambda a: a >= 1.0 - ZERO_ATOL,
            )
        else:  # zero_update
            eps = collapse_episodes(
                vitals,
                src,
                low=False,
                threshold=ZERO_UPDATE,
                healthy=ZERO_UPDATE,
                sustain=k.sustain,
                total_test=lambda a: a >= ZERO_UPDATE,
            )
        out = []
        for ep in eps:
            st = reward_state(vitals, ep)
            if (
                not ep.total
                and st.saturated(k.ceiling, k.rise, k.easy_share)
                and self._rewards_flat(vitals, ep)
            ):
                continue  # every group solved: the run saturating (SATURATION reports it)
            out.append(self._finding(vitals, src, ep, scale, how))
        return out

    def _unit_scaled(self, vitals: Vitals, ref: float) -> bool:
        """True when advantages are GRPO-normalised (per-group std), so the gates are absolute."""
        if vitals.adv_scale is not None:
            return vitals.adv_scale in UNIT_SCALES
        return self.knobs.unit_low <= ref <= self.knobs.unit_high

    def _rewards_flat(self, vitals: Vitals, ep: CollapseEpisode) -> bool:
        """True unless the group reward variance is known to be alive during ``ep`` (then dead
        advantages are a plumbing bug even at a high pass rate, not saturation)."""
        k = self.knobs
        if vitals.measured_acr:
            return median_in(vitals, "acr", ep.onset, ep.last_step) >= k.flat_acr
        for name in ("reward_std", "reward_range"):
            rs = vitals.get(name)
            if rs is not None and not (vitals.batch_trap and name == "reward_std"):
                during = median_in(vitals, name, ep.onset, ep.last_step)
                healthy = healthy_level(rs[np.isfinite(rs)], 2 * k.sustain + 1)
                return during < k.std_ratio * healthy
        return True

    def _finding(
        self, vitals: Vitals, src: str, ep: CollapseEpisode, scale: float, how: str
    ) -> Finding:
        k = self.knobs
        where = episode_text(ep)
        metrics = episode_metrics(ep)
        metrics["series"] = src
        evidence = _evidence(vitals, src)
        conf = CONFIDENCE[src]
        series = [src]
        thresholds: dict[str, float] = {}
        if src == "adv_std":
            thr = k.collapse_below * scale
            msg = f"adv_std {compare(ep.level, '<', thr)} {where}"
            msg += "" if ep.total else f" (early mean {fmt(ep.pre)}; {how})"
            metrics.update(adv_std=rnd(ep.level), threshold=rnd(thr), scaling=how)
            thresholds["adv_std"] = thr
            zf = median_in(vitals, "adv_zero_frac", ep.onset, ep.last_step)
            if zf == zf:
                series.append("adv_zero_frac")
                metrics["adv_zero_frac"] = rnd(zf)
                if zf >= 1.0 - k.healthy_early:
                    conf = CORROBORATED
                    msg += f"; adv_zero_frac {fmt(zf)} agrees"
        elif src in ("adv_zero_frac", "acr_residual"):
            thr = 1.0 - k.collapse_below
            msg = f"{src} {compare(ep.level, '>=', thr)} {where}"
            msg += "" if ep.total else f" (before: {fmt(ep.pre)})"
            if src == "acr_residual":
                msg += ": the groups left with all-zero advantages after AVSPO's virtual samples"
            metrics.update({src: rnd(ep.level), "threshold": rnd(thr)})
            thresholds[src] = thr
        elif src == "adv_span":
            thr = k.collapse_below * scale
            msg = f"advantage max - min {compare(ep.level, '<', thr)} {where}"
            msg += "" if ep.total else f" (before: {fmt(ep.pre)})"
            msg += ": every advantage of the step was 0" if ep.level <= ZERO_ATOL else ""
            metrics.update(adv_span=rnd(ep.level, 6), threshold=rnd(thr, 6))
            thresholds["adv_span"] = thr
        else:
            kl = vitals.kl_coef
            msg = f"loss and grad_norm exactly 0 {where}: every advantage was 0"
            msg += " (no KL term)" if not kl else f" (kl_coef {kl:g})"
            metrics.update(zero_update_frac=rnd(ep.level))
            series = ["zero_update", "loss", "grad_norm"]
        if ep.total:
            msg += "; the run never had usable advantages (setup problem)"
        return self.finding(
            msg,
            onset_step=ep.onset,
            end_step=ep.end,
            confidence=episode_confidence(ep, k.sustain, conf),
            evidence=evidence,
            metrics=metrics,
            actions=_actions(vitals, ep),
            series=series,
            thresholds=thresholds,
        )


def _source(vitals: Vitals) -> str | None:
    """The best series of the advantages' spread the run has. Under AVSPO (virtual scale) a
    collapsed group's real members share one non-zero advantage: adv_std can be 0 while every
    completion teaches, so only the share of groups still all-zero counts."""
    names = (
        ("acr_residual", "adv_zero_frac")
        if vitals.adv_scale == "virtual"
        else ("adv_std", "adv_zero_frac", "adv_span", "zero_update")
    )
    for name in names:
        if vitals.has(name):
            return name
    return None


def _evidence(vitals: Vitals, src: str) -> str:
    if src == "zero_update":
        return "loss_grad_zero"
    if src == "acr_residual":
        return "groups"
    if src in ("adv_std", "adv_zero_frac") and vitals.run.get(src) is None:
        g = vitals.run.groups
        if g is None or g.advantages is None:
            return "groups"  # recomputed from per-group rewards
    return "advantages"


def _actions(vitals: Vitals, ep: CollapseEpisode) -> list[str]:
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
    out += mitigations(vitals)
    kind = st.kind()
    if kind == "too easy":
        out.append("add harder prompts: most groups are solved by every completion")
    elif kind == "too hard":
        out.append("use a curriculum or easier prompts: most groups fail every completion")
    return out

"""Degenerate groups: most groups' rewards stopped varying (the Advantage Collapse Rate is high).

## What is happening
A group of G completions of one prompt teaches the policy only when its rewards differ. When
every completion of a group gets the same reward (all solved, all failed, or the same partial
credit) the group is collapsed: its advantages are all zero. The Advantage Collapse Rate (ACR)
is the share of a step's groups that are collapsed; when it stays high, most of the rollout
budget is wasted and learning stalls (He et al., ICML 2026).

## What it looks like in the recording
Per-group rewards show groups like `[1, 1, 1, 1, 1, 1, 1, 1]` or `[0, 0, 0, 0, 0, 0, 0, 0]`
taking over; TRL's `frac_reward_zero_std` climbs toward 1. The split says which way: groups
solved by every completion (too easy), failed by every completion (too hard), or sharing an
intermediate reward (flat: partial credit, or identical completions).

## How the detector decides
It reads the ACR: exact from per-group rewards when the run has them, else the trainer's
zero-variance fraction. An episode is :knob:`sustain` consecutive logged steps with ACR at or
above :knob:`acr_above`, after a stretch whose median ACR was below :knob:`healthy_below` (a run
that starts degenerate and recovers, like a too-hard start, is not a collapse). An episode
whose collapsed groups are mostly solved (at least :knob:`easy_share`) while the reward is at
the ceiling (pass rate at least :knob:`ceiling`) or rose by :knob:`rise` into it is the run
saturating: SATURATION reports it at info level, this detector stays silent. Otherwise the
finding gives the split (too easy / too hard / flat) and the expected ACR from the pass rate
(P0 = p^G + (1 - p)^G) beside the observed one. A run whose every logged step has every group
collapsed is reported however short it is; other runs under 30 steps are not judged.

## What to try
- Too easy (solved groups): add harder prompts, or filter prompts the policy always solves.
- Too hard (failed groups): a curriculum, easier prompts, or a few worked examples; check the
  verifier accepts correct answers.
- Flat or mixed at a middling reward: the completions of a group are identical (temperature,
  sampling seed, generation cache) or the verifier returns a constant; check both.
- Keep collapsed groups teaching with AVSPO, or filter zero-variance groups and resample (DAPO
  dynamic sampling); the finding names the setting in the run's trainer, and leaves out what the
  run already does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from rlvitals import advice
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
from rlvitals.detectors.kit import compare, fmt, median_in, rnd
from rlvitals.vitals import Vitals

ACR_ABOVE = 0.75
"""ACR at or above this is a collapsed step. Calibrated on the zoo dev runs and corpus: 30/48 zoo
dev runs of the group conditions (VERIFIER_CONSTANT, IDENTICAL_COMPLETIONS, SATURATED, TOO_HARD,
SMALL_GROUPS, POLICY_DEGRADATION) and 33/33 corpus labels at 0.5625 to 0.75, 0/9 zoo healthy; at
0.375 4/9 zoo and 3/48 corpus healthy runs fire, at 1.125 0/48 zoo and 3/33 corpus labels."""
HEALTHY_BELOW = 0.6
"""The stretch before an onset must have had a median ACR below this. Calibrated on the zoo dev runs
and corpus: 30/48 zoo group-condition runs at 0.6, 24/48 at 0.45 and 22/48 at 0.3, 31/48 at 0.9 and
above; corpus 33/33 from 0.45, 32/33 at 0.3; never a healthy run."""
SUSTAIN = 5
"""Consecutive logged steps at or above acr_above that make an episode. Calibrated on the zoo dev
runs: at 1 it fires on 5/9 healthy controls (and 3/48 corpus healthy runs), at 2 on none; 30/48
group-condition runs at 4 to 8, 23/48 at 20; corpus 33/33 throughout."""
CEILING = 0.9
"""Pass rate at or above which the reward is at the ceiling. Not calibrated: shared with the other
collapse detectors (0.9); zoo dev, real logs and corpus findings are the same from 0.675 up (26/48
zoo at 0.45)."""
RISE = 0.1
"""Pass-rate gain into an episode that makes a mostly-solved collapse a saturation. Not calibrated:
shared with the other collapse detectors; zoo dev, real logs and corpus findings are the same from
0.025 to 0.4."""
EASY_SHARE = 0.6
"""Share of collapsed groups solved by every completion that makes it too easy. Not calibrated:
shared with the other collapse detectors; zoo dev, real logs and corpus findings are the same from
0.15 to 0.6 (one more zoo run at 0.9)."""
TOTAL_ACR = 1.0 - 1e-9
CONFIDENCE = {"groups": 0.95, "zero_std_frac": 0.85}
TRAP_CONFIDENCE = 0.6


@register
class DegenerateGroups(Detector):
    __doc__ = __doc__
    id = "DEGENERATE_GROUPS"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("acr", "acr_solve_all", "acr_solve_none", "acr_flat", "zero_std_frac")

    @record(frozen=True)
    class Knobs:
        #: ACR at or above this is a collapsed step.
        acr_above: float = ACR_ABOVE
        #: The stretch before an onset must have had a median ACR below this.
        healthy_below: float = HEALTHY_BELOW
        #: Consecutive logged steps at or above acr_above that make an episode.
        sustain: int = SUSTAIN
        #: Pass rate (reward rescaled to [0, 1]) at or above which the reward is at the ceiling.
        ceiling: float = CEILING
        #: Pass-rate gain into an episode that makes a mostly-solved collapse a saturation.
        rise: float = RISE
        #: Share of collapsed groups solved by every completion that makes it "too easy".
        easy_share: float = EASY_SHARE

    def needs(self, vitals: Vitals) -> str | None:
        if not vitals.measured_acr:
            return "needs per-group rewards (rlvitals recorder) or frac_reward_zero_std"
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        if not vitals.measured_acr:
            return []
        k = self.knobs
        eps = collapse_episodes(
            vitals,
            "acr",
            low=False,
            threshold=k.acr_above,
            healthy=k.healthy_below,
            sustain=k.sustain,
            total_test=lambda a: a >= TOTAL_ACR,
        )
        out = []
        for ep in eps:
            st = reward_state(vitals, ep)
            if not ep.total and st.saturated(k.ceiling, k.rise, k.easy_share):
                continue
            out.append(self._finding(vitals, ep, st))
        return out

    def _finding(self, vitals: Vitals, ep: CollapseEpisode, st) -> Finding:
        k = self.knobs
        kind = st.kind()
        msg = f"ACR {compare(ep.level, '>=', k.acr_above)} {episode_text(ep)}"
        if not ep.total:
            msg += f" (before: {fmt(ep.pre)})"
        metrics = episode_metrics(ep)
        metrics.update(acr=rnd(ep.level), threshold=k.acr_above, kind=kind)
        if not math.isnan(st.easy_share):
            flat = max(0.0, 1.0 - st.easy_share - st.hard_share)
            msg += (
                f"; collapsed groups: {st.easy_share:.0%} solved, {st.hard_share:.0%} failed, "
                f"{flat:.0%} flat → {kind}"
            )
            metrics.update(
                easy_share=rnd(st.easy_share), hard_share=rnd(st.hard_share), flat_share=rnd(flat)
            )
        elif st.known:
            msg += f"; pass rate {fmt(st.p_span)} → {kind}"
        exp = median_in(vitals, "expected_acr", ep.onset, ep.last_step)
        if not math.isnan(exp):
            msg += f"; expected from the pass rate {fmt(exp)} (excess {fmt(ep.level - exp)})"
            metrics.update(expected_acr=rnd(exp), excess_acr=rnd(ep.level - exp))
        if st.known:
            metrics["pass_rate"] = rnd(st.p_span)
        evidence = vitals.evidence if vitals.evidence in CONFIDENCE else "zero_std_frac"
        conf = CONFIDENCE.get(evidence, CONFIDENCE["zero_std_frac"])
        if vitals.batch_trap and evidence == "zero_std_frac":
            conf = TRAP_CONFIDENCE
            msg += " (zero_std_frac here flags whole-batch collapse: scale_rewards='batch')"
        return self.finding(
            msg,
            onset_step=ep.onset,
            end_step=ep.end,
            confidence=episode_confidence(ep, k.sustain, conf),
            evidence=evidence,
            metrics=metrics,
            actions=_actions(vitals, kind),
            series=["acr", "acr_solve_all", "acr_solve_none", "expected_acr"],
            thresholds={"acr": k.acr_above},
        )


def _actions(vitals: Vitals, kind: str) -> list[str]:
    if kind == "too easy":
        first = "add harder prompts, or filter prompts the policy always solves"
    elif kind == "too hard":
        first = "use a curriculum or easier prompts; check the verifier accepts correct answers"
    else:
        first = (
            "check that the completions of a group differ ("
            + advice.knob("temperature", vitals.trainer)
            + ", seed, generation cache) and that the verifier does not return a constant"
        )
    return [first, *mitigations(vitals)]

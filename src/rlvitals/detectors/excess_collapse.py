"""Excess collapse: more collapse than the rewards explain — a pipeline problem, not the prompts.

## What is happening
Two ways the pipeline, not the prompt set, kills the learning signal:

- **Reward→advantage plumbing.** The rewards of a step still vary, yet the advantages the loss
  sees are (almost) all zero: a normalisation that divides by the wrong std, a scaling wrapper
  that zeroes them, advantages computed before the rewards arrive, or overwritten later.
- **Excess collapse.** More groups are collapsed than their pass rates can explain. With pass
  rate p and group size G a group is collapsed by chance with probability P0 = p^G + (1 - p)^G
  (DESIGN.md 3.3); an ACR far above that means the completions of a group are identical
  (temperature 0, a reused seed, a generation cache) or the verifier returns a constant.

## What it looks like in the recording
Plumbing: `adv_std` (or veRL's advantage max - min, or loss and grad_norm) drop to 0 while
`reward_std` keeps its level and the ACR stays low. Excess: the ACR jumps while `reward_mean`
stays middling, so the expected ACR stays low; the collapsed groups split between solved and
failed in proportion to the pass rate.

## How the detector decides
Plumbing: an ADV_COLLAPSE episode (same series and default gates) during which the reward
variance is alive — the group-level `reward_std` at or above :knob:`alive_ratio` of its level
before the onset, or the ACR at or below :knob:`acr_alive` (a batch-level spread such as veRL's
score max - min does not count: it stays alive when every group is degenerate). Excess: the
excess ACR (observed - expected) is measured as a share of the room above the expected ACR,
(observed - expected) / (1 - expected), so small groups at high pass rates (where much collapse
is expected) are judged fairly; an episode is :knob:`sustain` logged steps with that share at or
above :knob:`excess_above`, at least :knob:`excess_rise` above its median before the onset (a
baseline that assumes alike prompts leaves every run some excess of its own; only a jump
counts). With prompt ids in the per-group rewards, each group's expected collapse comes from
its prompt's own pass rate in nearby steps, so a prompt set that mixes always-solved and
never-solved prompts is expected to collapse and is not reported; without them, from the
step's mean pass rate (the finding says which). The expected ACR needs G (manifest or per-group
rewards) and reward_mean.

## What to try
- Plumbing: print rewards and advantages of one step side by side; check the normalisation
  (group vs batch std, `scale_rewards`), any wrapper that rescales advantages, and that the
  advantages reach the loss.
- Excess: check the completions of a group differ (temperature, sampling seed, generation
  cache, `num_generations`), and test the verifier with known-good and known-bad answers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._record import record
from rlvitals.detectors._collapse import (
    CollapseEpisode,
    collapse_episodes,
    episode_confidence,
    episode_metrics,
    episode_text,
)
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import compare, fmt, median_in, rnd
from rlvitals.vitals import Vitals

ALIVE_RATIO = 0.5
"""Reward variance at or above this fraction of its pre-onset level is alive. Calibrated on the zoo
dev runs and corpus: 16/32 zoo runs of VERIFIER_CONSTANT, IDENTICAL_COMPLETIONS, SMALL_GROUPS and
ADVANTAGE_PIPELINE and 11/11 corpus labels from 0.125 to 0.5, 13/32 at 0.75, 9/32 and 9/11 at 1.0;
never a healthy run."""
ACR_ALIVE = 0.5
"""ACR at or below this during an advantage collapse means the rewards still vary. Not calibrated: a
design choice (half); zoo dev, real logs and corpus findings are the same from 0.125 to 2.0."""
EXCESS_ABOVE = 0.5
"""Excess ACR, (observed - expected) / (1 - expected), at or above this is an excess collapse.
Calibrated on the zoo dev runs and corpus: 16/32 zoo runs and 11/11 corpus labels at 0.5; 22/32 at
0.375 but at 0.125 a zoo healthy control and a corpus healthy run fire; 15/32 and 8/11 at 1.0."""
EXCESS_RISE = 0.3
"""... and it must exceed its own pre-onset median by at least this much. Calibrated on the zoo dev
runs and corpus: 16/32 zoo runs and 11/11 corpus labels from 0.075 to 0.3, 15/32 at 0.45, 6/11
corpus at 1.2; never a healthy run."""
ROOM_FLOOR = 0.1
SUSTAIN = 5
"""Consecutive logged steps that make an excess episode. Calibrated on the zoo dev runs: at 1 it
fires on 7/9 healthy controls and 3/48 corpus healthy runs, at 2 on none (20/32 sign runs); 16/32 at
4 to 5, 15/32 at 8, 13/32 at 20; corpus 11/11 throughout."""
PLUMBING_CONFIDENCE = 0.85
EXCESS_CONFIDENCE = 0.75


@register
class ExcessCollapse(Detector):
    __doc__ = __doc__
    id = "EXCESS_COLLAPSE"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("adv_std", "reward_std", "excess_acr", "expected_acr")
    requires = ("ADV_COLLAPSE",)

    @record(frozen=True)
    class Knobs:
        #: Reward variance at or above this fraction of its pre-onset level is alive.
        alive_ratio: float = ALIVE_RATIO
        #: ACR at or below this during an advantage collapse means the rewards still vary.
        acr_alive: float = ACR_ALIVE
        #: Excess ACR as a share of the room above the expected ACR, (observed - expected) /
        #: (1 - expected), at or above this is an excess collapse.
        excess_above: float = EXCESS_ABOVE
        #: ... and it must exceed its own pre-onset median by at least this much.
        excess_rise: float = EXCESS_RISE
        #: Consecutive logged steps that make an excess episode.
        sustain: int = SUSTAIN

    def needs(self, vitals: Vitals) -> str | None:
        if not vitals.has("excess_acr") and not _plumbing_possible(vitals):
            return (
                "needs advantages and reward variance side by side, or the ACR with G and "
                "reward_mean (for the expected ACR)"
            )
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        out = self._plumbing(vitals, found) if _plumbing_possible(vitals) else []
        if vitals.has("excess_acr") and not vitals.batch_trap:
            out += self._excess(vitals)
        return out

    # ---- reward variance alive, advantages dead --------------------------------------------

    def _plumbing(self, vitals: Vitals, found: Mapping[str, list[Finding]] | None) -> list[Finding]:
        out = []
        for f in self.required(vitals, found, "ADV_COLLAPSE"):
            if f.evidence == "groups":
                continue  # advantages recomputed from the rewards cannot disagree with them
            first = f.onset_step
            last = f.end_step if f.end_step is not None else int(vitals.steps[-1])
            alive, why = self._alive(vitals, first, last, f)
            if not alive:
                continue
            msg = f"advantages dead ({f.message}) while reward variance is alive: {why}"
            out.append(
                self.finding(
                    msg,
                    onset_step=f.onset_step,
                    end_step=f.end_step,
                    confidence=min(PLUMBING_CONFIDENCE, f.confidence),
                    evidence=f.evidence,
                    metrics={**f.metrics, "kind": "plumbing", "reward_signal": why},
                    series=[*f.series, "reward_std", "acr"],
                    thresholds=dict(f.thresholds),
                    actions=[
                        "print rewards and advantages of one step side by side",
                        "check the normalisation (group vs batch std: "
                        f"{advice.knob('adv_norm', vitals.trainer)}) and any wrapper that "
                        "rescales advantages",
                        "check that the advantages reach the loss (not overwritten or detached)",
                    ],
                )
            )
        return out

    def _alive(self, vitals: Vitals, first: int, last: int, f: Finding) -> tuple[bool, str]:
        k = self.knobs
        # Group-level reward variance only: a batch-level spread (veRL score max - min, TRL's
        # batch std under scale_rewards="batch") stays alive when every group is degenerate.
        for name in ("reward_std",):
            x = vitals.get(name)
            if x is None or vitals.batch_trap:
                continue
            during = median_in(vitals, name, first, last)
            pre_first = _pre_first(vitals, first)
            before = median_in(vitals, name, pre_first, first - 1)
            if math.isnan(during) or math.isnan(before) or before <= 0:
                continue
            ratio = during / before
            label = "reward_std" if name == "reward_std" else "reward max - min"
            return ratio >= k.alive_ratio, (
                f"{label} {fmt(during)} = {ratio:.0%} of its level before ({fmt(before)}) "
                f">= {k.alive_ratio:.0%}"
            )
        if vitals.measured_acr:
            a = median_in(vitals, "acr", first, last)
            if not math.isnan(a):
                return a <= k.acr_alive, f"ACR {compare(a, '<=', k.acr_alive)}"
        return False, ""

    # ---- ACR above what the pass rates explain ----------------------------------------------

    def _excess(self, vitals: Vitals) -> list[Finding]:
        k = self.knobs
        out = []
        acr, exp = vitals.get("acr"), vitals.get("expected_acr")
        # Excess as a share of the room above the expected ACR: 1 = every group collapsed.
        norm = (acr - exp) / np.maximum(1.0 - exp, ROOM_FLOOR)
        eps = collapse_episodes(
            vitals,
            "excess_acr",
            x=norm,
            low=False,
            threshold=k.excess_above,
            healthy=k.excess_above,
            sustain=k.sustain,
        )
        for ep in eps:
            if ep.level - ep.pre < k.excess_rise:
                continue
            out.append(self._excess_finding(vitals, ep))
        return out

    def _excess_finding(self, vitals: Vitals, ep: CollapseEpisode) -> Finding:
        k = self.knobs
        acr = median_in(vitals, "acr", ep.onset, ep.last_step)
        exp = median_in(vitals, "expected_acr", ep.onset, ep.last_step)
        p = median_in(vitals, "pass_rate", ep.onset, ep.last_step)
        how = {
            "per-prompt": "from each prompt's own pass rate in nearby steps",
            "mixed": "from each prompt's own pass rate where it was seen in other steps",
        }.get(
            vitals.expected_acr_from or "",
            f"from the step's mean pass rate {fmt(p)} (prompts assumed alike: no prompt ids)",
        )
        msg = (
            f"ACR {fmt(acr)} but only {fmt(exp)} expected {how} with G = "
            f"{vitals.group_size} {episode_text(ep)}: the excess "
            f"{fmt(acr - exp)} fills {ep.level:.0%} of the room above the expected ACR "
            f"(>= {k.excess_above:.0%}; before: {_share(ep.pre)})"
        )
        metrics = episode_metrics(ep)
        metrics.update(
            kind="excess",
            excess_acr=rnd(acr - exp),
            excess_share=rnd(ep.level),
            threshold=k.excess_above,
            acr=rnd(acr),
            expected_acr=rnd(exp),
            pass_rate=rnd(p),
            group_size=vitals.group_size,
            expected_acr_from=vitals.expected_acr_from,
        )
        return self.finding(
            msg,
            onset_step=ep.onset,
            end_step=ep.end,
            series=["acr", "expected_acr", "excess_acr"],
            confidence=episode_confidence(ep, k.sustain, EXCESS_CONFIDENCE),
            evidence=vitals.evidence,
            metrics=metrics,
            actions=[
                "check that the completions of a group differ: "
                f"{advice.knob('temperature', vitals.trainer)}, the sampling seed, a generation "
                "cache that returns one completion G times",
                "test the verifier with known-good and known-bad answers",
            ],
        )


def _plumbing_possible(vitals: Vitals) -> bool:
    has_adv = any(vitals.run.get(n) is not None for n in ("adv_std", "adv_zero_frac"))
    has_adv = has_adv or (
        vitals.run.groups is not None and vitals.run.groups.advantages is not None
    )
    has_adv = has_adv or vitals.has("adv_span") or vitals.has("zero_update")
    return has_adv and vitals.reward_variance_logged


def _pre_first(vitals: Vitals, first: int) -> int:
    i = int(vitals.steps.searchsorted(first))
    return int(vitals.steps[max(0, i - 25)])


def _share(x: float) -> str:
    """The share of the room above the expected ACR, or what a negative one means (the ACR
    was under what the pass rate predicts: groups varied more than chance)."""
    if x != x:
        return "unknown"
    return f"{x:.0%}" if x >= 0 else "under the expected ACR"

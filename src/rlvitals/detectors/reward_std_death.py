"""Reward variance died: the rewards of a step stopped differing, so nothing can be learned.

## What is happening
Group-relative advantages are differences between rewards. When the rewards of a step no
longer vary, every advantage is zero whatever the estimator. Where the reward sits tells the
cause apart: at the ceiling the policy solves everything it is shown (the run is saturated: a
success, and a sign the prompts are too easy now); anywhere else the behaviour collapsed (the
policy emits one answer, or always fails) or the reward function broke (a verifier that
returns a constant).

## What it looks like in the recording
`reward_std` (TRL: the mean over groups of the group reward std; veRL: `critic/score/max` equal
to `critic/score/min`) falls to a small fraction of its earlier level and stays there.
`reward_mean` tells the story: near the maximum reward (at the ceiling), near the minimum (every
completion fails), or flat at a middling value (a constant reward, identical completions).

## How the detector decides
It reads the mean per-group reward std when the run has it (OpenRLHF's `group_reward_std`, or
recomputed from per-group rewards), else `reward_std` as logged — which since TRL 0.27 is the
std of the whole batch: it dies only when every reward of the batch agrees, so it never shows a
per-group collapse (a batch of all-0 and all-1 groups keeps a batch std near 0.5; the vitals
note which reading they assumed, and DEGENERATE_GROUPS reads the zero-std fraction) — else
the step's reward max - min. That fallback is a batch-level spread (with two prompts a step it
swings with the draw), so an episode read from it is dropped while an advantage spread keeps
:knob:`adv_alive` of its healthy level: the groups still vary. The level is relative to the run's own healthy level (the highest
running median), because reward scales differ between tasks: an episode is :knob:`sustain`
consecutive logged steps below :knob:`die_below` times that level, after a stretch whose median
was above :knob:`healthy_above` times it. The pass rate (reward_mean rescaled to [0, 1]) inside
the episode decides the verdict: at or above :knob:`ceiling`, or risen by :knob:`rise` into the
episode while above :knob:`easy_min`, is "at the ceiling" and reported at info level;
anything else is "not at the ceiling" (at the floor when the pass rate is at most
:knob:`floor`) and a warning. A run whose every logged step has zero
reward variance is reported however short it is; other runs under 30 steps are not judged.
Apart from episodes, a run whose reward variance is exactly 0 on at least :knob:`dead_share` of
its logged steps (and :knob:`dead_min` of them), most of them outside its episodes, is reported
as dead on and off: on each such step every group collapsed and nothing was learned, even
when no stretch lasts
:knob:`sustain` steps (groups of 2 and four prompts a step do this by chance); informational
when the pass rate on those steps is at the ceiling.

## What to try
- At the ceiling: add harder prompts (the policy has learned this set), or stop training.
- At the floor: check the verifier with known-good answers; lower the difficulty (curriculum).
- At a middling reward: check the reward function is not returning a constant and that the
  completions of a group differ (temperature, seed, generation cache).
- Roll back to a checkpoint from before the onset, and lower the learning rate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._median import nanmedian
from rlvitals._record import record
from rlvitals.detectors._collapse import (
    CollapseEpisode,
    RewardState,
    collapse_episodes,
    episode_confidence,
    episode_metrics,
    episode_text,
    mitigations,
    reward_state,
)
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import Span, compare, fmt, healthy_level, median_in, rnd
from rlvitals.signal import ZERO_ATOL
from rlvitals.vitals import Vitals

DIE_BELOW = 0.2
"""Reward variance below this fraction of the run's healthy level is dead. Calibrated on the zoo dev
runs and corpus: 27/40 zoo runs of the group conditions (VERIFIER_CONSTANT, IDENTICAL_COMPLETIONS,
SATURATED, TOO_HARD, SMALL_GROUPS) and 15/15 corpus labels from 0.1 to 0.3, 14/15 at 0.05; at 0.4
ten more zoo runs fire on a halved variance, nine of them of conditions it is no sign of (four
RUNAWAY_LENGTH, two POLICY_DEGRADATION); at 0.8 8/9 zoo healthy controls and 9/48 corpus healthy
runs fire."""
HEALTHY_ABOVE = 0.5
"""The stretch before an onset must have been above this fraction of the healthy level. Calibrated
on the corpus: 15/15 labels from 0.125 to 0.75, 10/15 at 1.0; zoo dev and real logs unchanged over
the sweep."""
SUSTAIN = 5
"""Consecutive logged steps below the threshold that make an episode. Calibrated on the zoo dev
runs: 27/40 group-condition runs from 4 to 10; at 2 fifteen more zoo runs fire (five
ADVANTAGE_PIPELINE, three RUNAWAY_LENGTH, three SMALL_GROUPS among them: chance dips), at 1 also
2/48 corpus healthy runs; corpus 14/15 at 20."""
CEILING = 0.9
"""Pass rate at or above which the reward is at the ceiling. Calibrated on the zoo dev runs and real
logs: 27/40 from 0.9 up, 23/40 at 0.675 (then a floor collapse of a mostly-solved run is read as the
ceiling); the real G=2 log's dead steps are missed at 0.225."""
RISE = 0.1
"""Pass-rate gain into an episode that counts as saturating (with easy_min). Not calibrated: shared
with the other collapse detectors; zoo dev, real logs and corpus findings are the same from 0.025 to
0.4."""
EASY_MIN = 0.6
"""Smallest pass rate of a saturating episode reached by a rise (not at the ceiling). Calibrated on
the corpus: the same findings from 0.15 to 0.9; above 1 a corpus healthy run fires (no saturation
excuse is left)."""
FLOOR = 0.1
"""Pass rate at or below which a dead reward variance is at the floor. Not calibrated: a design
choice; zoo dev, real logs and corpus findings are the same from 0.025 to 0.4."""
ADV_ALIVE = 0.5
"""Read from the batch's reward max - min, an episode is dropped while an advantage spread keeps
this share of its healthy level. Calibrated on the real logs: at 0.75 or above the HEALTHY veRL G=4
log (continuous reward, advantages +-1 alive) fires; the same findings everywhere from 0.125 to
0.5."""
DEAD_SHARE = 0.2
"""A share of logged steps at or above this with the reward variance exactly 0 is a run dead on and
off. Calibrated on the real logs and zoo dev: the real G=2 log has exact zeros on 44% of its steps
and the real legaloom curriculum on 39%, both reported; zoo dev: 27/40 group-condition runs at 0.2,
30/40 at 0.15, 32/40 at 0.1, 22/40 at 0.3, no healthy control at any value. Not lowered: the issue
wants intermittent chance ties at small G read as SMALL_GROUPS (the differential), not as a variance
that died."""
DEAD_MIN = 10
"""... with at least this many such steps. Calibrated on the zoo dev runs: 27/40 from 2 to 15, 23/40
at 20 and 17/40 at 40 (the zoo runs are 80 steps); no false finding at any value."""
SMALL_G = 4
CONFIDENCE = {"group_reward_std_mean": 0.9, "reward_std": 0.85, "reward_range": 0.75}
UNKNOWN_REWARD_CONFIDENCE = 0.6
_LABELS = {"reward_range": "reward max - min", "group_reward_std_mean": "mean group reward std"}
"""How findings name a reward-spread series (others by their own name)."""


@register
class RewardStdDeath(Detector):
    __doc__ = __doc__
    id = "REWARD_STD_DEATH"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("reward_std", "reward_mean")

    @record(frozen=True)
    class Knobs:
        #: Reward variance below this fraction of the run's healthy level is dead.
        die_below: float = DIE_BELOW
        #: The stretch before an onset must have been above this fraction of the healthy level.
        healthy_above: float = HEALTHY_ABOVE
        #: Consecutive logged steps below the threshold that make an episode.
        sustain: int = SUSTAIN
        #: Pass rate at or above which the reward is at the ceiling.
        ceiling: float = CEILING
        #: Pass-rate gain into an episode that counts as saturating (with easy_min).
        rise: float = RISE
        #: Smallest pass rate of a saturating episode reached by a rise (not at the ceiling).
        easy_min: float = EASY_MIN
        #: Pass rate at or below which a dead reward variance is "at the floor".
        floor: float = FLOOR
        #: Read from the batch's reward max - min, an episode is dropped while an advantage
        #: spread (adv_std, else advantage max - min) keeps this share of its healthy level.
        adv_alive: float = ADV_ALIVE
        #: A share of logged steps at or above this with the reward variance exactly 0 (every
        #: group collapsed on each) is a run that is dead on and off, however short each stretch.
        dead_share: float = DEAD_SHARE
        #: ... with at least this many such steps.
        dead_min: int = DEAD_MIN

    def needs(self, vitals: Vitals) -> str | None:
        if _source(vitals) is None:
            return "needs reward_std (or reward max and min), or per-group rewards"
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        src = _source(vitals)
        if src is None:
            return []
        k = self.knobs
        x = vitals.get(src)
        ref = healthy_level(x[np.isfinite(x)], 2 * k.sustain + 1)
        if not ref > 0:
            ref = 0.0
        eps = collapse_episodes(
            vitals,
            src,
            low=True,
            threshold=k.die_below * ref,
            healthy=k.healthy_above * ref,
            sustain=k.sustain,
            total_test=lambda a: np.abs(a) <= ZERO_ATOL,
        )
        eps = [part for ep in eps for part in self._split_at_ceiling(vitals, ep)]
        if src == "reward_range":
            # The step's reward max - min is a batch-level spread: with a few prompts per step it
            # swings with the draw. When the advantages show groups still varying, it is noise.
            eps = [ep for ep in eps if ep.total or not self._advantages_alive(vitals, ep)]
        out = [self._finding(vitals, src, ep, ref) for ep in eps]
        if not any(ep.total for ep in eps) and not vitals.too_short:
            f = self._intermittent(vitals, src, eps)
            if f is not None:
                # One phenomenon, one finding: the short stretches are part of the dead steps.
                return [f]
        return out

    def _split_at_ceiling(self, vitals: Vitals, ep: CollapseEpisode) -> list[CollapseEpisode]:
        """``ep`` as two episodes when it starts at the ceiling (every answer right) and the pass
        rate then leaves the ceiling for good: zero spread from solving everything is not the
        onset of a collapse at the floor (real logs: a run at the ceiling for 25 steps before
        it flipped to all-wrong had its collapse dated 25 steps early). Otherwise ``[ep]``."""
        k = self.knobs
        p = vitals.get("pass_rate")
        if p is None or ep.total:
            return [ep]
        sp = ep.span
        st = ep.steps[sp.first : sp.last + 1]
        at = np.searchsorted(vitals.steps, st)
        pr = p[np.clip(at, 0, p.size - 1)]
        ceil = np.isfinite(pr) & (pr >= k.ceiling)
        j = int(np.argmin(ceil)) if not ceil.all() else ceil.size  # first step off the ceiling
        rest = ceil[j:]
        if j < k.sustain or rest.size < k.sustain or rest.mean() > 0.2:
            return [ep]
        head = Span(sp.first, sp.first + j - 1, sp.onset, int(st[j - 1]), j)
        tail = Span(sp.first + j, sp.last, int(st[j]), sp.end, sp.n - j)
        return [
            CollapseEpisode(part, ep.steps, ep.x, part.median(ep.x), ep.pre)
            for part in (head, tail)
        ]

    def _intermittent(self, vitals: Vitals, src: str, eps: list[CollapseEpisode]) -> Finding | None:
        """The run's steps with reward variance exactly 0, when they are many: on each every
        group collapsed (ACR 1), so the step taught nothing, whether or not they form one
        stretch (small G and few prompts a step make it common)."""
        k = self.knobs
        x = vitals.get(src)
        ok = np.isfinite(x)
        dead = ok & (np.abs(x) <= ZERO_ATOL)
        n, n_dead = int(ok.sum()), int(dead.sum())
        if n == 0 or n_dead < k.dead_min or n_dead / n < k.dead_share:
            return None
        share = n_dead / n
        steps = vitals.steps[dead]
        inside = np.zeros(steps.shape, dtype=bool)
        for ep in eps:
            inside |= (steps >= ep.onset) & (steps <= ep.last_step)
        if inside.mean() >= 0.5:
            return None  # the dead steps are the episodes' own: they say it already
        p = vitals.get("pass_rate")
        level = float(nanmedian(p[dead])) if p is not None and np.isfinite(p[dead]).any() else None
        at_ceiling = level is not None and level >= k.ceiling
        label = _LABELS.get(src, src)
        msg = (
            f"{label} exactly 0 on {n_dead} of {n} logged steps ({share:.0%} >= "
            f"{k.dead_share:.0%}) since step {int(steps[0])}: on each every group's rewards "
            "agreed, so the step taught nothing"
        )
        if eps:
            longest = max(eps, key=lambda ep: ep.last_step - ep.onset)
            msg += (
                f"; {len(eps)} stretch(es) of low spread, the longest from step {longest.onset} "
                f"to {longest.last_step}"
            )
        if at_ceiling:
            msg += f"; pass rate there {fmt(level)}: the prompts are solved (saturation)"
        elif vitals.group_size and vitals.group_size <= SMALL_G:
            msg += f" (G = {vitals.group_size} makes whole-batch agreement common)"
        t = vitals.trainer
        return self.finding(
            msg,
            severity=Severity.INFO if at_ceiling else self.severity,
            onset_step=int(steps[0]),
            end_step=None,
            confidence=0.8,
            evidence="reward_std",
            metrics={
                "series": src,
                "kind": "intermittent",
                "dead_steps": n_dead,
                "logged_steps": n,
                "dead_share": rnd(share),
                "dead_share_threshold": k.dead_share,
                "pass_rate": rnd(level) if level is not None else None,
                "stretches": len(eps),
            },
            series=[src, "reward_mean"],
            actions=[
                advice.set_knob("group_size", t, "raise")
                + ", and the prompts per step: with few completions and prompts a step, "
                "whole steps agree by chance",
                *mitigations(vitals)[:2],
            ],
        )

    def _advantages_alive(self, vitals: Vitals, ep: CollapseEpisode) -> bool:
        """True when an advantage spread series keeps at least ``adv_alive`` of its healthy
        level during ``ep``."""
        k = self.knobs
        for name in ("adv_std", "adv_span"):
            x = vitals.get(name)
            if x is None:
                continue
            healthy = healthy_level(x[np.isfinite(x)], 2 * k.sustain + 1)
            during = median_in(vitals, name, ep.onset, ep.last_step)
            return bool(healthy > 0 and during >= k.adv_alive * healthy)
        return False

    def _finding(self, vitals: Vitals, src: str, ep: CollapseEpisode, ref: float) -> Finding:
        k = self.knobs
        st = reward_state(vitals, ep)
        label = _LABELS.get(src, src)
        thr = k.die_below * ref
        msg = f"{label} {compare(ep.level, '<', thr)} {episode_text(ep)}"
        if not ep.total:
            msg += f" (before: {fmt(ep.pre)})"
        metrics = episode_metrics(ep)
        metrics.update(series=src, threshold=rnd(thr, 6), healthy_level=rnd(ref, 6))
        conf = CONFIDENCE[src]
        severity = self.severity
        verdict, actions = _verdict(st, k, vitals.trainer)
        if verdict == "at the ceiling":
            severity = Severity.INFO
        if st.known:
            msg += f"; reward {verdict} (pass rate {fmt(st.p_span)})"
            metrics["pass_rate"] = rnd(st.p_span)
        else:
            msg += "; reward_mean not logged: cannot tell the ceiling from a collapse"
            conf = UNKNOWN_REWARD_CONFIDENCE
        metrics["verdict"] = verdict
        return self.finding(
            msg,
            severity=severity,
            onset_step=ep.onset,
            end_step=ep.end,
            confidence=episode_confidence(ep, k.sustain, conf),
            evidence="reward_std",
            metrics=metrics,
            actions=actions,
            series=[src, "reward_mean"],
            thresholds={src: thr},
        )


def _source(vitals: Vitals) -> str | None:
    """The per-group reward spread when the run has it (OpenRLHF's group_reward_std, or the
    mean group std from per-group rewards), else the logged reward_std (a whole-batch std in TRL
    from 0.27: it dies only when the whole batch agrees, never shows a per-group collapse, but
    when it dies the reward variance is dead), else the step's reward max - min."""
    if vitals.has("group_reward_std_mean"):
        return "group_reward_std_mean"
    if vitals.has("reward_std"):
        return "reward_std"
    if vitals.has("reward_range") and vitals.group_size != 1:
        return "reward_range"  # with G = 1 it spans prompts, not a group (GROUP_SIZE_ONE)
    return None


def _verdict(st: RewardState, k, trainer: str | None) -> tuple[str, list[str]]:
    rollback = "roll back to a checkpoint from before the onset and " + advice.set_knob(
        "learning_rate", trainer, "lower"
    )
    if not st.known:
        return "unknown", [
            "log reward_mean to tell saturation from a behaviour collapse",
            "check the verifier with known-good and known-bad answers",
        ]
    if st.saturated(k.ceiling, k.rise, k.easy_min):
        return "at the ceiling", [
            "add harder prompts: the policy solves this set",
            "or stop training here: more steps on this set teach nothing",
        ]
    if st.p_span <= k.floor:
        return "not at the ceiling: at the floor", [
            "check the verifier with known-good answers (a broken verifier scores 0)",
            "use a curriculum or easier prompts",
            rollback,
        ]
    if math.isnan(st.p_span):
        return "unknown", []
    return "not at the ceiling", [
        "check the reward function does not return a constant",
        "check that the completions of a group differ ("
        + advice.knob("temperature", trainer)
        + ", seed, generation cache)",
        rollback,
    ]

"""Group size 1: a group-relative estimator with one completion per prompt has no baseline.

## What is happening
GRPO, Dr. GRPO and RLOO learn from the differences between the completions of one prompt: the
group's mean is the baseline each completion is compared with. With one completion per prompt
(G = 1) there is no group: TRL refuses it, and veRL gives the lone completion mean 0 and std 1,
so its advantage is its raw reward. The run is then REINFORCE without a baseline: every reward
above zero pushes its completion up, however bad it is, the gradient's variance is high, and
none of the group-level vital signs (ACR, reward variance within groups) mean anything.

## What it looks like in the recording
The configuration says `actor_rollout_ref.rollout.n=1` (veRL), `num_generations=1`, or the
per-group rewards hold one completion per group. Without the configuration, veRL's console shows
it too: `critic/advantages/max` and `min` equal `critic/score/max` and `min` on every step.

## How the detector decides
It fires when the group size is 1 (from the configuration, the per-group rewards, or inferred
from advantages equal to rewards on at least 90% of the steps) and the estimator is a
group-baseline one (the GRPO family; an unknown estimator counts as one, since the group size
is only ever 1 by mistake in such runs). At least :knob:`min_steps` logged steps are needed.
A critic (PPO/GAE) or batch baseline (REINFORCE++) with G = 1 is what those estimators expect
and is not reported.

## What to try
- Sample several completions per prompt: 4 to 16 is usual for GRPO (the finding names the
  setting in the run's trainer).
- If one completion per prompt is what you want, use an estimator with another baseline (PPO
  with a critic, REINFORCE++, ReMax) rather than a group-relative one.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlvitals import advice, vocabulary
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import needs

MIN_STEPS = 5
"""Fewest logged steps needed to judge a run. Calibrated on the real logs: fires on the one G = 1
GRPO log (verdict NO_GROUP_BASELINE) and none of the 14 others, for any value from 1 to 20; silent
on zoo dev and corpus healthy runs."""


@register
class GroupSizeOne(Detector):
    __doc__ = __doc__
    id = "GROUP_SIZE_ONE"
    severity = Severity.WARN
    family = "setup"
    key_metrics = ("adv_max", "reward_max")

    @record(frozen=True)
    class Knobs:
        #: Fewest logged steps needed to judge a run.
        min_steps: int = MIN_STEPS

    def needs(self, vitals) -> str | None:
        if vitals.group_size is None:
            return (
                "needs the group size (the trainer's configuration, per-group rewards, or "
                "veRL's critic/advantages and critic/score extremes)"
            )
        return needs(vitals, ["reward_mean", "adv_max", "acr"], self.knobs.min_steps)

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        if vitals.group_size != 1 or vitals.n_steps < self.knobs.min_steps:
            return []
        est = vocabulary.info(vitals.estimator)
        if est is not None and not est.group_baseline:
            return []
        how = vitals.group_size_from or "the configuration"
        name = vitals.estimator or "a group-relative estimator"
        t = vitals.trainer
        msg = (
            f"G = 1 with {name}: every group holds one completion, so there is no group "
            f"baseline (G from {how})"
        )
        if t == "verl":
            msg += "; veRL makes the raw reward the advantage (REINFORCE without a baseline)"
        return [
            self.finding(
                msg,
                onset_step=None,
                confidence=0.95 if how != "advantages equal to rewards" else 0.85,
                evidence="config" if how == "the configuration" else how,
                metrics={"group_size": 1, "estimator": vitals.estimator, "group_size_from": how},
                series=["adv_max", "reward_max", "adv_min", "reward_min"],
                actions=[
                    advice.set_knob("group_size", t, "raise", " to 4-16"),
                    "or use an estimator with a critic or batch baseline (PPO/GAE, REINFORCE++)",
                ],
            )
        ]

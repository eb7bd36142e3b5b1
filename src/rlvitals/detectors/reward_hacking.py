"""Reward hacking: training reward keeps rising while the evaluation score falls or stands still.

## What is happening
The policy is getting better at the training reward without getting better at the task the
evaluation measures. When the evaluation falls while the training reward rises, the policy has
found something the reward pays for that is not the task: a verifier loophole (answer formats
the checker accepts, repeated answers, a parse bug), a length or style bias of a reward model, or
memorised training prompts. When the evaluation merely stands still, the training set is being
fitted beyond what transfers (too many epochs over the same prompts).

## What it looks like in the recording
`reward_mean` climbs steadily; an evaluation series (`eval/reward_mean`, an accuracy, or a veRL
`val-core/.../reward/mean@1`) peaks and then falls, or flattens early while the training curve
keeps going up.

## How the detector decides
It reads the evaluation series named by :knob:`eval_key`, or, when that is empty, every evaluation
series whose name says reward, accuracy, score or pass rate; it needs :knob:`min_eval_points`
values of each. The evaluation is smoothed by a centred rolling median of three points and its
noise estimated from the spread of successive differences. The training reward at an evaluation
step is the median of the training values logged in the :knob:`train_window` steps up to it.

*Falling*: the smoothed evaluation peaks at least :knob:`min_after` points before its end, the last
:knob:`min_after` values sit below the peak by at least :knob:`eval_drop` of the peak and by at
least :knob:`noise_k` noise units, and the training reward rose by at least :knob:`train_gain` of
its range since the peak (warning; onset = the peak).
*Plateau*: the evaluation never rose by more than :knob:`eval_drop` of its level after the first
third of the evaluations while the training reward rose by at least :knob:`train_gain` over the
same steps (informational). A run is flagged only when every evaluation series read shows one of
the two; one series that keeps improving clears it.

## What to try
- Read completions from after the onset with their rewards: look for answers the verifier accepts
  that are not correct (format tricks, multiple answers, empty boxes).
- Tighten the verifier; add a format or length penalty; evaluate with a stricter checker.
- Stop at the evaluation peak (checkpoint selection on eval), use fresh prompts or fewer epochs.
- Add a KL term or raise its coefficient to keep the policy near its reference.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np

from rlvitals._median import median
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import (
    Points,
    compare,
    eval_points,
    fmt,
    needs,
    points,
    rnd,
    rolling_median,
)

EVAL_KEY = ""
"""Evaluation series to compare with; empty = every reward-, accuracy- or score-like one. Not
calibrated: a user's choice, not a threshold; not swept."""
MIN_EVAL_POINTS = 4
"""Fewest evaluation values needed to judge a series. Not calibrated: a design choice; zoo dev (8/16
REWARD_HACKING and POLICY_DEGRADATION runs), real logs and corpus findings are the same from 1 to
16."""
MIN_AFTER = 2
"""Evaluation points that must follow the peak (and whose values form the end level). Not
calibrated: a design choice; zoo dev, real logs and corpus findings are the same from 1 to 8."""
EVAL_DROP = 0.05
"""Relative evaluation drop from the peak (share of the peak) that counts as falling. Calibrated on
the zoo dev runs and real logs: 8/16 zoo sign runs and no real log from 0.0125 to 0.2 on every set;
the noise test below is the binding one."""
NOISE_K = 2.0
"""The drop must also exceed this many noise units of the evaluation series. Calibrated on the zoo
dev runs: 8/16 REWARD_HACKING and POLICY_DEGRADATION runs from 0.5 to 2, 7/16 from 3; no false
finding on any set at any value."""
TRAIN_GAIN = 0.05
"""Training-reward rise, as a share of the reward range, that counts as rising. Calibrated on the
real logs: at 0.0375 or below the veRL GPG MATH log (verdict: REWARD_HACKING 'not') fires on val
MATH 0.537 -> 0.498 while its train score creeps at 0.93; 0.05 to 0.2 give the same findings
everywhere."""
TRAIN_WINDOW = 20
"""Training steps up to an evaluation step whose median training reward is compared. Calibrated on
the real logs: from 30 the same 'not' log fires; 5 to 20 give the same findings everywhere (80 loses
a zoo run)."""
EVAL_SMOOTH = 3
NOISE_SCALE = 1.4826 / np.sqrt(2.0)  # MAD of successive differences → std of one value
EARLY_SHARE = 1 / 3

_SCORE = re.compile(r"reward|acc|score|pass|correct|solve", re.IGNORECASE)
_NOT_SCORE = re.compile(
    r"std|min|max|loss|length|len|time|runtime|per_second|samples|steps|"
    r"tokens|entropy|kl",
    re.IGNORECASE,
)


@register
class RewardHacking(Detector):
    id = "REWARD_HACKING"
    severity = Severity.WARN
    family = "reward"
    key_metrics = ("reward_mean", "eval/reward_mean")

    @record(frozen=True)
    class Knobs:
        #: Evaluation series to compare with (e.g. ``eval/reward_mean``); empty = every
        #: reward-, accuracy- or score-like evaluation series.
        eval_key: str = EVAL_KEY
        #: Fewest evaluation values needed to judge a series.
        min_eval_points: int = MIN_EVAL_POINTS
        #: Evaluation points that must follow the peak (and whose values form the end level).
        min_after: int = MIN_AFTER
        #: Relative evaluation drop from the peak (share of the peak) that counts as falling.
        eval_drop: float = EVAL_DROP
        #: The drop must also exceed this many noise units of the evaluation series.
        noise_k: float = NOISE_K
        #: Training-reward rise, as a share of the reward range, that counts as rising.
        train_gain: float = TRAIN_GAIN
        #: Training steps up to an evaluation step whose median training reward is compared.
        train_window: int = TRAIN_WINDOW

    def needs(self, vitals) -> str | None:
        k = self.knobs
        if vitals.get("reward_mean") is None:
            return "needs reward_mean and an evaluation series"
        names = [k.eval_key] if k.eval_key else _score_series(vitals.eval_series)
        if not names:
            return "needs an evaluation series (eval/reward_mean, an accuracy or a score)"
        return needs(vitals, names, k.min_eval_points)

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        train = points(vitals, "reward_mean")
        if train is None:
            return []
        names = [k.eval_key] if k.eval_key else _score_series(vitals.eval_series)
        span = float(vitals.reward_max - vitals.reward_min) or 1.0
        verdicts = []
        for name in names:
            ev = eval_points(vitals, name)
            if ev is None or ev.n < max(k.min_eval_points, k.min_after + 1):
                continue  # no point before the last min_after ones to be a peak
            verdict = self._judge(ev, train, span)
            if verdict is None:
                return []  # this evaluation keeps improving (or is too noisy): no finding
            verdicts.append(verdict)
        if not verdicts:
            return []
        falling = [v for v in verdicts if v["kind"] == "falling"]
        pick = max(falling or verdicts, key=lambda v: v["train_gain"])
        return [self._finding(pick, falling != [])]

    def _judge(self, ev: Points, train: Points, span: float) -> dict | None:
        k = self.knobs
        es = rolling_median(ev.values, EVAL_SMOOTH, edges="pad")
        noise = _noise(ev.values)
        tr = np.array([_train_at(train, int(s), k.train_window) for s in ev.steps])
        peak = int(np.argmax(es[: ev.n - k.min_after]))
        # the median can move a sharp peak by one point: take the raw maximum next to it
        near = slice(max(0, peak - 1), min(ev.n - k.min_after, peak + 2))
        peak = near.start + int(np.argmax(ev.values[near]))
        end_level = float(median(ev.values[-k.min_after :]))
        drop = float(es[peak]) - end_level
        gain = (tr[-1] - tr[peak]) / span
        if (
            drop >= k.eval_drop * abs(float(es[peak]))
            and drop >= k.noise_k * noise
            and np.isfinite(gain)
            and gain >= k.train_gain
        ):
            return {
                "kind": "falling",
                "name": ev.name,
                "onset": int(ev.steps[peak]),
                "eval_peak": float(es[peak]),
                "eval_end": end_level,
                "drop": drop,
                "noise": noise,
                "train_gain": float(gain),
            }
        first = int(np.ceil(ev.n * EARLY_SHARE))
        if ev.n - first < k.min_after + 1:
            return None
        start_level = float(es[first])
        rise = float(np.max(es[first:])) - start_level
        gain = (tr[-1] - tr[first]) / span
        if rise <= k.eval_drop * abs(start_level) and gain >= k.train_gain:
            return {
                "kind": "plateau",
                "name": ev.name,
                "onset": int(ev.steps[first]),
                "eval_peak": start_level + rise,
                "eval_end": end_level,
                "drop": -rise,
                "noise": noise,
                "train_gain": float(gain),
            }
        return None

    def _finding(self, v: dict, falling: bool) -> Finding:
        k = self.knobs
        name = v["name"]
        if falling:
            msg = (
                f"{name} fell from its peak {fmt(v['eval_peak'])} to {fmt(v['eval_end'])} "
                f"(drop {compare(v['drop'], '>=', k.eval_drop)} of the peak and "
                f">= {fmt(k.noise_k)}x noise {fmt(v['noise'])}) since step {v['onset']}, while "
                f"reward_mean rose by {compare(v['train_gain'], '>=', k.train_gain)} of its range"
            )
        else:
            msg = (
                f"{name} stayed flat from step {v['onset']} (gain {fmt(-v['drop'])}, end "
                f"{fmt(v['eval_end'])}) while reward_mean rose by "
                f"{compare(v['train_gain'], '>=', k.train_gain)} of its range"
            )
        return self.finding(
            msg,
            severity=self.severity if falling else Severity.INFO,
            onset_step=v["onset"],
            end_step=None,
            confidence=0.8 if falling else 0.6,
            evidence=f"reward_mean,{name}",
            series=["reward_mean", name],
            metrics={
                "kind": v["kind"],
                "eval_series": name,
                "eval_peak": rnd(v["eval_peak"]),
                "eval_end": rnd(v["eval_end"]),
                "eval_noise": rnd(v["noise"]),
                "eval_drop": k.eval_drop,
                "train_gain": rnd(v["train_gain"]),
                "train_gain_threshold": k.train_gain,
            },
            actions=_ACTIONS if falling else _PLATEAU_ACTIONS,
        )


_ACTIONS = [
    "read completions after the onset with their rewards: look for answers the verifier "
    "accepts that are not correct",
    "tighten the verifier; add a format or length penalty; evaluate with a stricter checker",
    "select the checkpoint at the evaluation peak",
    "add a KL term or raise its coefficient",
]
_PLATEAU_ACTIONS = [
    "stop at the evaluation plateau (checkpoint selection on eval), or use fresh prompts",
    "train fewer epochs over the same prompts",
    "check that the evaluation measures what the training reward measures",
]


def _score_series(eval_series: dict) -> list[str]:
    """Eval series whose names say reward/accuracy/score/pass rate, sorted."""
    return sorted(
        n
        for n in eval_series
        if _SCORE.search(n.split("/", 1)[-1]) and not _NOT_SCORE.search(n.split("/", 1)[-1])
    )


def _noise(x: np.ndarray) -> float:
    """Std of one value, from the MAD of successive differences (robust to trends)."""
    if x.shape[0] < 3:
        return 0.0
    d = np.diff(x)
    return float(median(np.abs(d - median(d))) * NOISE_SCALE)


def _train_at(train: Points, step: int, window: int) -> float:
    """Median training reward logged in ``(step - window, step]``; nearest earlier value else."""
    lo = np.searchsorted(train.steps, step - window, side="right")
    hi = np.searchsorted(train.steps, step, side="right")
    if hi > lo:
        return float(median(train.values[lo:hi]))
    if hi > 0:
        return float(train.values[hi - 1])
    return float(train.values[0])

"""Saturation: the policy solves the prompt set, so most groups teach nothing — success, and a hint.

## What is happening
As a run learns its prompts, more groups are solved by every completion. Those groups are
collapsed (all rewards equal) and teach nothing, so the ACR rises honestly with the reward.
This is not a failure of the trainer, but every further step on this prompt set buys less:
rollouts are generated, scored and thrown away. It is the moment to add harder prompts.

## What it looks like in the recording
`reward_mean` climbs toward the maximum reward; the ACR climbs with it, and the collapsed groups
are mostly solved ones (`acr_solve_all`). The rise is gradual and matches the expected collapse
for the pass rate. A trainer that logs no zero-std fraction (veRL, OpenRLHF) shows only the
reward pinned near its ceiling.

## How the detector decides
It reads the best evidence the run has:
- **measured ACR** (per-group rewards or a zero-std fraction): over the last :knob:`tail` of the
  run's logged points (at least :knob:`min_points`), the median pass rate (reward rescaled to
  [0, 1]) must be at or above :knob:`pass_rate_min`, the median ACR at or above :knob:`acr_min`,
  and at least :knob:`easy_share` of the collapsed groups solved ones (when the split is known).
  The rise must also be explained by the pass rate: compared with the run's first quarter, the
  excess ACR (observed - expected) rose by less than 0.25, or (below a pass rate of
  :knob:`ceiling`, when the excess is unknown) the reward std normalised by sqrt(p (1 - p))
  kept 70% of its level — otherwise the groups collapsed faster than the reward rose, which is
  a collapse (DEGENERATE_GROUPS), not saturation.
- **estimated ACR** (no ACR logged, G known, rewards binary or not known otherwise): the
  expected ACR P0(p, G) = p^G + (1 - p)^G at the step's pass rate stands in for the ACR, under
  the same gates; the finding says it is an estimate (for binary rewards a lower bound: prompts
  of unequal difficulty collapse more often than alike ones). Partial-credit rewards (a step's
  reward min or max inside the range) break the formula and fall to the next mode.
- **reward at the ceiling** (no ACR and no G, G = 1, or an estimator with a critic such as
  PPO): the median pass rate over the tail at or above :knob:`ceiling`.

Without a measured ACR, the pass rate must come from a known reward range (stated, the
per-group rewards, the logged reward min and max, or [0, 1] when the rewards stay in it): a
range guessed from the mean reward alone is no ceiling, and the detector says it needs one.
The onset is the step from which the trailing mean (25 logged points) of the series judged
stayed within 0.05 below its gate to the end. Spending compute on a saturated signal for a sustained stretch is a warning: the
finding is a warning when the saturated stretch spans at least :knob:`warn_steps` training
steps, informational when shorter.

## What to try
- Add harder prompts, or filter out prompts the policy now always solves (the finding names the
  setting in the run's trainer).
- Or stop: more steps on a saturated set mostly burn compute.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals import advice, vocabulary
from rlvitals._median import median
from rlvitals._record import record
from rlvitals.detectors._collapse import EXCESS_JUMP, STD_RATIO_MIN, reward_std_ratio
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import compare, compress, median_where, rnd
from rlvitals.vitals import Vitals

TAIL = 0.2
"""Share of the run's logged points (its end) that is judged. Not calibrated: a design choice; zoo
dev (8/8 SATURATED), real logs (5/5 saturated) and corpus findings are the same from 0.05 to 0.8."""
MIN_POINTS = 10
"""... but at least this many points. Not calibrated: a design choice; zoo dev, real logs and corpus
findings are the same from 2 to 40."""
PASS_RATE_MIN = 0.8
"""Median pass rate over the tail at or above this. Calibrated on the real logs and zoo dev: the
real saturated runs sit at 0.94-0.98; 8/8 zoo SATURATED, 5/5 real and 2/2 corpus from 0.2 to 0.8,
and no healthy or 'not' run fires at 0.2 (the ACR test binds)."""
ACR_MIN = 0.5
"""Median ACR (measured or estimated) over the tail at or above this. Calibrated on the real logs,
zoo dev and corpus: the three real saturated GRPO/GPG runs' estimated ACR is 0.73-0.92, and at 0.75
one of them and 8/8 zoo SATURATED runs are lost; at 0.375 a corpus healthy run fires."""
EASY_SHARE = 0.6
"""Share of collapsed groups solved by every completion, when the split is known. Calibrated on the
zoo dev runs: 8/8 SATURATED runs from 0.15 to 0.9, 0/8 when every group must be solved; corpus 2/2
up to 0.9."""
CONFIDENCE = {"acr": 0.8, "estimate": 0.7, "ceiling": 0.6}
CEILING = 0.9
"""Pass rate at or above which the rise needs no further explanation; without ACR and G, the pass
rate that counts as saturated. Calibrated on the real logs: the two real PPO runs without a group
size (median pass rate 0.945 and 0.954) are judged by it alone and are lost at 1.35 (3/5); at 0.45
the HEALTHY real log and a 'not' log fire; the same findings from 0.675 to 0.9."""
WARN_STEPS = 50
"""A saturated stretch of at least this many training steps is a warning. Calibrated on the zoo dev
runs: 8/8 SATURATED runs (80 steps) warn from 12 to 50, 7/8 at 75; the real saturated stretches are
longer (335 and 1054 steps on the PPO logs): 5/5 up to 50, 4/5 at 100."""
SMOOTH = 25
"""Logged points of the trailing mean that dates the onset."""
HYSTERESIS = 0.05
"""The stretch lasts while the trailing mean stays within this below the gate."""


@register
class Saturation(Detector):
    __doc__ = __doc__
    id = "SATURATION"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("acr", "acr_solve_all", "reward_mean")

    @record(frozen=True)
    class Knobs:
        #: Share of the run's logged points (its end) that is judged.
        tail: float = TAIL
        #: ... but at least this many points.
        min_points: int = MIN_POINTS
        #: Median pass rate over the tail at or above this.
        pass_rate_min: float = PASS_RATE_MIN
        #: Median ACR (measured or estimated) over the tail at or above this.
        acr_min: float = ACR_MIN
        #: Share of collapsed groups solved by every completion, when the split is known.
        easy_share: float = EASY_SHARE
        #: Pass rate at or above which the rise needs no further explanation (at the ceiling);
        #: without ACR and G, the pass rate that counts as saturated.
        ceiling: float = CEILING
        #: A saturated stretch of at least this many training steps is a warning.
        warn_steps: int = WARN_STEPS

    def needs(self, vitals: Vitals) -> str | None:
        if not vitals.has("pass_rate"):
            return "needs reward_mean: not logged"
        if _mode(vitals)[0] != "acr" and vitals.reward_range_from == "mean reward":
            return (
                "needs the reward range: the mean reward leaves [0, 1] and the run states no "
                "range, so its pass rate is a guess (pass --reward-range MIN,MAX)"
            )
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        k = self.knobs
        if not vitals.has("pass_rate") or vitals.batch_trap or vitals.too_short:
            return []
        mode, name = _mode(vitals)
        if mode != "acr" and vitals.reward_range_from == "mean reward":
            return []  # a pass rate from a guessed range cannot say the ceiling is reached
        steps, x = compress(vitals.steps, vitals.get(name))
        n = x.shape[0]
        if n < k.min_points:
            return []
        m = max(k.min_points, round(n * k.tail))
        first = int(steps[n - m])
        tail = vitals.steps >= first
        p = vitals.get("pass_rate")[tail]
        p = p[np.isfinite(p)]
        if p.size == 0:
            return []
        p_tail = float(median(p))
        x_tail = float(median(x[n - m :]))
        metrics: dict = {"pass_rate": rnd(p_tail), "mode": mode}
        easy_txt = ""
        if mode == "ceiling":
            if p_tail < k.ceiling:
                return []
            gate = k.ceiling
            what = (
                f"pass rate {compare(p_tail, '>=', k.ceiling)} over the last {m} logged steps: "
                "the reward sits at its ceiling (no ACR or group size logged to say more)"
            )
        else:
            if p_tail < k.pass_rate_min or x_tail < k.acr_min:
                return []
            metrics["acr"] = rnd(x_tail)
            gate = k.acr_min
            sa = vitals.get("acr_solve_all") if mode == "acr" else None
            if sa is not None:
                tot = float(np.nansum(vitals.get("acr")[tail]))
                easy = float(np.nansum(sa[tail])) / tot if tot > 0 else 0.0
                if easy < k.easy_share:
                    return []
                metrics["easy_share"] = rnd(easy)
                easy_txt = f", {easy:.0%} of collapsed groups solved by every completion"
            if mode == "acr" and not _explained(vitals, tail, steps[n // 4], p_tail >= k.ceiling):
                return []  # the ACR rose more than the pass rate explains: a collapse, not this
            label = "ACR" if mode == "acr" else "estimated ACR"
            what = (
                f"{label} {compare(x_tail, '>=', k.acr_min)} with pass rate "
                f"{compare(p_tail, '>=', k.pass_rate_min)} over the last {m} logged steps"
                f"{easy_txt}"
            )
            if mode == "estimate":
                what += (
                    f" (P0 = p^G + (1-p)^G at the pass rate with G = {vitals.group_size}: an "
                    "estimate, the run logs no zero-std fraction"
                    + ("; rewards assumed binary)" if vitals.binary_rewards is None else ")")
                )
        onset = _onset(steps, x, gate, first)
        stretch = int(vitals.steps[-1]) - onset + 1
        warn = stretch >= k.warn_steps
        metrics.update(saturated_steps=stretch, warn_steps=k.warn_steps)
        msg = f"{what}: the run is saturating its prompt set since step {onset} ({stretch} steps)"
        return [
            self.finding(
                msg,
                severity=self.severity if warn else Severity.INFO,
                onset_step=onset,
                end_step=None,
                confidence=CONFIDENCE[mode],
                evidence=vitals.evidence if mode == "acr" else "reward_mean",
                metrics=metrics,
                series=[name, "pass_rate", "acr_solve_all"] if name != "pass_rate" else [name],
                thresholds={name: gate}
                | ({} if name == "pass_rate" else {"pass_rate": k.pass_rate_min}),
                actions=[
                    "add harder prompts, or filter prompts the policy always solves ("
                    + advice.mitigation("dynamic_sampling", vitals.trainer)
                    + ")",
                    "or stop training: more steps on a saturated set mostly burn compute",
                ],
            )
        ]


def _mode(vitals: Vitals) -> tuple[str, str]:
    """``(mode, series)``: ``acr`` (measured), ``estimate`` (P0 from pass rate and G) or
    ``ceiling`` (the pass rate alone)."""
    if vitals.measured_acr:
        return "acr", "acr"
    est = vocabulary.info(vitals.estimator)
    if (
        vitals.expected_acr_from == "estimate"
        and vitals.has("expected_acr")
        and vitals.binary_rewards is not False
        and (vitals.group_size or 0) >= 2  # P0 with G = 1 is 1 whatever the pass rate
        and (est is None or est.group_baseline)  # a critic's advantages ignore the groups
    ):
        return "estimate", "expected_acr"
    return "ceiling", "pass_rate"


def _onset(steps: np.ndarray, x: np.ndarray, gate: float, default: int) -> int:
    """First step from which the trailing mean of ``x`` stays above ``gate`` minus
    :data:`HYSTERESIS` (sampling noise around the gate neither starts nor ends a stretch)."""
    c = np.concatenate(([0.0], np.cumsum(x, dtype=np.float64)))
    i = np.arange(x.shape[0])
    lo = np.maximum(i + 1 - SMOOTH, 0)
    w = (c[i + 1] - c[lo]) / (i + 1 - lo)
    below = np.flatnonzero(w < gate - HYSTERESIS)
    if not below.size:
        return int(steps[0])
    if below[-1] + 1 < steps.size:
        return int(steps[below[-1] + 1])
    return default


def _explained(vitals: Vitals, tail: np.ndarray, early_end: int, at_ceiling: bool) -> bool:
    """True when the tail's ACR is explained by its pass rate, compared with the run's first
    quarter: the excess ACR did not jump, or (below the ceiling) the normalised reward std kept
    its level."""
    early = vitals.steps <= early_end
    ex = vitals.get("excess_acr")
    jump = median_where(ex, tail) - median_where(ex, early)
    if jump == jump:
        return jump < EXCESS_JUMP
    if at_ceiling:
        return True
    ratio = reward_std_ratio(vitals, tail, early)
    return True if ratio is None else ratio >= STD_RATIO_MIN

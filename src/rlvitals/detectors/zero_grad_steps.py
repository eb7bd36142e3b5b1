"""Zero-gradient steps: training steps whose gradient norm and loss are both exactly zero.

## What is happening
A step with a gradient norm of exactly 0 and a loss of exactly 0 updated nothing: every
completion's advantage was zero (every group of the batch had identical rewards) and no KL or
entropy term contributed, or the loss was masked out entirely (all completions filtered or
truncated and masked). The rollouts of that step cost generation time and taught nothing. When
every step looks like this the run has no learning signal at all; ADV_COLLAPSE reports that as a
collapse of the advantages, and this detector counts the steps in addition.

## What it looks like in the recording
`grad_norm` and `loss` (or `pg_loss`) print as `0.0` on some steps, in stretches or scattered,
while `reward_mean` keeps being logged. With one prompt per step they alternate with normal steps.

## How the detector decides
It counts logged steps where `grad_norm` and the loss (`loss`, else `pg_loss`) are both exactly
zero. Values printed with few decimals (`0.000` in a console log) are ambiguous: when every
gradient norm is a multiple of some 10^-d, zeros count only if the median non-zero gradient norm
is at least :knob:`rounding_margin` such quanta. The detector fires with at least :knob:`min_steps`
zero steps; it is a warning when their share of the logged steps from the first zero step on is
at least :knob:`warn_frac`, informational below. It is informational too when the reward at the zero steps sits within
:knob:`edge` of either end of the reward range: a saturated (or hopeless) prompt set gives
all-equal groups honestly, and the collapse family reports it as saturation. Onset is the first
zero step, end the last one (open when it is the last logged step).

## What to try
- Read the collapse findings (ADV_COLLAPSE, DEGENERATE_GROUPS): zero steps are what total
  advantage collapse looks like from the optimiser.
- Filter or resample groups with identical rewards (dynamic sampling), or use AVSPO so collapsed
  groups still give a signal.
- Check for a loss mask that drops every token (all completions truncated or filtered).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._median import median
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import fmt, rnd

MIN_STEPS = 3
"""Fewest zero-gradient steps that make a finding. Calibrated on the corpus: 6/6 failures from 1 to
6, 5/6 at 12; no zoo dev, real or corpus healthy run has a zero step to count."""
WARN_FRAC = 0.05
"""Share of logged steps with zero gradient at or above which the finding is a warning. Not
calibrated: a design choice; corpus 6/6 and every healthy run the same from 0.0125 to 0.2."""
ROUNDING_MARGIN = 20.0
"""For rounded logs: the median non-zero gradient norm must be at least this many rounding quanta
for a printed zero to count as a real zero. Not calibrated: a design choice; the findings are the
same from 5 to 80 on every set."""
MAX_DECIMALS = 6
EDGE = 0.1
"""Reward at the zero steps within this share of the reward range from its maximum (or minimum)
means saturation (or a hopeless set): info. Calibrated on the corpus: 6/6 warn from 0.025 to 0.1,
5/6 at 0.15 and 1/6 at 0.4 (more of them read as saturation, info); no healthy run fires."""


@register
class ZeroGradSteps(Detector):
    id = "ZERO_GRAD_STEPS"
    severity = Severity.WARN
    family = "gradient"
    key_metrics = ("grad_norm", "loss", "pg_loss")

    @record(frozen=True)
    class Knobs:
        #: Fewest zero-gradient steps that make a finding.
        min_steps: int = MIN_STEPS
        #: Share of logged steps with zero gradient at or above which the finding is a warning.
        warn_frac: float = WARN_FRAC
        #: For rounded logs: the median non-zero gradient norm must be at least this many
        #: rounding quanta for a printed zero to count as a real zero.
        rounding_margin: float = ROUNDING_MARGIN
        #: Reward at the zero steps within this share of the reward range from its maximum (or
        #: minimum) means saturation (or a hopeless prompt set): informational.
        edge: float = EDGE

    def needs(self, vitals) -> str | None:
        if vitals.get("grad_norm") is None:
            return "needs grad_norm and loss (or pg_loss)"
        if vitals.get("loss") is None and vitals.get("pg_loss") is None:
            return "needs loss or pg_loss beside grad_norm"
        return None

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        grad = vitals.get("grad_norm")
        loss_name = "loss" if vitals.get("loss") is not None else "pg_loss"
        loss = vitals.get(loss_name)
        if grad is None or loss is None:
            return []
        grad = np.asarray(grad, dtype=np.float64)
        loss = np.asarray(loss, dtype=np.float64)
        logged = np.isfinite(grad)
        n_logged = int(logged.sum())
        zero = (grad == 0.0) & (loss == 0.0)
        n_zero = int(zero.sum())
        if n_zero < k.min_steps or n_logged == 0:
            return []
        nonzero = grad[logged & (grad != 0.0)]
        quantum = _quantum(grad[logged])
        if (
            quantum is not None
            and nonzero.size
            and median(np.abs(nonzero)) < k.rounding_margin * quantum
        ):
            return []  # printed zeros are indistinguishable from small rounded values
        steps = np.asarray(vitals.steps)
        idx = np.flatnonzero(zero)
        logged_idx = np.flatnonzero(logged)
        since = int((logged_idx >= idx[0]).sum())  # logged steps from the first zero step on
        frac = n_zero / since
        level = _reward_level(vitals, zero)
        at_edge = level is not None and (level >= 1 - k.edge or level <= k.edge)
        warn = frac >= k.warn_frac and not at_edge
        onset, last = int(steps[idx[0]]), int(steps[idx[-1]])
        still = idx[-1] == logged_idx[-1]
        return [
            self.finding(
                f"{n_zero} of the {since} logged steps since step {onset} ({fmt(frac)}) had "
                f"grad_norm and {loss_name} exactly 0 (last at step {last})"
                + (f" (share >= {fmt(k.warn_frac)})" if warn else "")
                + (
                    f"; reward there {fmt(level)} of its range: saturation, not a bug"
                    if at_edge
                    else ""
                ),
                severity=self.severity if warn else Severity.INFO,
                onset_step=onset,
                end_step=None if still else last,
                confidence=round(min(1.0, 0.6 + 0.4 * min(1.0, frac / k.warn_frac)), 3),
                evidence=f"grad_norm,{loss_name}",
                series=["grad_norm", loss_name],
                metrics={
                    "zero_steps": n_zero,
                    "logged_steps": n_logged,
                    "steps_since_first": since,
                    "zero_frac": rnd(frac),
                    "warn_frac": k.warn_frac,
                    "min_steps": k.min_steps,
                    "reward_level": None if level is None else rnd(level),
                },
                actions=_actions(vitals.trainer),
            )
        ]


def _actions(t: str | None) -> list[str]:
    return [
        "read the collapse findings (ADV_COLLAPSE, DEGENERATE_GROUPS): zero steps are total "
        "advantage collapse seen from the optimiser",
        advice.mitigation("dynamic_sampling", t) + "; or " + advice.mitigation("avspo", t),
        "check for a loss mask that drops every token (all completions truncated or filtered)",
    ]


def _reward_level(vitals, mask: np.ndarray) -> float | None:
    """Median reward at the ``mask`` steps, as a share of the reward range; None if unknown."""
    r = vitals.get("reward_mean")
    if r is None:
        return None
    vals = np.asarray(r, dtype=np.float64)[mask]
    vals = vals[np.isfinite(vals)]
    span = float(vitals.reward_max - vitals.reward_min)
    if vals.size == 0 or span <= 0:
        return None
    return float((median(vals) - vitals.reward_min) / span)


def _quantum(x: np.ndarray) -> float | None:
    """The rounding step 10^-d when every value is a multiple of it (d <= 6), else None.

    >>> _quantum(np.array([0.0, 0.125, 0.3])), _quantum(np.array([0.1234567, 0.5]))
    (0.001, None)
    """
    for d in range(MAX_DECIMALS + 1):
        scaled = x * 10.0**d
        if np.all(np.abs(scaled - np.round(scaled)) < 1e-6):
            return 10.0**-d
    return None

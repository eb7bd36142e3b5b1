"""Non-finite gradients or loss: the run produced inf, or its loss and gradient went silent as NaN.

## What is happening
An infinite gradient norm or loss means the update overflowed; a gradient norm and loss that stop
being finite while the rest of the run keeps logging mean they turned NaN (a NaN logged by a
trainer is indistinguishable from a missing value once it is in a log, so the detector looks for
that silence). Either way the weights are at risk: one NaN update poisons every parameter it
touches, and everything the run does afterwards is wasted compute. Typical causes are fp16
overflow, a log-probability of -inf (a token the policy gives zero probability), a division by a
zero standard deviation, or a learning rate far too high.

## What it looks like in the recording
`grad_norm` or `loss` logs `inf`, or both go blank (NaN) from some step on while `reward_mean`,
`length_mean` and the timings keep arriving. Rewards usually collapse right after.

## How the detector decides
Any `inf` in `grad_norm`, `loss` or `pg_loss` is reported with its first step (critical). A *NaN
block* is a run of at least :knob:`nan_block` consecutive logged rows (rows where the heartbeat
series, the first of `reward_mean`, `length_mean`, `entropy`, `kl` that exists, is finite) in
which `grad_norm` and the loss are both missing, after `grad_norm` had been logged on at least
:knob:`min_coverage` of the heartbeat rows before the block. Isolated missing rows never count.

## What to try
- Restart from the last checkpoint before the onset with a lower learning rate.
- Train in bf16 rather than fp16, or enable loss scaling; keep gradient clipping on.
- Guard the advantage normalisation against a zero std (an epsilon) and the log-probabilities
  against -inf (mask padding, check the tokenizer's special tokens).
- Turn on anomaly detection for one step around the onset to find the operation.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import compare, rnd, runs

NAN_BLOCK = 5
"""Consecutive heartbeat rows with grad_norm and loss missing that count as a NaN block. Calibrated
on the corpus: 3/3 non-finite failures found from 2 to 20; at 1 it fires on 3/48 healthy corpus runs
(single dropped rows); silent on zoo dev and real healthy runs (neither set has the condition)."""
MIN_COVERAGE = 0.9
"""Share of the heartbeat rows before the block on which grad_norm must have been logged. Calibrated
on the corpus: 3/3 found from 0.225 to 0.9, 2/3 when full coverage is asked (a run with a few NaN
rows earlier is then never judged); never fires on a healthy zoo dev, real or corpus run."""
HEARTBEAT = ("reward_mean", "length_mean", "entropy", "kl")
WATCHED = ("grad_norm", "loss", "pg_loss")


@register
class GradNonfinite(Detector):
    id = "GRAD_NONFINITE"
    severity = Severity.CRITICAL
    family = "gradient"
    key_metrics = ("grad_norm", "loss")

    @record(frozen=True)
    class Knobs:
        #: Consecutive heartbeat rows with grad_norm and loss missing that count as a NaN block.
        nan_block: int = NAN_BLOCK
        #: Share of the heartbeat rows before the block on which grad_norm must have been logged.
        min_coverage: float = MIN_COVERAGE

    def needs(self, vitals) -> str | None:
        if any(vitals.get(n) is not None for n in WATCHED):
            return None
        return "needs grad_norm, loss or pg_loss"

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        out = self._infinities(vitals)
        nan = self._nan_block(vitals)
        if nan is None:
            return out
        for f in out:
            # inf then silence: one story, told once
            if (
                f.evidence == "grad_norm"
                and f.onset_step
                <= nan.onset_step
                <= f.metrics["last_inf_step"] + self.knobs.nan_block * vitals.log_every
            ):
                f.message += f"; then {nan.message}"
                f.end_step = nan.end_step
                f.metrics.update(nan.metrics)
                return out
        out.append(nan)
        return out

    def _infinities(self, vitals) -> list[Finding]:
        steps = np.asarray(vitals.steps)
        out = []
        for name in WATCHED:
            x = vitals.get(name)
            if x is None:
                continue
            bad = np.isinf(np.asarray(x, dtype=np.float64))
            if not bad.any():
                continue
            idx = np.flatnonzero(bad)
            onset, last = int(steps[idx[0]]), int(steps[idx[-1]])
            finite_after = np.isfinite(x[idx[-1] + 1 :]).any()
            out.append(
                self.finding(
                    f"{name} is inf at {idx.size} logged step(s), first at step {onset}",
                    onset_step=onset,
                    end_step=last if finite_after else None,
                    confidence=1.0,
                    evidence=name,
                    series=[name],
                    metrics={
                        "inf_steps": int(idx.size),
                        "first_inf_step": onset,
                        "last_inf_step": last,
                    },
                    actions=_actions(vitals.trainer),
                )
            )
        return out

    def _nan_block(self, vitals) -> Finding | None:
        k = self.knobs
        grad = vitals.get("grad_norm")
        beat = next((vitals.get(n) for n in HEARTBEAT if vitals.get(n) is not None), None)
        if grad is None or beat is None:
            return None
        rows = np.isfinite(beat)
        g = np.isfinite(grad)[rows]
        loss = vitals.get("loss")
        if loss is None:
            loss = vitals.get("pg_loss")
        silent = ~g if loss is None else ~g & ~np.isfinite(loss)[rows]
        steps = np.asarray(vitals.steps)[rows]
        for first, last in runs(silent, k.nan_block):
            before = g[:first]
            if before.size == 0 or before.mean() < k.min_coverage:
                continue
            onset = int(steps[first])
            resumed = last < steps.size - 1
            return self.finding(
                f"grad_norm and loss missing (NaN) for {last - first + 1} consecutive logged "
                f"rows from step {onset} while the run kept logging "
                f"(grad_norm coverage before: {compare(float(before.mean()), '>=', k.min_coverage)})",
                onset_step=onset,
                end_step=int(steps[last]) if resumed else None,
                confidence=0.8,
                evidence="grad_norm,loss",
                series=["grad_norm", "loss", "reward_mean"],
                metrics={
                    "nan_rows": int(last - first + 1),
                    "nan_block": k.nan_block,
                    "coverage_before": rnd(float(before.mean())),
                    "min_coverage": k.min_coverage,
                },
                actions=_actions(vitals.trainer),
            )
        return None


def _actions(t: str | None) -> list[str]:
    return [
        "restart from the last checkpoint before the onset with a lower "
        + advice.knob("learning_rate", t),
        f"train in {advice.knob('precision', t)}; keep {advice.knob('grad_clip', t)}",
        "guard advantage normalisation against zero std and log-probs against -inf",
        "run one step with anomaly detection around the onset to find the operation",
    ]

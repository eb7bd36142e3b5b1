"""The ACR table of a run: one library call behind ``rlvitals acr``, on the doctor's own reading.

``rlvitals acr`` and ``rlvitals doctor`` answer the same questions about collapse (the ACR of
each step, its split into solved / failed / flat, the stalls), so both read them here: the
series come from the doctor's vitals (one reward range, one tolerance) and the stalls are the
ACR_STALL detector's findings, so the two commands never disagree on a split or an onset.

>>> from rlvitals.examples import example_path
>>> from rlvitals.importers import load
>>> t = acr_table(load(example_path("collapse")))
>>> t.steps.size, [(f.onset_step, f.end_step) for f in t.stalls]
(120, [(60, None)])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvitals.detectors import Finding
from rlvitals.recording.run import Run
from rlvitals.signal import DEFAULT_TAU, acr_100, acr_volatility, windowed_acr

__all__ = ["AcrTable", "acr_table"]


@dataclass
class AcrTable:
    """The exact per-step ACR of a run with per-group rewards.

    Attributes:
        steps: ``(T,)`` steps with per-group rewards.
        acr, solve_all, solve_none, flat, expected: ``(T,)`` the ACR, its split (they sum to
            the ACR) and the expected ACR, as the doctor's vitals compute them.
        reward_range: ``(low, high)`` the split was judged in.
        expected_from: how the expected ACR was made (``Vitals.expected_acr_from``).
        stalls: the ACR_STALL findings (the doctor's stalls, onsets and severities).
        notes: what the vitals assumed (reward range, expected-ACR source).
    """

    steps: np.ndarray
    acr: np.ndarray
    solve_all: np.ndarray
    solve_none: np.ndarray
    flat: np.ndarray
    expected: np.ndarray
    reward_range: tuple[float, float]
    expected_from: str | None
    stalls: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The paper's summaries: mean ACR, ACR_100, the last windowed ACR, volatility, stalls."""
        vol = acr_volatility(self.acr)
        return {
            "steps": int(self.steps.size),
            "acr_mean": _f(np.nanmean(self.acr)) if self.acr.size else None,
            "acr_100": _f(acr_100(self.acr, self.steps)),
            "acr_windowed_last": _f(windowed_acr(self.acr)[-1]) if self.acr.size else None,
            "volatility_max": _f(np.nanmax(vol)) if np.isfinite(vol).any() else None,
            "stalls": [
                {
                    "onset_step": f.onset_step,
                    "end_step": f.end_step,
                    "severity": str(f.severity.value),
                    "message": f.message,
                }
                for f in self.stalls
            ],
            "reward_range": list(self.reward_range),
            "expected_from": self.expected_from,
        }


def acr_table(run: Run, *, tau: float = DEFAULT_TAU) -> AcrTable | None:
    """The ACR table of ``run``, or None when it has no per-group rewards."""
    from rlvitals.doctor import DoctorConfig, diagnose

    if run.groups is None or run.groups.n_groups == 0:
        return None
    d = diagnose(run, DoctorConfig(select=["ACR_STALL"], tau=tau))
    v = d.vitals
    keep = np.isin(v.steps, run.groups.step)

    def col(name: str) -> np.ndarray:
        x = v.series.get(name)
        return np.full(int(keep.sum()), np.nan) if x is None else x[keep]

    return AcrTable(
        steps=v.steps[keep],
        acr=col("acr"),
        solve_all=col("acr_solve_all"),
        solve_none=col("acr_solve_none"),
        flat=col("acr_flat"),
        expected=col("expected_acr"),
        reward_range=(float(v.reward_min), float(v.reward_max)),
        expected_from=v.expected_acr_from,
        stalls=d.by_id("ACR_STALL"),
        notes=list(v.notes),
    )


def _f(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, 6)

"""Does early collapse predict the outcome on *your* runs? ACR_100 against the final metric.

He et al. (ICML 2026, arXiv 2605.21125) regress final accuracy on ACR_100 over 245 runs:
final accuracy ≈ 51.4 − 29.6 · ACR_100 (accuracy in percent), Pearson r = −0.785, R² = 0.617.
:func:`correlate` computes the same on the scanned runs: Pearson r with a percentile bootstrap
interval (:data:`BOOTSTRAP` resamples of the runs, a fixed seed so a table always gives the
same interval), and the ordinary least-squares line. The paper's line is drawn beside it in
the metric's own units: as is when the final values look like percentages, divided by 100
when every value lies in [0, 1] (a fraction).

>>> c = correlate([0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.45, 0.42, 0.36, 0.33])
>>> round(c.r, 3), round(c.slope, 3), c.paper_scale
(-0.995, -0.43, 0.01)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rlvitals.scan._row import ScanRow

__all__ = [
    "BOOTSTRAP",
    "CONFIDENCE",
    "MIN_RUNS",
    "PAPER",
    "Correlation",
    "correlate",
    "correlate_rows",
]

PAPER = {"intercept": 51.4, "slope": -29.6, "r": -0.785, "r2": 0.617, "runs": 245}
"""He et al. 2026: final accuracy (%) ≈ 51.4 − 29.6 · ACR_100 over 245 runs."""
BOOTSTRAP = 2000
"""Bootstrap resamples for the interval on r."""
CONFIDENCE = 0.95
MIN_RUNS = 3
"""Fewer runs with both numbers give no correlation."""
SEED = 0


@dataclass(frozen=True)
class Correlation:
    """ACR_100 (x) against a final metric (y) over the runs that have both.

    Attributes:
        n: runs with both numbers; ``against``: ``eval`` or ``reward``; ``y_label``: the
            metric (an eval key, or "final train reward"; "eval (k keys)" when runs differ).
        r, r_low, r_high: Pearson r and its bootstrap interval (:data:`CONFIDENCE`).
        slope, intercept, r2: the least-squares line y = intercept + slope · x, and R².
        paper_scale: 1 when the metric is in percent, 0.01 when it is a fraction: the
            paper's line in these units is ``paper_scale · (51.4 − 29.6 · x)``.
        x, y: the points (for the plot); ``labels``: their runs.
    """

    n: int
    against: str
    y_label: str
    r: float
    r_low: float
    r_high: float
    slope: float
    intercept: float
    r2: float
    paper_scale: float
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    labels: tuple[str, ...] = ()

    def paper_y(self, x: float) -> float:
        return self.paper_scale * (PAPER["intercept"] + PAPER["slope"] * x)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("x", "y", "labels"):
            d.pop(k)
        d["paper"] = dict(PAPER)
        return d


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    return float(dx @ dy) / den if den > 0 else math.nan


def correlate(
    x: Sequence[float],
    y: Sequence[float],
    *,
    against: str = "eval",
    y_label: str = "final metric",
    labels: Sequence[str] = (),
    resamples: int = BOOTSTRAP,
    seed: int = SEED,
) -> Correlation | None:
    """Pearson r (bootstrap interval) and the OLS line of ``y`` on ``x``; None for fewer than
    :data:`MIN_RUNS` points or when either has no spread."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    lab = tuple(str(s) for s, k in zip(labels, ok) if k) if len(labels) == len(ok) else ()
    n = int(xa.size)
    if n < MIN_RUNS or np.ptp(xa) == 0 or np.ptp(ya) == 0:
        return None
    r = _pearson(xa, ya)
    slope = float(np.sum((xa - xa.mean()) * (ya - ya.mean())) / np.sum((xa - xa.mean()) ** 2))
    intercept = float(ya.mean() - slope * xa.mean())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    bx, by = xa[idx], ya[idx]
    dx = bx - bx.mean(axis=1, keepdims=True)
    dy = by - by.mean(axis=1, keepdims=True)
    den = np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rs = (dx * dy).sum(axis=1) / den
    rs = rs[np.isfinite(rs)]
    tail = (1 - CONFIDENCE) / 2
    lo, hi = np.quantile(rs, [tail, 1 - tail]) if rs.size else (math.nan, math.nan)
    fraction = bool(np.all((ya >= 0) & (ya <= 1)))
    return Correlation(
        n=n,
        against=against,
        y_label=y_label,
        r=r,
        r_low=float(lo),
        r_high=float(hi),
        slope=slope,
        intercept=intercept,
        r2=r * r,
        paper_scale=0.01 if fraction else 1.0,
        x=tuple(map(float, xa)),
        y=tuple(map(float, ya)),
        labels=lab,
    )


def correlate_rows(rows: Sequence[ScanRow], against: str = "auto") -> Correlation | None:
    """:func:`correlate` over scanned rows: ACR_100 against the final eval metric
    (``against="eval"``), the final train reward (``"reward"``), or (``"auto"``) the eval
    metric when at least :data:`MIN_RUNS` runs have one, else the train reward."""
    if against not in ("auto", "eval", "reward"):
        raise ValueError(f"against must be auto, eval or reward, got {against!r}")
    if against == "auto":
        with_eval = sum(1 for r in rows if r.acr_100 is not None and r.eval_final is not None)
        against = "eval" if with_eval >= MIN_RUNS else "reward"
    if against == "eval":
        pts = [
            (r.acr_100, r.eval_final, r)
            for r in rows
            if r.acr_100 is not None and r.eval_final is not None
        ]
        keys = sorted({r.eval_key for _, _, r in pts if r.eval_key})
        label = keys[0] if len(keys) == 1 else f"final eval metric ({len(keys)} keys)"
    else:
        pts = [
            (r.acr_100, r.reward_final, r)
            for r in rows
            if r.acr_100 is not None and r.reward_final is not None
        ]
        label = "final train reward"
    return correlate(
        [p[0] for p in pts],
        [p[1] for p in pts],
        against=against,
        y_label=label,
        labels=[p[2].label for p in pts],
    )

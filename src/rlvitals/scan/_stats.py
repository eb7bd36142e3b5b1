"""Does early collapse predict the outcome on *your* runs? ACR_100 against the final metric.

He et al. (ICML 2026, arXiv 2605.21125) regress final accuracy on ACR_100 over 245 runs:
final accuracy ≈ 51.4 − 29.6 · ACR_100 (accuracy in percent), Pearson r = −0.785, R² = 0.617.
:func:`correlate` computes the same on the scanned runs: Pearson r with a percentile bootstrap
interval (:data:`BOOTSTRAP` resamples of the runs, a fixed seed so a table always gives the
same interval), and the ordinary least-squares line. The paper's line is drawn beside it in
the metric's own units: as is when the final values look like percentages, divided by 100
when every value lies in [0, 1] (a fraction).

Which runs enter (:func:`correlate_rows`): runs judged by the doctor (not "not judged", not
unreadable), with a measured ACR_100 (an estimate from the mean reward would correlate the
reward with itself), on one scale: against the final eval metric, the runs of the eval key most
runs share (never MATH against GSM8K); against the final train reward, the runs of the reward
range most runs share. Every run left out is named with why (:attr:`Correlation.left_out`).

>>> c = correlate([0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.45, 0.42, 0.36, 0.33])
>>> round(c.r, 3), round(c.slope, 3), c.paper_scale
(-0.995, -0.43, 0.01)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rlvitals._stats import line, pearson_interval

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
    "reward_scale",
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
        left_out: ``(run, why)`` for every run that is not a point (:func:`correlate_rows`).
        scale: what the points share (the eval key, or the reward range), or None.
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
    left_out: tuple[tuple[str, str], ...] = ()
    scale: str | None = None

    def paper_y(self, x: float) -> float:
        return self.paper_scale * (PAPER["intercept"] + PAPER["slope"] * x)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("x", "y", "labels"):
            d.pop(k)
        d["left_out"] = [{"run": r, "why": w} for r, w in self.left_out]
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
    slope, intercept = line(xa, ya)
    lo, hi = pearson_interval(xa, ya, seed=seed, resamples=resamples, level=CONFIDENCE)
    fraction = bool(np.all((ya >= 0) & (ya <= 1)))
    return Correlation(
        n=n,
        against=against,
        y_label=y_label,
        r=r,
        r_low=lo,
        r_high=hi,
        slope=slope,
        intercept=intercept,
        r2=r * r,
        paper_scale=0.01 if fraction else 1.0,
        x=tuple(map(float, xa)),
        y=tuple(map(float, ya)),
        labels=lab,
    )


def reward_scale(lo: float | None, hi: float | None) -> str:
    """The scale class of a reward range: ``[0, 1]``, ``[-1, 1]``, or ``within ±10^k`` (ranges
    read from a run's own extremes differ run to run; the class does not).

    >>> reward_scale(0, 1), reward_scale(-0.3, 1.0), reward_scale(-2, 3), reward_scale(0, 40)
    ('[0, 1]', '[-1, 1]', 'within ±10', 'within ±100')
    """
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return "unknown"
    if lo >= 0 and hi <= 1:
        return "[0, 1]"
    if lo >= -1 and hi <= 1:
        return "[-1, 1]"
    k = max(1, math.ceil(math.log10(max(abs(lo), abs(hi)))))
    return f"within ±{10**k}"


def _range(r: ScanRow) -> str:
    lo, hi = r.reward_range or (None, None)
    return reward_scale(lo, hi)


def candidates(rows: Sequence[ScanRow], against: str) -> tuple[list[ScanRow], list[tuple]]:
    """``(rows that may be points, [(label, why)] of the others)`` before the scale is chosen."""
    keep, out = [], []
    for r in rows:
        y = r.eval_final if against == "eval" else r.reward_final
        if r.error:
            out.append((r.label, "not read"))
        elif r.not_judged:
            out.append((r.label, "not judged"))
        elif r.acr_100 is None:
            out.append((r.label, "no ACR_100"))
        elif r.acr_100_from != "measured":
            out.append((r.label, "ACR_100 estimated from the mean reward, not measured"))
        elif y is None:
            out.append((r.label, "no final eval metric" if against == "eval" else "no reward"))
        else:
            keep.append(r)
    return keep, out


def correlate_rows(rows: Sequence[ScanRow], against: str = "auto") -> Correlation | None:
    """:func:`correlate` over scanned rows (module docstring says which): ACR_100 against the
    final eval metric (``against="eval"``), the final train reward (``"reward"``), or
    (``"auto"``) the eval metric when at least :data:`MIN_RUNS` runs of one eval key qualify,
    else the train reward."""
    if against not in ("auto", "eval", "reward"):
        raise ValueError(f"against must be auto, eval or reward, got {against!r}")
    if against == "auto":
        keys = Counter(str(r.eval_key) for r in candidates(rows, "eval")[0])
        against = "eval" if keys and max(keys.values()) >= MIN_RUNS else "reward"
    keep, left_out = candidates(rows, against)
    scale_of = (lambda r: str(r.eval_key)) if against == "eval" else _range
    counts = Counter(scale_of(r) for r in keep)
    scale = max(counts, key=counts.__getitem__) if counts else None  # ties: first seen
    pts = [r for r in keep if scale_of(r) == scale]
    for r in keep:
        if scale_of(r) != scale:
            what = f"eval key {scale_of(r)}" if against == "eval" else f"rewards {_range(r)}"
            left_out.append((r.label, f"{what}, not {scale} like the others"))
    if against == "eval":
        label = str(scale) if scale else "final eval metric"
    else:
        label = "final train reward"
    c = correlate(
        [r.acr_100 for r in pts],
        [r.eval_final if against == "eval" else r.reward_final for r in pts],
        against=against,
        y_label=label,
        labels=[r.label for r in pts],
    )
    if c is None:
        return None
    from dataclasses import replace

    return replace(c, left_out=tuple(left_out), scale=scale)

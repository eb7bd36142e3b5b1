"""The least-squares line and the bootstrap interval of a Pearson r, written once for the scan's
correlation (:mod:`rlvitals.scan`) and the lab's statistics (:mod:`rlvitals.lab.stats`).

Each caller keeps its own point estimate of r and its own handling of missing values; what is
here is the same arithmetic, operation for operation, that both used (their numbers are pinned).

>>> x, y = np.array([0.0, 1.0, 2.0, 3.0]), np.array([1.0, 3.0, 5.0, 7.0])
>>> line(x, y)
(2.0, 1.0)
>>> pearson_interval(x, y, seed=0, resamples=200, level=0.95)
(1.0, 1.0)
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["line", "pearson_interval"]


def line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """``(slope, intercept)`` of the least-squares line ``y = intercept + slope x``.

    Args:
        x, y: ``(n,)`` float, finite, ``x`` not constant.
    """
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    return slope, float(y.mean() - slope * x.mean())


def pearson_interval(
    x: np.ndarray, y: np.ndarray, *, seed: int, resamples: int, level: float
) -> tuple[float, float]:
    """Percentile bootstrap interval of Pearson r over the pairs ``(x_i, y_i)``.

    Args:
        x, y: ``(n,)`` float, finite.
        seed: seed of ``np.random.default_rng`` (the same data give the same interval).
        resamples: bootstrap resamples, each ``n`` pairs drawn with replacement.
        level: confidence level (0.95: the 2.5% and 97.5% quantiles).

    Returns:
        ``(lo, hi)``; resamples without spread in x or y are left out, and NaN when none is left.
    """
    n = x.size
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    xs, ys = x[idx], y[idx]
    xc = xs - xs.mean(axis=1, keepdims=True)
    yc = ys - ys.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rs = (xc * yc).sum(axis=1) / den
    rs = rs[np.isfinite(rs)]
    if not rs.size:
        return math.nan, math.nan
    lo, hi = np.quantile(rs, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)

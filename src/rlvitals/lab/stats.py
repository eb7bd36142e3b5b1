"""Statistics of the lab's experiments: bootstrap intervals, correlation, OLS, paired tests.

Every interval is a percentile bootstrap (numpy, seeded: the same data give the same interval).
Paired tests compare two methods run from the same seeds: a paired t-test and a Wilcoxon
signed-rank test (scipy), with Holm's correction across the methods compared with one baseline.

>>> mean_ci([1.0, 2.0, 3.0, 4.0])["mean"]
2.5
>>> fit = ols([0.0, 1.0, 2.0], [1.0, 3.0, 5.0])
>>> fit["slope"], fit["intercept"], fit["r2"]
(2.0, 1.0, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "BOOTSTRAP",
    "LEVEL",
    "holm",
    "mean_ci",
    "ols",
    "paired",
    "pearson",
]

BOOTSTRAP = 10_000
"""Bootstrap resamples."""
LEVEL = 0.95
"""Confidence level of every interval."""


def _finite(x: Sequence[float]) -> np.ndarray:
    a = np.asarray([np.nan if v is None else v for v in x], dtype=np.float64)
    return a[np.isfinite(a)]


def mean_ci(x: Sequence[float], *, seed: int = 0, n_boot: int = BOOTSTRAP) -> dict[str, Any]:
    """Mean of ``x`` with its bootstrap interval: ``{"mean", "lo", "hi", "n"}``.

    None/NaN values are left out; fewer than two values give no interval (None).
    """
    a = _finite(x)
    if a.size == 0:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    if a.size == 1:
        return {"mean": float(a[0]), "lo": None, "hi": None, "n": 1}
    rng = np.random.default_rng(seed)
    boots = a[rng.integers(0, a.size, size=(n_boot, a.size))].mean(axis=1)
    lo, hi = np.quantile(boots, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return {"mean": float(a.mean()), "lo": float(lo), "hi": float(hi), "n": int(a.size)}


def _r(x: np.ndarray, y: np.ndarray) -> float:
    sx, sy = x.std(), y.std()
    if sx == 0 or sy == 0:
        return math.nan
    return float(((x - x.mean()) * (y - y.mean())).mean() / (sx * sy))


def pearson(
    x: Sequence[float], y: Sequence[float], *, seed: int = 0, n_boot: int = BOOTSTRAP
) -> dict[str, Any]:
    """Pearson r of paired ``x``, ``y`` with a bootstrap interval over the pairs.

    Returns ``{"r", "lo", "hi", "n", "r2"}``; r is None when either side is constant or there
    are fewer than three pairs (pairs with a missing value are dropped).
    """
    a = np.asarray([np.nan if v is None else v for v in x], dtype=np.float64)
    b = np.asarray([np.nan if v is None else v for v in y], dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    n = int(a.size)
    r = _r(a, b) if n >= 3 else math.nan
    if not math.isfinite(r):
        return {"r": None, "lo": None, "hi": None, "n": n, "r2": None}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    xs, ys = a[idx], b[idx]
    xc = xs - xs.mean(axis=1, keepdims=True)
    yc = ys - ys.mean(axis=1, keepdims=True)
    den = np.sqrt((xc**2).sum(axis=1) * (yc**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rs = (xc * yc).sum(axis=1) / den
    rs = rs[np.isfinite(rs)]
    lo, hi = np.quantile(rs, [(1 - LEVEL) / 2, (1 + LEVEL) / 2]) if rs.size else (None, None)
    return {"r": r, "lo": _f(lo), "hi": _f(hi), "n": n, "r2": r * r}


def ols(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Least-squares line ``y = intercept + slope x``: ``{"slope", "intercept", "r2", "n"}``."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 2 or a.std() == 0:
        return {"slope": None, "intercept": None, "r2": None, "n": int(a.size)}
    slope = float(((a - a.mean()) * (b - b.mean())).sum() / ((a - a.mean()) ** 2).sum())
    intercept = float(b.mean() - slope * a.mean())
    resid = b - (intercept + slope * a)
    tot = ((b - b.mean()) ** 2).sum()
    r2 = float(1 - (resid**2).sum() / tot) if tot > 0 else None
    return {"slope": slope, "intercept": intercept, "r2": r2, "n": int(a.size)}


def paired(
    treated: Sequence[float],
    control: Sequence[float],
    *,
    seed: int = 0,
    n_boot: int = BOOTSTRAP,
) -> dict[str, Any]:
    """Paired comparison of two methods over the same seeds (``treated - control``).

    Returns ``{"diff", "lo", "hi", "n", "t_p", "wilcoxon_p", "wins"}``: the mean difference
    with its bootstrap interval, the two-sided p-values of a paired t-test and of the Wilcoxon
    signed-rank test (None when undefined: fewer than two pairs, or no difference at all), and
    how many pairs the treated method won.
    """
    from scipy import stats as sps

    a = np.asarray([np.nan if v is None else v for v in treated], dtype=np.float64)
    b = np.asarray([np.nan if v is None else v for v in control], dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.size} != {b.size}")
    ok = np.isfinite(a) & np.isfinite(b)
    d = a[ok] - b[ok]
    ci = mean_ci(d, seed=seed, n_boot=n_boot)
    t_p = w_p = None
    if d.size >= 2 and np.any(d != 0):
        if d.std() > 0:
            t_p = float(sps.ttest_rel(a[ok], b[ok]).pvalue)
        w_p = float(sps.wilcoxon(d).pvalue)
    return {
        "diff": ci["mean"],
        "lo": ci["lo"],
        "hi": ci["hi"],
        "n": int(d.size),
        "t_p": t_p,
        "wilcoxon_p": w_p,
        "wins": int((d > 0).sum()),
    }


def holm(pvalues: dict[str, float | None]) -> dict[str, float | None]:
    """Holm–Bonferroni adjusted p-values (None stays None).

    >>> holm({"a": 0.01, "b": 0.04, "c": 0.03})
    {'a': 0.03, 'b': 0.06, 'c': 0.06}
    """
    items = sorted(((p, k) for k, p in pvalues.items() if p is not None))
    m = len(items)
    out: dict[str, float | None] = {k: None for k in pvalues}
    running = 0.0
    for i, (p, k) in enumerate(items):
        running = max(running, min(1.0, (m - i) * p))
        out[k] = round(running, 12)
    return out


def _f(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)

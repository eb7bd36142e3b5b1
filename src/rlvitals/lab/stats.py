"""Statistics of the lab's experiments: intervals, correlation, OLS, paired tests that can tell.

Means and correlations get percentile bootstrap intervals (numpy, seeded: the same data give the
same interval). Paired differences between two methods run from the same seeds get a **paired
t-interval** (a percentile bootstrap over 8 seeds covers ~88%, not 95%: issue 26), a paired
t-test and a Wilcoxon signed-rank test (scipy), an **equivalence test** (TOST: two one-sided
t-tests against ``±margin``, so "no difference" can be a finding), and the **smallest detectable
effect** (the true difference a two-sided 5% test finds with 80% power given the seeds' spread).
Holm's correction is applied across every comparison of a table (:func:`holm`).

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

from rlvitals._stats import line, pearson_interval

__all__ = [
    "BOOTSTRAP",
    "EQUIVALENCE_MARGIN",
    "LEVEL",
    "POWER",
    "decide",
    "fixed_effects",
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
EQUIVALENCE_MARGIN = 2.0
"""TOST margin for accuracy differences, in points (issue 26: "no difference" within ±2)."""
POWER = 0.8
"""Power of the smallest detectable effect."""


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
    lo, hi = pearson_interval(a, b, seed=seed, resamples=n_boot, level=LEVEL)
    return {"r": r, "lo": _f(lo), "hi": _f(hi), "n": n, "r2": r * r}


def ols(x: Sequence[float], y: Sequence[float]) -> dict[str, Any]:
    """Least-squares line ``y = intercept + slope x``: ``{"slope", "intercept", "r2", "n"}``."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 2 or a.std() == 0:
        return {"slope": None, "intercept": None, "r2": None, "n": int(a.size)}
    slope, intercept = line(a, b)
    resid = b - (intercept + slope * a)
    tot = ((b - b.mean()) ** 2).sum()
    r2 = float(1 - (resid**2).sum() / tot) if tot > 0 else None
    return {"slope": slope, "intercept": intercept, "r2": r2, "n": int(a.size)}


def paired(
    treated: Sequence[float],
    control: Sequence[float],
    *,
    margin: float | None = None,
    seed: int = 0,
    n_boot: int = BOOTSTRAP,
) -> dict[str, Any]:
    """Paired comparison of two methods over the same seeds (``treated - control``).

    Returns ``{"diff", "lo", "hi", "boot_lo", "boot_hi", "sd", "n", "t_p", "wilcoxon_p",
    "tost_p", "mde", "wins"}``: the mean difference with its 95% paired t-interval (``lo``,
    ``hi``) and its bootstrap interval, the std of the differences, the two-sided p-values of
    the paired t-test and the Wilcoxon signed-rank test, the TOST p-value of equivalence within
    ``±margin`` (None without a margin), the smallest true difference detectable with
    :data:`POWER` at 5% two-sided (``(t_0.975 + t_0.8) sd / sqrt(n)``), and how many pairs the
    treated method won. Undefined values (fewer than two pairs, no spread) are None.

    >>> r = paired([1.0, 2.0, 3.0, 4.0], [0.0, 1.5, 2.0, 3.5], margin=2.0)
    >>> r["diff"], round(r["lo"], 3), round(r["hi"], 3), round(r["tost_p"], 4)
    (0.75, 0.291, 1.209, 0.0016)
    """
    from scipy import stats as sps

    a = np.asarray([np.nan if v is None else v for v in treated], dtype=np.float64)
    b = np.asarray([np.nan if v is None else v for v in control], dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length: {a.size} != {b.size}")
    ok = np.isfinite(a) & np.isfinite(b)
    d = a[ok] - b[ok]
    n = int(d.size)
    ci = mean_ci(d, seed=seed, n_boot=n_boot)
    t_p = w_p = tost_p = lo = hi = sd = mde = None
    if n >= 2:
        sd = float(d.std(ddof=1))
        if sd > 0:
            se = sd / math.sqrt(n)
            tq = float(sps.t.ppf((1 + LEVEL) / 2, n - 1))
            lo, hi = float(d.mean() - tq * se), float(d.mean() + tq * se)
            t_p = float(sps.ttest_rel(a[ok], b[ok]).pvalue)
            mde = (tq + float(sps.t.ppf(POWER, n - 1))) * se
            if margin is not None:
                p_low = float(sps.t.sf((d.mean() + margin) / se, n - 1))  # H0: diff <= -margin
                p_high = float(sps.t.cdf((d.mean() - margin) / se, n - 1))  # H0: diff >= margin
                tost_p = max(p_low, p_high)
        else:
            lo = hi = float(d.mean())
            if margin is not None:
                tost_p = 0.0 if abs(d.mean()) < margin else 1.0
        if np.any(d != 0):
            w_p = float(sps.wilcoxon(d).pvalue)
    return {
        "diff": ci["mean"],
        "lo": lo,
        "hi": hi,
        "boot_lo": ci["lo"],
        "boot_hi": ci["hi"],
        "sd": sd,
        "n": n,
        "t_p": t_p,
        "wilcoxon_p": w_p,
        "tost_p": tost_p,
        "margin": margin,
        "mde": mde,
        "wins": int((d > 0).sum()),
        "losses": int((d < 0).sum()),
    }


def decide(v: dict[str, Any], *, alpha: float = 0.05, min_n: int = 5) -> str:
    """``higher``, ``lower``, ``equivalent`` or ``inconclusive`` for a :func:`paired` result
    whose Holm-adjusted p-values are ``t_p_holm`` and ``tost_p_holm``.

    >>> decide({"diff": 3.0, "n": 8, "t_p_holm": 0.01, "tost_p_holm": 0.9})
    'higher'
    >>> decide({"diff": 0.1, "n": 8, "t_p_holm": 0.9, "tost_p_holm": 0.01})
    'equivalent'
    >>> decide({"diff": 0.1, "n": 3, "t_p_holm": 0.01})
    'too few seeds'
    """
    if v.get("diff") is None:
        return "not measurable"
    if v.get("n", 0) < min_n:
        return "too few seeds"
    p = v.get("t_p_holm", v.get("t_p"))
    if p is not None and p < alpha:
        return "higher" if v["diff"] > 0 else "lower"
    q = v.get("tost_p_holm", v.get("tost_p"))
    if q is not None and q < alpha:
        return "equivalent"
    return "inconclusive"


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


def fixed_effects(
    x: Sequence[float], y: Sequence[float], factors: Sequence[Sequence[str]]
) -> dict[str, Any]:
    """OLS slope of ``y`` on ``x`` with fixed effects: one dummy per level of every factor.

    ``factors[i]`` lists observation i's level of each factor (``["L3", "G8", "T1"]`` for
    additive level, G and T effects; ``["L3-G8-T1"]`` for one effect per cell, so only the
    variation within a cell, across seeds, identifies the slope). Returns ``{"slope", "lo",
    "hi", "p", "n", "df", "partial_r"}``: the slope with its 95% t-interval and two-sided p
    (classical OLS errors), and the partial correlation of x and y after the effects. Rows
    with a missing value are left out; None values when the slope is not identified.

    >>> fit = fixed_effects([0, 1, 0, 1], [1.0, 3.0, 5.0, 7.0], [["a"], ["a"], ["b"], ["b"]])
    >>> fit["slope"], fit["df"]
    (2.0, 1)
    """
    from scipy import stats as sps

    rows = [
        (float(a), float(b), tuple(f))
        for a, b, f in zip(x, y, factors)
        if a is not None and b is not None and math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    none = {"slope": None, "lo": None, "hi": None, "p": None, "n": len(rows), "df": None}
    if len(rows) < 3:
        return {**none, "partial_r": None}
    xs = np.array([r[0] for r in rows])
    ys = np.array([r[1] for r in rows])
    cols = [np.ones(len(rows))]
    for k in range(len(rows[0][2])):
        levels = sorted({r[2][k] for r in rows})
        cols += [np.array([r[2][k] == lv for r in rows], dtype=float) for lv in levels[1:]]
    z = np.column_stack(cols)
    # residualise x and y on the effects (Frisch-Waugh): the slope of the residuals
    rx = xs - z @ np.linalg.lstsq(z, xs, rcond=None)[0]
    ry = ys - z @ np.linalg.lstsq(z, ys, rcond=None)[0]
    rank = int(np.linalg.matrix_rank(z))
    df = len(rows) - rank - 1
    sxx = float(rx @ rx)
    if df < 1 or sxx <= 1e-12 * max(1.0, float(xs @ xs)):
        return {**none, "df": df, "partial_r": None}
    slope = float(rx @ ry) / sxx
    resid = ry - slope * rx
    se = math.sqrt(float(resid @ resid) / df / sxx)
    tq = float(sps.t.ppf((1 + LEVEL) / 2, df))
    p = float(2 * sps.t.sf(abs(slope / se), df)) if se > 0 else 0.0
    syy = float(ry @ ry)
    return {
        "slope": slope,
        "lo": slope - tq * se,
        "hi": slope + tq * se,
        "p": p,
        "n": len(rows),
        "df": df,
        "partial_r": float(rx @ ry) / math.sqrt(sxx * syy) if syy > 0 else None,
    }


def _f(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)

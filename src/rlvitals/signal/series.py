"""Helpers over a step series of ACR values (DESIGN.md 3.2): cumulative, windowed, ACR_100,
volatility and the paper's stall rule, plus :func:`bool_runs`, the one run-finder every step-series
rule uses. numpy only (series are short)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_WINDOW",
    "STALL_ACR",
    "STALL_STEPS",
    "acr_100",
    "acr_volatility",
    "bool_runs",
    "cumulative_acr",
    "stall_spans",
    "windowed_acr",
]

DEFAULT_WINDOW = 25
"""Window W for windowed ACR and ACR volatility (paper: 25). Calibrated on the corpus: ACR_VOLATILE
finds 8/8 labelled runs from 19 to 100 logged steps, 7/8 at 12, 2/8 at 6; silent on the zoo dev,
real and corpus healthy runs at every value."""
STALL_ACR = 0.35
"""Stall rule: ACR above this (paper: 0.35). Calibrated on the zoo dev runs and corpus: 8/8
VERIFIER_CONSTANT runs and 8/8 corpus stalls from 0.26 to 0.35, 6/8 corpus at 0.525; at 0.175 a zoo
healthy control stalls (4/9 at 0.0875); silent on the real logs."""
STALL_STEPS = 50
"""... for more than this many consecutive steps (paper: 50). Calibrated on the zoo dev runs: 8/8
VERIFIER_CONSTANT runs (80 steps) from 25 to 50, 1/8 at 75; at 12 a zoo healthy control stalls;
corpus 8/8 up to 50, 6/8 at 100."""


def bool_runs(mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """First and last index (inclusive) of every run of True in ``mask`` ``(n,)``.

    >>> a, b = bool_runs(np.array([0, 1, 1, 0, 1], dtype=bool))
    >>> a.tolist(), b.tolist()
    ([1, 4], [2, 4])
    """
    m = np.asarray(mask, dtype=np.int8)
    if m.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    d = np.diff(np.concatenate(([0], m, [0])))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1


def _series(x: Any, name: str = "acr") -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D series, got shape {a.shape}")
    return a


def _check_window(window: int) -> int:
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    return int(window)


def cumulative_acr(n_collapsed: Any, n_groups: Any) -> np.ndarray:
    """Cumulative ACR: collapsed groups seen so far / groups seen so far.

    >>> cumulative_acr([1, 0, 3], [2, 2, 4]).tolist()
    [0.5, 0.25, 0.5]
    """
    c = _series(n_collapsed, "n_collapsed")
    n = _series(n_groups, "n_groups")
    if c.shape != n.shape:
        raise ValueError(f"n_collapsed and n_groups differ in length: {c.shape} != {n.shape}")
    c = np.where(np.isnan(c), 0.0, c)
    n = np.where(np.isnan(n), 0.0, n)
    total = np.cumsum(n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, np.cumsum(c) / np.where(total > 0, total, 1), np.nan)


def _rolling_sums(a: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Trailing-window count, sum and sum of squares of the finite values of ``a``."""
    ok = ~np.isnan(a)
    v = np.where(ok, a, 0.0)

    def trail(x: np.ndarray) -> np.ndarray:
        c = np.cumsum(np.r_[0.0, x])
        return c[1:] - c[np.maximum(np.arange(1, len(x) + 1) - window, 0)]

    return trail(ok.astype(np.float64)), trail(v), trail(v * v)


def windowed_acr(acr: Any, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Trailing mean of ACR over the last ``window`` steps (fewer at the start); NaN-aware.

    >>> windowed_acr([0.0, 1.0, 1.0, 0.0], window=2).tolist()
    [0.0, 0.5, 1.0, 0.5]
    """
    a = _series(acr)
    window = _check_window(window)
    n, s, _ = _rolling_sums(a, window)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.where(n > 0, n, 1), np.nan)


def acr_100(acr: Any, steps: Any = None, *, first: int = 100) -> float:
    """Mean ACR over the first ``first`` steps (the paper's early predictor of final accuracy).

    With ``steps`` given, rows whose step lies within ``first`` steps of the first logged step
    are used, so sparse logging still covers steps 1..100.

    >>> acr_100([0.5] * 100 + [1.0] * 50)
    0.5
    """
    a = _series(acr)
    if steps is None:
        head = a[:first]
    else:
        s = _series(steps, "steps")
        if s.shape != a.shape:
            raise ValueError(f"steps and acr differ in length: {s.shape} != {a.shape}")
        if a.size == 0:
            return math.nan
        head = a[s < np.nanmin(s) + first]
    head = head[~np.isnan(head)]
    return float(head.mean()) if head.size else math.nan


def acr_volatility(acr: Any, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Population std of ACR over each trailing ``window``-step window; NaN until a window fills.

    The paper associates a volatility above 0.15 with a 2.3x higher chance of divergence.

    >>> acr_volatility([0.0, 1.0, 0.0, 1.0], window=2).tolist()
    [nan, 0.5, 0.5, 0.5]
    """
    a = _series(acr)
    window = _check_window(window)
    n, s, ss = _rolling_sums(a, window)
    full = n >= window
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s / np.where(n > 0, n, 1)
        var = np.maximum(ss / np.where(n > 0, n, 1) - mean * mean, 0.0)
    out = np.sqrt(var)
    out[~full] = np.nan
    return out


def stall_spans(
    acr: Any, steps: Any = None, *, threshold: float = STALL_ACR, min_steps: int = STALL_STEPS
) -> list[tuple[int, int]]:
    """Spans where ACR stays above ``threshold`` for more than ``min_steps`` consecutive steps.

    Returns ``[(first_step, last_step), ...]`` (inclusive). With ``steps`` the span length is
    measured in training steps, so sparse logging is handled; NaN entries break no span.

    >>> stall_spans([0.1] * 5 + [0.5] * 60 + [0.1] * 5)
    [(5, 64)]
    """
    a = _series(acr)
    s = np.arange(a.size, dtype=np.float64) if steps is None else _series(steps, "steps")
    if s.shape != a.shape:
        raise ValueError(f"steps and acr differ in length: {s.shape} != {a.shape}")
    keep = ~np.isnan(a)
    a, s = a[keep], s[keep]
    first, last = bool_runs(a > threshold)
    long = s[last] - s[first] + 1 > min_steps
    return [(int(s[i]), int(s[j])) for i, j in zip(first[long], last[long])]

"""The detector kit: what every detector uses to read series and find where a condition held.

The reading, levels and episodes are the events layer's (:mod:`rlvitals.vitals.events`), the
one layer the detectors and the differential diagnosis share: a run's series are read once and
every detector sees the same points. The rolling statistics are :mod:`rlvitals.signal.rolling`.
This module re-exports both, so a detector imports one kit, and adds what only detectors need:

- reading: :class:`Points`, :func:`points`, :func:`eval_points`, :func:`first_present`,
  :func:`compress`, :func:`median_in`, :func:`median_where`, :func:`needs`;
- rolling statistics: :func:`rolling_median` (centred), :func:`rolling_mean`,
  :func:`trailing_median`, :func:`healthy_level`, :func:`segment_median`;
- where a condition held: :class:`Span`, :func:`runs`, :func:`find_spans` (sustained, with
  noise bridged), :func:`hysteresis` (start and release conditions), :func:`long_run_sustain`;
- how sure: :func:`confidence`;
- the message vocabulary (:mod:`rlvitals._text`): :func:`fmt`, :func:`compare`, :func:`rnd`,
  :func:`span_text`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from rlvitals._median import median
from rlvitals._text import compare, fmt, rnd, span_text
from rlvitals.signal import bool_runs
from rlvitals.signal.rolling import (
    healthy_level,
    rolling_mean,
    rolling_median,
    segment_median,
    trailing_median,
)
from rlvitals.vitals.events import (
    LONG_RUN_POINTS,
    Points,
    Span,
    eval_points,
    find_spans,
    first_present,
    hysteresis,
    long_run_sustain,
    points,
    runs,
)

if TYPE_CHECKING:
    from rlvitals.vitals import Vitals

__all__ = [
    "LONG_RUN_POINTS",
    "Points",
    "Span",
    "bool_runs",
    "compare",
    "compress",
    "confidence",
    "eval_points",
    "find_spans",
    "first_present",
    "fmt",
    "healthy_level",
    "hysteresis",
    "long_run_sustain",
    "median_in",
    "median_where",
    "needs",
    "points",
    "rnd",
    "rolling_mean",
    "rolling_median",
    "runs",
    "segment_median",
    "span_text",
    "trailing_median",
]

# --------------------------------------------------------------------------------------------
# Reading series


def compress(steps: np.ndarray, x: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The finite points of ``x``: ``(steps (n,), values (n,))``; empty arrays when ``x`` is None.

    >>> s, v = compress(np.array([1, 2, 3]), np.array([0.5, np.nan, 1.0]))
    >>> s.tolist(), v.tolist()
    ([1, 3], [0.5, 1.0])
    """
    if x is None:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ok = np.isfinite(x)
    if ok.all():
        return steps, x
    return steps[ok], x[ok]


def median_in(vitals: Vitals, name: str, first: int, last: int) -> float:
    """Median of series ``name`` over steps ``first..last``; NaN when absent or empty."""
    steps = vitals.steps
    return median_where(vitals.get(name), (steps >= first) & (steps <= last))


def median_where(x: np.ndarray | None, where: np.ndarray) -> float:
    """Median of the finite values of ``x`` where ``where`` holds (both ``(T,)``, on the
    vitals' steps); NaN when ``x`` is None or no such value is left.

    >>> median_where(np.array([1.0, np.nan, 3.0, 9.0]), np.array([True, True, True, False]))
    2.0
    """
    if x is None:
        return math.nan
    keep = where & np.isfinite(x)
    return float(median(x[keep])) if keep.any() else math.nan


def needs(vitals: Vitals, names: Iterable[str], min_points: int) -> str | None:
    """None when one of ``names`` has at least ``min_points`` finite values, else why not.

    For :meth:`Detector.needs`, the real reason, in the report's words: ``"needs entropy: not
    logged"`` when the run has none of the series, ``"needs entropy: too few points (3 logged,
    20+ needed)"`` when it logs one too rarely.

    >>> from rlvitals.recording import RunBuilder
    >>> from rlvitals.vitals import compute_vitals
    >>> b = RunBuilder()
    >>> for s in range(1, 4):
    ...     b.add_row(s, {"entropy": 0.5})
    >>> v = compute_vitals(b.build())
    >>> needs(v, ["entropy"], 20), needs(v, ["kl"], 20)
    ('needs entropy: too few points (3 logged, 20+ needed)', 'needs kl: not logged')
    """
    names = list(names)
    best = 0
    for name in names:
        p = eval_points(vitals, name) if name.startswith("eval/") else points(vitals, name)
        if p is not None:
            if p.n >= min_points:
                return None
            best = max(best, p.n)
    what = " or ".join(names)
    if not best:
        return f"needs {what}: not logged"
    return f"needs {what}: too few points ({best} logged, {min_points}+ needed)"


# --------------------------------------------------------------------------------------------
# How sure


def confidence(
    points: int, sustain: int, *, base: float = 1.0, margin: float | None = None
) -> float:
    """A finding's confidence in (0, 1]: ``base`` times how long and how far the condition held.

    Half of the scale is fixed, a quarter grows with the duration (full at ``2 * sustain``
    points) and a quarter with ``margin``, the relative excess over the threshold (0 = at it,
    1 = twice as far; full when None, for conditions without a distance, like a collapse to
    zero).

    >>> confidence(5, 5), confidence(20, 5, margin=1.0), confidence(10, 5, base=0.8)
    (0.875, 1.0, 0.8)
    """
    m = 1.0 if margin is None else min(1.0, max(0.0, margin))
    d = min(1.0, points / max(1, 2 * sustain))
    return round(base * (0.5 + 0.25 * m + 0.25 * d), 3)

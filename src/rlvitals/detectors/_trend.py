"""Small, vectorised helpers the non-collapse detectors share: finite points, smoothing, spans.

Every helper works on *logged points*: the finite values of one series and the steps they were
logged at, so a run that logs every 10 steps and one that logs every step are judged alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from rlvitals.vitals import Vitals

__all__ = [
    "Episode",
    "Points",
    "confidence",
    "episodes",
    "eval_points",
    "first_present",
    "fmt",
    "needs",
    "point_episodes",
    "points",
    "rnd",
    "rolling_median",
    "span_steps",
    "spans",
    "trailing_median",
]


@dataclass(frozen=True)
class Points:
    """The finite values of one series.

    Attributes:
        name: series name.
        steps: ``(n,)`` int64 steps that logged a finite value.
        values: ``(n,)`` float64 the values.
    """

    name: str
    steps: np.ndarray
    values: np.ndarray

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    def between(self, first_step: int, last_step: int) -> np.ndarray:
        """The values logged at steps in ``[first_step, last_step]``; ``(m,)`` float64.

        >>> Points("x", np.array([1, 2, 5, 9]), np.array([1.0, 2, 3, 4])).between(2, 5).tolist()
        [2.0, 3.0]
        """
        return self.values[(self.steps >= first_step) & (self.steps <= last_step)]


def points(vitals: Vitals, name: str) -> Points | None:
    """The finite points of train series ``name``, or None when the series is absent or empty."""
    return _finite_points(name, vitals.steps, vitals.get(name))


def eval_points(vitals: Vitals, name: str) -> Points | None:
    """The finite points of eval series ``name`` (``eval/...``) on the eval step index."""
    return _finite_points(name, vitals.eval_steps, vitals.eval_series.get(name))


def _finite_points(name: str, steps: np.ndarray, x: np.ndarray | None) -> Points | None:
    if x is None:
        return None
    x = np.asarray(x, dtype=np.float64)
    mask = np.isfinite(x)
    if not mask.any():
        return None
    return Points(name, np.asarray(steps)[mask].astype(np.int64), x[mask])


def rolling_median(x: np.ndarray, window: int) -> np.ndarray:
    """Centred rolling median with edge padding; ``(n,) -> (n,)``.

    Centred, so a step change stays at its true position (no lag in onsets).

    >>> rolling_median(np.array([1.0, 1, 9, 1, 1, 5, 5, 5]), 3).tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0]
    """
    n = x.shape[0]
    if window <= 1 or n == 0:
        return x.copy()
    half = window // 2
    padded = np.pad(x, (half, half), mode="edge")
    view = np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1)
    return np.median(view, axis=1)


def trailing_median(x: np.ndarray, window: int) -> np.ndarray:
    """Median of the ``window`` points *before* each point (the point itself excluded).

    The first point has no history: its baseline is itself. ``(n,) -> (n,)``.

    >>> trailing_median(np.array([1.0, 2, 3, 100]), 2).tolist()
    [1.0, 1.0, 1.5, 2.5]
    """
    n = x.shape[0]
    if n == 0:
        return x.copy()
    padded = np.concatenate([np.full(window, x[0]), x[:-1]])
    view = np.lib.stride_tricks.sliding_window_view(padded, window)
    out = np.median(view, axis=1)
    # Early points have less history than `window`: use only what exists (padding repeats x[0]).
    for i in range(1, min(window, n)):
        out[i] = np.median(x[:i])
    return out


def spans(mask: np.ndarray, min_len: int, merge_gap: int = 0) -> list[tuple[int, int]]:
    """Runs of True at least ``min_len`` long, as ``(first, last)`` index pairs (inclusive).

    Runs separated by at most ``merge_gap`` False points are merged first.

    >>> spans(np.array([0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], bool), 3)
    [(1, 3), (8, 11)]
    >>> spans(np.array([0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], bool), 3, merge_gap=1)
    [(1, 11)]
    """
    m = np.asarray(mask, dtype=bool)
    if m.size == 0 or not m.any():
        return []
    d = np.diff(np.concatenate([[0], m.astype(np.int8), [0]]))
    starts = np.flatnonzero(d == 1)
    ends = np.flatnonzero(d == -1) - 1
    runs: list[list[int]] = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if runs and s - runs[-1][1] - 1 <= merge_gap:
            runs[-1][1] = e
        else:
            runs.append([s, e])
    return [(s, e) for s, e in runs if e - s + 1 >= min_len]


def episodes(
    start: np.ndarray,
    release: Callable[[int], np.ndarray],
    sustain: int,
    max_episodes: int,
) -> list[tuple[int, int]]:
    """Episodes with hysteresis, as ``(first, last)`` index pairs (inclusive).

    An episode starts at the first run of ``sustain`` True points of ``start`` and lasts until
    the first run of ``sustain`` True points of ``release(first)`` (the release condition may
    depend on the onset, e.g. a baseline frozen there); ``last`` is the point before that run, or
    the final point when the condition never cleared. At most ``max_episodes`` are returned.

    >>> x = np.array([0, 0, 5, 5, 5, 5, 2, 0, 0, 0, 5, 5, 5], float)
    >>> episodes(x > 4, lambda i: x < 1, 2, 5)
    [(2, 6), (10, 12)]
    """
    n = start.shape[0]
    out: list[tuple[int, int]] = []
    pos = 0
    while pos < n and len(out) < max_episodes:
        found = spans(start[pos:], sustain)
        if not found:
            break
        first = pos + found[0][0]
        rel = np.asarray(release(first), dtype=bool)
        rel_spans = spans(rel[first + 1 :], sustain)
        if not rel_spans:
            out.append((first, n - 1))
            break
        stop = first + 1 + rel_spans[0][0]
        out.append((first, stop - 1))
        pos = stop
    return out


def span_steps(p: Points, first: int, last: int) -> tuple[int, int | None]:
    """``(onset_step, end_step)`` of a span of ``p``; ``end_step`` is None when it runs to the end."""
    onset = int(p.steps[first])
    end = None if last >= p.n - 1 else int(p.steps[last])
    return onset, end


@dataclass(frozen=True)
class Episode:
    """One episode of a series' points, from :func:`point_episodes`.

    Attributes:
        first: index of its first point.
        last: index of its last point (inclusive).
        onset: the step of its first point.
        end: the step of its last point; None when it runs to the series' final point (ongoing).
    """

    first: int
    last: int
    onset: int
    end: int | None

    @property
    def n(self) -> int:
        """How many logged points it lasted."""
        return self.last - self.first + 1

    def median(self, x: np.ndarray) -> float:
        """The median of ``x`` (``(n,)``, aligned with the series' points) over the episode."""
        return float(np.median(x[self.first : self.last + 1]))


def point_episodes(
    p: Points,
    start: np.ndarray,
    release: Callable[[int], np.ndarray],
    sustain: int,
    max_episodes: int,
) -> list[Episode]:
    """:func:`episodes` of the points of ``p``, each with its onset and end step.

    ``start`` and ``release(first)`` are ``(p.n,)`` bool, as for :func:`episodes`.

    >>> p = Points("x", np.arange(10, 140, 10), np.array([0, 0, 5, 5, 5, 5, 2, 0, 0, 0, 5, 5, 5.]))
    >>> [(e.onset, e.end, e.n) for e in point_episodes(p, p.values > 4, lambda i: p.values < 1, 2, 5)]
    [(30, 70, 5), (110, None, 3)]
    """
    return [
        Episode(first, last, *span_steps(p, first, last))
        for first, last in episodes(start, release, sustain, max_episodes)
    ]


def confidence(margin: float, duration: int, sustain: int) -> float:
    """A detector's confidence in [0.5, 1]: half from how far past the threshold, half from how long.

    ``margin`` is the relative excess over the threshold (0 = just at it, 1 = twice as far);
    ``duration`` the points the condition held; ``sustain`` the points required.

    >>> confidence(0.0, 5, 5), confidence(1.0, 20, 5)
    (0.625, 1.0)
    """
    m = min(1.0, max(0.0, margin))
    d = min(1.0, duration / max(1, 2 * sustain))
    return round(0.5 + 0.25 * m + 0.25 * d, 3)


def fmt(x: float | int | None) -> str:
    """A number for a message: integers as is, floats with 3 significant digits.

    >>> fmt(0.0312345), fmt(1234.5), fmt(7), fmt(float("nan")), fmt(2.5e-7)
    ('0.0312', '1234', '7', 'nan', '2.5e-07')
    """
    if x is None:
        return "n/a"
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return str(int(x))
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if 1000 <= abs(x) < 1e9:
        return f"{x:.0f}"
    return f"{x:.3g}"


def rnd(x: float, digits: int = 4) -> float | None:
    """``x`` rounded to ``digits`` significant digits for ``Finding.metrics``; NaN/inf → None."""
    x = float(x)
    if not math.isfinite(x):
        return None
    if x == 0:
        return 0.0
    return round(x, max(0, digits - 1 - math.floor(math.log10(abs(x)))))


def needs(vitals: Vitals, names: Iterable[str], min_points: int) -> str | None:
    """None when one of ``names`` has at least ``min_points`` finite values, else what is missing.

    For :meth:`Detector.needs`: ``"needs entropy (20+ logged values)"``.
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
    have = f"; the run has {best}" if best else ""
    return f"needs {what} ({min_points}+ logged values{have})"


def first_present(vitals: Vitals, names: Iterable[str]) -> Points | None:
    """The first of ``names`` that has finite points."""
    for name in names:
        p = points(vitals, name)
        if p is not None:
            return p
    return None

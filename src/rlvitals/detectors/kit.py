"""The detector kit: what every detector uses to read series and find where a condition held.

Everything here works on *logged points*: the finite values of one series and the steps they
were logged at (NaN = the step did not log the key), so a run that logs every 10 steps and one
that logs every step are judged alike: lengths are counted in logged points, onsets and ends
are reported in training steps. Everything is vectorised numpy (a 1,000,000-step run costs
milliseconds).

- reading: :class:`Points`, :func:`points`, :func:`eval_points`, :func:`first_present`,
  :func:`compress`, :func:`median_in`, :func:`needs`;
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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from rlvitals._median import median
from rlvitals._record import record
from rlvitals._text import compare, fmt, rnd, span_text
from rlvitals.signal import bool_runs

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

LONG_RUN_POINTS = 2000
"""Runs with more logged points than this need longer episodes (:func:`long_run_sustain`)."""


# --------------------------------------------------------------------------------------------
# Reading series


@record(frozen=True)
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


def first_present(vitals: Vitals, names: Iterable[str]) -> Points | None:
    """The first of ``names`` that has finite points."""
    for name in names:
        p = points(vitals, name)
        if p is not None:
            return p
    return None


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
    x = vitals.get(name)
    if x is None:
        return math.nan
    keep = (vitals.steps >= first) & (vitals.steps <= last) & np.isfinite(x)
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
# Rolling statistics


def rolling_median(x: np.ndarray, k: int, *, edges: str = "shrink") -> np.ndarray:
    """Centred running median of window ``k`` (made odd), ``(n,) -> (n,)``.

    Centred, so a step change stays at its true position (no lag in onsets). At the edges the
    window either shrinks (``"shrink"``: the median of the points that exist) or the series is
    padded with its first and last values (``"pad"``).

    >>> rolling_median(np.array([0.0, 10.0, 0.0, 0.0, 5.0]), 3).tolist()
    [5.0, 0.0, 0.0, 0.0, 2.5]
    >>> rolling_median(np.array([1.0, 1, 9, 1, 1, 5, 5, 5]), 3, edges="pad").tolist()
    [1.0, 1.0, 1.0, 1.0, 1.0, 5.0, 5.0, 5.0]
    """
    if edges not in ("shrink", "pad"):
        raise ValueError(f"edges must be 'shrink' or 'pad', got {edges!r}")
    n = x.shape[0]
    if n == 0 or k <= 1:
        return x.astype(np.float64, copy=True)
    if edges == "pad":
        half = k // 2
        padded = np.pad(x, (half, half), mode="edge")
        return median(np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1), axis=1)
    k = min(k | 1, n if n % 2 else n - 1) if n > 1 else 1
    if k <= 1:
        return x.astype(np.float64, copy=True)
    h = k // 2
    win = np.lib.stride_tricks.sliding_window_view(x, k)
    out = np.empty(n, dtype=np.float64)
    out[h : n - h] = median(win, axis=1)
    # Edges: shrunken windows, computed together as NaN-padded rows.
    xf = x.astype(np.float64, copy=False)
    head = np.concatenate((np.full(h, np.nan), xf[: 2 * h]))
    tail = np.concatenate((xf[n - 2 * h :], np.full(h, np.nan)))
    out[:h] = _nan_row_median(np.lib.stride_tricks.sliding_window_view(head, k))
    out[n - h :] = _nan_row_median(np.lib.stride_tricks.sliding_window_view(tail, k))
    return out


def _nan_row_median(rows: np.ndarray) -> np.ndarray:
    """Median of each row ignoring NaN (rows hold at least one number); ``(r,)``."""
    srt = np.sort(rows, axis=1)  # NaN last
    c = np.isfinite(srt).sum(axis=1)
    r = np.arange(rows.shape[0])
    return 0.5 * (srt[r, (c - 1) // 2] + srt[r, c // 2])


def rolling_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Centred running mean of window ``k`` (odd; edges use shrunken windows), ``(n,)``.

    >>> rolling_mean(np.array([0.0, 3.0, 0.0, 3.0]), 3).tolist()
    [1.5, 1.0, 2.0, 1.5]
    """
    n = x.shape[0]
    if n == 0 or k <= 1:
        return x.astype(np.float64, copy=True)
    h = (k | 1) // 2
    c = np.concatenate(([0.0], np.cumsum(x, dtype=np.float64)))
    i = np.arange(n)
    lo = np.maximum(i - h, 0)
    hi = np.minimum(i + h + 1, n)
    return (c[hi] - c[lo]) / (hi - lo)


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
    out = median(view, axis=1)
    # Early points have less history than `window`: use only what exists (padding repeats x[0]).
    # Row i - 1 holds x[:i] padded with NaN; its median is read off the sorted row (NaN last),
    # and is NaN where x[:i] holds a NaN, as median(x[:i]) would be.
    m = min(window, n)
    if m > 1:
        i = np.arange(1, m)
        head = x[: m - 1].astype(np.float64, copy=False)
        rows = np.where(np.arange(m - 1)[None, :] < i[:, None], head[None, :], np.nan)
        srt = np.sort(rows, axis=1)
        r = np.arange(m - 1)
        med = 0.5 * (srt[r, (i - 1) // 2] + srt[r, i // 2])
        out[1:m] = np.where(np.cumsum(np.isnan(head)) > 0, np.nan, med)
    return out


def healthy_level(x: np.ndarray, k: int, *, high: bool = True) -> float:
    """The run's own healthy level: the max (``high``) or min of the running median of ``x``.

    A running median ignores single spikes, so this is the typical level of the run's best
    stretch — the reference that relative gates scale by.

    >>> healthy_level(np.array([1.0, 1.1, 0.9, 50.0, 1.0, 0.0, 0.0, 0.0]), 3)
    1.1
    """
    if x.size == 0:
        return float("nan")
    m = rolling_median(x, k)
    return float(m.max() if high else m.min())


def segment_median(x: np.ndarray, i0: int, i1: int) -> float:
    """Median of ``x[i0:i1]`` clipped to the array; NaN when empty.

    >>> segment_median(np.array([1.0, 2.0, 3.0]), -5, 2)
    1.5
    """
    i0 = max(i0, 0)
    i1 = min(i1, x.shape[0])
    if i1 <= i0:
        return float("nan")
    return float(median(x[i0:i1]))


# --------------------------------------------------------------------------------------------
# Where a condition held


@record(frozen=True)
class Span:
    """A stretch of logged points where a condition held.

    Attributes:
        first, last: first and last index (inclusive) into the series' points.
        onset: training step of the first point.
        end: training step of the last point when the condition cleared; None while it is on
            (the stretch reaches the end of the series, or too few points follow to tell).
        hits: points in the stretch that met the condition (all of them unless noise was
            bridged).
    """

    first: int
    last: int
    onset: int
    end: int | None
    hits: int

    @property
    def n(self) -> int:
        """How many logged points the stretch covers."""
        return self.last - self.first + 1

    def median(self, x: np.ndarray) -> float:
        """The median of ``x`` (``(n,)``, aligned with the series' points) over the stretch."""
        return float(median(x[self.first : self.last + 1]))


def runs(mask: np.ndarray, min_len: int = 1, merge_gap: int = 0) -> list[tuple[int, int]]:
    """Runs of True at least ``min_len`` long, as ``(first, last)`` index pairs (inclusive).

    Runs separated by at most ``merge_gap`` False points are merged first.

    >>> runs(np.array([0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], bool), 3)
    [(1, 3), (8, 11)]
    >>> runs(np.array([0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], bool), 3, merge_gap=1)
    [(1, 11)]
    """
    starts, ends = bool_runs(np.asarray(mask, dtype=bool))
    merged: list[list[int]] = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if merged and s - merged[-1][1] - 1 <= merge_gap:
            merged[-1][1] = e
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged if e - s + 1 >= min_len]


def find_spans(
    steps: np.ndarray,
    cond: np.ndarray,
    *,
    sustain: int,
    gap: int = 2,
    min_density: float = 0.7,
) -> list[Span]:
    """Stretches where ``cond`` holds on at least ``sustain`` consecutive-ish logged points.

    Runs of True separated by at most ``gap`` False points are merged (noise in a collapsed
    stretch does not split it); a merged stretch is kept when it holds ``>= sustain`` True
    points, its first ``sustain`` points are consecutive hits, and at least ``min_density`` of
    its points are hits. A stretch that reaches the last point, or is followed only by a few
    points (no more than ``gap``: too few to call a recovery), is ongoing (``end=None``).

    Args:
        steps: ``(n,)`` training step of each point.
        cond: ``(n,)`` bool, the condition at each point.

    >>> c = np.array([0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0], dtype=bool)
    >>> [(s.onset, s.end) for s in find_spans(np.arange(11) * 10, c, sustain=3)]
    [(10, 60)]
    """
    starts, ends = bool_runs(cond)
    if starts.size == 0:
        return []
    # Merge runs separated by <= gap False points.
    sep = starts[1:] - ends[:-1] - 1
    brk = np.flatnonzero(sep > gap)
    g0 = np.concatenate(([0], brk + 1))
    g1 = np.concatenate((brk, [starts.size - 1]))
    lens = ends - starts + 1
    csum = np.concatenate(([0], np.cumsum(lens)))
    n = cond.shape[0]
    out: list[Span] = []
    for a, b in zip(g0.tolist(), g1.tolist()):
        i0, i1 = int(starts[a]), int(ends[b])
        hits = int(csum[b + 1] - csum[a])
        width = i1 - i0 + 1
        if hits < sustain or hits < min_density * width:
            continue
        # The onset is where a sustained stretch begins: skip leading isolated hits whose own
        # run is shorter than sustain and that are followed by a gap.
        k = a
        while k < b and lens[k] < min(sustain, 2) and starts[k + 1] - ends[k] - 1 > 0:
            k += 1
        if k != a:
            i0 = int(starts[k])
            hits = int(csum[b + 1] - csum[k])
            if hits < sustain:
                continue
        end = None if n - 1 - i1 <= min(gap, sustain - 1) else int(steps[i1])
        out.append(Span(i0, i1, int(steps[i0]), end, hits))
    return out


def hysteresis(
    p: Points,
    start: np.ndarray,
    release: Callable[[int], np.ndarray],
    sustain: int,
    max_episodes: int,
) -> list[Span]:
    """Episodes with hysteresis over the points of ``p``.

    An episode starts at the first run of ``sustain`` True points of ``start`` (``(p.n,)``
    bool) and lasts until the first run of ``sustain`` True points of ``release(first)`` (the
    release condition may depend on the onset, e.g. a baseline frozen there); its last point is
    the one before that run, or the final point when the condition never cleared (then ``end``
    is None). At most ``max_episodes`` are returned.

    >>> p = Points("x", np.arange(10, 140, 10), np.array([0, 0, 5, 5, 5, 5, 2, 0, 0, 0, 5, 5, 5.]))
    >>> [(e.onset, e.end, e.n) for e in hysteresis(p, p.values > 4, lambda i: p.values < 1, 2, 5)]
    [(30, 70, 5), (110, None, 3)]
    """
    n = start.shape[0]
    out: list[Span] = []
    pos = 0
    while pos < n and len(out) < max_episodes:
        found = runs(start[pos:], sustain)
        if not found:
            break
        first = pos + found[0][0]
        rel = np.asarray(release(first), dtype=bool)
        rel_runs = runs(rel[first + 1 :], sustain)
        last = n - 1 if not rel_runs else first + rel_runs[0][0]
        end = None if last >= n - 1 else int(p.steps[last])
        out.append(Span(first, last, int(p.steps[first]), end, last - first + 1))
        if not rel_runs:
            break
        pos = last + 1
    return out


def long_run_sustain(sustain: int, n: int) -> int:
    """``sustain`` raised by one per doubling of the run beyond :data:`LONG_RUN_POINTS` points.

    Noise alone makes a run of a few consecutive points past a threshold likely somewhere in a
    very long run (a 20,000-step log has thousands of chances); a slightly longer requirement
    keeps the false-alarm rate per run flat.

    >>> long_run_sustain(5, 1000), long_run_sustain(5, 20000)
    (5, 9)
    """
    if n <= LONG_RUN_POINTS:
        return sustain
    return sustain + math.ceil(math.log2(n / LONG_RUN_POINTS))


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

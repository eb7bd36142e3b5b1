"""Span finding on step series: where does a condition hold, since when, and did it clear?

Detectors work on the *finite points* of a series (NaN = the step did not log the key), so a
run logged every 10 steps is handled the same way as one logged every step: lengths are counted
in logged points, onsets and ends are reported in training steps.

Everything here is vectorised numpy (a 1,000,000-step run costs milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "Span",
    "bool_runs",
    "compress",
    "find_spans",
    "healthy_level",
    "rolling_mean",
    "rolling_median",
    "segment_median",
]


@dataclass(frozen=True)
class Span:
    """A stretch of logged points where a condition held.

    Attributes:
        i0, i1: first and last index (inclusive) into the compressed arrays.
        onset_step: training step of the first point.
        end_step: training step of the last point, or None when the span reaches the end of the
            series (the condition is still on).
        n_points: logged points in the span; ``n_hits`` of them met the condition.
    """

    i0: int
    i1: int
    onset_step: int
    end_step: int | None
    n_points: int
    n_hits: int

    @property
    def last_index(self) -> int:
        return self.i1


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


def bool_runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


def find_spans(
    steps: np.ndarray,
    cond: np.ndarray,
    *,
    sustain: int,
    gap: int = 2,
    min_density: float = 0.7,
) -> list[Span]:
    """Spans where ``cond`` holds on at least ``sustain`` consecutive-ish logged points.

    Runs of True separated by at most ``gap`` False points are merged (noise in a collapsed
    stretch does not split it); a merged span is kept when it holds ``>= sustain`` True points
    and its first ``sustain`` points are consecutive hits, and at least ``min_density`` of its
    points are hits. A span that reaches the last point, or is followed only by a few points
    (no more than ``gap``: too few to call a recovery), is ongoing (``end_step=None``).

    Args:
        steps: ``(n,)`` training step of each point.
        cond: ``(n,)`` bool, the condition at each point.
        sustain: points needed.
        gap: largest run of False points bridged inside a span.
        min_density: smallest share of hits in a kept span.

    >>> c = np.array([0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0], dtype=bool)
    >>> [(s.onset_step, s.end_step) for s in find_spans(np.arange(11) * 10, c, sustain=3)]
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
        out.append(
            Span(
                i0=i0,
                i1=i1,
                onset_step=int(steps[i0]),
                end_step=None if n - 1 - i1 <= min(gap, sustain - 1) else int(steps[i1]),
                n_points=i1 - i0 + 1,
                n_hits=hits,
            )
        )
    return out


def rolling_median(x: np.ndarray, k: int) -> np.ndarray:
    """Centred running median of window ``k`` (odd; edges use shrunken windows), ``(n,)``.

    >>> rolling_median(np.array([0.0, 10.0, 0.0, 0.0, 5.0]), 3).tolist()
    [5.0, 0.0, 0.0, 0.0, 2.5]
    """
    n = x.shape[0]
    if n == 0 or k <= 1:
        return x.astype(np.float64, copy=True)
    k = min(k | 1, n if n % 2 else n - 1) if n > 1 else 1
    if k <= 1:
        return x.astype(np.float64, copy=True)
    h = k // 2
    win = np.lib.stride_tricks.sliding_window_view(x, k)
    out = np.empty(n, dtype=np.float64)
    out[h : n - h] = np.median(win, axis=1)
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
    return float(np.median(x[i0:i1]))

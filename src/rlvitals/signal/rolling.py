"""Rolling statistics over the logged points of one series: centred and trailing running
medians, a centred running mean, the run's healthy level, a clipped segment median and the
NaN-ignoring median of each row of a small array.

The levels the events layer (:mod:`rlvitals.vitals.events`) and every detector measure against.
numpy only, vectorised (a 1,000,000-point series costs milliseconds); medians are
:func:`rlvitals._median.median` (``np.median`` bit for bit, without importing ``numpy.ma``).
"""

from __future__ import annotations

import numpy as np

from rlvitals._median import median

__all__ = [
    "healthy_level",
    "rolling_mean",
    "rolling_median",
    "row_nanmedian",
    "segment_median",
    "trailing_median",
]


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
    out[:h] = row_nanmedian(np.lib.stride_tricks.sliding_window_view(head, k))
    out[n - h :] = row_nanmedian(np.lib.stride_tricks.sliding_window_view(tail, k))
    return out


def row_nanmedian(a: np.ndarray) -> np.ndarray:
    """``nanmedian(a, axis=1)`` of a small ``(r, w)`` array, NaN for an all-NaN row, without
    numpy's masked-array path (10x slower at w = 25) or its warnings: sort (NaNs go last) and
    average the middle one or two of each row's values; ``(r,)``.

    >>> row_nanmedian(np.array([[1.0, np.nan, 3.0], [np.nan, np.nan, np.nan]])).tolist()
    [2.0, nan]
    """
    srt = np.sort(a, axis=1)
    n = (~np.isnan(a)).sum(axis=1)
    rows = np.arange(a.shape[0])
    lo = np.clip((n - 1) // 2, 0, a.shape[1] - 1)
    hi = np.clip(n // 2, 0, a.shape[1] - 1)
    out = 0.5 * (srt[rows, lo] + srt[rows, hi])
    out[n == 0] = np.nan
    return out


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
    # Row i - 1 holds x[:i] padded with NaN; its median is the row's NaN-ignoring median, and
    # NaN where x[:i] holds a NaN, as median(x[:i]) would be.
    m = min(window, n)
    if m > 1:
        i = np.arange(1, m)
        head = x[: m - 1].astype(np.float64, copy=False)
        rows = np.where(np.arange(m - 1)[None, :] < i[:, None], head[None, :], np.nan)
        out[1:m] = np.where(np.cumsum(np.isnan(head)) > 0, np.nan, row_nanmedian(rows))
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

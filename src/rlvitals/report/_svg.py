"""Inline SVG line plots for the HTML report: no scripts, no external resources.

A plot is one series against steps, with shaded finding spans, dashed vertical onset/end
markers and dotted horizontal threshold lines. Long series are reduced to at most
``max_points`` by keeping each bucket's first, minimum, maximum and last value, so spikes survive.
Every label is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

import numpy as np

__all__ = ["Marker", "line_plot", "nice_ticks", "reduce_points"]

WIDTH, HEIGHT = 520, 170
PAD_L, PAD_R, PAD_T, PAD_B = 56, 12, 22, 26
MAX_POINTS = 1200
COLORS = {"critical": "#c62828", "warn": "#d97706", "info": "#1d6fb8"}
LINE = "#334155"


@dataclass(frozen=True)
class Marker:
    """A finding drawn on a plot: shaded from ``onset`` to ``end`` (or the last step)."""

    onset: int
    end: int | None
    severity: str
    label: str
    thresholds: list[float] = field(default_factory=list)


def reduce_points(x: np.ndarray, y: np.ndarray, max_points: int = MAX_POINTS):
    """At most ~``max_points`` points of ``(x, y)`` keeping each bucket's extremes.

    >>> x = np.arange(10_000); y = np.zeros(10_000); y[5_000] = 9.0
    >>> rx, ry = reduce_points(x, y, 100)
    >>> len(rx) <= 100, float(ry.max())
    (True, 9.0)
    """
    n = x.shape[0]
    if n <= max_points:
        return x, y
    buckets = max(1, max_points // 4)
    size = -(-n // buckets)  # ceil: every bucket but the last is full
    pad = buckets * size - n
    yy = np.concatenate([y, np.full(pad, y[-1])]).reshape(buckets, size)
    base = np.arange(buckets) * size
    keep = np.concatenate(
        [
            base,
            base + yy.argmin(axis=1),
            base + yy.argmax(axis=1),
            np.minimum(base + size - 1, n - 1),
        ]
    )
    k = np.unique(np.minimum(keep, n - 1))
    return x[k], y[k]


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round tick values covering ``[lo, hi]``.

    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 12))
        t += step
    return ticks


def _label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.4g}"


def line_plot(
    name: str,
    steps: np.ndarray,
    values: np.ndarray,
    markers: Sequence[Marker] = (),
    width: int = WIDTH,
    height: int = HEIGHT,
) -> str:
    """An ``<svg>`` element plotting ``values`` (``(n,)``, NaN = gap) against ``steps`` (``(n,)``).

    Returns an empty string when the series has no finite value.
    """
    steps = np.asarray(steps, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        return ""
    xs, ys = reduce_points(steps[finite], values[finite])
    levels = [t for m in markers for t in m.thresholds]
    lo = float(min(ys.min(), *levels)) if levels else float(ys.min())
    hi = float(max(ys.max(), *levels)) if levels else float(ys.max())
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5 * (abs(lo) or 1.0), hi + 0.5 * (abs(hi) or 1.0)
    pad = 0.06 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    x0, x1 = float(steps[0]), float(steps[-1])
    if x1 <= x0:
        x1 = x0 + 1.0
    pw, ph = width - PAD_L - PAD_R, height - PAD_T - PAD_B

    def sx(x: float) -> float:
        return PAD_L + (x - x0) / (x1 - x0) * pw

    def sy(y: float) -> float:
        return PAD_T + (hi - y) / (hi - lo) * ph

    parts = [
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(name)}">',
        f'<text x="{PAD_L}" y="14" class="ptitle">{escape(name)}</text>',
        f'<rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" class="frame"/>',
    ]
    for t in nice_ticks(lo, hi):
        y = sy(t)
        parts.append(
            f'<line x1="{PAD_L}" x2="{PAD_L + pw}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
        )
        parts.append(f'<text x="{PAD_L - 4}" y="{y + 3:.1f}" class="ytick">{_label(t)}</text>')
    for t in nice_ticks(x0, x1, 5):
        x = sx(t)
        parts.append(f'<text x="{x:.1f}" y="{height - 8}" class="xtick">{_label(t)}</text>')
    for m in markers:
        color = COLORS.get(m.severity, LINE)
        a = sx(max(x0, min(x1, m.onset)))
        b = sx(x1 if m.end is None else max(x0, min(x1, m.end)))
        title = f"<title>{escape(m.label)}</title>"
        parts.append(
            f'<rect x="{a:.1f}" y="{PAD_T}" width="{max(b - a, 1.5):.1f}" '
            f'height="{ph}" fill="{color}" fill-opacity="0.10">{title}</rect>'
        )
        parts.append(
            f'<line x1="{a:.1f}" x2="{a:.1f}" y1="{PAD_T}" y2="{PAD_T + ph}" '
            f'stroke="{color}" class="onset">{title}</line>'
        )
        if m.end is not None:
            parts.append(
                f'<line x1="{b:.1f}" x2="{b:.1f}" y1="{PAD_T}" y2="{PAD_T + ph}" '
                f'stroke="{color}" class="end">{title}</line>'
            )
        for t in m.thresholds:
            y = sy(t)
            parts.append(
                f'<line x1="{PAD_L}" x2="{PAD_L + pw}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{color}" class="thr"><title>threshold {_label(t)}</title>'
                f"</line>"
            )
            parts.append(
                f'<text x="{PAD_L + pw - 2}" y="{y - 3:.1f}" class="thrlabel" '
                f'fill="{color}">threshold {_label(t)}</text>'
            )
    # the series itself: logged points joined in step order (a step that did not log is skipped)
    if xs.shape[0] == 1:
        parts.append(f'<circle cx="{sx(xs[0]):.1f}" cy="{sy(ys[0]):.1f}" r="2.5" class="dot"/>')
    else:
        pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs.tolist(), ys.tolist()))
        parts.append(f'<polyline points="{pts}" class="series"/>')
    parts.append("</svg>")
    return "".join(parts)

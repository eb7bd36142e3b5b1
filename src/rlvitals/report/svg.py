"""Inline SVG plots for the HTML report: no scripts, no external resources.

:func:`plot` draws one or more series against steps: lines, dashed lines and stacked areas
(a legend names them when there is more than one), with shaded finding spans, dashed vertical
onset/end markers, dotted horizontal threshold lines and marked points for isolated events
(:attr:`Marker.marks`: a spike is a point, not an episode). With ``interactive=True`` the plot
carries its data for the pages' script (:mod:`rlvitals.report.web`): the frame
(``data-frame``) and each drawn element's data coordinates, so hover values, zoom and log scale
work on the page without a request. Long series are reduced to at most ``max_points`` by keeping each
bucket's first, minimum, maximum and last value, so spikes survive.

Any float is drawable: non-finite values are gaps, an axis whose values agree (to one ulp, or
exactly) is widened to a relative minimum, and scales are computed from halves so ±1e308 never
overflows. Every label is escaped.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

import numpy as np

__all__ = ["PLOT_CSS", "Frame", "Layer", "Marker", "axis_range", "nice_ticks", "plot"]

WIDTH, HEIGHT = 520, 170
WIDE = 1064
"""Width of a plot that takes a whole row (the reward and ACR plots)."""
PAD_L, PAD_R, PAD_T, PAD_B = 56, 12, 22, 26
MAX_POINTS = 1200
MAX_AREA_POINTS = 400
"""Stacked areas are drawn from at most this many bucket means."""
COLORS = {"critical": "#c62828", "warn": "#d97706", "info": "#1d6fb8"}
LINE = "#334155"
PALETTE = ("#2563eb", "#0d9488", "#9333ea", "#db2777", "#b45309", "#4d7c0f", "#0891b2")
"""Colours of overlaid series after the first (:data:`LINE`)."""
LEGEND_ROW = 14
CHAR_W = 6.0
"""Approximate width of a 10px legend character, for laying the legend out."""
_REL = 1e-9
"""An axis narrower than this share of its magnitude is widened (float resolution)."""
_TINY = 1e-300
"""An axis whose values are all smaller than this in magnitude is drawn around 0."""
_MAX = sys.float_info.max
PLOT_CSS = """\
.plots { display:flex; flex-wrap:wrap; gap:10px; }
svg.plot { background:#fff; border:1px solid var(--line); border-radius:6px; max-width:100%;
           height:auto; }
svg .ptitle { font:600 12px ui-monospace,"DejaVu Sans Mono",monospace; fill:var(--fg); }
svg .frame { fill:none; stroke:var(--line); }
svg .grid { stroke:#f1f5f9; }
svg .ytick { font-size:10px; fill:var(--muted); text-anchor:end; }
svg .xtick { font-size:10px; fill:var(--muted); text-anchor:middle; }
svg .series { fill:none; stroke-width:1.4; stroke-linejoin:round; }
svg .series.dash, svg .dash { stroke-dasharray:5 3; stroke-width:1.6; }
svg .lg { stroke-width:2; } svg .legend { font-size:10px; fill:var(--fg); }
svg .area { fill-opacity:0.85; stroke:none; }
svg .mark { stroke:#fff; stroke-width:1; }
svg .onset { stroke-width:1.5; stroke-dasharray:5 3; }
svg .end { stroke-width:1.5; stroke-dasharray:2 3; }
svg .thr { stroke-width:1.2; stroke-dasharray:2 2; }
svg .thrlabel { font-size:10px; text-anchor:end; }
"""
"""The style of every class :func:`plot` draws (a ``.plots`` row of them), for each page that
shows its plots (the HTML report, compare's page); the page defines ``--fg``, ``--muted`` and
``--line``."""


@dataclass(frozen=True)
class Marker:
    """A finding drawn on a plot: shaded from ``onset`` to ``end`` (or the last step), or, when
    it has ``marks``, points at those steps on the plot's first series."""

    onset: int
    end: int | None
    severity: str
    label: str
    thresholds: list[float] = field(default_factory=list)
    marks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Layer:
    """One series of a plot.

    Attributes:
        label: its name in the legend (and the plot's title when it is alone).
        steps: ``(n,)`` steps.
        values: ``(n,)`` values; NaN or inf = gap.
        color: stroke (or fill) colour.
        style: ``line``, ``dash`` (dashed line) or ``area`` (areas stack in order, from 0,
            on the steps of the first area).
    """

    label: str
    steps: np.ndarray
    values: np.ndarray
    color: str = LINE
    style: str = "line"


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
    """About ``n`` round tick values covering ``[lo, hi]``; at most ``2 n + 3`` of them, for
    any two floats (a span below float resolution gives its two ends).

    >>> nice_ticks(0.0, 1.0)
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> nice_ticks(-1e308, 1e308)
    [-1e+308, -5e+307, 0.0, 5e+307, 1e+308]
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = hi / n - lo / n  # halves of a sort: never overflows
    if not raw > 0:
        return [lo, hi]
    mag = 10.0 ** math.floor(math.log10(raw))
    if not (mag > 0 and math.isfinite(mag)):
        return [lo, hi]
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first, last = lo / step, hi / step
    if not (math.isfinite(first) and math.isfinite(last)):
        return [lo, hi]
    k0, k1 = math.ceil(first), math.floor(last)
    if k1 - k0 > 2 * n + 2:
        return [lo, hi]
    digits = max(0, 1 - math.floor(math.log10(step)))
    ticks: list[float] = []
    for k in range(k0, k1 + 1):
        t = round(k * step, digits) + 0.0  # + 0.0: no "-0"
        if math.isfinite(t) and (not ticks or t > ticks[-1]):
            ticks.append(t)
    return ticks or [lo, hi]


def axis_range(lo: float, hi: float, pad: float = 0.06) -> tuple[float, float]:
    """``[lo, hi]`` (finite) widened where its values agree and padded by ``pad`` of its span;
    always finite with ``hi > lo`` by more than float resolution.

    >>> axis_range(0.0, 1.0, pad=0.0), axis_range(2.0, 2.0, pad=0.0), axis_range(0.0, 0.0, 0.0)
    ((0.0, 1.0), (1.0, 3.0), (-0.5, 0.5))
    >>> axis_range(-1.7e308, 1.7e308) == (-sys.float_info.max, sys.float_info.max)
    True
    """
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo, hi = 0.0, 1.0
    lo, hi = min(lo, hi), max(lo, hi)
    scale = max(abs(lo), abs(hi))
    if scale < _TINY:
        lo, hi = -0.5, 0.5
    elif hi * 0.5 - lo * 0.5 <= scale * _REL * 0.5:
        c = lo * 0.5 + hi * 0.5
        lo, hi = _clamp(c - 0.5 * abs(c)), _clamp(c + 0.5 * abs(c))
    p = (hi * 0.5 - lo * 0.5) * (2.0 * pad)
    return _clamp(lo - p), _clamp(hi + p)


def _nums(values, spec: str = ".7g") -> str:
    """Values as a space-separated attribute (the pages' script reads them back)."""
    return " ".join(format(float(v), spec) for v in values)


def _data(fr: Frame, **attrs) -> str:
    """`` data-NAME="..."`` attributes when the plot carries its data, else nothing."""
    if not fr.data:
        return ""
    out = []
    for k, v in attrs.items():
        if isinstance(v, str):
            out.append(f' data-{k}="{escape(v)}"')
        else:
            out.append(f' data-{k}="{_nums(np.atleast_1d(v))}"')
    return "".join(out)


def _clamp(x: float) -> float:
    return max(-_MAX, min(_MAX, x))


def _label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e4 or abs(v) < 1e-3:
        return f"{v:.1e}"
    return f"{v:.4g}"


class Frame:
    """The mapping from data to pixels of one plot area; ``data``: also write each element's
    data coordinates (:func:`plot`'s ``interactive``)."""

    data = False

    def __init__(self, x: tuple[float, float], y: tuple[float, float], box: tuple[int, ...]):
        self.x0, self.x1 = x
        self.y0, self.y1 = y
        self.left, self.top, self.w, self.h = box
        self._xs = self.x1 * 0.5 - self.x0 * 0.5
        self._ys = self.y1 * 0.5 - self.y0 * 0.5

    def sx(self, x: float) -> float:
        return self.left + (x * 0.5 - self.x0 * 0.5) / self._xs * self.w

    def sy(self, y: float) -> float:
        return self.top + (self.y1 * 0.5 - y * 0.5) / self._ys * self.h


def _finite(layer: Layer) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(layer.steps, dtype=np.float64)
    y = np.asarray(layer.values, dtype=np.float64)
    ok = np.isfinite(y) & np.isfinite(x)
    return x[ok], y[ok]


def _stack(areas: Sequence[Layer]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Steps and cumulative tops of the stacked ``areas`` (bucket means beyond
    :data:`MAX_AREA_POINTS`); NaN where any area is missing."""
    x = np.asarray(areas[0].steps, dtype=np.float64)
    ys = [np.asarray(a.values, dtype=np.float64) for a in areas]
    ys = [y if y.shape == x.shape else np.full(x.shape, np.nan) for y in ys]
    with np.errstate(all="ignore"):
        tops = np.cumsum(np.stack(ys), axis=0)
        ok = np.isfinite(tops).all(axis=0) & np.isfinite(x)
        x, tops = x[ok], tops[:, ok]
        n = x.shape[0]
        if n > MAX_AREA_POINTS:
            idx = np.arange(n) * MAX_AREA_POINTS // n
            counts = np.bincount(idx, minlength=MAX_AREA_POINTS)
            x = np.bincount(idx, x, MAX_AREA_POINTS) / counts
            tops = np.stack([np.bincount(idx, t, MAX_AREA_POINTS) / counts for t in tops])
            ok = np.isfinite(tops).all(axis=0) & np.isfinite(x)
            x, tops = x[ok], tops[:, ok]
    return x, list(tops)


def _legend(layers: Sequence[Layer], width: int) -> list[tuple[float, int, Layer]]:
    """``(x, row, layer)`` of each legend entry, wrapped to ``width``."""
    out, x, row = [], float(PAD_L), 0
    for layer in layers:
        w = 18 + CHAR_W * len(layer.label) + 12
        if x + w > width - PAD_R and x > PAD_L:
            x, row = float(PAD_L), row + 1
        out.append((x, row, layer))
        x += w
    return out


def plot(
    title: str,
    layers: Sequence[Layer],
    markers: Sequence[Marker] = (),
    *,
    width: int = WIDTH,
    height: int = HEIGHT,
    y_include: Sequence[float] = (),
    interactive: bool = False,
) -> str:
    """An ``<svg>`` element drawing ``layers`` (the first is the series findings mark) with
    ``markers``; ``y_include`` are values the y axis must show (``(0, 1)`` for a share);
    ``interactive``: carry the data for the pages' script (module docstring).

    Returns an empty string when no layer has a finite value.
    """
    lines = [(layer, *_finite(layer)) for layer in layers if layer.style != "area"]
    lines = [(layer, x, y) for layer, x, y in lines if x.size]
    areas = [layer for layer in layers if layer.style == "area"]
    ax, tops = _stack(areas) if areas else (np.zeros(0), [])
    if not lines and not ax.size:
        return ""
    if not ax.size:
        areas, tops = [], []
    shown = [*areas, *(layer for layer, _, _ in lines)]
    legend = _legend(shown, width) if len(shown) > 1 else []
    top = PAD_T + (legend[-1][1] + 1) * LEGEND_ROW if legend else PAD_T
    height += top - PAD_T
    xs_all = [x for _, x, _ in lines] + ([ax] if ax.size else [])
    ys_all = [y for _, _, y in lines] + tops + ([np.zeros(1)] if ax.size else [])
    levels = [t for m in markers for t in m.thresholds if math.isfinite(t)]
    levels += [float(v) for v in y_include if math.isfinite(v)]
    lo = min([float(y.min()) for y in ys_all] + levels)
    hi = max([float(y.max()) for y in ys_all] + levels)
    x0 = min(float(x.min()) for x in xs_all)
    x1 = max(float(x.max()) for x in xs_all)
    pw, ph = width - PAD_L - PAD_R, height - top - PAD_B
    fr = Frame(axis_range(x0, x1, pad=0.0), axis_range(lo, hi), (PAD_L, top, pw, ph))
    fr.data = interactive
    frame = ""
    if interactive:
        frame = f' data-frame="{fr.left} {fr.top} {fr.w} {fr.h} ' + _nums(
            [fr.x0, fr.x1, fr.y0, fr.y1], ".17g"
        )
        frame += '"'
    parts = [
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(title)}"{frame}>',
        f'<text x="{PAD_L}" y="14" class="ptitle">{escape(title)}</text>',
        f'<rect x="{PAD_L}" y="{top}" width="{pw}" height="{ph}" class="frame"/>',
    ]
    for lx, row, layer in legend:
        y = PAD_T + row * LEGEND_ROW + 6
        swatch = (
            f'<rect x="{lx:.0f}" y="{y - 5}" width="14" height="8" fill="{layer.color}"/>'
            if layer.style == "area"
            else f'<line x1="{lx:.0f}" x2="{lx + 14:.0f}" y1="{y - 1}" y2="{y - 1}" '
            f'stroke="{layer.color}" class="{"dash" if layer.style == "dash" else "lg"}"/>'
        )
        parts.append(
            f'{swatch}<text x="{lx + 18:.0f}" y="{y + 3}" class="legend">'
            f"{escape(layer.label)}</text>"
        )
    axes = _axes(fr, height)
    parts += ['<g class="axes">', *axes, "</g>"] if interactive else axes
    for i, layer in enumerate(areas):
        below = tops[i - 1] if i else np.zeros_like(ax)
        parts.append(_area(fr, ax, below, tops[i], layer))
    parts += _markers(fr, markers, lines[0] if lines else None)
    for layer, x, y in lines:
        parts.append(_line(fr, x, y, layer))
    parts += _marks(fr, markers, lines[0] if lines else None)
    parts.append("</svg>")
    return "".join(parts)


def _axes(fr: Frame, height: int) -> list[str]:
    parts = []
    for t in nice_ticks(fr.y0, fr.y1):
        y = fr.sy(t)
        parts.append(
            f'<line x1="{fr.left}" x2="{fr.left + fr.w}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{fr.left - 4}" y="{y + 3:.1f}" class="ytick">{_label(t)}</text>'
        )
    for t in nice_ticks(fr.x0, fr.x1, 5):
        parts.append(f'<text x="{fr.sx(t):.1f}" y="{height - 8}" class="xtick">{_label(t)}</text>')
    return parts


def _runs(ok: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of True in ``ok``."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], ok.astype(np.int8), [0]])))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


def _area(fr: Frame, x: np.ndarray, below: np.ndarray, above: np.ndarray, layer: Layer) -> str:
    pts_up = [f"{fr.sx(a):.1f},{fr.sy(b):.1f}" for a, b in zip(x.tolist(), above.tolist())]
    pts_dn = [f"{fr.sx(a):.1f},{fr.sy(b):.1f}" for a, b in zip(x.tolist(), below.tolist())]
    if len(pts_up) == 1:  # one step: a thin bar
        pts_up = [pts_up[0], f"{fr.sx(x[0]) + 2:.1f},{fr.sy(above[0]):.1f}"]
        pts_dn = [pts_dn[0], f"{fr.sx(x[0]) + 2:.1f},{fr.sy(below[0]):.1f}"]
    pts = " ".join(pts_up + pts_dn[::-1])
    data = _data(fr, x=x, lo=below, hi=above)
    return (
        f'<polygon points="{pts}" fill="{layer.color}" {data} class="area">'
        f"<title>{escape(layer.label)}</title></polygon>"
    )


def _line(fr: Frame, x: np.ndarray, y: np.ndarray, layer: Layer) -> str:
    """The logged points joined in step order (a step that did not log is skipped)."""
    xs, ys = reduce_points(x, y)
    cls = "series dash" if layer.style == "dash" else "series"
    title = f"<title>{escape(layer.label)}</title>"
    data = _data(fr, series=layer.label, x=xs, y=ys)
    if xs.shape[0] == 1:
        return (
            f'<circle cx="{fr.sx(xs[0]):.1f}" cy="{fr.sy(ys[0]):.1f}" r="2.5" '
            f'fill="{layer.color}"{data} class="dot">{title}</circle>'
        )
    pts = " ".join(f"{fr.sx(a):.1f},{fr.sy(b):.1f}" for a, b in zip(xs.tolist(), ys.tolist()))
    return f'<polyline points="{pts}" stroke="{layer.color}"{data} class="{cls}">{title}</polyline>'


def _markers(fr: Frame, markers: Sequence[Marker], first) -> list[str]:
    parts = []
    for m in markers:
        color = COLORS.get(m.severity, LINE)
        title = f"<title>{escape(m.label)}</title>"
        if m.marks:
            if first is None:  # no series to put the points on: thin lines at the steps
                for s in m.marks:
                    if fr.x0 <= s <= fr.x1:
                        x = fr.sx(float(s))
                        parts.append(
                            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{fr.top}" '
                            f'y2="{fr.top + fr.h}" stroke="{color}" class="end"'
                            f"{_data(fr, x=float(s))}>{title}</line>"
                        )
        else:
            da = max(fr.x0, min(fr.x1, float(m.onset)))
            db = fr.x1 if m.end is None else max(fr.x0, min(fr.x1, float(m.end)))
            a, b = fr.sx(da), fr.sx(db)
            parts.append(
                f'<rect x="{a:.1f}" y="{fr.top}" width="{max(b - a, 1.5):.1f}" '
                f'height="{fr.h}" fill="{color}" fill-opacity="0.10"'
                f"{_data(fr, x0=da, x1=db)}>{title}</rect>"
                f'<line x1="{a:.1f}" x2="{a:.1f}" y1="{fr.top}" y2="{fr.top + fr.h}" '
                f'stroke="{color}"{_data(fr, x=da)} class="onset">{title}</line>'
            )
            if m.end is not None:
                parts.append(
                    f'<line x1="{b:.1f}" x2="{b:.1f}" y1="{fr.top}" y2="{fr.top + fr.h}" '
                    f'stroke="{color}"{_data(fr, x=db)} class="end">{title}</line>'
                )
        for t in m.thresholds:
            if not math.isfinite(t):
                continue
            y = fr.sy(t)
            yv = _data(fr, yv=t)
            parts.append(
                f'<line x1="{fr.left}" x2="{fr.left + fr.w}" y1="{y:.1f}" y2="{y:.1f}" '
                f'stroke="{color}"{yv} class="thr"><title>threshold {_label(t)}</title></line>'
                f'<text x="{fr.left + fr.w - 2}" y="{y - 3:.1f}" class="thrlabel" '
                f'fill="{color}"{yv}>threshold {_label(t)}</text>'
            )
    return parts


def _marks(fr: Frame, markers: Sequence[Marker], first) -> list[str]:
    """Each marked step as a point on the first series (at its value there)."""
    if first is None:
        return []
    _, x, y = first
    parts = []
    for m in markers:
        color = COLORS.get(m.severity, LINE)
        for s in m.marks:
            i = int(np.searchsorted(x, float(s)))
            if i < x.shape[0] and x[i] == s:
                parts.append(
                    f'<circle cx="{fr.sx(x[i]):.1f}" cy="{fr.sy(y[i]):.1f}" r="4" '
                    f'fill="{color}"{_data(fr, x=x[i], y=y[i])} class="mark"><title>{escape(m.label)}: step {int(s)}'
                    f"</title></circle>"
                )
    return parts

"""An inline SVG heat map for the HTML report: rows x columns of values in [0, 1].

Cells of one colour are one ``<path>``, so a 40 x 60 map costs tens of KB, not hundreds; each
row's label is its tooltip too. Every label is escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

import numpy as np

from rlvitals.report._svg import LEGEND_ROW, PAD_B, PAD_L, PAD_R, PAD_T, WIDE

__all__ = ["HEAT", "heat_map"]

HEAT = (
    "#8c510a",
    "#bf812d",
    "#dfc27d",
    "#f6e8c3",
    "#f5f5f5",
    "#c7eae5",
    "#80cdc1",
    "#35978f",
    "#01665e",
)
"""Heat map colours from 0 to 1 (diverging: both ends are strong, the middle is pale)."""
HEAT_LABEL_CHARS = 18
"""Characters of a row label shown at its left (all of it in the tooltip)."""


def heat_map(
    title: str,
    rows: Sequence[str],
    columns: Sequence[tuple[int, int]],
    values: np.ndarray,
    *,
    width: int = WIDE,
    legend: tuple[str, str] = ("0", "1"),
    row_height: int = 9,
    label_width: int = 120,
) -> str:
    """An ``<svg>`` heat map of ``values`` (``(len(rows), len(columns))`` in [0, 1], NaN =
    empty): one row per label, one column per ``(first step, last step)`` bin. Cells of one
    colour are one path, so the page stays small; each row's label is its tooltip too.

    Returns an empty string when there is nothing to draw.
    """
    v = np.asarray(values, dtype=np.float64)
    nr, nc = len(rows), len(columns)
    if nr == 0 or nc == 0 or v.shape != (nr, nc):
        return ""
    top, left = PAD_T + LEGEND_ROW, label_width
    cw = max(1.0, (width - left - PAD_R) / nc)
    height = top + nr * row_height + PAD_B
    with np.errstate(invalid="ignore"):
        level = np.where(np.isfinite(v), np.clip(v, 0.0, 1.0) * (len(HEAT) - 1) + 0.5, -1).astype(
            int
        )
    parts = [
        f'<svg class="plot heat" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(title)}">',
        f'<text x="{PAD_L}" y="14" class="ptitle">{escape(title)}</text>',
    ]
    lx = float(left)
    for i, c in enumerate(HEAT):
        parts.append(
            f'<rect x="{lx + 14 * i:.0f}" y="{PAD_T - 2}" width="14" height="8" '
            f'fill="{c}" class="hcell"/>'
        )
    lx += 14 * len(HEAT)
    parts.append(
        f'<text x="{left - 4}" y="{PAD_T + 5}" class="ytick">{escape(legend[0])}</text>'
        f'<text x="{lx + 4:.0f}" y="{PAD_T + 5}" class="legend">{escape(legend[1])}</text>'
    )
    for k, color in enumerate(HEAT):
        rr, cc = np.nonzero(level == k)
        if rr.size:
            d = "".join(
                f"M{left + c * cw:.1f} {top + r * row_height}h{cw:.1f}v{row_height - 1}h-{cw:.1f}z"
                for r, c in zip(rr.tolist(), cc.tolist())
            )
            parts.append(f'<path d="{d}" fill="{color}"/>')
    for r, label in enumerate(rows):
        y = top + r * row_height
        parts.append(
            f'<rect x="{left}" y="{y}" width="{nc * cw:.1f}" height="{row_height}" '
            f'class="hrow"><title>{escape(label)}</title></rect>'
            f'<text x="{left - 4}" y="{y + row_height - 1}" class="hlabel">'
            f"{escape(_short(label))}</text>"
        )
    parts.append(
        f'<rect x="{left}" y="{top}" width="{nc * cw:.1f}" height="{nr * row_height}" '
        f'class="frame"/>'
    )
    for c in sorted({0, nc // 2, nc - 1}):
        first, last = columns[c]
        label = str(first) if first == last else f"{first}-{last}"
        parts.append(
            f'<text x="{left + (c + 0.5) * cw:.1f}" y="{height - 8}" class="xtick">'
            f"{escape(label)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _short(label: str) -> str:
    return label if len(label) <= HEAT_LABEL_CHARS else label[: HEAT_LABEL_CHARS - 1] + "…"

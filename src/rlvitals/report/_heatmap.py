"""An inline SVG heat map for the HTML report: rows x columns of values in [0, 1].

Cells of one colour are one ``<path>``, so a 40 x 60 map costs tens of KB, not hundreds; each
row's label is its tooltip too (or the tooltip given). Every label is escaped.

:func:`prompt_label` names a prompt row: its text when the run recorded text as the prompt
(cut to fit, all of it in the tooltip), else a short form of its id (a hash, a number) with a
tooltip saying the text was not recorded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

import numpy as np

from rlvitals.report.svg import LEGEND_ROW, PAD_B, PAD_L, PAD_R, PAD_T, WIDE

__all__ = ["HEAT", "heat_map", "prompt_label"]

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
TEXT_LABEL_CHARS = 36
"""Characters of a prompt's text shown at the left of its row."""
TEXT_LABEL_WIDTH = 210
"""Width of the label column when rows are labelled with prompt text."""
TIP_CHARS = 600
"""Characters of a prompt's text in its row's tooltip."""
_ID = re.compile(r"(?:[a-z0-9]+:)?[0-9a-f]{8,64}|-?\d+", re.I)
"""A prompt key that is an id (a hex hash, ``blake2b:<hex>``, an integer), not text."""


def prompt_label(key: object) -> tuple[str, str, bool]:
    """``(label, tooltip, is_text)`` of a prompt row.

    >>> prompt_label("blake2b:0123456789abcdef")[0], prompt_label(42)[2]
    ('#01234567', False)
    >>> prompt_label("What is 2 + 2?")
    ('What is 2 + 2?', 'What is 2 + 2?', True)
    """
    s = str(key)
    if _ID.fullmatch(s.strip()):
        short = s.rsplit(":", 1)[-1]
        short = "#" + (short[:8] if not short.lstrip("-").isdigit() else short)
        return short, f"prompt id {s} (the prompt text was not recorded)", False
    text = " ".join(s.split())
    tip = text if len(text) <= TIP_CHARS else text[: TIP_CHARS - 1] + "…"
    label = text if len(text) <= TEXT_LABEL_CHARS else text[: TEXT_LABEL_CHARS - 1] + "…"
    return label, tip, True


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
    tips: Sequence[str] | None = None,
    label_chars: int = HEAT_LABEL_CHARS,
) -> str:
    """An ``<svg>`` heat map of ``values`` (``(len(rows), len(columns))`` in [0, 1], NaN =
    empty): one row per label, one column per ``(first step, last step)`` bin. Cells of one
    colour are one path, so the page stays small; each row's tooltip is ``tips[i]``, else its
    label; labels longer than ``label_chars`` are cut.

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
        tip = tips[r] if tips is not None and r < len(tips) else label
        parts.append(
            f'<rect x="{left}" y="{y}" width="{nc * cw:.1f}" height="{row_height}" '
            f'class="hrow"><title>{escape(tip)}</title></rect>'
            f'<text x="{left - 4}" y="{y + row_height - 1}" class="hlabel">'
            f"{escape(_short(label, label_chars))}<title>{escape(tip)}</title></text>"
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


def _short(label: str, chars: int = HEAT_LABEL_CHARS) -> str:
    return label if len(label) <= chars else label[: chars - 1] + "…"

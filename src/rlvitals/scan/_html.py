"""The scan as one self-contained HTML page: the ACR_100 scatter, then the run table.

Inline CSS, SVG and the pages' own script (:mod:`rlvitals.report.web`: the table sorts by any
column when its header is clicked); the Content-Security-Policy allows that script by its hash
and refuses every request (the same policy as the doctor's report). Paths are relative to the
scan's root; a run with a report written by ``--reports`` links to it. The scatter puts each run at (ACR_100, final metric), coloured
by its worst finding, with its name as the point's tooltip (an SVG ``<title>``); the
least-squares line of these runs is drawn solid and the paper's line (He et al. 2026, in the
metric's units) dashed beside it, with r, its bootstrap interval and both equations in the
caption. Every string from the input is HTML-escaped.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from rlvitals._version import __version__
from rlvitals.report import web
from rlvitals.report.svg import COLORS, Frame, axis_range, nice_ticks
from rlvitals.scan._cells import COLUMNS, correlation_text, left_out_lines
from rlvitals.scan._row import ScanRow

if TYPE_CHECKING:
    from rlvitals.scan._core import ScanResult
    from rlvitals.scan._stats import Correlation

__all__ = ["render_html", "scatter"]

CSP = web.CSP
W, H = 640, 400
PAD_L, PAD_R, PAD_T, PAD_B = 60, 16, 34, 44
STATUS_COLOURS = {
    **COLORS,
    "ok": "#2e7d32",
    "not judged": "#6b7280",
    "error": "#111827",
}

CSS = """
:root { --fg:#1f2937; --muted:#6b7280; --line:#e5e7eb; --bg:#f8fafc; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
       font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; }
main { max-width:1400px; margin:0 auto; padding:22px 26px 44px; }
h1 { font-size:22px; margin:0 0 6px; } h2 { font-size:16px; margin:22px 0 8px; color:var(--muted);
     text-transform:uppercase; letter-spacing:.04em; }
.summary { margin:0 0 14px; padding-left:18px; } .summary li { margin:2px 0; }
figure { margin:0; background:#fff; border:1px solid var(--line); border-radius:8px;
         padding:8px; display:inline-block; }
figcaption { font-size:12px; color:var(--muted); max-width:640px; margin:4px 4px 0; }
svg .frame { fill:none; stroke:var(--line); } svg .grid { stroke:#f1f5f9; }
svg .tick { font-size:11px; fill:var(--muted); } svg .axis { font-size:12px; fill:var(--fg); }
svg .pt { stroke:#fff; stroke-width:1; fill-opacity:.9; }
svg .ols { stroke:#334155; stroke-width:2; } svg .paper { stroke:#9333ea; stroke-width:2;
           stroke-dasharray:6 4; } svg .legend { font-size:11px; fill:var(--fg); }
svg.scatter { max-width:100%; height:auto; }
table.runs a { color:inherit; } .summary li, figcaption { overflow-wrap:anywhere; }
@media (max-width: 640px) { main { padding:14px 12px 32px; } }
table.runs { border-collapse:collapse; width:100%; background:#fff; border:1px solid var(--line);
             font-size:13px; }
table.runs th, table.runs td { padding:5px 8px; border-bottom:1px solid var(--line);
                               text-align:left; vertical-align:top; }
table.runs th { font-size:11px; color:var(--muted); text-transform:uppercase; }
table.runs td.r { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
table.runs td.run { font-family:ui-monospace,"DejaVu Sans Mono",monospace; word-break:break-all; }
.status { display:inline-block; font-size:11px; font-weight:700; padding:1px 7px;
          border-radius:4px; color:#fff; white-space:nowrap; }
footer { color:var(--muted); font-size:12px; margin-top:24px; }
"""


def _colour(status: str) -> str:
    return STATUS_COLOURS.get(status, STATUS_COLOURS["not judged"])


def scatter(c: Correlation, statuses: Sequence[str] = ()) -> str:
    """The ``<svg>`` scatter of ACR_100 against the final metric with both lines."""
    xs, ys = list(c.x), list(c.y)
    x0, x1 = axis_range(min(0.0, *xs), max(1.0, *xs), pad=0.02)
    line_y = [c.intercept + c.slope * x for x in (x0, x1)] + [c.paper_y(x) for x in (x0, x1)]
    # the paper's line may leave the data's range: keep the axis on the data (plus the OLS line)
    y0, y1 = axis_range(min(ys + line_y[:2]), max(ys + line_y[:2]))
    pw, ph = W - PAD_L - PAD_R, H - PAD_T - PAD_B
    frame = Frame((x0, x1), (y0, y1), (PAD_L, PAD_T, pw, ph))  # data to pixels, as the plots
    sx, sy = frame.sx, frame.sy
    parts = [
        f'<svg class="scatter" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="ACR_100 against {escape(c.y_label)}">',
        f'<rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}" class="frame"/>',
    ]
    for t in nice_ticks(x0, x1, 5):
        parts.append(
            f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{PAD_T}" y2="{PAD_T + ph}" class="grid"/>'
            f'<text x="{sx(t):.1f}" y="{PAD_T + ph + 15}" class="tick" text-anchor="middle">'
            f"{t:g}</text>"
        )
    for t in nice_ticks(y0, y1, 5):
        parts.append(
            f'<line x1="{PAD_L}" x2="{PAD_L + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>'
            f'<text x="{PAD_L - 6}" y="{sy(t) + 4:.1f}" class="tick" text-anchor="end">{t:.4g}</text>'
        )
    parts.append(
        f'<text x="{PAD_L + pw / 2:.0f}" y="{H - 8}" class="axis" text-anchor="middle">'
        "ACR_100 (mean ACR over the first 100 steps)</text>"
        f'<text x="14" y="{PAD_T + ph / 2:.0f}" class="axis" text-anchor="middle" '
        f'transform="rotate(-90 14 {PAD_T + ph / 2:.0f})">{escape(c.y_label)}</text>'
    )
    parts.append(
        f'<clipPath id="area"><rect x="{PAD_L}" y="{PAD_T}" width="{pw}" height="{ph}"/></clipPath>'
    )
    for cls, (ya, yb) in (("paper", line_y[2:]), ("ols", line_y[:2])):
        parts.append(
            f'<line x1="{sx(x0):.1f}" x2="{sx(x1):.1f}" y1="{sy(ya):.1f}" y2="{sy(yb):.1f}" '
            f'class="{cls}" clip-path="url(#area)"/>'
        )
    for i, (x, y) in enumerate(zip(xs, ys)):
        status = statuses[i] if i < len(statuses) else "ok"
        label = c.labels[i] if i < len(c.labels) else ""
        parts.append(
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="5" class="pt" fill="{_colour(status)}">'
            f"<title>{escape(label)}: ACR_100 {x:.3f}, {escape(c.y_label)} {y:.4g} "
            f"({escape(status)})</title></circle>"
        )
    lx = PAD_L + 8
    parts.append(
        f'<line x1="{lx}" x2="{lx + 22}" y1="{PAD_T - 14}" y2="{PAD_T - 14}" class="ols"/>'
        f'<text x="{lx + 28}" y="{PAD_T - 10}" class="legend">these runs (OLS), r = {c.r:.2f}</text>'
        f'<line x1="{lx + 230}" x2="{lx + 252}" y1="{PAD_T - 14}" y2="{PAD_T - 14}" class="paper"/>'
        f'<text x="{lx + 258}" y="{PAD_T - 10}" class="legend">paper: 51.4 - 29.6·ACR_100'
        f"{' (÷100)' if c.paper_scale != 1 else ''}, r = -0.785</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def _cell(col: tuple, r: ScanRow) -> str:
    name, align, get, value = col
    text = escape(get(r))
    if name == "run" and r.report:
        from urllib.parse import quote

        text = f'<a href="{escape(quote(r.report))}">{text}</a>'
    data = ""
    if value is not None:
        v = value(r)
        data = f' data-v="{"" if v is None else repr(float(v))}"'
    why = r.error or r.not_judged
    if name == "status":
        title = f' title="{escape(why)}"' if why else ""
        return (
            f'<td><span class="status" style="background:{_colour(r.status)}"{title}>'
            f"{text}</span></td>"
        )
    cls = "r" if align == "r" else ("run" if name == "run" else "")
    title = ""
    if name == "ACR_100" and r.acr_100_from == "estimate":
        title = ' title="the doctor\'s estimate from the mean reward and G (no ACR logged)"'
    elif name == "worst incident" and r.incident:
        title = f' title="{escape(r.incident)}"'
    elif name == "eval" and r.eval_key:
        title = f' title="{escape(r.eval_key)}"'
    elif name == "run" and why:
        title = f' title="{escape(why)}"'
    return f'<td class="{cls}"{title}{data}>{text}</td>'


def render_html(
    result: ScanResult, rows: Sequence[ScanRow], tail: Sequence[str], against: str = "auto"
) -> str:
    """The page: summary, scatter (when there is a correlation), run table."""
    c = result.correlation(against)
    out = [
        *web.head(f"rlvitals scan: {len(rows)} runs", CSS),
        "<main>",
        "<h1>rlvitals scan</h1>",
        '<ul class="summary">' + "".join(f"<li>{escape(t)}</li>" for t in tail) + "</ul>",
    ]
    if c is not None:
        by_label = {r.label: r.status for r in rows}
        statuses = [by_label.get(label, "ok") for label in c.labels]
        out.append("<h2>Early collapse against the outcome</h2>")
        out.append(
            f"<figure>{scatter(c, statuses)}<figcaption>{escape(correlation_text(c, rows))}. "
            "Points are coloured by the run's worst finding."
            + "".join(f"<br>{escape(x)}" for x in left_out_lines(c))
            + "</figcaption></figure>"
        )
    out.append(f"<h2>Runs ({len(rows)}) · click a column to sort</h2>")
    out.append('<div class="scroll"><table class="runs sortable"><thead><tr>')
    out.append("".join(f"<th>{escape(col[0])}</th>" for col in COLUMNS))
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>" + "".join(_cell(col, r) for col in COLUMNS) + "</tr>")
    out.append("</tbody></table></div>")
    out.append(
        f"<footer>rlvitals {escape(__version__)} · self-contained page: no network requests "
        f"(its one script is inline)</footer></main>{web.script_tag()}</body></html>"
    )
    return "\n".join(out) + "\n"

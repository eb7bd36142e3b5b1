"""A comparison in text, JSON, Markdown or one self-contained HTML page.

Each says the same, in the same order: the two runs, their vitals side by side, the first step
where they diverge (and each series' own), the incidents one has and the other not, then the
configuration differences. The HTML page adds a plot per compared series with both runs
overlaid and the divergence step marked (inline SVG; no script, no request). Strings from the
input are made one line and escape-free for a terminal, escaped in Markdown and HTML.
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

from rlvitals._text import fmt

if TYPE_CHECKING:
    from rlvitals.compare import Comparison, Divergence

__all__ = ["FORMATS", "render_compare"]

FORMATS = ("text", "json", "md", "html")
MAX_CONFIG_LINES = 60
"""Configuration differences written out in text and Markdown before '... and N more'."""
_VALUE_CHARS = 60

_VITALS = (
    ("steps", "steps"),
    ("G", "group_size"),
    ("evidence", "evidence"),
    ("ACR_100", "acr_100"),
    ("ACR mean", "acr_mean"),
    ("ACR last window", "acr_windowed_last"),
    ("wasted rollouts", "wasted_frac_mean"),
    ("adv_std mean", "adv_std_mean"),
)


def _cell(v: Any) -> str:
    return fmt(v) if v is None or isinstance(v, (int, float)) else str(v)


def _value(v: Any) -> str:
    s = "(absent)" if v is None else str(v)
    return s if len(s) <= _VALUE_CHARS else s[: _VALUE_CHARS - 1] + "…"


def _final(c: Comparison) -> list[tuple[str, str, str]]:
    from rlvitals.scan import Job, row_from_diagnosis

    ra = row_from_diagnosis(c.a, Job(0, 0, c.labels[0], None))
    rb = row_from_diagnosis(c.b, Job(0, 0, c.labels[1], None))
    key = ra.eval_key or rb.eval_key
    if key and rb.eval_key and ra.eval_key and ra.eval_key != rb.eval_key:
        key = f"{ra.eval_key} / {rb.eval_key}"
    return [
        ("final train reward", fmt(ra.reward_final), fmt(rb.reward_final)),
        (f"final eval ({key or 'none'})", fmt(ra.eval_final), fmt(rb.eval_final)),
        ("primary condition", _cond(ra), _cond(rb)),
        ("worst", ra.status, rb.status),
        ("worst incident", _inc(ra), _inc(rb)),
    ]


def _cond(r) -> str:
    if not r.condition:
        return "not judged" if r.not_judged else "-"
    return r.condition + (f" @{r.condition_onset}" if r.condition_onset is not None else "")


def _inc(r) -> str:
    if not r.incident_root:
        return "-"
    return r.incident_root + (f" @{r.incident_onset}" if r.incident_onset is not None else "")


def rows(c: Comparison) -> list[tuple[str, str, str]]:
    """``(what, A, B)`` lines of the side-by-side vitals."""
    va, vb = c.a.vitals.summary(), c.b.vitals.summary()
    out = [("format", str(c.a.run.manifest.format), str(c.b.run.manifest.format))]
    out.append(("trainer", str(c.a.run.manifest.trainer), str(c.b.run.manifest.trainer)))
    out += [(label, _cell(va.get(k)), _cell(vb.get(k))) for label, k in _VITALS]
    return out + _final(c)


def divergence_text(d: Divergence | None) -> str:
    if d is None:
        return "no divergence: every compared series stays within its tolerance"
    if d.step is None:
        return f"{d.series}: no divergence ({d.why})"
    return (
        f"{d.series} from step {d.step} (A {fmt(d.a)}, B {fmt(d.b)}; tolerance "
        f"{fmt(d.tolerance)}, {d.points} common steps)"
    )


def _incident_line(x: dict) -> str:
    since = f" since step {x['onset_step']}" if x.get("onset_step") is not None else ""
    return f"{x['root']} ({x['severity']}){since}: {x['title']}"


def lines(c: Comparison) -> list[tuple[str, list[str]]]:
    """``(section title, lines)`` in order, shared by text and Markdown."""
    out: list[tuple[str, list[str]]] = []
    out.append(("first divergence", [divergence_text(c.first)]))
    out.append(("per series", [divergence_text(d) for d in c.divergences]))
    out.append(("incidents only in A", [_incident_line(x) for x in c.only_a] or ["none"]))
    out.append(("incidents only in B", [_incident_line(y) for y in c.only_b] or ["none"]))
    both = [
        f"{x['root']} / {y['root']}: A since {x.get('onset_step')}, B since {y.get('onset_step')}"
        for x, y in c.both
    ]
    out.append(("incidents in both", both or ["none"]))
    cfg = [f"{k}: {_value(a)} | {_value(b)}" for k, a, b in c.config[:MAX_CONFIG_LINES]]
    if len(c.config) > MAX_CONFIG_LINES:
        cfg.append(f"... and {len(c.config) - MAX_CONFIG_LINES} more")
    out.append((f"configuration differences ({len(c.config)}; A | B)", cfg or ["none"]))
    return out


def _text(c: Comparison) -> str:
    from rlvitals.report.common import one_line

    table = rows(c)
    w0 = max(len(r[0]) for r in table)
    w1 = max(len(one_line(r[1])) for r in table)
    out = ["rlvitals compare", f"A  {one_line(c.labels[0])}", f"B  {one_line(c.labels[1])}", ""]
    out.append(f"{'':<{w0}}  {'A':>{w1}}  B")
    out += [f"{one_line(k):<{w0}}  {one_line(a):>{w1}}  {one_line(b)}" for k, a, b in table]
    for title, body in lines(c):
        out.append("")
        out.append(title)
        out += [f"  {one_line(x)}" for x in body]
    return "\n".join(out) + "\n"


def _md(c: Comparison) -> str:
    from rlvitals.report.markdown import md_escape

    out = ["## rlvitals compare", "", f"- **A** {md_escape(c.labels[0])}"]
    out += [f"- **B** {md_escape(c.labels[1])}", "", "| | A | B |", "|---|---:|---:|"]
    out += [f"| {md_escape(k)} | {md_escape(a)} | {md_escape(b)} |" for k, a, b in rows(c)]
    for title, body in lines(c):
        out += ["", f"**{md_escape(title)}**", ""]
        out += [f"- {md_escape(x)}" for x in body]
    return "\n".join(out) + "\n"


_CSS = """
:root { --fg:#1f2937; --muted:#6b7280; --line:#e5e7eb; --bg:#f8fafc; }
body { margin:0; background:var(--bg); color:var(--fg);
       font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; }
main { max-width:1180px; margin:0 auto; padding:22px 26px 44px; }
h1 { font-size:22px; margin:0 0 6px; } h2 { font-size:15px; margin:20px 0 8px;
     color:var(--muted); text-transform:uppercase; letter-spacing:.04em; }
.src { font-family:ui-monospace,"DejaVu Sans Mono",monospace; color:var(--muted);
       word-break:break-all; margin:2px 0; }
table { border-collapse:collapse; background:#fff; border:1px solid var(--line); }
th, td { padding:5px 10px; border-bottom:1px solid var(--line); text-align:left; }
td.v { font-variant-numeric:tabular-nums; } th { font-size:11px; color:var(--muted); }
ul { margin:0; padding-left:20px; }
.plots { display:flex; flex-wrap:wrap; gap:10px; }
svg.plot { background:#fff; border:1px solid var(--line); border-radius:6px; max-width:100%;
           height:auto; }
svg .ptitle { font:600 12px ui-monospace,"DejaVu Sans Mono",monospace; fill:var(--fg); }
svg .frame { fill:none; stroke:var(--line); } svg .grid { stroke:#f1f5f9; }
svg .ytick { font-size:10px; fill:var(--muted); text-anchor:end; }
svg .xtick { font-size:10px; fill:var(--muted); text-anchor:middle; }
svg .series { fill:none; stroke-width:1.4; stroke-linejoin:round; }
svg .series.dash, svg .dash { stroke-dasharray:5 3; stroke-width:1.6; }
svg .lg { stroke-width:2; } svg .legend { font-size:10px; fill:var(--fg); }
svg .onset { stroke-width:1.5; stroke-dasharray:5 3; }
svg .end { stroke-width:1.5; stroke-dasharray:2 3; }
svg .thr { stroke-width:1.2; stroke-dasharray:2 2; } svg .thrlabel { font-size:10px; }
svg .mark { stroke:#fff; stroke-width:1; }
footer { color:var(--muted); font-size:12px; margin-top:24px; }
"""


def _plots(c: Comparison) -> list[str]:
    from rlvitals.report.svg import PALETTE, WIDTH, Layer, Marker, plot

    out = []
    for d in c.divergences:
        sa, sb = c.a.vitals.series.get(d.series), c.b.vitals.series.get(d.series)
        if sa is None or sb is None:
            continue
        layers = [
            Layer(f"A {d.series}", c.a.vitals.steps, sa),
            Layer(f"B {d.series}", c.b.vitals.steps, sb, color=PALETTE[0], style="dash"),
        ]
        marks = [Marker(d.step, None, "info", "diverges")] if d.step is not None else []
        svg = plot(d.series, layers, marks, width=WIDTH)
        if svg:
            out.append(svg)
    return out


def _html(c: Comparison) -> str:
    from rlvitals._version import __version__
    from rlvitals.report.web import CSP

    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        "<title>rlvitals compare</title>",
        f"<style>{_CSS}</style></head><body><main>",
        "<h1>rlvitals compare</h1>",
        f'<p class="src"><b>A</b> {escape(c.labels[0])}</p>',
        f'<p class="src"><b>B</b> {escape(c.labels[1])}</p>',
        "<h2>Vitals</h2><table><tr><th></th><th>A</th><th>B</th></tr>",
    ]
    out += [
        f'<tr><td>{escape(k)}</td><td class="v">{escape(a)}</td><td class="v">{escape(b)}</td></tr>'
        for k, a, b in rows(c)
    ]
    out.append("</table>")
    sections = lines(c)
    for title, body in sections[:-1]:
        out.append(f"<h2>{escape(title)}</h2><ul>")
        out += [f"<li>{escape(x)}</li>" for x in body]
        out.append("</ul>")
    plots = _plots(c)
    if plots:
        out.append('<h2>Series, A solid and B dashed</h2><div class="plots">')
        out += plots
        out.append("</div>")
    out.append(f"<h2>{escape(sections[-1][0])}</h2>")
    if c.config:
        out.append("<table><tr><th>key</th><th>A</th><th>B</th></tr>")
        out += [
            f"<tr><td>{escape(k)}</td><td>{escape(_value(a))}</td><td>{escape(_value(b))}</td></tr>"
            for k, a, b in c.config
        ]
        out.append("</table>")
    else:
        out.append("<p>none</p>")
    out.append(
        f"<footer>rlvitals {escape(__version__)} · self-contained page: no scripts, no network "
        "requests</footer></main></body></html>"
    )
    return "\n".join(out) + "\n"


def render_compare(c: Comparison, fmt_: str = "text") -> str:
    """``c`` in ``fmt_`` (:data:`FORMATS`)."""
    if fmt_ == "json":
        return json.dumps(c.to_dict(), indent=1, allow_nan=False, default=str) + "\n"
    if fmt_ == "md":
        return _md(c)
    if fmt_ == "html":
        return _html(c)
    if fmt_ == "text":
        return _text(c)
    raise ValueError(f"unknown format {fmt_!r}; valid: {', '.join(FORMATS)}")

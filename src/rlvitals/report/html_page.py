"""The HTML report: one self-contained page (inline CSS, SVG and the pages' own script; its
Content-Security-Policy allows that script by its hash and refuses every request,
:mod:`rlvitals.report.web`). Plots show their values on hover, zoom on a dragged range and
switch to a log scale; the page reads at phone width (390 px: tables scroll, plots shrink).

Header with the run, its verdict badge ("not judged" in grey when the doctor could not judge
the run, never a green "no findings") and its vitals; the not-judged note with the detectors
that could not judge, grouped by why; one card per incident (title, severity, steps, root
cause, its detectors linked to their findings, first actions); a table of findings and one
card per finding with its message, plots of its key series (span shaded, onset and end marked,
threshold lines dotted, isolated events as points), its numbers and what to try; then the
run's vital signs (:mod:`rlvitals.report._plots`: reward with evaluations overlaid, ACR by kind
with the expected ACR, residual ACR, a prompt x step heat map) and the notes. Every string that
comes from the run (source path, series names, messages, metric names) is HTML-escaped.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from rlvitals._version import __version__
from rlvitals.report import Renderer, RenderOptions, register, web
from rlvitals.report._plots import Figure, available, finding_plots, overview, prompt_heat_map
from rlvitals.report.common import (
    INCIDENT_ACTIONS,
    end_text,
    header_facts,
    incident_span,
    lead,
    marks_text,
    named_conditions,
    notes,
    number,
    skip_groups,
    verdict,
)
from rlvitals.report.svg import PLOT_CSS

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["render_html"]

CSP = web.CSP
"""The page's Content-Security-Policy: its own script only; the browser refuses any request."""

CSS = """
:root { --crit:#c62828; --warn:#d97706; --info:#1d6fb8; --ok:#2e7d32; --fg:#1f2937;
        --muted:#6b7280; --line:#e5e7eb; --bg:#f8fafc; --unjudged:#6b7280; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
       font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; }
main { max-width:1180px; margin:0 auto; padding:24px 28px 48px; }
h1 { font-size:22px; margin:0 0 2px; } h2 { font-size:18px; margin:0 0 8px; }
h2.section { font-size:16px; margin:22px 0 10px; color:var(--muted); text-transform:uppercase;
             letter-spacing:.04em; }
h3 { font-size:14px; margin:12px 0 4px; text-transform:uppercase; letter-spacing:.04em;
     color:var(--muted); }
.source { font-family:ui-monospace,"DejaVu Sans Mono",monospace; color:var(--muted);
          word-break:break-all; margin:0 0 10px; }
.verdict { display:inline-block; font-weight:600; font-size:16px; padding:4px 12px;
           border-radius:6px; color:#fff; background:var(--ok); }
.verdict.critical { background:var(--crit); } .verdict.warn { background:var(--warn); }
.verdict.info { background:var(--info); } .verdict.unjudged { background:var(--unjudged); }
.unjudged-note { background:#fff; border:1px solid var(--line); border-left:5px solid
                 var(--unjudged); border-radius:8px; padding:10px 16px; margin:0 0 18px; }
.unjudged-note p { margin:0 0 6px; }
.skipped { font-size:13px; margin:4px 0 0; padding-left:18px; }
.skipped li { margin:1px 0; } .skipped .why { color:var(--muted); }
article.incident { background:#fff; border:1px solid var(--line); border-left:5px solid
                   var(--info); border-radius:8px; padding:12px 18px; margin:0 0 14px; }
article.incident.critical { border-left-color:var(--crit); }
article.incident.warn { border-left-color:var(--warn); }
.cause { margin:4px 0 6px; } .members { font-size:13px; color:var(--muted); margin:0 0 6px; }
figure { margin:0; } figcaption { font-size:12px; color:var(--muted); max-width:1064px;
                                  margin:2px 0 0 4px; }
.facts { display:flex; flex-wrap:wrap; gap:6px 18px; margin:12px 0 20px; padding:0; }
.facts div { font-size:13px; } .facts dt { display:inline; color:var(--muted); }
.facts dd { display:inline; margin:0 0 0 4px; font-weight:600; }
table { border-collapse:collapse; width:100%; }
table.findings { background:#fff; border:1px solid var(--line); border-radius:8px;
                 margin-bottom:24px; }
table.findings th, table.findings td { text-align:left; padding:7px 10px;
                                       border-bottom:1px solid var(--line); vertical-align:top; }
table.findings th { font-size:12px; color:var(--muted); text-transform:uppercase; }
td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
.badge { display:inline-block; font-size:11px; font-weight:700; padding:1px 7px;
         border-radius:4px; color:#fff; letter-spacing:.03em; }
.badge.critical { background:var(--crit); } .badge.warn { background:var(--warn); }
.badge.info { background:var(--info); }
.id { font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-weight:600; }
article.finding { background:#fff; border:1px solid var(--line); border-left:5px solid var(--info);
                  border-radius:8px; padding:14px 18px; margin:0 0 18px; }
article.finding.critical { border-left-color:var(--crit); }
article.finding.warn { border-left-color:var(--warn); }
.when { color:var(--muted); font-weight:400; font-size:14px; margin-left:6px; }
.msg { margin:4px 0 10px; }
svg .hrow { fill:transparent; } svg .hlabel { font:9px ui-monospace,"DejaVu Sans Mono",monospace;
                                               fill:var(--muted); text-anchor:end; }
.metrics { display:flex; flex-wrap:wrap; gap:4px 8px; margin:10px 0 0; padding:0; }
.metrics div { font-size:13px; background:var(--bg); border:1px solid var(--line);
               border-radius:4px; padding:1px 8px; }
.metrics dt { display:inline; color:var(--muted);
              font-family:ui-monospace,"DejaVu Sans Mono",monospace; font-size:12px; }
.metrics dd { display:inline; margin:0 0 0 6px; font-weight:600;
              font-variant-numeric:tabular-nums; }
a.id { color:inherit; text-decoration:none; } a.id:hover { text-decoration:underline; }
ul.try { margin:0; padding-left:20px; } ul.try li { margin:2px 0; }
.meta { color:var(--muted); font-size:13px; margin:10px 0 0; }
section.overview { margin-top:28px; }
.notes { color:var(--muted); font-size:13px; margin-top:24px; }
.notes li { margin:2px 0; }
footer { color:var(--muted); font-size:12px; margin-top:28px; }
main p, main li, main dt, main dd, main h2, figcaption { overflow-wrap:anywhere; }
.metrics div, .facts div { max-width:100%; }
@media (max-width: 640px) {
  main { padding:14px 12px 32px; } h1 { font-size:19px; } .facts { gap:4px 12px; }
  article.incident, article.finding { padding:10px 12px; }
  table.findings th, table.findings td { padding:5px 6px; }
}
"""


def render_html(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The HTML page of ``diagnosis`` (see the module docstring)."""
    d = diagnosis.to_dict()
    vitals = diagnosis.vitals
    findings = d["findings"]
    incidents = d.get("incidents") or []
    not_judged = d.get("not_judged")
    have = available(vitals)
    source = str(d["run"].get("source") or "(run)")
    worst = "unjudged" if not_judged else d.get("worst") or "ok"
    out = [
        *web.head(f"rlvitals doctor: {source}", CSS + PLOT_CSS),
        "<main><header>",
        "<h1>rlvitals doctor</h1>",
        f'<p class="source">{escape(source)}</p>',
        f'<span class="verdict {escape(worst)}">'
        f"{escape(verdict(findings, incidents, not_judged, named_conditions(d)))}</span>",
        '<dl class="facts">'
        + "".join(
            f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in header_facts(d)
        )
        + "</dl>",
        "</header>",
    ]
    if not_judged:
        out.append(
            f'<section class="unjudged-note"><p><strong>Not judged:</strong> '
            f"{escape(str(not_judged))}</p>{_skipped(d)}</section>"
        )
    first = lead(d.get("conditions"))
    if first:
        out.append(f'<p class="lead"><strong>{escape(first)}</strong></p>')
        out.append(_conditions(d["conditions"]))
    if incidents:
        out.append('<h2 class="section">Incidents</h2>')
        out += [_incident(inc, findings) for inc in incidents]
    if findings:
        out.append('<h2 class="section">Findings</h2>')
        out.append(_summary_table(findings))
    for i, f in enumerate(findings):
        out.append(_card(i, f, finding_plots(f, vitals, have)))
    out.append(_overview(overview(vitals, findings), prompt_heat_map(vitals)))
    out.append(_notes(d, skipped=not not_judged))
    out.append(
        f"<footer>rlvitals {escape(__version__)} · self-contained report: no network requests "
        "(its one script is inline) · drag across a plot to zoom, double-click to reset</footer>"
    )
    out.append(f"</main>{web.script_tag()}</body></html>")
    return "\n".join(out) + "\n"


def _summary_table(findings: list[dict]) -> str:
    rows = []
    for i, f in enumerate(findings):
        rows.append(
            f'<tr><td><span class="badge {escape(f["severity"])}">'
            f"{escape(f['severity'].upper())}</span></td>"
            f'<td><a class="id" href="#finding-{i}">{escape(f["id"])}</a></td>'
            f'<td class="num">{escape(number(f["onset_step"]))}</td>'
            f'<td class="num">{escape(end_text(f))}</td><td>{escape(f["message"])}</td></tr>'
        )
    return (
        '<div class="scroll"><table class="findings"><thead><tr><th>severity</th><th>ID</th>'
        "<th>onset</th><th>end</th><th>finding</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></div>"
    )


def _incident(inc: dict, findings: list[dict]) -> str:
    sev = escape(inc["severity"])
    links = []
    for i in inc.get("findings") or []:
        if isinstance(i, int) and 0 <= i < len(findings):
            name = escape(findings[i]["id"])
            root = " (root)" if findings[i]["id"] == inc["root"] else ""
            links.append(f'<a class="id" href="#finding-{i}">{name}</a>{root}')
    if not links:
        links = [f'<span class="id">{escape(str(x))}</span>' for x in inc.get("detectors") or []]
    actions = list(inc.get("actions") or [])
    parts = [
        f'<article class="incident {sev}">',
        f'<h2><span class="badge {sev}">{sev.upper()}</span> {escape(inc["title"])}'
        f'<span class="when">{escape(incident_span(inc, findings))}</span></h2>',
        f'<p class="cause">{escape(inc["cause"])}</p>',
        f'<p class="members">{len(links)} finding{"s" if len(links) != 1 else ""}: '
        + ", ".join(links)
        + "</p>",
    ]
    if actions:
        parts.append(
            '<ul class="try">'
            + "".join(f"<li>{escape(str(a))}</li>" for a in actions[:INCIDENT_ACTIONS])
            + (
                f'<li class="meta">+{len(actions) - INCIDENT_ACTIONS} more under the findings</li>'
                if len(actions) > INCIDENT_ACTIONS
                else ""
            )
            + "</ul>"
        )
    parts.append("</article>")
    return "".join(parts)


def _card(i: int, f: dict, plots: list[str]) -> str:
    sev = escape(f["severity"])
    metrics = f.get("metrics") or {}
    parts = [
        f'<article class="finding {sev}" id="finding-{i}">',
        f'<h2><span class="badge {sev}">{sev.upper()}</span> '
        f'<span class="id">{escape(f["id"])}</span>'
        f'<span class="when">{escape(marks_text(f))}</span></h2>',
        f'<p class="msg">{escape(f["message"])}</p>',
    ]
    if plots:
        parts.append('<div class="plots">' + "".join(plots) + "</div>")
    if metrics:
        parts.append(
            '<dl class="metrics">'
            + "".join(
                f"<div><dt>{escape(str(k))}</dt><dd>{escape(number(v))}</dd></div>"
                for k, v in metrics.items()
            )
            + "</dl>"
        )
    actions = f.get("actions") or []
    if actions:
        parts.append(
            '<h3>Try</h3><ul class="try">'
            + "".join(f"<li>{escape(str(a))}</li>" for a in actions)
            + "</ul>"
        )
    parts.append(
        f'<p class="meta">confidence {f["confidence"]:.2f} · evidence '
        f"{escape(str(f['evidence']))}</p>"
    )
    parts.append("</article>")
    return "".join(parts)


def _figure(fig: Figure) -> str:
    cap = f"<figcaption>{escape(fig.caption)}</figcaption>" if fig.caption else ""
    return f"<figure>{fig.svg}{cap}</figure>"


def _overview(figs: list[Figure], heat: Figure | None) -> str:
    if not figs and heat is None:
        return ""
    out = '<section class="overview"><h2>Vital signs</h2><div class="plots">'
    out += "".join(_figure(f) for f in figs) + "</div>"
    if heat is not None:
        out += '<h2 class="section">Prompts</h2><div class="plots">' + _figure(heat) + "</div>"
    return out + "</section>"


def _skipped(d: dict) -> str:
    items = []
    for cls, reasons in skip_groups(d.get("skipped") or {}):
        inner = "".join(
            "<li>"
            + ", ".join(f'<span class="id">{escape(i)}</span>' for i in ids)
            + f': <span class="why">{escape(why)}</span></li>'
            for why, ids in reasons
        )
        items.append(f"<li><strong>{escape(cls)}</strong><ul>{inner}</ul></li>")
    return f'<ul class="skipped">{"".join(items)}</ul>' if items else ""


def _notes(d: dict, skipped: bool = True) -> str:
    items = [escape(str(n)) for n in notes(d)]
    items += [
        f'detector error: <span class="id">{escape(k)}</span> {escape(str(v))}'
        for k, v in sorted((d.get("errors") or {}).items())
    ]
    out = ""
    if items:
        out = '<ul class="notes">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
    if skipped and d.get("skipped"):
        n = len(d["skipped"])
        out += f'<div class="notes"><p>Not judged ({n}):</p>{_skipped(d)}</div>'
    return out


register(
    Renderer(
        "html", "self-contained HTML page with plots (no network requests)", ".html", render_html
    )
)


def _conditions(conditions: list[dict]) -> str:
    items = []
    for i, c in enumerate(conditions):
        since = f" · since step {c['onset_step']}" if c.get("onset_step") is not None else ""
        rows = "".join(f"<li>for: {escape(x)}</li>" for x in c.get("for") or [])
        rows += "".join(f"<li>against: {escape(x)}</li>" for x in c.get("against") or [])
        rows += "".join(f"<li>try: {escape(x)}</li>" for x in c.get("actions") or [])
        role = "primary" if i == 0 else "also"
        items.append(
            f"<li><strong>{escape(c['title'])}</strong> <code>{escape(c['id'])}</code> "
            f"({role}{escape(since)}, confidence {c['confidence']:.2f})<ul>{rows}</ul></li>"
        )
    return f'<h2 class="section">Conditions</h2><ul class="conditions">{"".join(items)}</ul>'

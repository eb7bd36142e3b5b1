"""The HTML report: one self-contained page (inline CSS and SVG; no script, no request).

Header with the run and its vitals, a table of findings, one card per finding with its message,
plots of its key series (finding span shaded, onset and end marked, threshold lines dotted), its
numbers and what to try, then an overview of the run's vital signs. Every string that comes
from the run (source path, series names, messages, metric names) is HTML-escaped.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

import numpy as np

from rlvitals._text import span_label
from rlvitals._version import __version__
from rlvitals.report import Renderer, RenderOptions, register
from rlvitals.report._common import PLOTS_PER_FINDING, header_facts, number, verdict
from rlvitals.report._svg import Marker, line_plot

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["render_html"]

OVERVIEW = (
    "reward_mean",
    "eval/reward_mean",
    "acr",
    "adv_std",
    "reward_std",
    "entropy",
    "kl",
    "length_mean",
    "truncation_frac",
    "clip_frac",
    "grad_norm",
    "throughput",
    "step_time",
)
"""Series shown in the overview, in order, when the run has them."""
OVERVIEW_MAX = 8

CSS = """
:root { --crit:#c62828; --warn:#d97706; --info:#1d6fb8; --ok:#2e7d32; --fg:#1f2937;
        --muted:#6b7280; --line:#e5e7eb; --bg:#f8fafc; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
       font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; }
main { max-width:1180px; margin:0 auto; padding:24px 28px 48px; }
h1 { font-size:22px; margin:0 0 2px; } h2 { font-size:18px; margin:0 0 8px; }
h3 { font-size:14px; margin:12px 0 4px; text-transform:uppercase; letter-spacing:.04em;
     color:var(--muted); }
.source { font-family:ui-monospace,"DejaVu Sans Mono",monospace; color:var(--muted);
          word-break:break-all; margin:0 0 10px; }
.verdict { display:inline-block; font-weight:600; font-size:16px; padding:4px 12px;
           border-radius:6px; color:#fff; background:var(--ok); }
.verdict.critical { background:var(--crit); } .verdict.warn { background:var(--warn); }
.verdict.info { background:var(--info); }
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
.plots { display:flex; flex-wrap:wrap; gap:10px; }
svg.plot { background:#fff; border:1px solid var(--line); border-radius:6px; max-width:100%;
           height:auto; }
svg .ptitle { font:600 12px ui-monospace,"DejaVu Sans Mono",monospace; fill:var(--fg); }
svg .frame { fill:none; stroke:var(--line); }
svg .grid { stroke:#f1f5f9; }
svg .ytick { font-size:10px; fill:var(--muted); text-anchor:end; }
svg .xtick { font-size:10px; fill:var(--muted); text-anchor:middle; }
svg .series { fill:none; stroke:#334155; stroke-width:1.4; stroke-linejoin:round; }
svg .dot { fill:#334155; }
svg .onset { stroke-width:1.5; stroke-dasharray:5 3; }
svg .end { stroke-width:1.5; stroke-dasharray:2 3; }
svg .thr { stroke-width:1.2; stroke-dasharray:2 2; }
svg .thrlabel { font-size:10px; text-anchor:end; }
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
"""


def render_html(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The HTML page of ``diagnosis`` (see the module docstring)."""
    d = diagnosis.to_dict()
    vitals = diagnosis.vitals
    findings = d["findings"]
    available = _available(vitals)
    source = str(d["run"].get("source") or "(run)")
    worst = d.get("worst") or "ok"
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>rlvitals doctor: {escape(source)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        "<header>",
        "<h1>rlvitals doctor</h1>",
        f'<p class="source">{escape(source)}</p>',
        f'<span class="verdict {escape(worst)}">{escape(verdict(findings))}</span>',
        '<dl class="facts">'
        + "".join(
            f"<div><dt>{escape(k)}</dt><dd>{escape(v)}</dd></div>" for k, v in header_facts(d)
        )
        + "</dl>",
        "</header>",
    ]
    if findings:
        out.append(_summary_table(findings))
    plotted: dict[str, list[Marker]] = {}
    for i, f in enumerate(findings):
        names = [n for n in f.get("series") or () if n in available][:PLOTS_PER_FINDING]
        for name in names:
            plotted.setdefault(name, []).append(_marker(f, name, with_thresholds=False))
        out.append(_card(i, f, names, vitals))
    out.append(_overview(vitals, available, plotted))
    out.append(_notes(d))
    out.append(
        f"<footer>rlvitals {escape(__version__)} · self-contained report: no scripts, "
        f"no network requests</footer>"
    )
    out.append("</main></body></html>")
    return "\n".join(out) + "\n"


def _available(vitals) -> set[str]:
    names = {n for n in vitals.series if vitals.get(n) is not None}
    names |= {n for n in vitals.eval_series if vitals.get(n) is not None}
    return names


def _series(vitals, name: str) -> tuple[np.ndarray, np.ndarray]:
    if name.startswith("eval/"):
        return vitals.eval_steps, vitals.eval_series[name]
    return vitals.steps, vitals.series[name]


def _marker(f: dict, name: str, with_thresholds: bool = True) -> Marker:
    onset = f["onset_step"]
    thr = (f.get("thresholds") or {}).get(name)
    return Marker(
        onset=0 if onset is None else int(onset),
        end=f["end_step"],
        severity=f["severity"],
        label=f"{f['id']}: {span_label(f['onset_step'], f['end_step'])}",
        thresholds=[float(thr)] if with_thresholds and thr is not None else [],
    )


def _summary_table(findings: list[dict]) -> str:
    rows = []
    for i, f in enumerate(findings):
        end = (
            "ongoing"
            if f["end_step"] is None and f["onset_step"] is not None
            else number(f["end_step"])
        )
        rows.append(
            f'<tr><td><span class="badge {escape(f["severity"])}">'
            f"{escape(f['severity'].upper())}</span></td>"
            f'<td><a class="id" href="#finding-{i}">{escape(f["id"])}</a></td>'
            f'<td class="num">{escape(number(f["onset_step"]))}</td>'
            f'<td class="num">{escape(end)}</td><td>{escape(f["message"])}</td></tr>'
        )
    return (
        '<table class="findings"><thead><tr><th>severity</th><th>ID</th><th>onset</th>'
        "<th>end</th><th>finding</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )


def _card(i: int, f: dict, names: list[str], vitals) -> str:
    sev = escape(f["severity"])
    plots = []
    for name in names:
        steps, values = _series(vitals, name)
        svg = line_plot(name, steps, values, [_marker(f, name)])
        if svg:
            plots.append(svg)
    metrics = f.get("metrics") or {}
    parts = [
        f'<article class="finding {sev}" id="finding-{i}">',
        f'<h2><span class="badge {sev}">{sev.upper()}</span> '
        f'<span class="id">{escape(f["id"])}</span>'
        f'<span class="when">{escape(span_label(f["onset_step"], f["end_step"]))}</span></h2>',
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


def _overview(vitals, available: set[str], plotted: dict[str, list[Marker]]) -> str:
    names = [n for n in OVERVIEW if n in available][:OVERVIEW_MAX]
    if not names:
        return ""
    plots = []
    for name in names:
        steps, values = _series(vitals, name)
        plots.append(line_plot(name, steps, values, plotted.get(name, [])))
    return (
        '<section class="overview"><h2>Vital signs</h2><div class="plots">'
        + "".join(p for p in plots if p)
        + "</div></section>"
    )


def _notes(d: dict) -> str:
    items = [escape(str(n)) for n in (d.get("vitals", {}).get("notes") or [])]
    items += [escape(str(w)) for w in (d["run"].get("warnings") or [])]
    items += [
        f'not judged: <span class="id">{escape(k)}</span> {escape(str(v))}'
        for k, v in sorted((d.get("skipped") or {}).items())
    ]
    items += [
        f'detector error: <span class="id">{escape(k)}</span> {escape(str(v))}'
        for k, v in sorted((d.get("errors") or {}).items())
    ]
    if not items:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


register(
    Renderer(
        "html", "self-contained HTML page with plots (no network requests)", ".html", render_html
    )
)

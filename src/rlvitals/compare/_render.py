"""A comparison in text, JSON, Markdown or one self-contained HTML page.

Each says the same, in the same order: the two runs, their vitals side by side, the first step
where they diverge (and each series' own), the incidents one has and the other not, then the
configuration differences, ranked (:mod:`rlvitals.compare._config`: algorithm, data,
optimisation, then the rest; keys one run lacks folded into one line per side). Final eval
scores are compared key by key: a row per eval key both runs logged, never one run's MATH score
against the other's GSM8K. The HTML page adds a plot per compared series with both runs overlaid
in two colours (A blue and solid, B orange and dashed) and the divergence step marked; its plots
show values on hover, zoom and switch to a log scale (the pages' own script, allowed by its
hash; no request). Strings from the input are made one line and escape-free for a terminal,
escaped in Markdown and HTML.
"""

from __future__ import annotations

import json
from html import escape
from typing import TYPE_CHECKING, Any

from rlvitals._text import fmt
from rlvitals.compare._config import config_sections

if TYPE_CHECKING:
    from rlvitals.compare import Comparison, Divergence

__all__ = ["FORMATS", "render_compare"]

FORMATS = ("text", "json", "md", "html")
MAX_CONFIG_LINES = 60
"""Configuration differences written out in text and Markdown before '... and N more'."""
_VALUE_CHARS = 60
COLOUR_A, COLOUR_B = "#2563eb", "#ea580c"
"""Run A's colour (solid lines) and run B's (dashed), on every plot of the page."""
EVAL_ROWS = 6
"""Eval keys both runs logged, compared one row each at most (the rest are counted)."""
KEYS_SHOWN = 12
"""Keys named in a folded "only in A / only in B" line before "and N more"."""

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


def _last(run, key: str) -> float | None:
    import numpy as np

    v = np.asarray(run.eval_series.get(key, ()), dtype=float)
    ok = np.flatnonzero(np.isfinite(v))
    return float(v[ok[-1]]) if ok.size else None


def eval_rows(c: Comparison) -> list[tuple[str, str, str]]:
    """``(what, A, B)``: the final score of each eval key both runs logged (scores first, as
    :func:`rlvitals.scan.choose_eval_key` ranks them; at most :data:`EVAL_ROWS`), then one line
    per run naming the eval keys only it has. Never two different keys on one row."""
    from rlvitals.scan import choose_eval_key

    ka = {k for k in c.a.run.eval_series if _last(c.a.run, k) is not None}
    kb = {k for k in c.b.run.eval_series if _last(c.b.run, k) is not None}
    common = {k: c.a.run.eval_series[k] for k in ka & kb}
    keys: list[str] = []
    while len(keys) < EVAL_ROWS and (k := choose_eval_key(common)) is not None:
        keys.append(k)
        del common[k]
    out = [(f"final {k}", fmt(_last(c.a.run, k)), fmt(_last(c.b.run, k))) for k in keys]
    if not keys and (ka or kb):
        out.append(("final eval", "no score key in common", "no score key in common"))
    for side, mine, theirs in (("A", ka, kb), ("B", kb, ka)):
        only = sorted(mine - theirs)
        if only:
            cells = [_keys(only), "-"] if side == "A" else ["-", _keys(only)]
            out.append((f"eval only in {side}", *cells))
    return out


def _keys(keys: list[str]) -> str:
    more = f" and {len(keys) - KEYS_SHOWN} more" if len(keys) > KEYS_SHOWN else ""
    return ", ".join(keys[:KEYS_SHOWN]) + more


def _final(c: Comparison) -> list[tuple[str, str, str]]:
    ra, rb = _rows(c)
    return [
        ("final train reward", fmt(ra.reward_final), fmt(rb.reward_final)),
        *eval_rows(c),
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
    ra, rb = _rows(c)
    if ra.acr_100_from == "estimate" or rb.acr_100_from == "estimate":  # as scan shows it
        i = next(i for i, r in enumerate(out) if r[0] == "ACR_100")
        out[i] = ("ACR_100 (≈ estimate)", _acr100(ra), _acr100(rb))
    return out + _final(c)


def _acr100(r) -> str:
    if r.acr_100 is None:
        return fmt(None)
    return ("≈" if r.acr_100_from == "estimate" else "") + fmt(r.acr_100)


def _rows(c: Comparison):
    """Each run's scan row (the final numbers, the condition, ACR_100 or its estimate)."""
    from rlvitals.scan import Job, row_from_diagnosis

    return (
        row_from_diagnosis(c.a, Job(0, 0, c.labels[0], None)),
        row_from_diagnosis(c.b, Job(0, 0, c.labels[1], None)),
    )


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
    cs = config_sections(c.config)
    cfg: list[str] = []
    for name, rows_ in cs.sections:
        cfg += [f"[{name}] {k}: {_value(a)} | {_value(b)}" for k, a, b in rows_]
    if len(cfg) > MAX_CONFIG_LINES:
        cfg = [*cfg[:MAX_CONFIG_LINES], f"... and {len(cfg) - MAX_CONFIG_LINES} more"]
    cfg += _only_lines(cs)
    title = f"configuration differences ({cs.changed} changed; A | B)"
    out.append((title, cfg or ["none"]))
    return out


def _only_lines(cs) -> list[str]:
    return [
        f"only in {side} ({len(keys)} keys): {_keys(keys)}"
        for side, keys in (("A", cs.only_a), ("B", cs.only_b))
        if keys
    ]


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
footer { color:var(--muted); font-size:12px; margin-top:24px; }
.a { color:#2563eb; } .b { color:#ea580c; } td, li { overflow-wrap:anywhere; }
tr.sec th { text-align:left; background:var(--bg); text-transform:uppercase; }
ul.only { margin-top:8px; }
@media (max-width: 640px) { main { padding:14px 12px 32px; } }
"""


def _plots(c: Comparison) -> list[str]:
    from rlvitals.report.svg import WIDTH, Layer, Marker, plot

    out = []
    for d in c.divergences:
        sa, sb = c.a.vitals.series.get(d.series), c.b.vitals.series.get(d.series)
        if sa is None or sb is None:
            continue
        layers = [
            Layer(f"A {d.series}", c.a.vitals.steps, sa, color=COLOUR_A),
            Layer(f"B {d.series}", c.b.vitals.steps, sb, color=COLOUR_B, style="dash"),
        ]
        marks = [Marker(d.step, None, "info", "diverges")] if d.step is not None else []
        svg = plot(d.series, layers, marks, width=WIDTH, interactive=True)
        if svg:
            out.append(svg)
    return out


def _html(c: Comparison) -> str:
    from rlvitals._version import __version__
    from rlvitals.report import web
    from rlvitals.report.svg import PLOT_CSS

    out = [
        *web.head("rlvitals compare", _CSS + PLOT_CSS),
        "<main>",
        "<h1>rlvitals compare</h1>",
        f'<p class="src"><b class="a">A</b> {escape(c.labels[0])}</p>',
        f'<p class="src"><b class="b">B</b> {escape(c.labels[1])}</p>',
        '<h2>Vitals</h2><div class="scroll"><table><tr><th></th><th class="a">A</th>'
        '<th class="b">B</th></tr>',
    ]
    out += [
        f'<tr><td>{escape(k)}</td><td class="v">{escape(a)}</td><td class="v">{escape(b)}</td></tr>'
        for k, a, b in rows(c)
    ]
    out.append("</table></div>")
    sections = lines(c)
    for title, body in sections[:-1]:
        out.append(f"<h2>{escape(title)}</h2><ul>")
        out += [f"<li>{escape(x)}</li>" for x in body]
        out.append("</ul>")
    plots = _plots(c)
    if plots:
        out.append(
            '<h2>Series: <span class="a">A solid</span>, <span class="b">B dashed</span></h2>'
            '<div class="plots">'
        )
        out += plots
        out.append("</div>")
    out.append(f"<h2>{escape(sections[-1][0])}</h2>")
    cs = config_sections(c.config)
    if cs.sections:
        out.append(
            '<div class="scroll"><table class="config"><tr><th>key</th><th>A</th><th>B</th></tr>'
        )
        for name, rows_ in cs.sections:
            out.append(f'<tr class="sec"><th colspan="3">{escape(name)}</th></tr>')
            out += [
                f"<tr><td>{escape(k)}</td><td>{escape(_value(a))}</td>"
                f"<td>{escape(_value(b))}</td></tr>"
                for k, a, b in rows_
            ]
        out.append("</table></div>")
    only = _only_lines(cs)
    if only:
        out.append('<ul class="only">' + "".join(f"<li>{escape(x)}</li>" for x in only) + "</ul>")
    if not cs.sections and not only:
        out.append("<p>none</p>")
    out.append(
        f"<footer>rlvitals {escape(__version__)} · self-contained page: no network requests "
        f"(its one script is inline)</footer></main>{web.script_tag()}</body></html>"
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

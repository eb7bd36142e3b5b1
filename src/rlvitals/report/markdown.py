"""The Markdown report: fits a CI step summary (``>> $GITHUB_STEP_SUMMARY``).

A heading with the verdict; for a run the doctor could not judge, a quoted "Not judged" note
(never a green check); the incidents (title, severity, steps, root cause, detectors, first
actions); a table of findings and one section per finding with its numbers and "Try:" list;
the notes; the detectors that could not judge, grouped by why, in a ``<details>`` block (open
when the run was not judged). Every string from the run is escaped: control characters are made
visible, Markdown punctuation (pipes, backticks, ``$`` math, emphasis) gets a backslash, ``<``,
``>`` and ``&`` become HTML entities (GitHub renders HTML inside Markdown).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlvitals.report import Renderer, RenderOptions, register
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
    one_line,
    skip_groups,
    verdict,
)

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["md_code", "md_escape", "render_markdown"]

ICON = {"critical": "🔴", "warn": "🟠", "info": "🔵"}
UNJUDGED = "⚪"
_SPECIAL = re.compile(r"([\\`*_\[\]|~$])")
_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/@+= -]+$")
_LINE_START = re.compile(r"^(#|[-+=*>](?=\s|$)|\d+[.)](?=\s|$))")


def md_escape(text: object, line_start: bool = False) -> str:
    """``text`` safe to place in Markdown prose or a table cell (one line); with ``line_start``
    also safe at the start of a line (no heading, list or quote).

    >>> print(md_escape("a|b <script> *x* [l](u)"))
    a\\|b &lt;script&gt; \\*x\\* \\[l\\](u)
    >>> print(md_escape("# 1. not a heading", line_start=True))
    \\# 1. not a heading
    >>> print(md_escape("$x$ a\\x1b[31m"))
    \\$x\\$ a\\\\x1b\\[31m
    """
    s = one_line(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = " ".join(_SPECIAL.sub(r"\\\1", s).split())
    return _LINE_START.sub(r"\\\1", s) if line_start else s


def md_code(text: object) -> str:
    """``text`` as an inline code span, safe in a table cell (GFM).

    Text with characters a code span would not make safe everywhere (HTML, backticks, pipes)
    is escaped as prose instead.

    >>> print(md_code("ENTROPY_COLLAPSE"), md_code("a|<b>"))
    `ENTROPY_COLLAPSE` a\\|&lt;b&gt;
    """
    s = " ".join(one_line(text).split())
    return f"`{s}`" if _PLAIN.match(s) else md_escape(s)


def _conditions(conditions: list[dict]) -> list[str]:
    out = ["### Conditions", ""]
    for i, c in enumerate(conditions):
        since = f" · since step {c['onset_step']}" if c.get("onset_step") is not None else ""
        role = "primary" if i == 0 else "also"
        out.append(
            f"- **{md_escape(c['title'])}** ({md_code(c['id'])}, {role}{since}, "
            f"confidence {c['confidence']:.2f})"
        )
        out += [f"  - for: {md_escape(x)}" for x in c.get("for") or []]
        out += [f"  - against: {md_escape(x)}" for x in c.get("against") or []]
        out += [f"  - try: {md_escape(x)}" for x in c.get("actions") or []]
    return [*out, ""]


def render_markdown(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The Markdown report of ``diagnosis`` (see the module docstring)."""
    d = diagnosis.to_dict()
    findings = d["findings"]
    incidents = d.get("incidents") or []
    not_judged = d.get("not_judged")
    icon = UNJUDGED if not_judged else ICON.get(d.get("worst") or "", "✅")
    out = [
        f"## {icon} rlvitals doctor: {verdict(findings, incidents, not_judged, named_conditions(d))}",
        "",
        f"**Run:** {md_escape(d['run'].get('source') or '(run)')}  ",
        " · ".join(f"{md_escape(k)} **{md_escape(v)}**" for k, v in header_facts(d)),
        "",
    ]
    if not_judged:
        out += [f"> **Not judged:** {md_escape(not_judged)}", ""]
    first = lead(d.get("conditions"))
    if first:
        out += [f"**{md_escape(first)}**", ""]
        out += _conditions(d["conditions"])
    if incidents:
        out += ["### Incidents", ""]
        for inc in incidents:
            out += _incident(inc, findings)
    if findings:
        out += ["### Findings", ""]
        out += ["| | ID | onset | end | finding |", "|---|---|--:|--:|---|"]
        for f in findings:
            out.append(
                f"| {ICON.get(f['severity'], '')} {md_escape(f['severity'])} | {md_code(f['id'])} "
                f"| {number(f['onset_step'])} | {end_text(f)} | {md_escape(f['message'])} |"
            )
        out.append("")
        for f in findings:
            out += _section(f)
    out += _footer(d)
    return "\n".join(out).rstrip() + "\n"


def _incident(inc: dict, findings: list[dict]) -> list[str]:
    sev = inc["severity"]
    ids = [str(i) for i in inc.get("detectors") or []]
    rest = [md_code(i) for i in ids if i != inc["root"]]
    members = f"root {md_code(inc['root'])}" + (f" · with {', '.join(rest)}" if rest else "")
    lines = [
        f"{ICON.get(sev, '')} **{md_escape(inc['title'])}** ({md_escape(sev)}, "
        f"{incident_span(inc, findings)})  ",
        f"{md_escape(inc['cause'], line_start=True)}  ",
        members,
        "",
    ]
    actions = list(inc.get("actions") or [])
    lines += [f"- try: {md_escape(a)}" for a in actions[:INCIDENT_ACTIONS]]
    if len(actions) > INCIDENT_ACTIONS:
        lines.append(f"- (+{len(actions) - INCIDENT_ACTIONS} more under the findings below)")
    if actions:
        lines.append("")
    return lines


def _section(f: dict) -> list[str]:
    sev = md_escape(f["severity"])
    lines = [
        f"#### {ICON.get(f['severity'], '')} {md_code(f['id'])} ({sev}, {marks_text(f)})",
        "",
        md_escape(f["message"], line_start=True),
        "",
        f"Confidence {f['confidence']:.2f} · evidence {md_code(f['evidence'])}",
        "",
    ]
    metrics = f.get("metrics") or {}
    if metrics:
        lines.append(
            " · ".join(f"{md_code(k)} **{md_escape(number(v))}**" for k, v in metrics.items())
        )
        lines.append("")
    actions = f.get("actions") or []
    if actions:
        lines.append("**Try:**")
        lines += [f"- {md_escape(a)}" for a in actions]
        lines.append("")
    return lines


def _footer(d: dict) -> list[str]:
    lines: list[str] = []
    if notes(d):
        lines += [f"> note: {md_escape(n)}" for n in notes(d)]
        lines.append("")
    skipped = d.get("skipped") or {}
    if skipped:
        tag = "<details open>" if d.get("not_judged") else "<details>"
        lines += [f"{tag}<summary>Not judged ({len(skipped)})</summary>", ""]
        for cls, reasons in skip_groups(skipped):
            lines.append(f"- **{md_escape(cls)}**")
            lines += [
                f"  - {', '.join(md_code(i) for i in ids)}: {md_escape(why)}"
                for why, ids in reasons
            ]
        lines += ["", "</details>", ""]
    for det_id, err in sorted((d.get("errors") or {}).items()):
        lines.append(f"- detector error in {md_code(det_id)}: {md_escape(err)}")
    return lines


register(Renderer("md", "Markdown (fits a CI step summary)", ".md", render_markdown))

"""The Markdown report: fits a CI step summary (``>> $GITHUB_STEP_SUMMARY``).

A heading with the verdict, a table of findings, one section per finding with its numbers and
"Try:" list, and the detectors that could not judge the run in a collapsed ``<details>`` block.
Every string from the run is escaped: Markdown punctuation gets a backslash, ``<``, ``>`` and
``&`` become HTML entities (GitHub renders HTML inside Markdown).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rlvitals.report import Renderer, RenderOptions, register
from rlvitals.report._common import header_facts, number, span_text, verdict

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["md_code", "md_escape", "render_markdown"]

ICON = {"critical": "🔴", "warn": "🟠", "info": "🔵"}
_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_PLAIN = re.compile(r"^[A-Za-z0-9_.,:/@+= -]+$")
_LINE_START = re.compile(r"^(#|[-+=*>](?=\s|$)|\d+[.)](?=\s|$))")


def md_escape(text: object, line_start: bool = False) -> str:
    """``text`` safe to place in Markdown prose or a table cell (one line); with ``line_start``
    also safe at the start of a line (no heading, list or quote).

    >>> print(md_escape("a|b <script> *x* [l](u)"))
    a\\|b &lt;script&gt; \\*x\\* \\[l\\](u)
    >>> print(md_escape("# 1. not a heading", line_start=True))
    \\# 1. not a heading
    """
    s = str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = " ".join(_SPECIAL.sub(r"\\\1", s).split())
    return _LINE_START.sub(r"\\\1", s) if line_start else s


def md_code(text: object) -> str:
    """``text`` as an inline code span, safe in a table cell (GFM).

    Text with characters a code span would not make safe everywhere (HTML, backticks, pipes)
    is escaped as prose instead.

    >>> print(md_code("ENTROPY_COLLAPSE"), md_code("a|<b>"))
    `ENTROPY_COLLAPSE` a\\|&lt;b&gt;
    """
    s = " ".join(str(text).split())
    return f"`{s}`" if _PLAIN.match(s) else md_escape(s)


def render_markdown(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The Markdown report of ``diagnosis`` (see the module docstring)."""
    d = diagnosis.to_dict()
    findings = d["findings"]
    icon = ICON.get(d.get("worst") or "", "✅")
    out = [
        f"## {icon} rlvitals doctor: {verdict(findings)}",
        "",
        f"**Run:** {md_escape(d['run'].get('source') or '(run)')}  ",
        " · ".join(f"{md_escape(k)} **{md_escape(v)}**" for k, v in header_facts(d)),
        "",
    ]
    if findings:
        out += ["| | ID | onset | end | finding |", "|---|---|--:|--:|---|"]
        for f in findings:
            end = (
                "ongoing"
                if f["end_step"] is None and f["onset_step"] is not None
                else number(f["end_step"])
            )
            out.append(
                f"| {ICON.get(f['severity'], '')} {f['severity']} | {md_code(f['id'])} "
                f"| {number(f['onset_step'])} | {end} | {md_escape(f['message'])} |"
            )
        out.append("")
        for f in findings:
            out += _section(f)
    out += _footer(d)
    return "\n".join(out).rstrip() + "\n"


def _section(f: dict) -> list[str]:
    lines = [
        f"### {ICON.get(f['severity'], '')} {md_code(f['id'])} ({f['severity']}, {span_text(f)})",
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
    notes = list(d.get("vitals", {}).get("notes") or []) + list(d["run"].get("warnings") or [])
    if notes:
        lines += [f"> note: {md_escape(n)}" for n in notes]
        lines.append("")
    skipped = d.get("skipped") or {}
    if skipped:
        lines += [f"<details><summary>Not judged ({len(skipped)})</summary>", ""]
        lines += [f"- {md_code(k)}: {md_escape(v)}" for k, v in sorted(skipped.items())]
        lines += ["", "</details>", ""]
    for det_id, err in sorted((d.get("errors") or {}).items()):
        lines.append(f"- detector error in {md_code(det_id)}: {md_escape(err)}")
    return lines


register(Renderer("md", "Markdown (fits a CI step summary)", ".md", render_markdown))

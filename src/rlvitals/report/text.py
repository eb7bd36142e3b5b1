"""The terminal report: the verdict, the incidents, then a table of findings and each finding
with its numbers and "try:" lines, then the notes and the detectors that could not judge.

A run the doctor could not judge says so under the verdict ("NOT JUDGED: ..."), never a green
"no findings". Each incident reads as one story: its title, severity and steps, the root-cause
sentence, its detectors (root first) and its first actions; the findings beneath stay complete.

Built with rich; every string from the run goes in as plain ``Text`` (never parsed as markup)
after :func:`~rlvitals.report.common.terminal_strings` made it safe for a terminal (escape
sequences, other control characters and line breaks are printed visibly, never sent).
Colour only when asked (the CLI asks when stdout is a terminal); otherwise plain characters.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

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
    skip_groups,
    terminal_strings,
    verdict,
)

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["render_text"]

DEFAULT_WIDTH = 100
INDENT = 2
STYLE = {"critical": "bold red", "warn": "bold yellow", "info": "cyan"}
LABEL = {"critical": "CRITICAL", "warn": "WARN", "info": "INFO"}
UNJUDGED = "bold magenta"


def render_text(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The text report of ``diagnosis`` (see the module docstring)."""
    d = terminal_strings(diagnosis.to_dict())
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=options.width or DEFAULT_WIDTH,
        force_terminal=options.color,
        no_color=not options.color,
        color_system="standard" if options.color else None,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=False,
        legacy_windows=False,
    )
    _header(console, d)
    _conditions(console, d.get("conditions") or [])
    findings = d["findings"]
    incidents = d.get("incidents") or []
    if incidents:
        console.print(Text("Incidents", style="bold underline"))
        for inc in incidents:
            _incident(console, inc, findings)
    if findings:
        console.print(Text("Findings", style="bold underline"))
        console.print(_table(findings))
        console.print()
        for f in findings:
            _details(console, f)
    _footer(console, d)
    return "".join(line.rstrip(" ") + "\n" for line in buf.getvalue().splitlines())


def _header(console: Console, d: dict) -> None:
    title = Text("rlvitals doctor  ", style="bold")
    title.append(str(d["run"].get("source") or "(run)"))
    console.print(title)
    facts = Text(" · ".join(f"{k} {v}" for k, v in header_facts(d)), style="dim")
    console.print(facts)
    console.print()
    not_judged = d.get("not_judged")
    line = Text(verdict(d["findings"], d.get("incidents"), not_judged, named_conditions(d)))
    line.stylize(UNJUDGED if not_judged else STYLE.get(d.get("worst") or "", "bold green"))
    if not_judged:
        line.append(f": {not_judged}")
    console.print(line)
    console.print()


def _conditions(console: Console, conditions: list[dict]) -> None:
    first = lead(conditions)
    if not first:
        return
    console.print(Text(first, style="bold"))
    _tries(console, (conditions[0].get("actions") or [])[:2])
    for against in (conditions[0].get("against") or [])[:1]:
        console.print(_indent(Text(f"but: {against}", style="dim")))
    console.print()


def _indent(text: Text, levels: int = 1) -> Padding:
    return Padding(text, (0, 0, 0, levels * INDENT))


def _tries(console: Console, actions) -> None:
    """One indented ``try:`` line per action."""
    for action in actions:
        t = Text("try: ", style="green")
        t.append(str(action))
        console.print(_indent(t))


def _headline(severity: str, name: str) -> Text:
    """An incident's or a finding's first line: its severity label in the severity's colour,
    then ``name`` in bold (the caller appends the rest)."""
    line = Text()
    line.append(LABEL.get(severity, severity), style=STYLE.get(severity, ""))
    line.append(" ")
    line.append(name, style="bold")
    return line


def _incident(console: Console, inc: dict, findings: list[dict]) -> None:
    line = _headline(inc["severity"], str(inc["title"]))
    line.append(f"  {incident_span(inc, findings)}", style="dim")
    console.print(line)
    console.print(_indent(Text(str(inc["cause"]))))
    ids = [str(i) for i in inc.get("detectors") or []]
    members = Text("root ", style="dim")
    members.append(str(inc["root"]), style="bold")
    rest = [i for i in ids if i != inc["root"]]
    if rest:
        members.append(" · with ", style="dim")
        members.append(", ".join(rest))
    console.print(_indent(members))
    actions = list(inc.get("actions") or [])
    _tries(console, actions[:INCIDENT_ACTIONS])
    if len(actions) > INCIDENT_ACTIONS:
        more = len(actions) - INCIDENT_ACTIONS
        console.print(_indent(Text(f"(+{more} more under the findings below)", style="dim")))
    console.print()


def _table(findings: list[dict]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, expand=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("ID", no_wrap=True)
    table.add_column("onset", justify="right", no_wrap=True)
    table.add_column("end", justify="right", no_wrap=True)
    table.add_column("finding", ratio=1, overflow="fold")
    for f in findings:
        sev = f["severity"]
        table.add_row(
            Text(LABEL.get(sev, sev), style=STYLE.get(sev, "")),
            Text(f["id"], style="bold"),
            Text(number(f["onset_step"])),
            Text(end_text(f)),
            Text(f["message"]),
        )
    return table


def _details(console: Console, f: dict) -> None:
    line = _headline(f["severity"], f["id"])
    line.append(f"  {marks_text(f)} · confidence {f['confidence']:.2f} · evidence ", "dim")
    line.append(str(f["evidence"]), style="dim")
    console.print(line)
    console.print(_indent(Text(f["message"])))
    metrics = f.get("metrics") or {}
    if metrics:
        text = Text(" · ".join(f"{k} {number(v)}" for k, v in metrics.items()), style="dim")
        console.print(_indent(text))
    _tries(console, f.get("actions") or [])
    console.print()


def _footer(console: Console, d: dict) -> None:
    for note in notes(d):
        console.print(Text("note: " + str(note), style="dim"))
    skipped = d.get("skipped") or {}
    if skipped:
        loud = bool(d.get("not_judged"))
        console.print(Text(f"not judged ({len(skipped)}):", style=UNJUDGED if loud else "dim"))
        for cls, reasons in skip_groups(skipped):
            console.print(_indent(Text(f"{cls}:", style="bold" if loud else "dim")))
            for why, ids in reasons:
                t = Text(", ".join(ids), style="")
                t.append(f": {why}", style="dim")
                console.print(_indent(t, 2))
    for det_id, err in sorted((d.get("errors") or {}).items()):
        console.print(Text(f"detector error: {det_id}: {err}", style="red"))


register(Renderer("text", "terminal report (rich; plain when not a terminal)", ".txt", render_text))

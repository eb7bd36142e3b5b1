"""The terminal report: a table of findings, then each finding with its numbers and "try:" lines.

Built with rich; every string from the run goes in as plain ``Text`` (never parsed as markup).
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
from rlvitals.report._common import header_facts, number, span_text, verdict

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["render_text"]

DEFAULT_WIDTH = 100
INDENT = 2
STYLE = {"critical": "bold red", "warn": "bold yellow", "info": "cyan"}
LABEL = {"critical": "CRITICAL", "warn": "WARN", "info": "INFO"}


def render_text(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The text report of ``diagnosis`` (see the module docstring)."""
    d = diagnosis.to_dict()
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
    findings = d["findings"]
    if findings:
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
    head = Text(verdict(d["findings"]), style=STYLE.get(d.get("worst") or "", "bold green"))
    console.print(head)


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
            Text(
                "ongoing"
                if f["end_step"] is None and f["onset_step"] is not None
                else number(f["end_step"])
            ),
            Text(f["message"]),
        )
    return table


def _details(console: Console, f: dict) -> None:
    sev = f["severity"]
    line = Text()
    line.append(LABEL.get(sev, sev), style=STYLE.get(sev, ""))
    line.append(" ")
    line.append(f["id"], style="bold")
    line.append(f"  {span_text(f)} · confidence {f['confidence']:.2f} · evidence ", style="dim")
    line.append(str(f["evidence"]), style="dim")
    console.print(line)
    console.print(Padding(Text(f["message"]), (0, 0, 0, INDENT)))
    metrics = f.get("metrics") or {}
    if metrics:
        text = Text(" · ".join(f"{k} {number(v)}" for k, v in metrics.items()), style="dim")
        console.print(Padding(text, (0, 0, 0, INDENT)))
    for action in f.get("actions") or []:
        t = Text("try: ", style="green")
        t.append(str(action), style="")
        console.print(Padding(t, (0, 0, 0, INDENT)))
    console.print()


def _footer(console: Console, d: dict) -> None:
    notes = list(d.get("vitals", {}).get("notes") or []) + list(d["run"].get("warnings") or [])
    for note in notes:
        console.print(Text("note: " + str(note), style="dim"))
    skipped = d.get("skipped") or {}
    if skipped:  # names only: the JSON, Markdown and HTML reports say what each one needs
        console.print(
            Text(
                f"not judged ({len(skipped)}, the run does not log what they read): "
                + ", ".join(sorted(skipped)),
                style="dim",
            )
        )
    for det_id, err in sorted((d.get("errors") or {}).items()):
        console.print(Text(f"detector error: {det_id}: {err}", style="red"))


register(Renderer("text", "terminal report (rich; plain when not a terminal)", ".txt", render_text))

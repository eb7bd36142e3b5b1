"""The live terminal view of ``rlvitals watch``: vitals with sparklines, incidents, what changed.

:func:`watch_view` turns a :class:`~rlvitals.Diagnosis` of the run so far, and the incident
events the tracker raised while following it, into one rich renderable; ``rlvitals watch``
redraws it in place (``rich.live``), or prints it once (``--once``, or when stdout is not a
terminal). Every string that comes from the run goes through
:func:`~rlvitals.report.common.terminal_strings` and is shown as plain ``Text`` (never markup):
a log cannot move the cursor or change the terminal.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

import numpy as np
from rich.console import Group
from rich.table import Table
from rich.text import Text

from rlvitals.report.common import (
    lead,
    named_conditions,
    one_line,
    terminal_strings,
    verdict,
)

__all__ = ["SPARK_POINTS", "VITALS", "sparkline", "watch_view"]

SPARK_POINTS = 32
"""Steps each sparkline shows (the most recent ones)."""
VITALS = (
    ("acr", "ACR"),
    ("acr_windowed", "ACR, 25-step mean"),
    ("excess_acr", "excess ACR"),
    ("reward_mean", "reward"),
    ("reward_std", "reward std"),
    ("adv_std", "advantage std"),
    ("entropy", "entropy"),
    ("kl", "KL"),
    ("grad_norm", "grad norm"),
    ("length_mean", "completion length"),
    ("truncation_frac", "truncated"),
    ("clip_frac", "clipped"),
    ("step_time", "step time"),
)
"""Series the view shows, when the run has them: (vitals name, label)."""
_BARS = "▁▂▃▄▅▆▇█"
_STYLE = {"critical": "bold red", "warn": "bold yellow", "info": "cyan"}


def sparkline(values: np.ndarray, points: int = SPARK_POINTS) -> str:
    """The last ``points`` finite values as block characters (min to max of those shown).

    >>> sparkline(np.array([0.0, 0.5, 1.0, np.nan, 1.0]))
    '▁▅██'
    """
    v = values[np.isfinite(values)][-points:]
    if v.size == 0:
        return ""
    lo, hi = float(v.min()), float(v.max())
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        return _BARS[3] * v.size
    idx = np.clip(((v - lo) / (hi - lo) * (len(_BARS) - 1)).round().astype(int), 0, len(_BARS) - 1)
    return "".join(_BARS[i] for i in idx)


def _num(x: float) -> str:
    if not math.isfinite(x):
        return str(x)
    a = abs(x)
    if a != 0 and (a < 1e-3 or a >= 1e5):
        return f"{x:.3g}"
    return f"{x:.3f}".rstrip("0").rstrip(".") if a < 100 else f"{x:.1f}"


def watch_view(
    diagnosis: Any,
    events: Iterable[Any] = (),
    *,
    source: str = "",
    updated: float | None = None,
    live: bool = False,
    note: str | None = None,
) -> Group:
    """One screen: header, verdict, vitals, incidents, the last events (module docstring).

    Args:
        diagnosis: the doctor's diagnosis of the run so far.
        events: ``(step, kind, severity, text)`` of the condition and incident events, oldest
            first (``opened``, ``closed``, ``reopened``, ``worse``, ``recovered``).
        source: the path followed.
        updated: when the input last changed (``time.time()``), or None.
        live: whether the view is being redrawn (a "following" mark).
        note: a line to show under the header (e.g. why the last read failed).
    """
    d = terminal_strings(diagnosis.to_dict())
    run = d["run"]
    parts: list[Any] = []
    head = Text()
    head.append("rlvitals watch ", style="bold")
    head.append(one_line(source or run.get("source") or ""))
    facts = [run.get("format"), run.get("trainer")]
    head.append("  (" + ", ".join(str(f) for f in facts if f) + ")" if any(facts) else "")
    if run.get("last_step") is not None:
        head.append(f"  steps {run['first_step']}..{run['last_step']} ({run['steps']} logged)")
    if updated is not None:
        head.append(f"  updated {max(0, int(time.time() - updated))} s ago")
    if live:
        head.append("  following (Ctrl-C stops)", style="dim")
    parts.append(head)
    if note:
        parts.append(Text(one_line(note), style="magenta"))
    parts.append(
        Text(
            verdict(d["findings"], d["incidents"], d["not_judged"], named_conditions(d)),
            style="bold",
        )
    )
    first = lead(d.get("conditions"))
    if first:
        parts.append(Text(one_line(first), style="bold"))
    if d["not_judged"]:
        parts.append(Text("NOT JUDGED: " + one_line(d["not_judged"]), style="bold magenta"))

    vt = Table(title="vitals", title_justify="left", show_edge=False, pad_edge=False)
    for col in ("series", "last", "min", "max", f"last {SPARK_POINTS} steps"):
        vt.add_column(col, justify="right" if col in ("last", "min", "max") else "left")
    v = diagnosis.vitals
    for name, label in VITALS:
        s = v.get(name)
        if s is None:
            continue
        tail = s[np.isfinite(s)][-SPARK_POINTS:]
        if tail.size == 0:
            continue
        vt.add_row(
            label,
            _num(float(tail[-1])),
            _num(float(tail.min())),
            _num(float(tail.max())),
            sparkline(s),
        )
    if vt.row_count:
        parts.append(vt)

    it = Table(title="incidents", title_justify="left", show_edge=False, pad_edge=False)
    for col in ("severity", "what", "detectors", "since", "until"):
        it.add_column(col)
    for inc in d["incidents"]:
        it.add_row(
            Text(inc["severity"].upper(), style=_STYLE.get(inc["severity"], "")),
            Text(one_line(inc["title"])),
            Text(", ".join(inc["detectors"])),
            "" if inc["onset_step"] is None else str(inc["onset_step"]),
            "ongoing" if inc["end_step"] is None else str(inc["end_step"]),
        )
    parts.append(it if it.row_count else Text("no incident", style="green"))

    lines = list(events)[-8:]
    if lines:
        et = Table(title="what changed", title_justify="left", show_edge=False, pad_edge=False)
        et.add_column("step", justify="right")
        et.add_column("")
        et.add_column("")
        for step, kind, severity, text in lines:
            et.add_row(str(step), Text(kind, style=_STYLE.get(severity, "")), Text(one_line(text)))
        parts.append(et)
    return Group(*parts)

"""What every renderer shares: labels, number formatting, the header facts, plot choices.

Everything here formats; nothing decides. Each renderer reads the JSON contract
(:meth:`Diagnosis.to_dict`) so every format says the same thing, in the same order: the
not-judged note, the incidents (each with its root cause, its detectors and its first actions),
then every finding complete, then the notes and the detectors that could not judge, grouped by
why. What to plot under a finding, where its threshold lies and which steps are isolated events
are fields of the finding itself (``series``, ``thresholds``, ``marks``).
"""

from __future__ import annotations

import unicodedata
from typing import Any

from rlvitals._text import number, span_label, terminal_safe

__all__ = [
    "INCIDENT_ACTIONS",
    "PLOTS_PER_FINDING",
    "SEVERITY_ORDER",
    "SKIP_CLASSES",
    "counts",
    "end_text",
    "header_facts",
    "incident_span",
    "marks_text",
    "notes",
    "number",
    "one_line",
    "skip_groups",
    "terminal_strings",
    "verdict",
]

SEVERITY_ORDER = ("critical", "warn", "info")
"""Most severe first."""

PLOTS_PER_FINDING = 2
"""Series drawn under each finding in the HTML report."""

INCIDENT_ACTIONS = 3
"""Actions listed under an incident (the root's first); every finding below keeps all of its."""

SKIP_CLASSES = ("not logged", "too few points", "run too short", "other")
"""Why a detector could not judge, as :func:`skip_groups` groups the reasons the doctor wrote."""

MARKS_LISTED = 8
"""Marked steps written out in a finding's span."""


def counts(findings: list[dict]) -> dict[str, int]:
    """Findings per severity, most severe first."""
    out = {s: 0 for s in SEVERITY_ORDER}
    for f in findings:
        out[f["severity"]] = out.get(f["severity"], 0) + 1
    return out


def end_text(f: dict) -> str:
    """A finding's end step for a table: ``ongoing`` while it lasts (an onset, no end).

    >>> end_text({"onset_step": 5, "end_step": None}), end_text({"onset_step": 5, "end_step": 9})
    ('ongoing', '9')
    """
    if f["end_step"] is None and f["onset_step"] is not None:
        return "ongoing"
    return number(f["end_step"])


def notes(d: dict) -> list:
    """The notes a report ends with: the vitals' notes, then the run's warnings."""
    return [*(d.get("vitals", {}).get("notes") or []), *(d["run"].get("warnings") or [])]


def named_conditions(d: dict) -> bool:
    """Whether a report dict names a condition other than HEALTHY."""
    return any(c.get("id") != "HEALTHY" for c in d.get("conditions") or [])


def lead(conditions: list[dict] | None) -> str | None:
    """The report's first sentence: the primary condition, since when, its first sign, and
    the others by ID (None when the run was not judged).

    >>> lead([{"id": "RUNAWAY_LENGTH", "title": "Completions stop terminating",
    ...        "onset_step": 75, "for": ["90% cut at the cap"]}, {"id": "SMALL_GROUPS"}])
    'Completions stop terminating (RUNAWAY_LENGTH) since step 75: 90% cut at the cap. Also: SMALL_GROUPS.'
    """
    if not conditions:
        return None
    p = conditions[0]
    since = f" since step {p['onset_step']}" if p.get("onset_step") is not None else ""
    sign = f": {p['for'][0]}" if p.get("for") else ""
    text = f"{p['title']} ({p['id']}){since}{sign}."
    if len(conditions) > 1:
        text += " Also: " + ", ".join(c["id"] for c in conditions[1:]) + "."
    return text


def verdict(
    findings: list[dict],
    incidents: list | None = None,
    not_judged: Any = None,
    conditions_named: bool = False,
) -> str:
    """``"2 warnings, 1 info"``, ``"... in 1 incident"``, ``"no findings"`` or ``"not judged"``
    (a run the doctor could not judge is never a plain "no findings"; a run whose conditions
    name a cause no detector saw reads "no detector findings", and the condition leads).

    >>> verdict([{"severity": "warn"}, {"severity": "warn"}, {"severity": "info"}])
    '2 warnings, 1 info'
    >>> verdict([{"severity": "warn"}] * 5, incidents=[{}]), verdict([], not_judged="why")
    ('5 warnings in 1 incident', 'not judged')
    >>> verdict([{"severity": "info"}], not_judged="too short")
    '1 info; not judged'
    """
    if not findings and not_judged:
        return "not judged"
    c = counts(findings)
    names = {
        "critical": ("critical", "critical"),
        "warn": ("warning", "warnings"),
        "info": ("info", "info"),
    }
    parts = [f"{n} {names[s][n != 1]}" for s, n in c.items() if n]
    if not parts:
        return "no detector findings" if conditions_named else "no findings"
    text = ", ".join(parts)
    if incidents and len(incidents) < len(findings):
        text += f" in {len(incidents)} incident{'s' if len(incidents) != 1 else ''}"
    if not_judged:  # findings of other families do not judge the learning signal
        text += "; not judged"
    return text


def marks_text(f: dict) -> str:
    """A finding's span, with its marked steps when it has them (isolated events, not one
    episode).

    >>> marks_text({"onset_step": 30, "end_step": 101, "marks": [30, 75, 101]})
    'at steps 30, 75, 101'
    >>> marks_text({"onset_step": 5, "end_step": None, "marks": []})
    'since step 5'
    """
    marks = [int(m) for m in f.get("marks") or []]
    if not marks:
        return span_label(f.get("onset_step"), f.get("end_step"))
    shown = ", ".join(str(m) for m in marks[:MARKS_LISTED])
    more = f" and {len(marks) - MARKS_LISTED} more" if len(marks) > MARKS_LISTED else ""
    return f"at step{'s' if len(marks) > 1 else ''} {shown}{more}"


def incident_span(inc: dict, findings: list[dict]) -> str:
    """An incident's span; the marked steps when it is one finding of isolated events.

    >>> f = {"onset_step": 30, "end_step": 101, "marks": [30, 75, 101]}
    >>> incident_span({"onset_step": 30, "end_step": 101, "findings": [0]}, [f])
    'at steps 30, 75, 101'
    """
    idx = inc.get("findings") or []
    if len(idx) == 1 and isinstance(idx[0], int) and 0 <= idx[0] < len(findings):
        f = findings[idx[0]]
        if f.get("marks"):
            return marks_text(f)
    return span_label(inc.get("onset_step"), inc.get("end_step"))


def skip_class(why: str) -> str:
    """The class of a reason the doctor gave for not judging (:data:`SKIP_CLASSES`).

    >>> skip_class("needs kl: not logged"), skip_class("needs per-group rewards or x")
    ('not logged', 'not logged')
    >>> skip_class("needs entropy: too few points (3 logged, 20+ needed)")
    'too few points'
    >>> skip_class("too few points: the run spans 5 training step(s), a collapse is judged from 30")
    'run too short'
    """
    text = str(why)
    if text.startswith("too few points: the run spans"):
        return "run too short"
    if "too few points" in text:
        return "too few points"
    if text.startswith("needs") or "not logged" in text:
        return "not logged"
    return "other"


def skip_groups(skipped: dict[str, str]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """The skipped detectors as ``[(class, [(reason, [IDs])])]``: classes in
    :data:`SKIP_CLASSES` order, each distinct reason once with the detectors that gave it.

    >>> skip_groups({"KL_BLOWUP": "needs kl: not logged", "A": "needs kl: not logged"})
    [('not logged', [('needs kl: not logged', ['A', 'KL_BLOWUP'])])]
    """
    by: dict[str, dict[str, list[str]]] = {c: {} for c in SKIP_CLASSES}
    for det_id, why in sorted(skipped.items()):
        by[skip_class(why)].setdefault(str(why), []).append(str(det_id))
    return [(c, list(reasons.items())) for c, reasons in by.items() if reasons]


_VISIBLE = {"\n": "\\n", "\r": "\\r", "\t": " "}


def one_line(text: Any) -> str:
    r"""``text`` safe for a terminal, on one line: control characters (ESC, CSI, OSC, BEL, C1)
    made visible (:func:`rlvitals._text.terminal_safe`), and so are line breaks and the
    invisible format characters that reorder or hide text (bidi overrides, zero-width).

    >>> print(one_line("run\x1b]0;pwned\x07\nFAKE \u202egnp.exe"))
    run\x1b]0;pwned\x07\nFAKE \u202egnp.exe
    """
    s = terminal_safe(text)
    if s.isprintable():
        return s
    return "".join(_VISIBLE.get(ch) or (ch if ch.isprintable() else _escape_char(ch)) for ch in s)


def _escape_char(ch: str) -> str:
    if unicodedata.category(ch) == "Zs":  # no-break and other spaces
        return " "
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"


def terminal_strings(obj: Any) -> Any:
    """``obj`` (the JSON contract) with every string in it, keys too, made :func:`one_line`."""
    if isinstance(obj, str):
        return one_line(obj)
    if isinstance(obj, dict):
        return {terminal_strings(k): terminal_strings(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [terminal_strings(v) for v in obj]
    return obj


def header_facts(d: dict) -> list[tuple[str, str]]:
    """``(label, value)`` pairs describing the run and its vitals, for every renderer's header."""
    run, v = d.get("run", {}), d.get("vitals", {})
    facts: list[tuple[str, str]] = []
    if run.get("format"):
        facts.append(("format", str(run["format"])))
    if run.get("trainer"):
        facts.append(("trainer", str(run["trainer"])))
    steps = run.get("steps", v.get("steps"))
    if steps is not None:
        first, last = run.get("first_step"), run.get("last_step")
        rng = f" ({first}-{last})" if first is not None and last is not None else ""
        facts.append(("steps", f"{steps}{rng}"))
    for label, key in (("G", "group_size"), ("estimator", "estimator"), ("kl_coef", "kl_coef")):
        val = v.get(key, run.get(key))
        if val is not None:
            facts.append((label, number(val)))
    facts.append(("evidence", str(v.get("evidence", "none"))))
    for label, key in (("ACR mean", "acr_mean"), ("ACR_100", "acr_100")):
        if v.get(key) is not None:
            facts.append((label, number(v[key])))
    return facts

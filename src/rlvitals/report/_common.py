"""What every renderer shares: labels, number formatting, the header facts, plot choices.

Everything here formats; nothing decides. Each renderer reads the JSON contract
(:meth:`Diagnosis.to_dict`) so every format says the same thing; what to plot under a finding
and where its threshold lies are fields of the finding itself (``series``, ``thresholds``).
"""

from __future__ import annotations

from rlvitals._text import number, span_label

__all__ = [
    "PLOTS_PER_FINDING",
    "SEVERITY_ORDER",
    "counts",
    "header_facts",
    "number",
    "span_text",
    "verdict",
]

SEVERITY_ORDER = ("critical", "warn", "info")
"""Most severe first."""

PLOTS_PER_FINDING = 2
"""Series drawn under each finding in the HTML report."""


def counts(findings: list[dict]) -> dict[str, int]:
    """Findings per severity, most severe first."""
    out = {s: 0 for s in SEVERITY_ORDER}
    for f in findings:
        out[f["severity"]] = out.get(f["severity"], 0) + 1
    return out


def verdict(findings: list[dict]) -> str:
    """``"2 warnings, 1 info"`` or ``"no findings"``.

    >>> verdict([{"severity": "warn"}, {"severity": "warn"}, {"severity": "info"}])
    '2 warnings, 1 info'
    """
    c = counts(findings)
    names = {
        "critical": ("critical", "critical"),
        "warn": ("warning", "warnings"),
        "info": ("info", "info"),
    }
    parts = [f"{n} {names[s][n != 1]}" for s, n in c.items() if n]
    return ", ".join(parts) if parts else "no findings"


def span_text(f: dict) -> str:
    """A finding's span as a label (:func:`rlvitals._text.span_label`).

    >>> span_text({"onset_step": 60, "end_step": 139}), span_text({"onset_step": 5, "end_step": None})
    ('steps 60-139', 'since step 5')
    """
    return span_label(f.get("onset_step"), f.get("end_step"))


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

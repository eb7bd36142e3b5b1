"""What every renderer shares: labels, number formatting, the header facts, plot choices.

Everything here formats; nothing decides. Each renderer reads the JSON contract
(:meth:`Diagnosis.to_dict`) so every format says the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "SEVERITY_ORDER",
    "counts",
    "header_facts",
    "number",
    "plot_series",
    "span_text",
    "thresholds",
    "verdict",
]

SEVERITY_ORDER = ("critical", "warn", "info")
"""Most severe first."""

PLOTS_PER_FINDING = 2
"""Series drawn under each finding in the HTML report."""

THRESHOLD_SUFFIX = "_threshold"
"""A metric ``<series>_threshold`` is drawn as a threshold line on ``<series>``'s plot."""


def number(x: Any) -> str:
    """A metric value for display: 4 significant digits, integers and strings as they are.

    >>> number(0.123456), number(12), number(None), number(True), number(float("nan"))
    ('0.1235', '12', '-', 'yes', 'nan')
    """
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
            return f"{x:.3g}"
        return f"{x:.4g}"
    return str(x)


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
    names = {"critical": ("critical", "critical"), "warn": ("warning", "warnings"),
             "info": ("info", "info")}
    parts = [f"{n} {names[s][n != 1]}" for s, n in c.items() if n]
    return ", ".join(parts) if parts else "no findings"


def span_text(f: dict) -> str:
    """``"since step 60"``, ``"steps 60-139"``, or ``"whole run"``.

    >>> span_text({"onset_step": 60, "end_step": 139}), span_text({"onset_step": 5, "end_step": None})
    ('steps 60-139', 'since step 5')
    """
    onset, end = f.get("onset_step"), f.get("end_step")
    if onset is None:
        return "whole run"
    if end is None:
        return f"since step {onset}"
    if end == onset:
        return f"step {onset}"
    return f"steps {onset}-{end}"


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


def plot_series(finding: dict, key_metrics: tuple[str, ...], available: set[str]) -> list[str]:
    """The series to draw under a finding: its evidence series, then its detector's key metrics,
    then the series its metrics name; only those the run has, at most
    :data:`PLOTS_PER_FINDING`."""
    names: list[str] = []
    metrics = finding.get("metrics", {})
    candidates = [
        *(e.strip() for e in str(finding.get("evidence", "")).split(",")),
        str(metrics.get("series", "")),
        *key_metrics,
        *(k[: -len(THRESHOLD_SUFFIX)] for k in metrics if k.endswith(THRESHOLD_SUFFIX)),
    ]
    for name in candidates:
        if name and name in available and name not in names:
            names.append(name)
    return names[:PLOTS_PER_FINDING]


def thresholds(finding: dict, series: str, plotted: Sequence[str] = ()) -> list[float]:
    """Threshold values the finding states for ``series``: a metric ``<series>_threshold``, or a
    metric ``threshold`` that belongs to ``series`` (the metric ``series`` names it, or else
    ``series`` is the first of the ``plotted`` series the metrics hold a value of).

    >>> f = {"metrics": {"acr": 0.9, "threshold": 0.35, "reward_mean_threshold": 0.5}}
    >>> thresholds(f, "acr", ["acr", "reward_mean"]), thresholds(f, "reward_mean", ["acr"])
    ([0.35], [0.5])
    """
    metrics = finding.get("metrics", {})
    owner = metrics.get("series") or next((k for k in metrics if k in plotted), None)
    out = []
    for key, val in metrics.items():
        is_own = key == series + THRESHOLD_SUFFIX
        is_named = key == "threshold" and owner == series
        numeric = isinstance(val, (int, float)) and not isinstance(val, bool)
        if (is_own or is_named) and numeric and math.isfinite(val):
            out.append(float(val))
    return out

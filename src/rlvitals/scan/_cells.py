"""The cells of the scan table, shared by every output (:mod:`rlvitals.scan._render`,
:mod:`rlvitals.scan._html`): which columns, how each run fills them, and the line on ACR_100
against the final metric."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from rlvitals.scan._row import ScanRow

if TYPE_CHECKING:
    from rlvitals.scan._stats import Correlation

__all__ = ["COLUMNS", "correlation_text", "left_out_lines"]


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}" if math.isfinite(x) else "nan"


def _incident(r: ScanRow) -> str:
    if r.error:
        return "read error"
    if not r.incident:
        return "not judged" if r.not_judged else "-"
    at = f" @{r.incident_onset}" if r.incident_onset is not None else ""
    return f"{r.incident_root}{at}"


def _condition(r: ScanRow) -> str:
    if r.error or not r.condition:
        return "-"
    at = f" @{r.condition_onset}" if r.condition_onset is not None else ""
    return f"{r.condition}{at}"


def _acr100(r: ScanRow) -> str:
    if r.acr_100 is not None and r.acr_100_from == "estimate":
        return "≈" + _num(r.acr_100)  # the doctor's estimate, not a measured ACR
    return _num(r.acr_100)


def _run(r: ScanRow) -> str:
    if not r.merged:
        return r.label
    return f"{r.label} (also as {', '.join(r.merged)})"


def _formats(r: ScanRow) -> str:
    """The format read, then those of the other places the run was found."""
    others = [m.rsplit(" (", 1)[-1].rstrip(")") for m in r.merged]
    return "+".join([r.format or "-", *others])


def _number(field: str) -> tuple[str, Callable[[ScanRow], str], Callable[[ScanRow], Any]]:
    """A numeric column of the row's ``field``: right-aligned, its cell rounded, its value."""
    get = attrgetter(field)
    return "r", lambda r: _num(get(r)), get


COLUMNS: tuple[tuple[str, str, Callable[[ScanRow], str], Callable[[ScanRow], Any] | None], ...] = (
    ("run", "l", _run, None),
    ("format", "l", _formats, None),
    ("trainer", "l", lambda r: r.trainer or "-", None),
    ("steps", *_number("steps")),
    ("G", *_number("group_size")),
    ("ACR_100", "r", _acr100, attrgetter("acr_100")),
    ("ACR mean", *_number("acr_mean")),
    ("ACR last", *_number("acr_last")),
    ("wasted", *_number("wasted")),
    ("reward", *_number("reward_final")),
    ("eval", *_number("eval_final")),
    ("condition", "l", _condition, None),
    ("worst incident", "l", _incident, None),
    ("status", "l", lambda r: r.status, None),
)
"""Header, alignment, cell and value (what a numeric column sorts by on the page, the cell's
text may be rounded; None for a text column) of every column of the table (text, Markdown,
HTML); an estimated ACR_100 is marked ``≈``; a run found in several formats names the others."""


def correlation_text(c: Correlation | None, rows: Sequence[ScanRow]) -> str:
    """One line on ACR_100 against the final metric, or why there is none."""
    from rlvitals.scan._stats import MIN_RUNS, PAPER

    if c is None:
        n = sum(1 for r in rows if r.acr_100 is not None and r.acr_100_from == "measured")
        return (
            f"ACR_100 vs final metric: not computed (needs {MIN_RUNS}+ judged runs with a "
            f"measured ACR_100 and a final metric on one scale, that differ; {n} run(s) have a "
            "measured ACR_100)"
        )
    sign = "-" if c.slope < 0 else "+"
    scale = f" (rewards {c.scale})" if c.against == "reward" and c.scale else ""
    out = f"; {len(c.left_out)} run(s) left out (listed below)" if c.left_out else ""
    return (
        f"ACR_100 vs {c.y_label}{scale} over {c.n} judged runs{out}: r = {c.r:.3f} "
        f"[{c.r_low:.3f}, {c.r_high:.3f}] (95% bootstrap), R² = {c.r2:.3f}; "
        f"OLS {c.intercept:.4g} {sign} {abs(c.slope):.4g}·ACR_100. "
        f"Paper (He et al. 2026, {PAPER['runs']} runs): r = {PAPER['r']}, "
        f"accuracy % ≈ {PAPER['intercept']} - {abs(PAPER['slope'])}·ACR_100"
    )


def left_out_lines(c: Correlation | None) -> list[str]:
    """One line per run the correlation left out, with why."""
    if c is None:
        return []
    return [f"left out of the correlation: {run}: {why}" for run, why in c.left_out]

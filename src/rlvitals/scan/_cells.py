"""The cells of the scan table, shared by every output (:mod:`rlvitals.scan._render`,
:mod:`rlvitals.scan._html`): which columns, how each run fills them, and the line on ACR_100
against the final metric."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rlvitals.scan._row import ScanRow

if TYPE_CHECKING:
    from rlvitals.scan._stats import Correlation

__all__ = ["COLUMNS", "correlation_text"]


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


COLUMNS: tuple[tuple[str, str, Callable[[ScanRow], str]], ...] = (
    ("run", "l", lambda r: r.label),
    ("format", "l", lambda r: r.format or "-"),
    ("trainer", "l", lambda r: r.trainer or "-"),
    ("steps", "r", lambda r: _num(r.steps)),
    ("G", "r", lambda r: _num(r.group_size)),
    ("ACR_100", "r", lambda r: _num(r.acr_100)),
    ("ACR mean", "r", lambda r: _num(r.acr_mean)),
    ("ACR last", "r", lambda r: _num(r.acr_last)),
    ("wasted", "r", lambda r: _num(r.wasted)),
    ("reward", "r", lambda r: _num(r.reward_final)),
    ("eval", "r", lambda r: _num(r.eval_final)),
    ("condition", "l", _condition),
    ("worst incident", "l", _incident),
    ("status", "l", lambda r: r.status),
)
"""Header, alignment and cell of every column of the table (text, Markdown, HTML)."""


def correlation_text(c: Correlation | None, rows: Sequence[ScanRow]) -> str:
    """One line on ACR_100 against the final metric, or why there is none."""
    from rlvitals.scan._stats import MIN_RUNS, PAPER

    if c is None:
        n = sum(1 for r in rows if r.acr_100 is not None)
        return (
            f"ACR_100 vs final metric: not computed (needs {MIN_RUNS}+ runs with ACR_100 and a "
            f"final metric that differ; {n} run(s) have ACR_100)"
        )
    sign = "-" if c.slope < 0 else "+"
    return (
        f"ACR_100 vs {c.y_label} over {c.n} runs: r = {c.r:.3f} "
        f"[{c.r_low:.3f}, {c.r_high:.3f}] (95% bootstrap), R² = {c.r2:.3f}; "
        f"OLS {c.intercept:.4g} {sign} {abs(c.slope):.4g}·ACR_100. "
        f"Paper (He et al. 2026, {PAPER['runs']} runs): r = {PAPER['r']}, "
        f"accuracy % ≈ {PAPER['intercept']} - {abs(PAPER['slope'])}·ACR_100"
    )

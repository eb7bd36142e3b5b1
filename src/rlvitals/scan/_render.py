"""The scan table in text, CSV, JSON and Markdown (HTML: :mod:`rlvitals.scan._html`).

Every format shows the same columns (:data:`COLUMNS`) in the same order, then the same summary:
how many runs, how many came from the cache, how many fail ``--fail-on``, which could not be
read or judged (and why), and ACR_100 against the final metric. Renderers format; they decide
nothing. Every string from the input (paths, run names, keys, errors) is made safe for where it
goes: one line and no escape sequences on a terminal, escaped in Markdown and HTML.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from rlvitals._version import __version__
from rlvitals.scan._cells import COLUMNS, correlation_text, left_out_lines
from rlvitals.scan._row import ScanRow

if TYPE_CHECKING:
    from rlvitals.scan._core import ScanResult

__all__ = [
    "COLUMNS",
    "FORMATS",
    "JSON_SCHEMA",
    "SORT_KEYS",
    "render_scan",
    "sort_rows",
    "suffix_format",
]

JSON_SCHEMA = 1
"""Version of the scan's JSON output."""
FORMATS = ("text", "csv", "json", "md", "html")
_SUFFIXES = {".txt": "text", ".csv": "csv", ".json": "json", ".md": "md", ".html": "html"}
_RANK = {"critical": 3, "warn": 2, "info": 1}


SORT_KEYS: dict[str, Callable[[ScanRow], Any]] = {
    "path": lambda r: r.label,
    "format": lambda r: r.format,
    "trainer": lambda r: r.trainer,
    "steps": lambda r: r.steps,
    "group_size": lambda r: r.group_size,
    "acr_100": lambda r: r.acr_100,
    "acr_mean": lambda r: r.acr_mean,
    "acr_last": lambda r: r.acr_last,
    "wasted": lambda r: r.wasted,
    "reward": lambda r: r.reward_final,
    "eval": lambda r: r.eval_final,
    "worst": lambda r: _RANK.get(r.worst or "", 0),
    "onset": lambda r: r.incident_onset,
    "condition": lambda r: r.condition,
    "status": lambda r: r.status,
}
"""``--sort`` keys; runs without the value (not logged, not read) go last either way."""


def sort_rows(rows: Sequence[ScanRow], key: str | None, reverse: bool = False) -> list[ScanRow]:
    """``rows`` sorted by ``key`` (:data:`SORT_KEYS`; None keeps the walk order)."""
    if key is None:
        return list(rows)
    if key not in SORT_KEYS:
        raise ValueError(f"unknown sort key {key!r}; valid: {', '.join(SORT_KEYS)}")
    get = SORT_KEYS[key]
    have = [r for r in rows if get(r) is not None]
    missing = [r for r in rows if get(r) is None]
    return sorted(have, key=get, reverse=reverse) + missing


def suffix_format(path: str) -> str | None:
    """The format an output file's suffix names (``.csv`` → csv), or None."""
    import os

    return _SUFFIXES.get(os.path.splitext(path)[1].lower())


def eval_keys(rows: Sequence[ScanRow]) -> list[str]:
    return sorted({r.eval_key for r in rows if r.eval_key})


def summary(result: ScanResult, fail_on: str, allow_unjudged: bool) -> dict[str, Any]:
    rows = result.rows
    return {
        "runs": len(rows),
        "cached": result.cached,
        "read": result.read,
        "seconds": round(result.seconds, 3),
        "errors": sum(1 for r in rows if r.error),
        "not_judged": sum(1 for r in rows if r.not_judged and not r.error),
        "fail_on": fail_on,
        "failing": len(result.failing(fail_on, allow_unjudged)),
        "skipped_files": result.skipped,
        "root": result.root,
        "merged": result.merged,
        "engine": result.engine,
        "jobs": result.jobs,
        "notes": list(result.notes),
    }


def summary_lines(
    result: ScanResult, fail_on: str, allow_unjudged: bool, against: str = "auto"
) -> list[str]:
    """The summary under the table (plain text; callers escape it for their format)."""
    s = summary(result, fail_on, allow_unjudged)
    lines = [
        f"{s['runs']} run(s): {s['read']} read, {s['cached']} from the cache, in "
        f"{s['seconds']:.1f} s ({s['engine']}, {s['jobs']} job(s)); {s['failing']} fail "
        f"--fail-on {fail_on}; {s['errors']} could not be read, {s['not_judged']} not judged"
    ]
    if result.root:
        lines.append(f"paths are relative to {result.root}")
    keys = eval_keys(result.rows)
    if keys:
        lines.append("eval = " + ", ".join(keys))
    if any(r.acr_100_from == "estimate" for r in result.rows):
        lines.append(
            "≈ACR_100: no ACR was logged; the doctor's estimate from the mean reward and G "
            "(expected collapse), not a measurement"
        )
    c = result.correlation(against)
    lines.append(correlation_text(c, result.rows))
    lines += left_out_lines(c)
    for r in result.rows:
        if r.error:
            lines.append(f"read error: {r.error}")
    for r in result.rows:
        if r.not_judged and not r.error:
            lines.append(f"not judged: {r.label}: {r.not_judged}")
    lines += [f"note: {n}" for n in result.notes]
    return lines


DROP_ORDER = ("format", "ACR mean", "wasted", "trainer", "G", "steps", "worst incident")
"""Columns a narrow terminal drops first (the CSV, JSON and HTML outputs keep them all)."""
RUN_MIN = 24


def _text(result: ScanResult, rows: Sequence[ScanRow], width: int | None, tail: list[str]) -> str:
    from rlvitals.report.common import one_line

    cols = list(COLUMNS)
    body = [[one_line(c[2](r)) for c in cols] for r in rows]

    def widths() -> list[int]:
        return [max([len(c[0])] + [len(b[i]) for b in body]) for i, c in enumerate(cols)]

    if width is not None:
        for name in DROP_ORDER:
            w = widths()
            if sum(w[1:]) + min(w[0], RUN_MIN) + 2 * (len(w) - 1) <= width:
                break
            i = next(k for k, c in enumerate(cols) if c[0] == name)
            del cols[i]
            for b in body:
                del b[i]
        w = widths()
        over = sum(w) + 2 * (len(w) - 1) - width
        if over > 0:  # the run column gives way (its left end is cut)
            keep = max(RUN_MIN, w[0] - over)
            for b in body:
                if len(b[0]) > keep:
                    b[0] = "…" + b[0][-(keep - 1) :]
    w = widths()

    def line(cells: list[str]) -> str:
        parts = [c.rjust(n) if col[1] == "r" else c.ljust(n) for c, n, col in zip(cells, w, cols)]
        return "  ".join(parts).rstrip()

    out = [line([c[0] for c in cols]), line(["-" * n for n in w])]
    out += [line(b) for b in body]
    out.append("")
    out += [one_line(t) for t in tail]
    return "\n".join(out) + "\n"


def _csv_cell(v: Any) -> Any:
    from rlvitals.report.common import one_line

    if v is None:
        return ""
    if isinstance(v, list):
        return one_line(";".join("" if x is None else str(x) for x in v))
    return one_line(v) if isinstance(v, str) else v


def _csv(rows: Sequence[ScanRow]) -> str:
    """One CSV row per run; every text cell made :func:`~rlvitals.report.common.one_line`
    (paths, run names and errors come from the input: an escape sequence in a run name never
    reaches a terminal raw, and a line break never splits a row)."""
    from rlvitals.report.common import one_line

    buf = io.StringIO()
    fields = [k for k in ScanRow.__dataclass_fields__ if k not in ("severities", "finding_ids")]
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*fields, "critical", "warn", "info", "finding_ids"])
    for r in rows:
        d = r.to_dict()
        w.writerow(
            [
                *(_csv_cell(d[k]) for k in fields),
                *(r.severities.get(s, 0) for s in ("critical", "warn", "info")),
                one_line(";".join(r.finding_ids)),
            ]
        )
    return buf.getvalue()


def _json(
    result: ScanResult, rows: Sequence[ScanRow], fail_on: str, allow: bool, against: str
) -> str:
    from rlvitals.report.json_report import strict

    c = result.correlation(against)
    doc = {
        "schema": JSON_SCHEMA,
        "rlvitals": __version__,
        "summary": summary(result, fail_on, allow),
        "correlation": c.to_dict() if c is not None else None,
        "runs": [r.to_dict() for r in rows],
    }
    return json.dumps(strict(doc), indent=1, allow_nan=False) + "\n"


def _md(result: ScanResult, rows: Sequence[ScanRow], tail: list[str]) -> str:
    from rlvitals.report.markdown import md_escape

    head = [c[0] for c in COLUMNS]
    out = ["## rlvitals scan", ""]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "|".join("---:" if c[1] == "r" else "---" for c in COLUMNS) + "|")
    for r in rows:
        out.append("| " + " | ".join(md_escape(c[2](r)) for c in COLUMNS) + " |")
    out.append("")
    out += [f"- {md_escape(t)}" for t in tail]
    return "\n".join(out) + "\n"


def render_scan(
    result: ScanResult,
    fmt: str = "text",
    *,
    sort: str | None = None,
    reverse: bool = False,
    fail_on: str = "warn",
    allow_unjudged: bool = False,
    width: int | None = None,
    against: str = "auto",
) -> str:
    """The scan table in ``fmt`` (:data:`FORMATS`), rows sorted by ``sort`` (ascending, or
    descending with ``reverse``); ``against`` chooses what ACR_100 is correlated with
    (:func:`rlvitals.scan._stats.correlate_rows`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    rows = sort_rows(result.rows, sort, reverse)
    if fmt == "csv":
        return _csv(rows)
    if fmt == "json":
        return _json(result, rows, fail_on, allow_unjudged, against)
    tail = summary_lines(result, fail_on, allow_unjudged, against)
    if fmt == "md":
        return _md(result, rows, tail)
    if fmt == "html":
        from rlvitals.scan._html import render_html

        return render_html(result, rows, tail, against)
    return _text(result, rows, width, tail)

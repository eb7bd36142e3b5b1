"""Which plots the HTML report draws from a run's vitals, and with what on them.

The overview leads with the two pictures people look for: the train reward with every
evaluation score overlaid (aligned by step: veRL's ``val-core/...``, TRL's ``eval_...``), and the
ACR stacked by kind (solved by all / failed by all / flat) with the expected ACR dashed over it
(labelled "estimate" when no ACR was measured per group) and, beside it, the ACR left after the
advantage estimator (``acr_residual``, under AVSPO). Then one plot per other vital sign, and a
prompt x step heat map of pass rates when the run recorded prompt ids. Every finding is drawn
where its series are: a shaded span from onset to end, or, for isolated events
(``Finding.marks``), points on the plot's first series.

Everything here formats: which findings exist and where they start are the doctor's answers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from rlvitals._text import span_label
from rlvitals.report._heatmap import (
    HEAT_LABEL_CHARS,
    TEXT_LABEL_CHARS,
    TEXT_LABEL_WIDTH,
    heat_map,
    prompt_label,
)
from rlvitals.report.common import PLOTS_PER_FINDING
from rlvitals.report.svg import LINE, PALETTE, WIDE, Layer, Marker, plot
from rlvitals.signal import group_stats

__all__ = [
    "Figure",
    "available",
    "eval_overlays",
    "finding_names",
    "finding_plots",
    "marker",
    "overview",
    "prompt_heat_map",
    "prompt_pass_rates",
]

OVERVIEW = (
    "adv_std",
    "reward_std",
    "entropy",
    "kl",
    "length_mean",
    "truncation_frac",
    "clip_frac",
    "grad_norm",
    "throughput",
    "step_time",
)
"""Series shown one per plot after the reward and ACR plots, in order, when the run has them."""
OVERVIEW_MAX = 8
EVAL_OVERLAY_MAX = len(PALETTE)
"""Evaluation series drawn over the train reward (the rest are named in the caption)."""
_EVAL_SCORE = re.compile(r"reward|score|acc|pass|correct|success|solve|match|win", re.I)
_EVAL_NOT_SCORE = re.compile(r"std|var|min|max|len|loss|time|second|entropy|kl|token", re.I)
SPLIT = (
    ("acr_solve_all", "solved by all (too easy)", "#86c5a4"),
    ("acr_solve_none", "failed by all (too hard)", "#e8a0a0"),
    ("acr_flat", "flat (partial credit agrees)", "#c8ccd4"),
)
EXPECTED_COLOR = "#7c3aed"
RESIDUAL_COLOR = "#0d9488"
HEAT_ROWS = 40
"""Prompts drawn in the heat map at most (the ones seen at the most steps)."""
HEAT_COLUMNS = 60
"""Step bins of the heat map at most."""


@dataclass(frozen=True)
class Figure:
    """An ``<svg>`` and a caption (plain text, escaped by the page), or no caption."""

    svg: str
    caption: str | None = None


def available(vitals) -> set[str]:
    """Names of the series (train and ``eval/``) the run has a finite value of."""
    names = {n for n, s in vitals.series.items() if np.isfinite(s).any()}
    names |= {n for n, s in vitals.eval_series.items() if np.isfinite(s).any()}
    return names


def _series(vitals, name: str) -> tuple[np.ndarray, np.ndarray]:
    if name.startswith("eval/"):
        return vitals.eval_steps, vitals.eval_series[name]
    return vitals.steps, vitals.series[name]


def finding_names(f: dict, have: set[str]) -> list[str]:
    """The series plotted under a finding: its first :data:`PLOTS_PER_FINDING` the run has."""
    return [n for n in f.get("series") or () if n in have][:PLOTS_PER_FINDING]


def marker(f: dict, name: str | None = None, with_thresholds: bool = True) -> Marker:
    """A finding as drawn on the plot of ``name``: its span or marks, and its threshold."""
    onset = f["onset_step"]
    thr = (f.get("thresholds") or {}).get(name) if with_thresholds else None
    return Marker(
        onset=0 if onset is None else int(onset),
        end=f["end_step"],
        severity=f["severity"],
        label=f"{f['id']}: {span_label(f['onset_step'], f['end_step'])}",
        thresholds=[float(thr)] if isinstance(thr, (int, float)) else [],
        marks=tuple(int(m) for m in f.get("marks") or ()),
    )


def finding_plots(f: dict, vitals, have: set[str]) -> list[str]:
    """The plots under one finding: each of its series with its span and threshold."""
    out = []
    for name in finding_names(f, have):
        steps, values = _series(vitals, name)
        svg = plot(name, [Layer(name, steps, values)], [marker(f, name)], interactive=True)
        if svg:
            out.append(svg)
    return out


def eval_overlays(vitals) -> list[str]:
    """The evaluation series that are scores (reward, accuracy, pass rate, ...), by name."""
    out = []
    for name in sorted(vitals.eval_series):
        base = name[len("eval/") :]
        if not np.isfinite(vitals.eval_series[name]).any():
            continue
        if _EVAL_SCORE.search(base) and not _EVAL_NOT_SCORE.search(base):
            out.append(name)
    return out


def _markers_on(findings: list[dict], names: set[str], have: set[str]) -> list[Marker]:
    return [
        marker(f, with_thresholds=False)
        for f in findings
        if names.intersection(finding_names(f, have))
    ]


def overview(vitals, findings: list[dict]) -> list[Figure]:
    """The overview plots, in order (module docstring)."""
    have = available(vitals)
    figs = [fig for fig in (_reward(vitals, findings, have), *_acr(vitals, findings, have)) if fig]
    drawn = 0
    for name in OVERVIEW:
        if name not in have or drawn >= OVERVIEW_MAX:
            continue
        steps, values = _series(vitals, name)
        marks = _markers_on(findings, {name}, have)
        svg = plot(name, [Layer(name, steps, values)], marks, interactive=True)
        if svg:
            figs.append(Figure(svg))
            drawn += 1
    return figs


def _reward(vitals, findings: list[dict], have: set[str]) -> Figure | None:
    evals = eval_overlays(vitals)
    shown, rest = evals[:EVAL_OVERLAY_MAX], evals[EVAL_OVERLAY_MAX:]
    layers = []
    if "reward_mean" in have:
        layers.append(Layer("reward_mean (train)", vitals.steps, vitals.series["reward_mean"]))
    for i, name in enumerate(shown):
        layers.append(Layer(name, vitals.eval_steps, vitals.eval_series[name], PALETTE[i]))
    if not layers:
        return None
    title = "reward (train) and evaluation" if shown else "reward_mean"
    markers = _markers_on(findings, {"reward_mean", *shown}, have)
    svg = plot(title, layers, markers, width=WIDE, height=200, interactive=True)
    if not svg:
        return None
    caption = None
    if rest:
        caption = f"{len(rest)} more evaluation series not drawn: " + ", ".join(rest)
    return Figure(svg, caption)


def _acr(vitals, findings: list[dict], have: set[str]) -> list[Figure]:
    if "acr" not in have:
        return []
    split = [(n, label, c) for n, label, c in SPLIT if n in have]
    layers = [Layer(label, vitals.steps, vitals.series[n], c, "area") for n, label, c in split]
    layers.insert(0, Layer("ACR", vitals.steps, vitals.series["acr"], LINE))
    if "expected_acr" in have:
        estimate = vitals.expected_acr_from == "estimate"
        label = "expected ACR (estimate)" if estimate else "expected ACR"
        layers.append(
            Layer(label, vitals.steps, vitals.series["expected_acr"], EXPECTED_COLOR, "dash")
        )
    names = {"acr", "expected_acr", "excess_acr", *(n for n, _, _ in split)}
    title = "ACR: share of collapsed groups" + (", by kind" if split else "")
    marks = _markers_on(findings, names, have)
    svg = plot(title, layers, marks, y_include=(0.0, 1.0), interactive=True)
    figs = [Figure(svg, _expected_caption(vitals))] if svg else []
    if "acr_residual" in have:
        res = plot(
            "ACR raw vs residual (after the estimator)",
            [
                Layer("raw ACR", vitals.steps, vitals.series["acr"], LINE),
                Layer("residual ACR", vitals.steps, vitals.series["acr_residual"], RESIDUAL_COLOR),
            ],
            _markers_on(findings, {"acr_residual"}, have),
            y_include=(0.0, 1.0),
            interactive=True,
        )
        if res:
            figs.append(Figure(res, "residual: groups whose advantages are still all zero"))
    return figs


def _expected_caption(vitals) -> str | None:
    how = {
        "estimate": "expected ACR estimated from the mean reward and G (no per-group rewards)",
        "batch": "expected ACR from each step's mean pass rate (prompts assumed alike)",
        "mixed": "expected ACR from each prompt's pass rate where known, else the step's",
        "per-prompt": "expected ACR from each prompt's own pass rate",
    }
    return how.get(vitals.expected_acr_from or "")


# --------------------------------------------------------------------------------------------


def prompt_pass_rates(vitals, max_rows: int = HEAT_ROWS, max_columns: int = HEAT_COLUMNS):
    """``(prompt ids, [(first, last step)], (rows, columns) pass rates, recurring prompts)``
    for the heat map, or None when the run has no prompt seen at two steps.

    Rows: the prompts seen at the most steps (ties: first seen first), sorted by their mean
    pass rate, highest first. Columns: the group steps binned into at most ``max_columns``.
    A cell is the mean over the prompt's groups in the bin of the group's mean reward rescaled
    to [0, 1] by the reward range; NaN where the prompt was not drawn.
    """
    g = vitals.run.groups
    if g is None or g.prompt is None or g.n_groups == 0:
        return None
    gid = g.row_group()
    rewards = np.where(np.isfinite(g.rewards), g.rewards, np.nan)
    mean = np.full(g.n_groups, np.nan)
    if gid.size:
        st = group_stats(rewards, gid)
        mean[np.unique(gid)] = np.asarray(st.mean, dtype=np.float64)
    lo, hi = float(vitals.reward_min), float(vitals.reward_max)
    with np.errstate(all="ignore"):
        rate = np.clip((mean - lo) / (hi - lo), 0.0, 1.0)
    keys = np.asarray(g.prompt).astype(str)
    uniq, first_idx, pinv = np.unique(keys, return_index=True, return_inverse=True)
    pinv = pinv.reshape(-1)
    ustep, sinv = np.unique(g.step, return_inverse=True)
    sinv = sinv.reshape(-1)
    pairs = np.unique(pinv.astype(np.int64) * ustep.size + sinv)
    seen = np.bincount(pairs // ustep.size, minlength=uniq.size)
    recurring = int((seen >= 2).sum())
    if recurring == 0:
        return None
    order = np.lexsort((first_idx, -seen))[: min(max_rows, recurring)]
    row_of = np.full(uniq.size, -1)
    row_of[order] = np.arange(order.size)
    ncol = min(max_columns, ustep.size)
    col_of_step = np.arange(ustep.size) * ncol // ustep.size
    r, c = row_of[pinv], col_of_step[sinv]
    ok = (r >= 0) & np.isfinite(rate)
    cell = r[ok] * ncol + c[ok]
    with np.errstate(all="ignore"):
        sums = np.bincount(cell, rate[ok], minlength=order.size * ncol)
        counts = np.bincount(cell, minlength=order.size * ncol)
        values = (sums / counts).reshape(order.size, ncol)
        row_mean = np.nanmean(np.where(np.isfinite(values), values, np.nan), axis=1)
    by_rate = np.argsort(-np.nan_to_num(row_mean, nan=-1.0), kind="stable")
    first = [int(ustep[col_of_step == k][0]) for k in range(ncol)]
    last = [int(ustep[col_of_step == k][-1]) for k in range(ncol)]
    return (
        [str(uniq[order[i]]) for i in by_rate],
        list(zip(first, last)),
        values[by_rate],
        recurring,
    )


def prompt_heat_map(vitals) -> Figure | None:
    """The prompt x step pass-rate heat map (:func:`prompt_pass_rates`), or None."""
    data = prompt_pass_rates(vitals)
    if data is None:
        return None
    keys, columns, values, recurring = data
    labels = [prompt_label(k) for k in keys]
    text = any(t for _, _, t in labels)
    svg = heat_map(
        "pass rate per prompt and step",
        [label for label, _, _ in labels],
        columns,
        values,
        legend=("0 (fails every time)", "1 (solves every time)"),
        tips=[tip for _, tip, _ in labels],
        label_width=TEXT_LABEL_WIDTH if text else 120,
        label_chars=TEXT_LABEL_CHARS if text else HEAT_LABEL_CHARS,
    )
    if not svg:
        return None
    per = columns[0][1] - columns[0][0] + 1 if columns else 1
    caption = (
        f"{len(keys)} of {recurring} prompts seen at two or more steps (the most seen), "
        f"highest mean pass rate first; {len(columns)} columns"
        + (f" of about {per} steps" if per > 1 else "")
        + "; blank: the prompt was not drawn"
        + ("" if text else "; rows are prompt ids (the run recorded no prompt text)")
    )
    return Figure(svg, caption)

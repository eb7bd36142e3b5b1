"""Write an experiment's folder: ``<exp>.json``, ``<exp>.md``, ``<exp>_*.png`` and ``<exp>.html``.

The Markdown is the summary a person reads (the paper's numbers beside ours, with intervals and
a verdict computed from them); the HTML is the same page with the plots inline (SVG); the PNGs
are for docs. Plots need matplotlib (the ``lab`` extra: ``pip install -e '.[lab]'``, docs/install.md); without it the JSON and
Markdown are still written and the page says what is missing.

One module, a little over 500 lines: the three experiments' Markdown and the HTML page made
from it share their tables, interval formatting and verdict wording (the statistics themselves
are :mod:`rlvitals.lab.stats`).
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

from rlvitals.lab.plots import draw
from rlvitals.lab.presets import PAPER
from rlvitals.lab.tasks import LEVEL_TARGETS, MIXED_LEVEL, MIXED_MIXTURE

__all__ = ["MIN_N", "fmt_ci", "verdict", "write"]

MIN_N = 5
"""Fewest paired seeds (or runs) for a verdict; below it the tables show numbers only."""


# --------------------------------------------------------------------------------------------
# Numbers


def _n(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, int):
        return str(x)
    return f"{x:.{digits}f}"


def fmt_ci(ci: dict[str, Any] | None, digits: int = 3, pct: bool = False) -> str:
    """``0.412 [0.380, 0.441]`` (``pct``: as percentages).

    >>> fmt_ci({"mean": 0.5, "lo": 0.4, "hi": 0.6}, 2)
    '0.50 [0.40, 0.60]'
    """
    if not ci:
        return "–"
    key = "mean" if "mean" in ci else "diff" if "diff" in ci else "r"
    k = 100.0 if pct else 1.0
    m, lo, hi = (ci.get(key), ci.get("lo"), ci.get("hi"))

    def s(v: Any) -> str:
        return _n(None if v is None else k * v, digits) + ("%" if pct and v is not None else "")

    if lo is None or hi is None:
        return s(m)
    return f"{s(m)} [{s(lo)}, {s(hi)}]"


def verdict(ci: dict[str, Any] | None, higher: str = "higher", lower: str = "lower") -> str:
    """``higher`` when the interval lies above 0, ``lower`` below, else no detectable difference.

    >>> verdict({"diff": 1.0, "lo": 0.2, "hi": 1.8, "n": 8})
    'higher'
    >>> verdict({"diff": 0.1, "lo": -1, "hi": 1, "n": 8}), verdict({"diff": 1, "lo": 1, "hi": 1, "n": 2})
    ('no detectable difference', 'too few seeds to judge (n = 2 < 5)')
    """
    if not ci or ci.get("lo") is None or ci.get("hi") is None:
        return "not measurable"
    if ci.get("n", MIN_N) < MIN_N:
        return f"too few seeds to judge (n = {ci['n']} < {MIN_N})"
    if ci["lo"] > 0:
        return higher
    if ci["hi"] < 0:
        return lower
    return "no detectable difference"


def _p(x: Any) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if x >= 0.001 else f"{x:.1e}"


# --------------------------------------------------------------------------------------------
# Markdown


def _header(doc: dict[str, Any]) -> list[str]:
    return [f"# rlvitals lab: {doc['experiment']} (preset `{doc['preset']}`)", ""]


def _setup(doc: dict[str, Any]) -> list[str]:
    base = doc["base_policy"]
    m = doc["machine"]
    rates = ", ".join(
        f"L{i} {100 * r:.1f}% (target {100 * t:.0f}%)"
        for i, (r, t) in enumerate(zip(base["level_rates"], LEVEL_TARGETS))
    )
    meta = base.get("meta", {})
    lines = [
        "## Set-up",
        "",
        f"- task `{base['task']}`; base policy `{Path(base['path']).parent.name}`"
        + (" (the lab's tiny Qwen2, warm-started)" if base.get("tiny") else ""),
        f"- base pass rate per level on held-out prompts: {rates}",
        f"- base policy built in {meta.get('seconds', '–')} s "
        f"(warm start {meta.get('warm_start_seconds', '–')} s; read from cache when built before)",
        f"- {len(doc['runs'])} runs, {doc['setup'].get('workers')} at a time; wall time "
        f"{doc['timing']['wall_seconds']:.0f} s when every run was trained "
        f"({doc['timing'].get('run_cpu_seconds', 0):.0f} CPU-seconds in the runs; "
        f"load average at the end {doc['timing'].get('load_average_end')})"
        + (
            f" (this invocation {doc['wall_seconds']:.0f} s, {doc['runs_read_back']} runs "
            "read back from their result.json)"
            if doc.get("runs_read_back")
            else ""
        ),
        f"- machine: {m['cpus']} CPUs ({m['processor']}), {m['platform']}, "
        f"Python {m['python']}, torch {m['torch']}",
        f"- command: `{m['argv']}`",
        "",
    ]
    return lines


def _predict_md(doc: dict[str, Any]) -> list[str]:
    a = doc["analysis"]
    paper = PAPER["predict"]
    pr, ols = a["pearson"], a["ols"]
    inside = pr["lo"] is not None and pr["lo"] <= paper["r"] <= pr["hi"] if pr.get("lo") else False
    line = (
        f"{_n(ols['intercept'], 1)} {'-' if (ols['slope'] or 0) < 0 else '+'} "
        f"{_n(abs(ols['slope'] or 0), 1)} · ACR_100"
        if ols["slope"] is not None
        else "–"
    )
    out = [
        *_header(doc),
        "Claim (He et al., ICML 2026): the mean ACR of the first 100 steps predicts final "
        "accuracy across runs, r = −0.785, R² = 0.617, accuracy ≈ 51.4 − 29.6 · ACR_100 "
        "(accuracy in points).",
        "",
        "| | paper | this lab |",
        "|---|---|---|",
        f"| Pearson r (ACR_100, final accuracy) | −0.785 | {fmt_ci(pr)} (n = {pr['n']}) |",
        f"| R² | 0.617 | {_n(pr['r2'])} |",
        f"| OLS line (accuracy, points) | 51.4 − 29.6 · ACR_100 | {line} |",
        f"| mean r within a level | – | {_n(a['within_level_mean_r'])} |",
        f"| r of ACR_100 with the accuracy *gain* (final − base) | – | {fmt_ci(a['pearson_gain'])} |",
        *_fixed_effects_rows(a),
        "",
        (
            f"**Verdict.** Across the grid r = {fmt_ci(pr, 2)}: the paper's −0.785 lies "
            f"{'inside' if inside else 'outside'} our 95% interval. " + _within_text(a)
            if pr["n"] >= MIN_N
            else f"**Verdict.** Too few runs to judge (n = {pr['n']} < {MIN_N})."
        ),
        "",
        "## Per level",
        "",
        "| level | target | runs | ACR_100 | final accuracy (points) | r within the level |",
        "|---|---|---|---|---|---|",
    ]
    for lvl, v in a["by_level"].items():
        target = (
            f"{100 * LEVEL_TARGETS[int(lvl)]:.0f}%" if int(lvl) < len(LEVEL_TARGETS) else "mixed"
        )
        name = f"L{lvl}" if int(lvl) < len(LEVEL_TARGETS) else "LM"
        out.append(
            f"| {name} | {target} | {v['n']} | {fmt_ci(v['acr_100'])} "
            f"| {fmt_ci(v['accuracy'], 1)} | {fmt_ci(v['pearson'], 2)} |"
        )
    out += ["", "![ACR_100 against final accuracy](predict_scatter.png)", ""]
    return out


def _fixed_effects_rows(a: dict[str, Any]) -> list[str]:
    """predict-v2's rows: what the early ACR is, and the slope with fixed effects."""
    if a.get("early") is None:
        return []
    out = [
        f"| ACR_100 here (predict-v2) | first 100 steps | the early ACR: mean raw ACR over the "
        f"first {100 * a['early']:.0f}% of a fixed budget of completions (any G) |",
    ]
    for key, label in (("additive", "level + G + T"), ("cells", "level × G × T cells")):
        fe = a.get("fixed_effects", {}).get(key) or {}
        slope = (
            f"{fe['slope']:.1f} [{fe['lo']:.1f}, {fe['hi']:.1f}] points per unit ACR, "
            f"p {fe['p']:.3g}, partial r {_n(fe.get('partial_r'), 2)} (n {fe['n']}, df {fe['df']})"
            if fe.get("slope") is not None
            else "not identified (too few runs per effect)"
        )
        out.append(f"| slope with {label} fixed effects | – | {slope} |")
    return out


def _within_text(a: dict[str, Any]) -> str:
    rs = [v["pearson"] for v in a["by_level"].values() if v["pearson"]["r"] is not None]
    if not rs:
        return "No level has enough runs for a within-level r."
    neg = sum(1 for r in rs if r["hi"] is not None and r["hi"] < 0)
    return (
        f"Within a level (the difficulty held fixed) the mean r is {_n(a['within_level_mean_r'], 2)}; "
        f"{neg} of {len(rs)} levels have an interval entirely below 0."
    )


def _arms_table(a: dict[str, Any], names: list[str], labels: dict[str, str]) -> list[str]:
    cols = [
        ("final_accuracy", 1),
        ("final_greedy_accuracy", 1),
        ("acr_mean", 3),
        ("acr_solve_all_mean", 3),
        ("acr_solve_none_mean", 3),
        ("informative_per_1k", 1),
        ("acr_residual_mean", 3),
        ("wasted_fraction", 3),
        ("entropy_final", 3),
        ("steps", 0),
        ("generated", 0),
        ("cpu_seconds", 1),
        ("wall_seconds", 1),
    ]
    head = (
        "| method | accuracy | greedy accuracy | raw ACR | all-right | all-wrong "
        "| informative groups / 1k completions | residual ACR | wasted | entropy "
        "| steps | completions | CPU s | wall s |"
    )
    out = [head, "|" + "---|" * (len(cols) + 1)]
    for m in names:
        arm = a["arms"][m]
        out.append(
            f"| {labels.get(m, m)} | "
            + " | ".join(fmt_ci(arm[k], d) if d else _n(arm[k]["mean"], 0) for k, d in cols)
            + " |"
        )
    return out


def _paired_table(a: dict[str, Any], names: list[str], labels: dict[str, str]) -> list[str]:
    ref = a["reference"]
    out = [
        f"| method | Δ accuracy vs {ref} (points, t-interval) | wins | t-test p (Holm) "
        "| Wilcoxon p (Holm) | TOST ±2 p (Holm) | smallest detectable Δ | decision "
        "| Δ accuracy over the budget (curve mean) | raw ACR change "
        "| Δ informative groups / 1k |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in names:
        if m not in a["vs_reference"]:
            continue
        v = a["vs_reference"][m]
        acc = v["final_accuracy"]
        raw = v["acr_mean_reduction"]
        out.append(
            f"| {labels.get(m, m)} | {fmt_ci(acc, 2)} | {acc['wins']}/{acc['n']} "
            f"| {_p(acc['t_p'])} ({_p(acc.get('t_p_holm'))}) "
            f"| {_p(acc['wilcoxon_p'])} ({_p(acc.get('wilcoxon_p_holm'))}) "
            f"| {_p(acc.get('tost_p'))} ({_p(acc.get('tost_p_holm'))}) "
            f"| {_n(acc.get('mde'), 2)} | {acc.get('decision', '–')} "
            f"| {fmt_ci(v['auc_accuracy'], 2)} | {_neg_pct(raw)} "
            f"| {fmt_ci(v.get('informative_per_1k'), 1)} |"
        )
    return out


def _pair_table(a: dict[str, Any], arm: str, title: str) -> list[str]:
    """``arm`` against every other arm (final accuracy), Holm across all pairs of the run."""
    if arm not in a["arms"]:
        return []
    out = [
        "",
        f"## {title} against every method (Δ accuracy, points, paired; Holm over all pairs)",
        "",
        f"| {arm} − | Δ accuracy (t-interval) | wins | t-test p (Holm) | TOST ±2 p (Holm) "
        "| smallest detectable Δ | decision |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, v in a["pairs"].items():
        m1, m2 = key.split(" - ")
        if arm not in (m1, m2):
            continue
        sign = 1 if m1 == arm else -1
        other = m2 if m1 == arm else m1
        d = _signed(v, sign)
        wins = v["wins"] if sign == 1 else v.get("losses", v["n"] - v["wins"])
        decision = v.get("decision", "–")
        if sign == -1 and decision in ("higher", "lower"):
            decision = "lower" if decision == "higher" else "higher"
        out.append(
            f"| {other} | {fmt_ci(d, 2)} | {wins}/{v['n']} "
            f"| {_p(v['t_p'])} ({_p(v.get('t_p_holm'))}) "
            f"| {_p(v.get('tost_p'))} ({_p(v.get('tost_p_holm'))}) "
            f"| {_n(v.get('mde'), 2)} | {decision} |"
        )
    return out


def _neg_pct(ci: dict[str, Any]) -> str:
    """A reduction as a signed change: a 40% reduction reads −40%."""
    if not ci or ci.get("mean") is None:
        return "–"
    flip = {k: (None if ci.get(k) is None else -ci[k]) for k in ("mean", "lo", "hi")}
    flip["lo"], flip["hi"] = flip["hi"], flip["lo"]
    return fmt_ci(flip, 0, pct=True)


def _level_text(level: int) -> str:
    """``L5 (base pass rate 5% target)`` or the mixed level's sizes and what it tests.

    >>> _level_text(5)
    'L5 (base pass rate 5% target; nearly every collapsed group is all-wrong, so only the negative half of a mitigation is tested)'
    """
    if level == MIXED_LEVEL:
        sizes = " / ".join(str(s) for s in MIXED_MIXTURE)
        weights = " / ".join(f"{w:g}" for w in MIXED_MIXTURE.values())
        return (
            f"LM (the paper's regime: sizes {sizes} at {weights}; groups collapse on both "
            "sides, all-right and all-wrong)"
        )
    text = f"L{level} (base pass rate {100 * LEVEL_TARGETS[level]:.0f}% target"
    if level >= 4:
        text += (
            "; nearly every collapsed group is all-wrong, so only the negative half of a "
            "mitigation is tested"
        )
    return text + ")"


def _compare_md(doc: dict[str, Any]) -> list[str]:
    a = doc["analysis"]
    names = list(a["arms"])
    settings = doc["preset_settings"]
    run = settings["run"]
    n_seeds = len(_seeds(doc))
    out = _header(doc)
    out += [
        f"Every method trains level {_level_text(settings['level'])} "
        f"from the same base policy with the same budget of **{run['budget']} generated "
        f"completions** ({run['prompts_per_step']} prompts × G = {run['group_size']} per plain "
        f"step; dynamic sampling spends more per step and so takes fewer), over {n_seeds} seeds "
        f"({_seed_list(doc)}; paired: seed s of every method starts from the same prompts and "
        "sampler state). "
        "Per-method intervals are 95% bootstrap intervals over seeds; paired differences get "
        "95% paired t-intervals, Holm's correction across every comparison of a table, a TOST "
        "equivalence test (±2 points) and the smallest difference 80% power detects (the "
        "decision: higher / lower when the Holm t-test p < 0.05, equivalent when the Holm TOST "
        "p < 0.05, else inconclusive). Success measures of a mitigation are the raw ACR (what "
        "the policy generated) and informative groups per 1,000 completions; the residual ACR "
        "is the share of groups the estimator left at advantage 0 — one minus the share it gave "
        "an advantage, noise included — and is never evidence that collapse fell.",
        "",
    ]
    out += _claims(a)
    out += ["", "## Methods at an equal budget", ""]
    out += _arms_table(a, names, {})
    out += ["", f"## Each method against {a['reference']} (paired over seeds)", ""]
    out += _paired_table(a, names, {})
    out += _pair_table(a, "pg_grpo", "PG-GRPO (the pre-registered primary: PG-GRPO − AVSPO)")
    out += _pair_table(a, "avspo", "AVSPO")
    out += [
        "",
        "![accuracy against completions generated](compare_accuracy.png)",
        "",
        "![raw ACR against completions generated](compare_acr.png)",
        "",
    ]
    return out


def _seeds(doc: dict[str, Any]) -> list[int]:
    """The seeds of the runs (a run's name ends ``-s<seed>``)."""
    return sorted({int(r["name"].rsplit("-s", 1)[1]) for r in doc["runs"]})


def _seed_list(doc: dict[str, Any]) -> str:
    return ", ".join(map(str, _seeds(doc)))


def _signed(v: dict[str, Any], sign: int) -> dict[str, Any]:
    if sign == 1:
        return v
    return {**v, "diff": -v["diff"], "lo": -v["hi"], "hi": -v["lo"]} if v["diff"] is not None else v


def _claims(a: dict[str, Any]) -> list[str]:
    v = a["vs_reference"].get("avspo")
    if v is None:
        return []
    acc, raw, res = v["final_accuracy"], v["acr_mean_reduction"], v["acr_residual_mean_reduction"]
    paper = PAPER["compare"]
    raw_v = verdict(raw, "ACR falls", "ACR rises")
    acc_v = acc.get("decision") or verdict(acc, "AVSPO higher", "AVSPO lower")
    in_range = _overlaps(raw, paper["acr_reduction"])
    acc_range = _overlaps(acc, paper["accuracy_gain_points"])
    return [
        "## The paper's claims beside ours",
        "",
        f"Paper (He et al., ICML 2026; {paper['setting']}): {paper['examples']}.",
        "",
        "| claim | paper | this lab (AVSPO vs GRPO, paired) | verdict |",
        "|---|---|---|---|",
        f"| ACR falls (raw: what the policy generated) | −58% to −63% | {_neg_pct(raw)} "
        f"| {raw_v}; the paper's range is {'inside' if in_range else 'outside'} our interval |",
        f"| informative groups per 1,000 completions | (not reported) "
        f"| {fmt_ci(v.get('informative_per_1k'), 1)} (Δ) | the success measure at an equal budget |",
        f"| residual ACR (share of groups left at advantage 0) | (not separated) "
        f"| {_neg_pct(res)} | counts how often the estimator gave an advantage; not evidence "
        "that collapse fell |",
        f"| accuracy rises | +4 to +6 points | {fmt_ci(acc, 2)} points, t-interval "
        f"(Holm t-test p {_p(acc.get('t_p_holm'))}, TOST ±2 p {_p(acc.get('tost_p_holm'))}, "
        f"smallest detectable {_n(acc.get('mde'), 2)}) | {acc_v}; the paper's range is "
        f"{'inside' if acc_range else 'outside'} our interval |",
    ]


def _overlaps(ci: dict[str, Any], span: list[float]) -> bool:
    """The interval ``ci`` (``lo``, ``hi``) and the paper's range ``span`` overlap."""
    return ci.get("lo") is not None and ci["lo"] <= span[1] and ci["hi"] >= span[0]


def _ablate_md(doc: dict[str, Any]) -> list[str]:
    a = doc["analysis"]
    variants = a["variants"]
    labels = {v["name"]: v["label"] for v in variants}
    default = a["reference"]
    out = _header(doc)
    settings = doc["preset_settings"]
    out += [
        f"AVSPO's design choices on level {_level_text(settings['level'])}, each arm at the same budget "
        f"({settings['run']['budget']} completions), seeds {_seed_list(doc)}, paired "
        f"against the paper's default (`{default}`). 95% bootstrap intervals per arm; paired "
        "differences: 95% t-intervals, Holm across every arm, TOST ±2 points, the decision as "
        "in compare.",
        "",
    ]
    for axis in ("virtual", "threshold", "alpha"):
        names = [default] + [v["name"] for v in variants if v["axis"] == axis]
        claim = PAPER["ablate"][axis]
        out += [f"## {axis}", "", f"Paper: {claim}.", ""]
        out += [
            "| arm | accuracy (points) | raw ACR | residual ACR | Δ accuracy vs default "
            "| t-test p (Holm) | TOST ±2 p (Holm) | smallest detectable Δ | decision |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for m in names:
            arm = a["arms"][m]
            vs = a["vs_reference"].get(m, {}).get("final_accuracy")
            out.append(
                f"| {labels.get(m, m)} | {fmt_ci(arm['final_accuracy'], 1)} | "
                f"{fmt_ci(arm['acr_mean'])} | {fmt_ci(arm['acr_residual_mean'])} | "
                + (
                    f"{fmt_ci(vs, 2)} | {_p(vs['t_p'])} ({_p(vs.get('t_p_holm'))}) "
                    f"| {_p(vs.get('tost_p'))} ({_p(vs.get('tost_p_holm'))}) "
                    f"| {_n(vs.get('mde'), 2)} | {vs.get('decision', '–')} |"
                    if vs
                    else "– | – | – | – | (the paper's default) |"
                )
            )
        out.append("")
    out += ["## Every arm", ""]
    out += _arms_table(a, [v["name"] for v in variants], labels)
    out += ["", "![accuracy per ablation arm](ablate_bars.png)", ""]
    return out


# --------------------------------------------------------------------------------------------
# HTML


def _md_to_html(lines: list[str], svgs: dict[str, str]) -> str:
    """The small Markdown subset the summaries use: headings, tables, images, lists, text."""
    out: list[str] = []
    table: list[list[str]] = []

    def inline(s: str) -> str:
        s = html.escape(s)
        s = re.sub(r"`([^`]+)`", r"<code>\1</code>", s)
        return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", s)

    def flush() -> None:
        if not table:
            return
        rows = [r for r in table if not re.fullmatch(r"\|?(\s*-+\s*\|)+\s*-*\s*", "|".join(r))]
        out.append("<table>")
        for i, r in enumerate(rows):
            tag = "th" if i == 0 else "td"
            out.append("<tr>" + "".join(f"<{tag}>{inline(c)}</{tag}>" for c in r) + "</tr>")
        out.append("</table>")
        table.clear()

    for ln in lines:
        if ln.startswith("|"):
            cells = [c.strip() for c in ln.strip().strip("|").split("|")]
            if all(re.fullmatch(r"-+", c) for c in cells):
                continue
            table.append(cells)
            continue
        flush()
        m = re.match(r"!\[([^\]]*)\]\(([^)]+)\)", ln)
        if m:
            svg = svgs.get(m.group(2))
            out.append(
                f"<figure>{svg}<figcaption>{inline(m.group(1))}</figcaption></figure>"
                if svg
                else f"<p><i>plot not drawn: {inline(m.group(1))}</i></p>"
            )
        elif ln.startswith("#"):
            level = len(ln) - len(ln.lstrip("#"))
            out.append(f"<h{level}>{inline(ln.lstrip('#').strip())}</h{level}>")
        elif ln.startswith("- "):
            out.append(f"<ul><li>{inline(ln[2:])}</li></ul>")
        elif ln.strip():
            out.append(f"<p>{inline(ln)}</p>")
    flush()
    style = (
        "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
        "table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}"
        "td,th{border:1px solid #ccc;padding:.2rem .4rem;text-align:left}"
        "figure svg{max-width:100%;height:auto}code{background:#f3f3f3}"
    )
    title = html.escape(lines[0].lstrip("# ")) if lines else "rlvitals lab"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
        f"<style>{style}</style></head><body>\n" + "\n".join(out) + "\n</body></html>\n"
    )


# --------------------------------------------------------------------------------------------
# The folder


def markdown(name: str, doc: dict[str, Any]) -> list[str]:
    """The summary's lines."""
    body = {"predict": _predict_md, "compare": _compare_md, "ablate": _ablate_md}[name](doc)
    return body + _setup(doc)


def write(name: str, doc: dict[str, Any], results: list[dict[str, Any]], out: Path) -> dict:
    """Write the experiment's files into ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {"json": str(out / f"{name}.json"), "markdown": str(out / f"{name}.md")}
    lines = markdown(name, doc)
    try:
        plots = draw(name, doc, results, out)
    except ImportError:
        plots = {"files": {}, "svg": {}}
        lines += [
            "",
            "Plots need matplotlib: `pip install -e '.[lab]'` in an rlvitals checkout (docs/install.md).",
            "",
        ]
    files["png"] = plots["files"]
    files["html"] = str(out / f"{name}.html")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (out / f"{name}.html").write_text(_md_to_html(lines, plots["svg"]), encoding="utf-8")
    (out / f"{name}.json").write_text(
        json.dumps({**doc, "files": files}, indent=1), encoding="utf-8"
    )
    return files

"""The pre-registered lab v2 study (docs/lab/preregistration.md): run it in stages, resumable,
and analyse whatever has finished under the pre-registered rules.

    nice -n 15 python benchmarks/lab_study.py run --out lab-out/study            # stages 1-3
    nice -n 15 python benchmarks/lab_study.py run --out lab-out/study --stages 1
    python benchmarks/lab_study.py analyse --out lab-out/study --md study.md --svg study.svg
    nice -n 15 python benchmarks/lab_study.py run --out lab-out/study --stages 1 --seeds 32

``--seeds 32`` is the pre-registered extension (seeds 116-131 after 100-115), taken only when
the primary comparison is inconclusive at 16 seeds with a smallest detectable effect above 2
points (``analyse`` says whether the rule is met), and then analysed once, at 32.

Stages (amendment 1): (1) ``grpo``, ``avspo``, ``pg_grpo``; (2) the other seven arms of
``compare --preset full``; (3) the four arms of ``compare --preset controls`` that (1) and (2)
do not hold. Every run is ``rlvitals lab compare``'s own (same settings, same folder layout
``<out>/runs/<arm>-s<seed>/result.json``), so an interrupted stage continues where it stopped
and ``rlvitals lab compare --preset full --out <out>`` reads the same runs back.

``analyse`` reads every finished run and analyses the arms that finished **all** their seeds
(the rule of amendment 1): family 1, every pair of the pre-registered arms, Holm over the
pairs present, plus the Bonferroni bound over the 45 pairs of the full family (Holm's adjusted
p lies between the raw p and 45 p, so a decision that holds at both ends holds under the
pre-registered family); every arm against GRPO; family 2, the controls and ablations against
``pg_grpo`` (Holm over the 6). ``--svg`` draws held-out accuracy against completions with
rlvitals' own SVG plotting (:mod:`rlvitals.report.svg`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

STAGE_1 = ("grpo", "avspo", "pg_grpo")
STAGE_2 = (
    "history_baseline",
    "pg_grpo_select",
    "pg_grpo_baseline",
    "dr_grpo",
    "avspo_released",
    "dapo",
    "zero_var_filter",
)
"""Stage 2, one arm at a time: the secondary comparison's arm and PG-GRPO's halves first (the
amendment leaves the order inside a stage open; fixed after stage 1, before any stage-2 arm
finished)."""
PRIMARY = ("pg_grpo", "avspo")
SECONDARY = (("pg_grpo", "grpo"), ("pg_grpo", "history_baseline"))
FAMILY_1_PAIRS = 45  # every pair of the ten pre-registered arms
FAMILY_2_SIZE = 6  # amendment 1: six arms against pg_grpo
COLORS = {"grpo": "#334155", "avspo": "#c62828", "pg_grpo": "#2563eb"}


def _presets() -> tuple[Any, Any]:
    from rlvitals.lab.presets import COMPARE

    return COMPARE["full"], COMPARE["controls"]


def stages() -> dict[int, tuple[str, ...]]:
    """The arms of each stage, in the pre-registered order."""
    full, controls = _presets()
    assert set(STAGE_1) | set(STAGE_2) == set(full.methods)
    three = tuple(m for m in controls.methods if m not in full.methods)
    return {1: STAGE_1, 2: STAGE_2, 3: three}


def _seeds(n: int | None) -> tuple[int, ...]:
    """The study's seeds: the preset's 16, or its first ``n`` extended by the next ones."""
    from rlvitals.lab.experiments import Setup, _seeds

    full, _ = _presets()
    return _seeds(full.seeds, Setup(out=".", seeds=n))


def run(out: str, which: list[int], workers: int, seeds: int | None = None) -> None:
    from rlvitals.lab import experiments

    full, controls = _presets()
    for stage in which:
        preset = full if stage < 3 else controls
        # stage 1 together (its arms pair on every seed); later stages one arm at a time, so
        # each arm finishes all its seeds before the next starts
        batches = [stages()[stage]] if stage == 1 else [(m,) for m in stages()[stage]]
        for arms in batches:
            p = dataclasses.replace(preset, methods=arms, reference=arms[0], seeds=_seeds(seeds))
            t0 = time.perf_counter()
            experiments.compare(p, out=out, workers=workers, show=False)
            print(
                f"stage {stage} ({', '.join(arms)}): {time.perf_counter() - t0:.0f} s", flush=True
            )


def _results(out: Path, seeds: tuple[int, ...]) -> dict[str, dict[int, dict]]:
    """Finished runs: arm -> seed -> result, for the study's arms and ``seeds``."""
    full, controls = _presets()
    arms = list(dict.fromkeys([*full.methods, *controls.methods]))
    found: dict[str, dict[int, dict]] = {m: {} for m in arms}
    for m in arms:
        for s in seeds:
            path = out / "runs" / f"{m}-s{s}" / "result.json"
            if path.is_file():
                found[m][s] = json.loads(path.read_text())
    return found


def _fmt(v: float | None, d: int = 2) -> str:
    return "–" if v is None else f"{v:.{d}f}"


def _p(v: float | None) -> str:
    if v is None:
        return "–"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def _ci(v: dict[str, Any], d: int = 2) -> str:
    m = v.get("diff", v.get("mean"))
    if m is None:
        return "–"
    if v.get("lo") is None:
        return _fmt(m, d)
    return f"{m:+.{d}f} [{v['lo']:+.{d}f}, {v['hi']:+.{d}f}]"


def _bound_decision(v: dict[str, Any], m: int) -> str:
    """The decision under a Holm family of ``m`` comparisons of which only some were run:
    Holm's adjusted p lies in [p, m p]."""
    t, q = v.get("t_p"), v.get("tost_p")
    if t is not None and t * m < 0.05:
        return "higher" if v["diff"] > 0 else "lower"
    if q is not None and q * m < 0.05:
        return "equivalent"
    if (t is None or t >= 0.05) and (q is None or q >= 0.05):
        return "inconclusive"
    return "undetermined until the other arms run"


def analyse(out: Path, seeds: int | None = None) -> dict[str, Any]:
    """The pre-registered analysis of every arm that finished all its seeds (``seeds``: the
    first that many, extended; None = the preset's 16)."""
    from rlvitals.lab import stats
    from rlvitals.lab.experiments import analyse_arms

    full, controls = _presets()
    study_seeds = _seeds(seeds)
    found = _results(out, study_seeds)
    n_seeds = len(study_seeds)
    complete = [m for m, rs in found.items() if len(rs) == n_seeds]
    family1 = [m for m in full.methods if m in complete]
    groups = {m: [found[m][s] for s in study_seeds] for m in family1}
    doc: dict[str, Any] = {
        "seeds": list(study_seeds),
        "finished_runs": {m: sorted(rs) for m, rs in found.items()},
        "complete_arms": complete,
        "family_1": analyse_arms(groups, "grpo") if "grpo" in groups else None,
    }
    if doc["family_1"]:
        whole = len(doc["family_1"]["pairs"]) == FAMILY_1_PAIRS  # the family is all there
        for v in doc["family_1"]["pairs"].values():
            v["preregistered_decision"] = (
                v["decision"] if whole else _bound_decision(v, FAMILY_1_PAIRS)
            )
            v["t_p_bonferroni_45"] = None if v["t_p"] is None else min(1.0, 45 * v["t_p"])
            v["tost_p_bonferroni_45"] = (
                None if v.get("tost_p") is None else min(1.0, 45 * v["tost_p"])
            )
    fam2 = [m for m in controls.methods if m in complete]
    if "pg_grpo" in fam2 and len(fam2) > 1:
        g2 = {m: [found[m][s] for s in study_seeds] for m in fam2}
        doc["family_2"] = analyse_arms(g2, "pg_grpo")
        whole = len(doc["family_2"]["vs_reference"]) == FAMILY_2_SIZE
        for v in doc["family_2"]["vs_reference"].values():
            acc = v["final_accuracy"]
            acc["preregistered_decision"] = (
                acc["decision"] if whole else _bound_decision(acc, FAMILY_2_SIZE)
            )
    primary = doc["family_1"]["pairs"].get("avspo - pg_grpo") if doc["family_1"] else None
    if primary is not None:
        doc["extension_32"] = bool(
            primary.get("preregistered_decision") == "inconclusive"
            and (primary.get("mde") or 0) > stats.EQUIVALENCE_MARGIN
        )
    cpu = [r["summary"]["cpu_seconds"] for rs in found.values() for r in rs.values()]
    wall = [r["summary"]["wall_seconds"] for rs in found.values() for r in rs.values()]
    doc["timing"] = {
        "runs": len(cpu),
        "cpu_seconds_total": round(sum(cpu), 1),
        "cpu_seconds_per_run": round(sum(cpu) / len(cpu), 2) if cpu else None,
        "wall_seconds_per_run": round(sum(wall) / len(wall), 2) if wall else None,
    }
    return doc


def _pair(doc: dict[str, Any], a: str, b: str) -> tuple[dict[str, Any], int] | None:
    pairs = doc["family_1"]["pairs"]
    if f"{a} - {b}" in pairs:
        return pairs[f"{a} - {b}"], 1
    if f"{b} - {a}" in pairs:
        return pairs[f"{b} - {a}"], -1
    return None


def _flip(v: dict[str, Any], sign: int) -> dict[str, Any]:
    if sign == 1 or v.get("diff") is None:
        return v
    flipped = {**v, "diff": -v["diff"], "lo": -v["hi"], "hi": -v["lo"]}
    flipped["wins"], flipped["losses"] = v.get("losses"), v.get("wins")
    for key in ("decision", "preregistered_decision"):
        flipped[key] = {"higher": "lower", "lower": "higher"}.get(v.get(key), v.get(key))
    return flipped


def markdown(doc: dict[str, Any]) -> str:
    """The tables docs/lab.md reproduces."""
    f1 = doc["family_1"]
    if f1 is None:
        return "No arm has finished all its seeds yet.\n"
    arms = list(f1["arms"])
    lines = [
        f"Arms complete on all {len(doc['seeds'])} seeds: {', '.join(doc['complete_arms'])}.",
        "",
        "| arm | accuracy | greedy | raw ACR | all-right | all-wrong | informative / 1k "
        "| residual ACR | curve mean | CPU s / run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for m in arms:
        a = f1["arms"][m]

        def c(key: str, d: int = 1, a: dict = a) -> str:
            v = a[key]
            return f"{v['mean']:.{d}f} [{v['lo']:.{d}f}, {v['hi']:.{d}f}]"

        lines.append(
            f"| {m} | {c('final_accuracy')} | {c('final_greedy_accuracy')} | {c('acr_mean', 3)} "
            f"| {a['acr_solve_all_mean']['mean']:.3f} | {a['acr_solve_none_mean']['mean']:.3f} "
            f"| {c('informative_per_1k')} | {a['acr_residual_mean']['mean']:.3f} "
            f"| {c('auc_accuracy')} | {a['cpu_seconds']['mean']:.1f} |"
        )
    present = len(f1["pairs"])
    lines += [
        "",
        f"Pairs (final accuracy, points; paired t-interval; Holm over the {present} pairs "
        f"present; pre-registered family: the {FAMILY_1_PAIRS} pairs of ten arms, whose Holm "
        "p lies between the raw p and 45 × p):",
        "",
        "| comparison | Δ accuracy | wins | t p | Holm (present) | TOST ±2 p | Holm TOST "
        "(present) | smallest detectable | decision (present) | decision (pre-registered "
        "family) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    shown = [PRIMARY, *SECONDARY]
    for k in f1["pairs"]:
        a, b = k.split(" - ")
        if (a, b) not in shown and (b, a) not in shown:
            shown.append((b, a) if a == "grpo" else (a, b))  # GRPO as the baseline side
    for a, b in shown:
        got = _pair(doc, a, b)
        if got is None:
            continue
        v = _flip(*got)
        lines.append(
            f"| {a} − {b} | {_ci(v)} | {v['wins']}/{v['n']} | {_p(v['t_p'])} "
            f"| {_p(v.get('t_p_holm'))} | {_p(v.get('tost_p'))} | {_p(v.get('tost_p_holm'))} "
            f"| {_fmt(v.get('mde'))} | {v.get('decision')} | {v.get('preregistered_decision')} |"
        )
    lines += [
        "",
        "Against GRPO (secondary: raw ACR change and Δ informative groups per 1,000 "
        "completions, paired):",
        "",
        "| arm | Δ accuracy | raw ACR change | Δ informative / 1k | Δ curve mean |",
        "|---|---|---|---|---|",
    ]
    for m, v in f1["vs_reference"].items():
        red = v["acr_mean_reduction"]
        raw = (
            "–"
            if red.get("mean") is None
            else f"{-100 * red['mean']:+.0f}% [{-100 * red['hi']:+.0f}%, {-100 * red['lo']:+.0f}%]"
        )
        lines.append(
            f"| {m} | {_ci(v['final_accuracy'])} | {raw} | {_ci(v['informative_per_1k'], 1)} "
            f"| {_ci(v['auc_accuracy'])} |"
        )
    f2 = doc.get("family_2")
    if f2:
        lines += [
            "",
            "Controls and ablations against pg_grpo (family 2: Holm over the comparisons "
            f"present; the pre-registered family has {FAMILY_2_SIZE}, bounded as above):",
            "",
            "| arm | Δ accuracy | wins | t p (Holm) | TOST p (Holm) | decision (present) "
            "| decision (pre-registered family) | raw ACR change | Δ informative / 1k |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for m, v in f2["vs_reference"].items():
            acc, red = v["final_accuracy"], v["acr_mean_reduction"]
            lines.append(
                f"| {m} | {_ci(acc)} | {acc['wins']}/{acc['n']} | {_p(acc['t_p'])} "
                f"({_p(acc.get('t_p_holm'))}) | {_p(acc.get('tost_p'))} "
                f"({_p(acc.get('tost_p_holm'))}) | {acc.get('decision')} "
                f"| {acc.get('preregistered_decision')} "
                f"| {-100 * red['mean']:+.0f}% | {_ci(v['informative_per_1k'], 1)} |"
            )
    if "extension_32" in doc:
        lines += [
            "",
            f"32-seed extension rule (primary inconclusive and smallest detectable > 2 points): "
            f"{'met' if doc['extension_32'] else 'not met'}.",
        ]
    t = doc["timing"]
    lines += [
        "",
        f"Runs read: {t['runs']}, {t['cpu_seconds_total']:.0f} CPU-seconds "
        f"({t['cpu_seconds_per_run']} per run; {t['wall_seconds_per_run']} s wall per run).",
    ]
    return "\n".join(lines) + "\n"


_STYLE = (
    "<style>.ptitle{font:600 12px monospace}.frame{fill:none;stroke:#e5e7eb}"
    ".grid{stroke:#f1f5f9}.ytick,.xtick,.legend{font-size:10px;fill:#6b7280;"
    "font-family:sans-serif}.ytick{text-anchor:end}.xtick{text-anchor:middle}"
    ".series{fill:none;stroke-width:1.5}.lg{stroke-width:2}.dash{stroke-dasharray:4 3}</style>"
)


def svg(doc: dict[str, Any]) -> str:
    """Held-out accuracy (mean over seeds, points) against completions generated, per arm of
    stage 1 (dashed: the 95% interval's ends), drawn by :func:`rlvitals.report.svg.plot`."""
    import numpy as np

    from rlvitals.report.svg import Layer, plot

    arms = doc["family_1"]["arms"]
    layers = []
    for m in STAGE_1:
        if m not in arms:
            continue
        curve = arms[m]["curve"]
        x = np.array([p["generated"] for p in curve], dtype=float)
        y = np.array([p["accuracy"]["mean"] for p in curve], dtype=float)
        layers.append(Layer(m, x, y, COLORS[m]))
        for end in ("lo", "hi"):
            v = np.array([p["accuracy"][end] for p in curve], dtype=float)
            layers.append(Layer(f"{m} 95% {end}", x, v, COLORS[m], "dash"))
    n = len(doc["seeds"])
    title = f"held-out accuracy (points) vs completions, LM, {n} paired seeds"
    out = plot(title, layers, width=640, height=260)
    out = out.replace(
        '<svg class="plot"', '<svg xmlns="http://www.w3.org/2000/svg" class="plot"', 1
    )
    return out.replace("</svg>", _STYLE + "</svg>", 1) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="train the stages (finished runs are read back)")
    r.add_argument("--out", required=True)
    r.add_argument("--stages", default="1,2,3", help="comma-separated stages (default 1,2,3)")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--seeds", type=int, help="32: the pre-registered extension (default 16)")
    a = sub.add_parser("analyse", help="analyse what has finished")
    a.add_argument("--out", required=True)
    a.add_argument("--json", help="write the analysis here")
    a.add_argument("--md", help="write the tables here")
    a.add_argument("--svg", help="write the accuracy plot here")
    a.add_argument("--seeds", type=int, help="analyse the first N seeds (32: the extension)")
    args = p.parse_args(argv)
    if args.cmd == "run":
        try:
            which = [int(s) for s in args.stages.split(",") if s.strip()]
        except ValueError:
            print(f"error: --stages takes numbers 1-3, got {args.stages!r}", file=sys.stderr)
            return 2
        if not which or any(s not in (1, 2, 3) for s in which):
            print(f"error: --stages takes numbers 1-3, got {args.stages!r}", file=sys.stderr)
            return 2
        run(args.out, which, args.workers, args.seeds)
        return 0
    out = Path(args.out)
    if not (out / "runs").is_dir():
        print(f"error: {out}: no runs/ folder (run the study first)", file=sys.stderr)
        return 2
    doc = analyse(out, args.seeds)
    md = markdown(doc)
    print(md)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1, default=str))
    if args.md:
        Path(args.md).write_text(md)
    if args.svg and doc["family_1"]:
        Path(args.svg).write_text(svg(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())

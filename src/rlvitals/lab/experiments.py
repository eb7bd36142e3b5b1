"""The lab's experiments: ``predict``, ``compare``, ``ablate`` — each one call, each a folder.

He et al. (ICML 2026, arXiv 2605.21125) claim that (1) the early ACR predicts final accuracy
across runs (Pearson r = -0.785, R^2 = 0.617, accuracy ~ 51.4 - 29.6 ACR_100, accuracy in
points) and (2) AVSPO cuts the ACR by 58-63% and adds 4-6 accuracy points over GRPO, with
ablations favouring its stratified virtual rewards, adaptive threshold and alpha = 0.5. Their
tables are single runs. Here every claim is measured with seeds and intervals:

- :func:`predict`: a grid of short GRPO runs over level x group size x temperature x seed;
  ACR_100 against final held-out accuracy (Pearson r with a bootstrap interval, R^2, the OLS
  line, r within each level), the paper's numbers beside ours.
- :func:`compare`: GRPO, Dr. GRPO, AVSPO, the released AVSPO, zero-variance filtering, DAPO
  dynamic sampling and a history baseline at an equal budget of generated completions (dynamic
  sampling's discarded completions count), several seeds, on one level; raw and residual ACR,
  accuracy, entropy, wall time with intervals; a paired test per method against GRPO.
- :func:`ablate`: AVSPO's virtual rewards (stratified / uniform-random / fixed 0.5 r_max), its
  threshold (adaptive / fixed 0.3, 0.5, 0.7) and alpha (0.3, 0.5, 0.7, 1.0).

Each writes ``<exp>.json`` (everything, per run included), ``<exp>.md`` (the summary),
``<exp>_*.png`` and ``<exp>.html`` into ``out``, and every run's recording under
``out/runs/<name>/rlvitals`` (``rlvitals doctor`` reads it). Presets: ``smoke`` (seconds, for
tests), ``quick`` (under 3 minutes on 2 cores), ``full`` (under 45 minutes on 2 cores).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvitals.lab import stats
from rlvitals.lab._runner import run_all
from rlvitals.lab.presets import (
    ABLATE,
    COMPARE,
    EXPERIMENTS,
    PAPER,
    PREDICT,
    VARIANTS,
    AblatePreset,
    ComparePreset,
    PredictPreset,
    Variant,
)
from rlvitals.lab.train import Args

__all__ = [
    "ABLATE",
    "COMPARE",
    "PAPER",
    "PREDICT",
    "VARIANTS",
    "AblatePreset",
    "ComparePreset",
    "PredictPreset",
    "Variant",
    "ablate",
    "compare",
    "predict",
]


# --------------------------------------------------------------------------------------------
# Shared set-up


@dataclass
class Setup:
    """What every experiment takes besides its preset (the CLI's options).

    Attributes:
        out: the experiment's folder.
        workers: runs training at once (processes, one torch thread each).
        task: task name.
        model: a local Hugging Face causal-LM directory instead of the tiny model.
        device: ``cpu``, ``cuda``, ...
        cache_dir: cache of base policies.
        seeds: use only the first this many seeds of the preset (None: all).
        show: draw progress bars (None: when stderr is a terminal).
    """

    out: str | os.PathLike
    workers: int = 2
    task: str = "sum"
    model: str | None = None
    device: str = "cpu"
    cache_dir: str | None = None
    seeds: int | None = None
    show: bool | None = None


def _base(setup: Setup, run: Args) -> Any:
    from rlvitals.lab._runner import PhaseBar
    from rlvitals.lab.policy import WarmStart, prepare_base

    with PhaseBar("base policy", setup.show) as bar:
        return prepare_base(
            setup.task,
            model=setup.model,
            device=setup.device,
            cache_dir=setup.cache_dir,
            warm=WarmStart(steps=run.warm_steps),
            progress=bar.update,
        )


def _run_args(setup: Setup, run: Args, **kw: Any) -> Args:
    return dataclasses.replace(
        run,
        task=setup.task,
        model=setup.model,
        device=setup.device,
        cache_dir=setup.cache_dir,
        out=str(Path(setup.out) / "runs"),
        **kw,
    )


def _seeds(seeds: tuple[int, ...], setup: Setup) -> tuple[int, ...]:
    if setup.seeds is None:
        return seeds
    if setup.seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {setup.seeds}")
    more = tuple(range(max(seeds) + 1, max(seeds) + 1 + setup.seeds - len(seeds)))
    return tuple(seeds[: setup.seeds]) + more  # the first N, extended by the next ones


def _machine() -> dict[str, Any]:
    import torch

    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "argv": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "load_average": _load_average(),
    }


def _load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def _finish(
    name: str,
    preset_name: str,
    preset: Any,
    setup: Setup,
    base: Any,
    results: list,
    analysis: dict,
    started: float,
) -> dict[str, Any]:
    from rlvitals.lab import report

    wall = round(time.perf_counter() - started, 1)
    timing_file = Path(setup.out) / f"{name}.timing.json"
    computed = sum(1 for r in results if not r.get("from_cache"))
    cpu = sum(r["summary"].get("cpu_seconds") or 0.0 for r in results)
    timing = {
        "wall_seconds": wall,
        "runs": len(results),
        "workers": setup.workers,
        "run_cpu_seconds": round(cpu, 1),
        "base_seconds": base.meta.get("seconds"),
        "load_average_end": _load_average(),
    }
    if computed == len(results) or not timing_file.is_file():
        # the first invocation that trained every run is the one whose wall time counts
        timing["runs_trained"] = computed
        Path(setup.out).mkdir(parents=True, exist_ok=True)
        timing_file.write_text(json.dumps(timing, indent=1))
    first = json.loads(timing_file.read_text())
    doc = {
        "experiment": name,
        "preset": preset_name,
        "preset_settings": _jsonable(dataclasses.asdict(preset)),
        "setup": _jsonable({k: v for k, v in dataclasses.asdict(setup).items() if k != "show"}),
        "base_policy": base.to_dict(),
        "paper": PAPER[name],
        "analysis": analysis,
        "runs": [{"name": r["args"]["name"], **r["summary"], "evals": r["evals"]} for r in results],
        "machine": _machine(),
        "wall_seconds": wall,
        "timing": first,
        "runs_read_back": len(results) - computed,
    }
    doc["files"] = report.write(name, doc, results, Path(setup.out))
    return doc


def _jsonable(x: Any) -> Any:
    return json.loads(json.dumps(x, default=str))


# --------------------------------------------------------------------------------------------
# predict


def predict(preset: str | PredictPreset = "quick", setup: Setup | None = None, **kw: Any) -> dict:
    """Run the ACR_100 -> final accuracy grid; write its folder; return the results document.

    ``setup`` (or its fields as keyword arguments: ``out``, ``workers``, ...) says where and how.
    """
    setup = setup or Setup(**kw)
    name, p = _preset("predict", preset)
    started = time.perf_counter()
    base = _base(setup, p.run)
    runs = [
        _run_args(
            setup,
            p.run,
            name=f"L{lvl}-G{g}-T{t:g}-s{s}",
            level=lvl,
            group_size=g,
            temperature=t,
            seed=s,
            method="grpo",
            budget=p.budget if p.budget is not None else p.steps * p.run.prompts_per_step * g,
        )
        for lvl in p.levels
        for g in p.group_sizes
        for t in p.temperatures
        for s in _seeds(p.seeds, setup)
    ]
    results = run_all(runs, base=base, workers=setup.workers, label="predict", show=setup.show)
    analysis = analyse_predict(results, early=p.early)
    return _finish("predict", name, p, setup, base, results, analysis, started)


def early_acr(result: dict[str, Any], share: float) -> float | None:
    """Mean raw ACR of the steps that end within ``share`` of the run's budget (at least the
    first step): predict-v2's early ACR, comparable across G at a fixed budget."""
    budget = result["args"]["budget"]
    acr = [
        s["acr"]
        for i, s in enumerate(result["steps"])
        if (i == 0 or s["generated"] <= share * budget) and s["acr"] is not None
    ]
    acr = [a for a in acr if a == a]
    return sum(acr) / len(acr) if acr else None


def analyse_predict(results: list[dict[str, Any]], early: float | None = None) -> dict[str, Any]:
    """Pearson r (bootstrap interval), R^2, the OLS line (accuracy in points), r per level.

    With ``early`` (predict-v2) the predictor is :func:`early_acr` over that share of the
    budget (stored as ``acr_100`` in the points, with ``early`` recorded), and the slope is
    also estimated with level + G + T fixed effects and with level x G x T cell fixed effects
    (:func:`stats.fixed_effects`): the part of the relation that difficulty, group size and
    temperature do not explain.
    """
    if early is not None:
        results = [
            {**r, "summary": {**r["summary"], "acr_100": early_acr(r, early)}} for r in results
        ]
    x = [r["summary"]["acr_100"] for r in results]
    y = [100.0 * r["summary"]["final_accuracy"] for r in results]
    gain = [
        100.0 * (r["summary"]["final_accuracy"] - r["summary"]["base_accuracy"]) for r in results
    ]
    by_level: dict[str, Any] = {}
    for lvl in sorted({r["summary"]["level"] for r in results}):
        rows = [r for r in results if r["summary"]["level"] == lvl]
        by_level[str(lvl)] = {
            "n": len(rows),
            "acr_100": stats.mean_ci([r["summary"]["acr_100"] for r in rows]),
            "accuracy": stats.mean_ci([100 * r["summary"]["final_accuracy"] for r in rows]),
            "pearson": stats.pearson(
                [r["summary"]["acr_100"] for r in rows],
                [100 * r["summary"]["final_accuracy"] for r in rows],
            ),
        }
    within = [v["pearson"]["r"] for v in by_level.values() if v["pearson"]["r"] is not None]
    factors = [
        (r["summary"]["level"], r["args"]["group_size"], r["args"]["temperature"]) for r in results
    ]
    return {
        "early": early,
        "fixed_effects": {
            "additive": stats.fixed_effects(
                x, y, [[f"L{a}", f"G{b}", f"T{c}"] for a, b, c in factors]
            ),
            "cells": stats.fixed_effects(x, y, [[f"L{a}-G{b}-T{c}"] for a, b, c in factors]),
        },
        "n_runs": len(results),
        "pearson": stats.pearson(x, y),
        "ols": stats.ols(x, y),
        "pearson_gain": stats.pearson(x, gain),
        "ols_gain": stats.ols(x, gain),
        "by_level": by_level,
        "within_level_mean_r": sum(within) / len(within) if within else None,
        "points": [
            {
                "name": r["args"]["name"],
                "level": r["summary"]["level"],
                "group_size": r["args"]["group_size"],
                "temperature": r["args"]["temperature"],
                "seed": r["args"]["seed"],
                "acr_100": r["summary"]["acr_100"],
                "final_accuracy": r["summary"]["final_accuracy"],
                "base_accuracy": r["summary"]["base_accuracy"],
            }
            for r in results
        ],
    }


# --------------------------------------------------------------------------------------------
# compare


def compare(preset: str | ComparePreset = "quick", setup: Setup | None = None, **kw: Any) -> dict:
    """Run every method at an equal budget over the seeds; write the folder; return the doc."""
    setup = setup or Setup(**kw)
    name, p = _preset("compare", preset)
    started = time.perf_counter()
    base = _base(setup, p.run)
    runs = [
        _run_args(setup, p.run, name=f"{m}-s{s}", level=p.level, method=m, seed=s)
        for m in p.methods
        for s in _seeds(p.seeds, setup)
    ]
    results = run_all(runs, base=base, workers=setup.workers, label="compare", show=setup.show)
    groups = {m: [r for r in results if r["summary"]["method"] == m] for m in p.methods}
    analysis = analyse_arms(groups, p.reference)
    return _finish("compare", name, p, setup, base, results, analysis, started)


METRICS = (
    ("final_accuracy", 100.0, "held-out accuracy (points, sampled T = 1)"),
    ("final_greedy_accuracy", 100.0, "held-out greedy accuracy (points)"),
    ("acr_mean", 1.0, "raw ACR (mean over steps)"),
    ("acr_100", 1.0, "raw ACR_100"),
    ("acr_solve_all_mean", 1.0, "raw ACR, all-right part"),
    ("acr_solve_none_mean", 1.0, "raw ACR, all-wrong part"),
    ("informative_per_1k", 1.0, "informative groups (0 < correct < G) per 1,000 completions"),
    ("acr_residual_mean", 1.0, "residual ACR: share of groups the estimator left at advantage 0"),
    ("wasted_fraction", 1.0, "completions trained with advantage 0"),
    ("entropy_final", 1.0, "token entropy (last 10% of steps)"),
    ("auc_accuracy", 100.0, "accuracy averaged over the evaluation points (per completion)"),
    ("steps", 1.0, "optimizer steps"),
    ("generated", 1.0, "completions generated"),
    ("wall_seconds", 1.0, "wall time per run (s)"),
    ("cpu_seconds", 1.0, "CPU time per run (s): what the wall time is without contention"),
)
"""What compare and ablate report per method: key, scale, meaning."""


def _value(r: dict[str, Any], key: str, scale: float) -> float | None:
    if key == "auc_accuracy":
        pts = [e["accuracy"] for e in r["evals"][1:]]
        return scale * sum(pts) / len(pts) if pts else None
    v = r["summary"].get(key)
    return None if v is None else scale * v


def analyse_arms(groups: dict[str, list[dict[str, Any]]], reference: str) -> dict[str, Any]:
    """Per arm: every metric with its interval; paired differences against ``reference`` and
    between every pair of arms; relative ACR reductions; accuracy against completions."""
    seeds = {m: {r["args"]["seed"]: r for r in rs} for m, rs in groups.items()}
    arms: dict[str, Any] = {}
    for m, rs in groups.items():
        arms[m] = {key: stats.mean_ci([_value(r, key, sc) for r in rs]) for key, sc, _ in METRICS}
        arms[m]["curve"] = _curve(rs)
    vs: dict[str, Any] = {}
    ref = seeds.get(reference, {})
    for m in groups:
        if m == reference or not ref:
            continue
        common = sorted(set(seeds[m]) & set(ref))
        a = [seeds[m][s] for s in common]
        b = [ref[s] for s in common]
        out = {
            key: stats.paired(
                [_value(r, key, sc) for r in a],
                [_value(r, key, sc) for r in b],
                margin=stats.EQUIVALENCE_MARGIN if sc == 100.0 else None,
            )
            for key, sc, _ in METRICS
            if key in ("final_accuracy", "final_greedy_accuracy", "auc_accuracy", "acr_mean")
            or key in ("acr_residual_mean", "entropy_final", "informative_per_1k")
        }
        for key in ("acr_mean", "acr_residual_mean", "acr_100"):
            rel = [
                1.0 - x["summary"][key] / y["summary"][key]
                for x, y in zip(a, b)
                if x["summary"][key] is not None and y["summary"][key]
            ]
            out[f"{key}_reduction"] = stats.mean_ci(rel)
        vs[m] = out
    # Holm across every comparison of a table: each accuracy metric against the reference
    for key in ("final_accuracy", "final_greedy_accuracy", "auc_accuracy"):
        _holm_all({m: v[key] for m, v in vs.items()})
    pairs: dict[str, Any] = {}
    names = list(groups)
    for i, m1 in enumerate(names):
        for m2 in names[i + 1 :]:
            common = sorted(set(seeds[m1]) & set(seeds[m2]))
            pairs[f"{m1} - {m2}"] = stats.paired(
                [_value(seeds[m1][s], "final_accuracy", 100.0) for s in common],
                [_value(seeds[m2][s], "final_accuracy", 100.0) for s in common],
                margin=stats.EQUIVALENCE_MARGIN,
            )
    _holm_all(pairs)  # every pair of arms: one table
    return {"reference": reference, "arms": arms, "vs_reference": vs, "pairs": pairs}


def _holm_all(table: dict[str, dict[str, Any]]) -> None:
    """Add Holm-adjusted ``t_p_holm``, ``wilcoxon_p_holm``, ``tost_p_holm`` and the decision
    (:func:`stats.decide`) to every paired result of one table."""
    for p in ("t_p", "wilcoxon_p", "tost_p"):
        adjusted = stats.holm({k: v.get(p) for k, v in table.items()})
        for k, v in table.items():
            v[f"{p}_holm"] = adjusted[k]
    for v in table.values():
        v["decision"] = stats.decide(v)


def _curve(rs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Accuracy against completions generated, by evaluation point over the seeds."""
    n = min((len(r["evals"]) for r in rs), default=0)
    out = []
    for k in range(n):
        pts = [r["evals"][k] for r in rs]
        out.append(
            {
                "generated": sum(p["generated"] for p in pts) / len(pts),
                "accuracy": stats.mean_ci([100 * p["accuracy"] for p in pts]),
            }
        )
    return out


# --------------------------------------------------------------------------------------------
# ablate


def ablate(preset: str | AblatePreset = "quick", setup: Setup | None = None, **kw: Any) -> dict:
    """Run the AVSPO ablation arms over the seeds; write the folder; return the doc."""
    setup = setup or Setup(**kw)
    name, p = _preset("ablate", preset)
    started = time.perf_counter()
    base = _base(setup, p.run)
    runs = [
        _run_args(
            setup,
            p.run,
            name=f"{v.name}-s{s}",
            level=p.level,
            method=v.method,
            estimator_config=dict(v.config),
            seed=s,
        )
        for v in p.variants
        for s in _seeds(p.seeds, setup)
    ]
    results = run_all(runs, base=base, workers=setup.workers, label="ablate", show=setup.show)
    groups = {
        v.name: [r for r in results if r["args"]["name"].rsplit("-s", 1)[0] == v.name]
        for v in p.variants
    }
    default = next((v.name for v in p.variants if v.axis == "default"), p.variants[0].name)
    analysis = analyse_arms(groups, default)
    analysis["variants"] = [dataclasses.asdict(v) for v in p.variants]
    return _finish("ablate", name, p, setup, base, results, analysis, started)


def _preset(kind: str, preset: Any) -> tuple[str, Any]:
    table = EXPERIMENTS[kind]
    if isinstance(preset, str):
        if preset not in table:
            raise ValueError(f"unknown {kind} preset {preset!r}; valid: {', '.join(table)}")
        return preset, table[preset]
    return "custom", preset

"""``rlvitals demo``: watch a GRPO run collapse, let the doctor find it, try AVSPO from the same seed.

1. Build (or read from cache) the lab's tiny base policy.
2. Train GRPO on a collapse-prone set-up: level L2 (base pass rate 60%) with a learning rate
   ten times the lab's default (1e-3 after a 30-step warm-up), the classic way a run loses its
   learning signal: the policy drifts to confident wrong answers, every completion of a group
   fails, and the advantages vanish.
3. Run the doctor on the recording and print the collapse findings with their onset, beside the
   step where the lab's own per-group data first shows ACR at the finding's threshold.
4. Train AVSPO from the same seed (same base, prompts and sampler state) and the doctor again.
5. Print a side-by-side summary (ACR, accuracy, wasted rollouts, findings) and write HTML
   reports: ``demo.html`` (the comparison) and the doctor's report of each run.
"""

from __future__ import annotations

import dataclasses
import html
import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from rlvitals.lab._runner import PhaseBar
from rlvitals.lab.train import PRESETS, Args

__all__ = ["DEMO", "DemoPreset", "acr_crossing", "demo"]


@dataclass(frozen=True)
class DemoPreset:
    """Settings of the demo.

    Attributes:
        run: the GRPO run (AVSPO repeats it with ``method="avspo"``).
    """

    run: Args


_DEMO_RUN = dataclasses.replace(
    Args(),
    name="grpo",
    level=2,
    learning_rate=1e-3,
    warmup_steps=30,
    budget=64 * 150,
    evals=3,
)
DEMO: dict[str, DemoPreset] = {
    "default": DemoPreset(_DEMO_RUN),
    "smoke": DemoPreset(
        dataclasses.replace(
            _DEMO_RUN,
            budget=64 * 60,
            learning_rate=3e-3,  # the smoke base policy is barely trained: hotter still
            warmup_steps=10,
            warm_steps=PRESETS["smoke"].warm_steps,
            evals=1,
            eval_prompts=32,
            eval_samples=2,
        )
    ),
}
"""``default`` (about two minutes on 2 cores, the base policy included) and ``smoke`` (tests)."""


def acr_crossing(steps: list[dict[str, Any]], threshold: float, sustain: int = 5) -> int | None:
    """First step ``s`` with ACR >= ``threshold`` whose ``sustain`` steps from ``s`` on average too.

    A step below the threshold is never the crossing, even when the steps after it lift the
    window's mean over it.

    ``steps`` are the lab's own per-step measurements (``LabTrainer.lab_steps``), computed from
    the rewards the trainer scored, independently of the recording and the doctor.

    >>> acr_crossing([{"step": i, "acr": a} for i, a in enumerate([0, 0, 1, 1, 1, 1, 1], 1)], 0.75)
    3
    """
    acr = [s["acr"] for s in steps]
    for i in range(len(acr) - sustain + 1):
        window = acr[i : i + sustain]
        if acr[i] >= threshold and sum(window) / sustain >= threshold:
            return int(steps[i]["step"])
    return None


def _collapse_findings(diagnosis: Any, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from rlvitals.detectors import catalogue

    family = {cls.id: cls.family for cls in catalogue()}
    out = []
    for f in diagnosis.findings:
        if family.get(f.id) != "collapse":
            continue
        thr = f.thresholds.get("acr")
        lab = acr_crossing(steps, thr) if thr is not None else None
        out.append(
            {
                "id": f.id,
                "severity": str(getattr(f.severity, "value", f.severity)),
                "onset_step": f.onset_step,
                "end_step": f.end_step,
                "acr_threshold": thr,
                "lab_crossing_step": lab,
                "onset_minus_lab": None
                if lab is None or f.onset_step is None
                else int(f.onset_step) - lab,
                "message": f.message,
            }
        )
    return out


def _say(msg: str = "") -> None:
    print(msg, flush=True)


def demo(
    out: str | Path,
    *,
    preset: str = "default",
    cache_dir: str | None = None,
    device: str = "cpu",
    show: bool | None = None,
) -> dict[str, Any]:
    """Run the demo into ``out``; print as it goes; return what it found (also ``demo.json``)."""
    import rlvitals
    from rlvitals.lab.experiments import Setup, _base
    from rlvitals.lab.train import train

    if preset not in DEMO:
        raise ValueError(f"unknown demo preset {preset!r}; valid: {', '.join(DEMO)}")
    started = time.perf_counter()
    out = Path(out)
    run = dataclasses.replace(DEMO[preset].run, out=str(out), cache_dir=cache_dir, device=device)
    _say("rlvitals demo: real GRPO on CPU (TRL GRPOTrainer, a tiny Qwen2), recorded and doctored")
    base = _base(Setup(out=out, cache_dir=cache_dir, device=device, show=show), run)
    _say(
        f"base policy ready: level L{run.level} holds {100 * base.level_rates[run.level]:.0f}% "
        f"solvable on held-out prompts ({time.perf_counter() - started:.0f} s)"
    )
    results: dict[str, Any] = {}
    for method in ("grpo", "avspo"):
        args = dataclasses.replace(run, name=method, method=method)
        _say("")
        _say(
            f"== {method}: level L{args.level}, G = {args.group_size}, lr {args.learning_rate:g}, "
            f"{args.budget} completions"
        )
        with PhaseBar(f"   {method}", show, transient=True) as bar:
            result = train(args, base=base, progress=partial(bar.update, "completions"))
        diagnosis = rlvitals.diagnose(rlvitals.load(result["recording"]))
        findings = _collapse_findings(diagnosis, result["steps"])
        report = Path(result["recording"]).parent / "report.html"
        report.write_text(rlvitals.render(diagnosis, "html"), encoding="utf-8")
        results[method] = {
            "summary": result["summary"],
            "findings": findings,
            "report": str(report),
        }
        s = result["summary"]
        _say(
            f"   accuracy {100 * s['base_accuracy']:.1f}% -> {100 * s['final_accuracy']:.1f}%, "
            f"mean ACR {s['acr_mean']:.2f} (residual {s['acr_residual_mean']:.2f}), "
            f"{100 * s['wasted_fraction']:.0f}% of completions wasted, {s['train_seconds']:.0f} s"
        )
        if diagnosis.conditions:
            from rlvitals.report.common import lead

            _say(f"   doctor names: {lead([c.to_dict() for c in diagnosis.conditions])}")
        results[method]["conditions"] = [c.id for c in diagnosis.conditions]
        if not findings:
            _say("   doctor: no collapse-family finding")
        for f in findings:
            lab = (
                f"; the lab's per-group ACR first averages >= {f['acr_threshold']:g} over 5 steps "
                f"at step {f['lab_crossing_step']}"
                if f["lab_crossing_step"] is not None
                else ""
            )
            _say(f"   doctor: {f['id']} ({f['severity']}) since step {f['onset_step']}{lab}")
            _say(f"      {f['message']}")
        _say(f"   report: {report}")
    summary = _side_by_side(results) + "\n\n" + verdict(results)
    _say("")
    _say(summary)
    page = out / "demo.html"
    page.write_text(_html(results, summary), encoding="utf-8")
    doc = {
        "preset": preset,
        "args": dataclasses.asdict(run),
        "runs": results,
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    (out / "demo.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    _say("")
    _say(f"HTML: {page} (and each run's doctor report); {doc['wall_seconds']:.0f} s in all")
    return doc


def verdict(results: dict[str, Any]) -> str:
    """One line: what the two runs show, from their held-out accuracy (the measure that
    matters), not from the share of completions with a nonzero advantage (which AVSPO raises
    by construction).

    >>> r = {m: {"summary": {"base_accuracy": 0.6, "final_accuracy": a, "acr_residual_mean": x},
    ...          "conditions": ["POLICY_DEGRADATION"]} for m, a, x in
    ...      (("grpo", 0.008, 0.84), ("avspo", 0.02, 0.04))}
    >>> verdict(r)[:70]
    'Verdict: both runs got worse (held-out accuracy 60.0% -> 0.8% with GRP'
    """
    g, a = results["grpo"]["summary"], results["avspo"]["summary"]
    start = g["base_accuracy"]
    worse = [m for m, s in (("GRPO", g), ("AVSPO", a)) if s["final_accuracy"] < 0.5 * start]
    acc = (
        f"held-out accuracy {100 * start:.1f}% -> {100 * g['final_accuracy']:.1f}% with GRPO, "
        f"{100 * a['final_accuracy']:.1f}% with AVSPO"
    )
    cause = results["grpo"].get("conditions") or []
    why = f"; the doctor names {cause[0]} for GRPO" if cause else ""
    residual = (
        f"AVSPO gives {100 * (1 - a['acr_residual_mean']):.0f}% of groups an advantage "
        f"(GRPO {100 * (1 - g['acr_residual_mean']):.0f}%)"
    )
    if len(worse) == 2:
        head = "both runs got worse"
        tail = f"{residual}, but that does not undo the damage: one seed shows no rescue"
    elif worse == ["GRPO"]:
        head, tail = "GRPO got worse and AVSPO did not", residual + " (one seed; see docs/lab.md)"
    elif worse == ["AVSPO"]:
        head, tail = "AVSPO got worse and GRPO did not", residual + " (one seed)"
    else:
        diff = 100 * (a["final_accuracy"] - g["final_accuracy"])
        head, tail = (
            f"neither got worse (AVSPO - GRPO {diff:+.1f} points)",
            "one seed: see docs/lab.md",
        )
    return f"Verdict: {head} ({acc}){why}; {tail}."


def _rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    g, a = results["grpo"]["summary"], results["avspo"]["summary"]

    def pct(x: Any) -> str:
        return "–" if x is None else f"{100 * x:.1f}%"

    def num(x: Any) -> str:
        return "–" if x is None else f"{x:.2f}"

    def first(m: str) -> str:
        fs = results[m]["findings"]
        if not fs:
            return "none"
        f = min(fs, key=lambda f: f["onset_step"] if f["onset_step"] is not None else 1 << 30)
        return f"{len(fs)}: first {f['id']} at step {f['onset_step']}"

    return [
        ("held-out accuracy, start", pct(g["base_accuracy"]), pct(a["base_accuracy"])),
        ("held-out accuracy, end", pct(g["final_accuracy"]), pct(a["final_accuracy"])),
        ("ACR_100 (raw)", num(g["acr_100"]), num(a["acr_100"])),
        ("mean ACR (raw)", num(g["acr_mean"]), num(a["acr_mean"])),
        ("mean residual ACR", num(g["acr_residual_mean"]), num(a["acr_residual_mean"])),
        ("wasted rollouts", pct(g["wasted_fraction"]), pct(a["wasted_fraction"])),
        ("completions generated", str(g["generated"]), str(a["generated"])),
        ("collapse findings", first("grpo"), first("avspo")),
    ]


def _side_by_side(results: dict[str, Any]) -> str:
    rows = [("", "GRPO", "AVSPO"), *_rows(results)]
    w = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def _html(results: dict[str, Any], summary: str) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
        for a, b, c in _rows(results)
    )
    finds = ""
    for m in ("grpo", "avspo"):
        items = (
            "".join(
                f"<li><b>{html.escape(f['id'])}</b> since step {f['onset_step']}: "
                f"{html.escape(f['message'])}</li>"
                for f in results[m]["findings"]
            )
            or "<li>none</li>"
        )
        rel = Path(results[m]["report"]).relative_to(Path(results[m]["report"]).parents[1])
        finds += (
            f"<h2>{m.upper()}: collapse findings</h2><ul>{items}</ul>"
            f"<p><a href='{html.escape(str(rel))}'>the doctor's full report</a></p>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>rlvitals demo</title>"
        "<style>body{font-family:system-ui,sans-serif;max-width:50rem;margin:2rem auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2rem .5rem}</style>"
        "</head><body><h1>rlvitals demo: GRPO against AVSPO from the same seed</h1>"
        f"<table><tr><th></th><th>GRPO</th><th>AVSPO</th></tr>{rows}</table>"
        f"<p><b>{html.escape(summary.splitlines()[-1])}</b></p>{finds}"
        "</body></html>\n"
    )

"""The other detector families and the reports: speed on a long run, quality on the corpus.

    python benchmarks/bench_other.py            # speed (20,000-step log) + quality (full corpus)
    python benchmarks/bench_other.py --quick    # speed + the CI-sized corpus

Speed is printed as a ratio to parsing the same JSONL log with ``json.loads`` in this process
(the baseline the doctor's speed target uses). Quality: recall and median onset error per family
on ``rlvitals_corpus.other`` failures, and the share of the collapse corpus's healthy runs on
which any of these detectors warns (false alarms).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # rlvitals_corpus: dev only

import numpy as np

from rlvitals.detectors import DETECTORS, Severity, load_all
from rlvitals.doctor import Diagnosis
from rlvitals.importers import load
from rlvitals.report import render
from rlvitals.vitals import compute_vitals
from rlvitals_corpus import generate, to_run
from rlvitals_corpus.other import FAMILY, other_suite
from rlvitals_corpus.quality import evaluate
from rlvitals_corpus.scenarios import collapse_suite

IDS = sorted(FAMILY)
STEPS = 20_000
REPEAT = 40
"""Timings are the best of this many runs, in CPU time of the process (a shared machine's load
inflates wall time; best-of-3 wall time swung 2x between runs of the same code)."""


def _write_log(path: Path, steps: int) -> None:
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            row = {
                "step": s,
                "reward": rng.random(),
                "frac_reward_zero_std": rng.random() * 0.3,
                "entropy": 0.8 * np.exp(-s / steps),
                "kl": 0.05 * s / steps * rng.random(),
                "grad_norm": 0.3 * np.exp(rng.normal(0, 0.3)),
                "loss": rng.normal(0, 0.01),
                "completions/mean_length": 300 + rng.normal(0, 10),
                "completions/clipped_ratio": 0.01,
                "clip_ratio/region_mean": 0.02,
                "step_time": 60 + rng.normal(0, 2),
                "learning_rate": 1e-6,
            }
            f.write(json.dumps(row) + "\n")


def _best(fn, repeat: int = REPEAT) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def speed() -> None:
    load_all()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.jsonl"
        _write_log(path, STEPS)
        lines = path.read_text().splitlines()
        parse = _best(lambda: [json.loads(ln) for ln in lines])
        run = load(path)
    vitals = compute_vitals(run)
    dets = [DETECTORS.get(i)() for i in IDS]
    t_det = _best(lambda: [d.check(vitals) for d in dets])
    diagnosis = Diagnosis(
        run=run, vitals=vitals, findings=[f for d in dets for f in d.check(vitals)]
    )
    print(f"## speed: {STEPS:,}-step JSONL log, json.loads parse {parse * 1000:.1f} ms (baseline)")
    print(f"{'what':<34} {'ms':>8} {'x parse':>8}")
    print(f"{'10 other detectors':<34} {t_det * 1000:8.1f} {t_det / parse:8.2f}")
    for fmt in ("text", "json", "md", "html"):
        t = _best(lambda fmt=fmt: render(diagnosis, fmt))
        size = len(render(diagnosis, fmt).encode())
        print(f"{'render ' + fmt + f' ({size // 1024} KB)':<34} {t * 1000:8.1f} {t / parse:8.2f}")


def quality(size: str) -> None:
    print(f"\n## quality: corpus size {size!r}")
    suite = other_suite(size)
    print(f"{'family':<11} {'runs':>5} {'recall':>7} {'median onset err':>17} {'p90':>6}")
    for family in sorted(set(FAMILY.values())):
        specs = [s for s in suite if FAMILY[s[1]["detector"]] == family]
        s = evaluate(specs, via_files=True, family=family).summary()
        print(
            f"{family:<11} {s['runs']:>5} {s['recall']:>7} "
            f"{s['median_onset_error_logged_steps']:>17} {s['p90_onset_error_logged_steps']:>6}"
        )
    healthy = [(n, p) for n, p in collapse_suite(size) if n == "healthy"]
    loud_runs = 0
    for name, params in healthy:
        params = dict(params)
        lr = generate(name, seed=params.pop("seed"), **params)
        v = compute_vitals(to_run(lr))
        loud = any(
            Severity(f.severity).rank >= Severity.WARN.rank
            for i in IDS
            for f in DETECTORS.get(i)().check(v)
        )
        loud_runs += loud
    print(
        f"false alarms (any warning from these detectors) on {len(healthy)} healthy runs: "
        f"{loud_runs} ({loud_runs / max(1, len(healthy)):.1%})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized corpus")
    args = ap.parse_args()
    speed()
    quality("ci" if args.quick else "full")


if __name__ == "__main__":
    main()

"""Doctor benchmark: a 20,000-step TRL ``trainer_state.json`` and a 1,000,000-step JSONL log.

Targets (issue 4):

1. loading, vitals and every detector on a 20,000-step TRL log within 3x the time of
   ``json.loads`` of the same file, in the same process;
2. the whole ``rlvitals doctor`` process on that log under 1.5 s, start-up included;
3. 1,000,000 steps with peak memory under 1 GB;
4. the differential diagnosis (issue 23) adds at most 10% to the ``rlvitals doctor`` process.

How it measures:
1. writes the logs into a temporary directory (deleted at the end): the TRL state is a labelled
   corpus run (:mod:`rlvitals_corpus`, identical-completion collapse from step 15,000, 1% NaN
   rows, eval rows) written as ``TrainerState.save_to_json`` does (``indent=2``, bare NaN);
   the JSONL holds TRL-named keys, a collapse in its last quarter;
2. in a fresh subprocess, times ``json.loads(path.read_text())`` and then
   ``diagnose_path(path)`` (load + vitals + every registered detector), best of 5 each,
   interleaved, and prints the ratio and the breakdown;
3. runs ``python -m rlvitals doctor <state> --format json -o <file>`` as a subprocess, best
   of 5 wall times (start-up, imports, load, diagnosis, report);
4. in another fresh subprocess, diagnoses the 1,000,000-step JSONL and reads the peak resident
   set size (``ru_maxrss``).

Run: ``python benchmarks/bench_doctor.py`` (``--steps``/``--big-steps`` for other sizes).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # rlvitals_corpus: dev only

RATIO_TARGET = 3.0
PROCESS_TARGET_S = 1.5
PEAK_MB_TARGET = 1024
DIFFERENTIAL_SHARE = 0.10
REPEATS = 5

_INPROC = r"""
import json, sys, time
from pathlib import Path
path = Path(sys.argv[1]); repeats = int(sys.argv[2])
from rlvitals.doctor import diagnose, diagnose_path
from rlvitals.doctor.differential import differential
from rlvitals.importers import load
from rlvitals.vitals import compute_vitals
from rlvitals.detectors import load_all
load_all()
diagnose_path(path)  # warm the imports and caches once
base, full, parts, diff = [], [], [], []
for _ in range(repeats):
    t = time.perf_counter(); json.loads(path.read_text()); base.append(time.perf_counter() - t)
    t = time.perf_counter(); d = diagnose_path(path); full.append(time.perf_counter() - t)
    t0 = time.perf_counter(); run = load(path); t1 = time.perf_counter()
    compute_vitals(run); t2 = time.perf_counter(); diagnose(run); t3 = time.perf_counter()
    parts.append((t1 - t0, t2 - t1, t3 - t2))
    t = time.perf_counter(); differential(d); diff.append(time.perf_counter() - t)
best = min(range(repeats), key=lambda i: parts[i][0] + parts[i][2])
print(json.dumps({"base": min(base), "full": min(full), "load": parts[best][0],
                  "vitals": parts[best][1], "diagnose": parts[best][2], "differential": min(diff),
                  "steps": d.vitals.n_steps, "findings": [f.id for f in d.findings],
                  "detectors": len(d.detectors)}))
"""

_PEAK = r"""
import json, resource, sys, time
t = time.perf_counter()
from rlvitals.doctor import diagnose_path
d = diagnose_path(sys.argv[1])
secs = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"peak_mb": peak, "seconds": secs, "steps": d.vitals.n_steps,
                  "findings": sorted({f.id for f in d.findings})}))
"""


def write_trl_state(folder: Path, steps: int) -> Path:
    from rlvitals_corpus import generate
    from rlvitals_corpus.writers import write

    lr = generate(
        "collapse_identical",
        seed=0,
        view="trl",
        steps=steps,
        onset=int(steps * 0.75),
        nan_rows=0.01,
    )
    return write(lr, "trl_state", folder)


def write_big_jsonl(path: Path, steps: int) -> int:
    """A ``steps``-row JSONL of TRL-named keys (collapse in the last quarter); file bytes."""
    import numpy as np

    rng = np.random.default_rng(0)
    chunk = 50_000
    onset = int(steps * 0.75)
    with open(path, "w") as f:
        for a in range(1, steps + 1, chunk):
            s = np.arange(a, min(a + chunk, steps + 1))
            n = s.size
            dead = s >= onset
            acr = np.where(dead, rng.uniform(0.9, 1.0, n), rng.uniform(0.1, 0.4, n))
            cols = {
                "reward": rng.uniform(0.4, 0.6, n),
                "reward_std": np.where(dead, rng.uniform(0.0, 0.02, n), rng.uniform(0.3, 0.4, n)),
                "frac_reward_zero_std": acr,
                "loss": rng.normal(0, 0.01, n),
                "grad_norm": rng.uniform(0.1, 0.5, n),
                "learning_rate": np.full(n, 1e-6),
                "kl": rng.uniform(0, 0.01, n),
                "entropy": rng.uniform(0.3, 0.5, n),
                "completions/mean_length": rng.uniform(150, 250, n),
                "clip_ratio/region_mean": rng.uniform(0, 0.02, n),
                "epoch": s / steps,
            }
            keys = list(cols)
            vals = np.column_stack([cols[k] for k in keys]).round(6).tolist()
            f.write(
                "".join(
                    json.dumps({"step": int(st), **dict(zip(keys, row))}) + "\n"
                    for st, row in zip(s.tolist(), vals)
                )
            )
    return path.stat().st_size


def _sub(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--big-steps", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=REPEATS)
    args = ap.parse_args(argv)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        state = write_trl_state(tmp / "trl", args.steps)
        mib = state.stat().st_size / 2**20
        r = _sub(_INPROC, str(state), str(args.repeats))
        ratio = r["full"] / r["base"]
        ok &= ratio <= RATIO_TARGET
        print(
            f"TRL trainer_state.json: {r['steps']:,} steps, {mib:.1f} MiB; "
            f"{r['detectors']} detectors; best of {args.repeats}"
        )
        print(f"baseline json.loads(read_text()):   {r['base'] * 1e3:8.1f} ms")
        print(
            f"load + vitals + every detector:     {r['full'] * 1e3:8.1f} ms   ratio "
            f"{ratio:.2f}x (target <= {RATIO_TARGET:g}x)"
        )
        print(
            f"  load {r['load'] * 1e3:.1f} ms, vitals {r['vitals'] * 1e3:.1f} ms, "
            f"diagnose (vitals + detectors) {r['diagnose'] * 1e3:.1f} ms"
        )
        print(f"  findings: {', '.join(r['findings'])}")
        differential_s = r["differential"]

        out = tmp / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "rlvitals",
            "doctor",
            str(state),
            "--format",
            "json",
            "-o",
            str(out),
            "--fail-on",
            "never",
            "--no-progress",
        ]
        walls = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            walls.append(time.perf_counter() - t)
            if p.returncode != 0:
                print(p.stderr)
                return 2
        json.loads(out.read_text())
        imp = (
            subprocess.run(
                [sys.executable, "-X", "importtime", "-c", "import rlvitals.cli"],
                capture_output=True,
                text=True,
            )
            .stderr.strip()
            .splitlines()
        )
        total_us = int(imp[-1].split("|")[1]) if imp else 0
        best = min(walls)
        ok &= best < PROCESS_TARGET_S
        print(
            f"'rlvitals doctor' process (JSON report): {best:.3f} s best of {args.repeats} "
            f"(median {sorted(walls)[len(walls) // 2]:.3f} s; target < {PROCESS_TARGET_S} s); "
            f"'import rlvitals.cli' {total_us / 1e3:.0f} ms"
        )
        share = differential_s / best
        ok &= share <= DIFFERENTIAL_SHARE
        print(
            f"differential diagnosis (events, rules, ordering; inside diagnose): "
            f"{differential_s * 1e3:.1f} ms = {share:.1%} of the doctor process "
            f"(target <= {DIFFERENTIAL_SHARE:.0%}, issue 23)"
        )

        if args.big_steps:
            big = tmp / "big.jsonl"
            size = write_big_jsonl(big, args.big_steps)
            r = _sub(_PEAK, str(big))
            ok &= r["peak_mb"] < PEAK_MB_TARGET
            print(
                f"{r['steps']:,}-step JSONL ({size / 2**20:.0f} MiB): diagnose_path "
                f"{r['seconds']:.1f} s, peak RSS {r['peak_mb']:.0f} MiB "
                f"(target < {PEAK_MB_TARGET} MiB); findings: {', '.join(r['findings'])}"
            )
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Scan benchmark: 1,000 runs of 2,000 steps in a mix of formats, scanned with 2 jobs.

Targets (issue 15):

1. a cold scan (no cache) within 1.3x of the baseline: ``diagnose_path`` of every run, one
   after the other in one process, divided by the number of jobs (what a perfect split of the
   same work over the jobs would take);
2. a re-scan with a warm cache (nothing changed) within 10% of the cold scan;
3. peak memory bounded by the jobs, not by the number of runs: the scanning process's and its
   largest worker's peak RSS over a quarter of the runs and over all of them.

How it measures:

1. writes the runs into a temporary folder (deleted at the end), in four parts of a quarter
   each: the labelled corpus's writers (:mod:`rlvitals_corpus.writers`: TRL
   ``trainer_state.json`` folders, JSONL, CSV, per-group JSONL, veRL console and file logger,
   OpenRLHF console, rlvitals recordings, TensorBoard through ``tensorboardX``) over a rotation
   of scenarios (healthy with evaluations, identical-completion and floor collapses, ACR
   stalls), plus stores written by the real libraries in a subprocess with its own HOME: an
   MLflow SQLite store of several runs and a W&B folder of several offline runs;
2. each scan runs in a fresh subprocess: ``rlvitals.scan.scan(paths, jobs=J)`` timed after the
   imports (the baseline's imports are not timed either), its ``ru_maxrss`` and its children's;
3. the baseline runs in a fresh subprocess: one untimed call to warm the imports, then
   ``diagnose_path(path, fmt, run=...)`` for every run the cold scan listed;
4. the warm re-scan is also timed as a whole ``rlvitals scan`` process (start-up included).

Run: ``python benchmarks/bench_scan.py`` (``--runs``, ``--steps``, ``--jobs``; ``--quick`` for
a smoke run of 100 runs of 500 steps). Writing the runs is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))  # rlvitals_corpus: dev only

COLD_TARGET = 1.3
WARM_TARGET = 0.10
PARTS = 4

# format -> share of the file-based runs (the stores come on top)
MIX = {
    "jsonl": 0.19,
    "trl_state": 0.19,
    "csv": 0.12,
    "verl_console": 0.14,
    "verl_file": 0.10,
    "openrlhf_console": 0.10,
    "groups_jsonl": 0.06,
    "recording": 0.08,
    "tensorboard": 0.02,
}
SCENARIOS = (
    ("healthy", {"eval_every": 100}),
    ("collapse_identical", {}),
    ("acr_stall", {}),
    ("healthy", {"shape": "learning", "eval_every": 200}),
    ("collapse_identical", {"onset_kind": "late"}),
    ("collapse_floor", {}),
)
_GROUPS = ("groups_jsonl", "recording")

_STORES = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from rlvitals_corpus import generate
from rlvitals_corpus.writers import write
root, n_mlflow, n_wandb, steps = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
for i in range(n_mlflow):
    lr = generate("collapse_identical" if i % 2 else "healthy", seed=900 + i, steps=steps)
    lr.name = f"mlflow-{i}"
    import mlflow
    mlflow.set_tracking_uri(f"sqlite:///{root}/mlflow/mlflow.db")
    from rlvitals_corpus import writers
    os.makedirs(f"{root}/mlflow", exist_ok=True)
    exp = mlflow.get_experiment_by_name("bench") or mlflow.get_experiment(mlflow.create_experiment("bench"))
    from mlflow.entities import Metric
    with mlflow.start_run(experiment_id=exp.experiment_id, run_name=lr.name) as run:
        mlflow.log_params(writers._trl_args(lr, root))
        client, t0, batch = mlflow.MlflowClient(), int(time.time() * 1000), []
        for s, row in writers._rows(lr):
            batch.extend(Metric(k, v, t0 + s, s) for k, v in row.items())
            if len(batch) >= 1000:
                client.log_batch(run.info.run_id, metrics=batch); batch = []
        if batch:
            client.log_batch(run.info.run_id, metrics=batch)
for i in range(n_wandb):
    lr = generate("collapse_identical" if i % 2 else "healthy", seed=950 + i, steps=steps)
    lr.name = f"wandb-{i}"
    write(lr, "wandb", f"{root}/wandb")
    time.sleep(1.05)  # W&B names run folders by the second they start
"""

_SCAN = r"""
import json, resource, sys, time
paths, jobs, cache = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
from rlvitals.scan import scan
import rlvitals.doctor, rlvitals.detectors
rlvitals.detectors.load_all()
t = time.perf_counter()
r = scan(paths, jobs=jobs, cache=cache != "-", cache_dir=None if cache == "-" else cache)
secs = time.perf_counter() - t
own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
jobs_list = [[row.path, row.format, row.run_id] for row in r.rows]
print(json.dumps({"seconds": secs, "rows": len(r.rows), "read": r.read, "cached": r.cached,
                  "errors": sum(1 for x in r.rows if x.error), "peak_mb": own,
                  "worker_peak_mb": kids, "jobs": jobs_list}))
"""

_BASE = r"""
import json, sys, time
todo = json.load(open(sys.argv[1]))
from rlvitals.doctor import diagnose_path
from rlvitals.errors import InputError
import rlvitals.detectors
rlvitals.detectors.load_all()
diagnose_path(todo[0][0], todo[0][1], run=todo[0][2])  # warm the imports
t = time.perf_counter()
for path, fmt, run in todo:
    try:
        diagnose_path(path, fmt, run=run)
    except InputError:
        pass
print(json.dumps({"seconds": time.perf_counter() - t, "runs": len(todo)}))
"""


def _write_one(args: tuple[int, str, str, int]) -> None:
    from rlvitals_corpus import generate
    from rlvitals_corpus.writers import write

    i, fmt, dest, steps = args
    name, params = SCENARIOS[i % len(SCENARIOS)]
    view = "groups" if fmt in _GROUPS else "trl"
    lr = generate(name, seed=i, steps=steps, view=view, **params)
    write(lr, fmt, Path(dest))


def write_runs(root: Path, runs: int, steps: int, jobs: int, stores: tuple[int, int]) -> None:
    """``runs`` runs under ``root/part{0..3}/``, every format in every part (the stores in the
    first, so that a quarter holds every kind of run)."""
    n_files = runs - sum(stores)
    counts = {fmt: max(1, round(share * n_files)) for fmt, share in MIX.items()}
    counts["jsonl"] += n_files - sum(counts.values())
    todo, i = [], 0
    for fmt, n in counts.items():
        for _ in range(n):
            part = root / f"part{i % PARTS}"
            todo.append((i, fmt, str(part / f"{fmt}-{i:05d}"), steps))
            i += 1
    with ProcessPoolExecutor(jobs) as ex:
        list(ex.map(_write_one, todo, chunksize=8))
    home = root.parent / "home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true",
        "PYTHONWARNINGS": "ignore",
    }
    dev = str(Path(__file__).resolve().parents[1] / "dev")
    first = root / "part0"
    subprocess.run(
        [
            sys.executable,
            "-c",
            _STORES,
            dev,
            str(first),
            str(stores[0]),
            str(stores[1]),
            str(steps),
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=3600,
    )


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x = (x * 31 + i) % 1_000_003
    return x


def parallel_speedup(jobs: int, n: int = 3_000_000) -> float:
    """How much faster ``jobs`` processes finish ``jobs`` pieces of pure CPU work than one
    process does, right now (a shared machine gives less than ``jobs``)."""
    t = time.perf_counter()
    for _ in range(jobs):
        _spin(n)
    serial = time.perf_counter() - t
    with ProcessPoolExecutor(jobs) as ex:
        list(ex.map(_spin, [1000] * jobs))  # start the workers first
        t = time.perf_counter()
        list(ex.map(_spin, [n] * jobs))
        par = time.perf_counter() - t
    return serial / par


def _sub(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=7200
    )
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _scan(paths: list[Path], jobs: int, cache: Path | None) -> dict:
    return _sub(_SCAN, json.dumps([str(p) for p in paths]), str(jobs), str(cache or "-"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--mlflow-runs", type=int, default=8)
    ap.add_argument("--wandb-runs", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="100 runs of 500 steps")
    args = ap.parse_args(argv)
    if args.quick:
        args.runs, args.steps, args.mlflow_runs, args.wandb_runs = 100, 500, 2, 2
    ok = True
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench-scan-") as tmp:
        tmp = Path(tmp)
        root = tmp / "runs"
        t = time.perf_counter()
        write_runs(root, args.runs, args.steps, args.jobs, (args.mlflow_runs, args.wandb_runs))
        mib = sum(f.stat().st_size for f in root.rglob("*") if f.is_file()) / 2**20
        print(
            f"{args.runs:,} runs x {args.steps:,} steps ({mib:.0f} MiB: "
            f"{', '.join(MIX)}, an MLflow store of {args.mlflow_runs} runs, a W&B folder of "
            f"{args.wandb_runs} runs), written in {time.perf_counter() - t:.0f} s; "
            f"jobs {args.jobs}"
        )
        cache = tmp / "cache"
        speedup = parallel_speedup(args.jobs)
        load = os.getloadavg()[0]
        print(
            f"machine now: load average {load:.1f} on {os.cpu_count()} CPUs; {args.jobs} processes "
            f"of pure CPU work run {speedup:.2f}x faster than one"
        )
        cold = _scan([root], args.jobs, cache)
        if cold["rows"] != args.runs:
            print(f"the scan listed {cold['rows']} runs, not {args.runs}")
            ok = False
        todo = tmp / "jobs.json"
        todo.write_text(json.dumps(cold["jobs"]))
        base = _sub(_BASE, str(todo))
        per_job = base["seconds"] / args.jobs
        ratio = cold["seconds"] / per_job
        ok &= ratio <= COLD_TARGET
        print(
            f"baseline: diagnose_path of each run in one process {base['seconds']:.1f} s "
            f"({1e3 * base['seconds'] / base['runs']:.0f} ms a run); / {args.jobs} jobs = "
            f"{per_job:.1f} s"
        )
        print(
            f"cold scan:  {cold['seconds']:8.1f} s  ratio {ratio:.2f}x (target <= "
            f"{COLD_TARGET}x); {cold['rows']} rows, {cold['errors']} read errors"
        )
        print(
            f"  against the baseline / the speedup the machine gave ({speedup:.2f}x): "
            f"{cold['seconds'] / (base['seconds'] / speedup):.2f}x (not a target: a figure for "
            "a shared machine)"
        )
        warm = _scan([root], args.jobs, cache)
        share = warm["seconds"] / cold["seconds"]
        ok &= share <= WARM_TARGET and warm["read"] == 0
        print(
            f"warm scan:  {warm['seconds']:8.2f} s  {100 * share:.1f}% of cold (target <= "
            f"{100 * WARM_TARGET:.0f}%); {warm['cached']} rows from the cache, {warm['read']} read"
        )
        cmd = [sys.executable, "-m", "rlvitals", "scan", str(root), "--cache-dir", str(cache)]
        cmd += ["--jobs", str(args.jobs), "--fail-on", "never", "--no-progress"]
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        whole = time.perf_counter() - t
        print(f"warm 'rlvitals scan' process, start-up included: {whole:.2f} s (rc {p.returncode})")
        quarter = _scan([root / "part0"], args.jobs, None)
        grow = cold["peak_mb"] / max(quarter["peak_mb"], 1)
        wgrow = cold["worker_peak_mb"] / max(quarter["worker_peak_mb"], 1)
        ok &= grow < 1.5 and wgrow < 1.5
        print(
            f"peak RSS: scanning process {quarter['peak_mb']:.0f} MiB for {quarter['rows']} runs, "
            f"{cold['peak_mb']:.0f} MiB for {cold['rows']} ({grow:.2f}x); largest worker "
            f"{quarter['worker_peak_mb']:.0f} MiB, {cold['worker_peak_mb']:.0f} MiB ({wgrow:.2f}x)"
            " (target: both < 1.5x for 4x the runs)"
        )
    print("all targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Import benchmark: a 1,000,000-step JSONL log with 20 keys per line.

Targets (issue 14; issue 3 had 3x and 1 GB): ``rlvitals.importers.load`` runs within 2x the
time of ``json.loads`` over the same lines in the same process, and on the default 1,000,000
lines in at most 7 s of CPU with a peak under 400 MiB. The JSON parser is orjson when installed
(a dependency); ``RLVITALS_JSON=stdlib`` measures the stdlib fallback.

How it measures:
1. writes the log into a temporary directory (deleted at the end);
2. in one fresh subprocess, times the baseline (read the file line by line, ``json.loads`` each
   line, keep nothing) and then ``rlvitals.importers.load`` on the same file, and prints the ratio
   of their process CPU times (wall times are printed too; on a shared machine they also
   measure the neighbours);
3. in two more fresh subprocesses, one per measurement, reads the peak resident set size
   (``resource.getrusage(RUSAGE_SELF).ru_maxrss``) after the baseline alone and after the import
   alone, so neither measurement inherits the other's memory.

Run: ``python benchmarks/bench_import.py`` (``--steps N`` for a smaller file).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME_RATIO_TARGET = 2.0
PEAK_MB_TARGET = 400
SECONDS_TARGET = 7.0
"""CPU seconds for 1,000,000 lines (checked only at that size)."""
N_KEYS = 20
KEYS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "loss",
    "grad_norm",
    "learning_rate",
    "kl",
    "entropy",
    "clip_ratio/region_mean",
    "completions/mean_length",
    "completions/max_length",
    "completions/min_length",
    "completions/clipped_ratio",
    "num_tokens",
    "step_time",
    "epoch",
    "rewards/accuracy/mean",
    "rewards/accuracy/std",
    "custom/metric_a",
)  # + "step" = 20 keys per line


def write_log(path: Path, steps: int, seed: int = 0) -> int:
    """Write ``steps`` JSONL lines of ``N_KEYS`` keys; return the file size in bytes."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        buf = []
        for step in range(1, steps + 1):
            row = {"step": step}
            for k in KEYS:
                row[k] = round(rng.random(), 6)
            buf.append(json.dumps(row))
            if len(buf) == 10000:
                f.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf) + "\n")
    return path.stat().st_size


def _baseline(path: str) -> int:
    loads = json.loads
    n = 0
    with open(path, "rb") as f:
        for line in f:
            loads(line)
            n += 1
    return n


def _import(path: str) -> int:
    from rlvitals.importers import load

    run = load(path)
    return run.n_steps


def _child(mode: str, path: str) -> None:
    """Run inside a fresh interpreter: print one JSON line with the measurements."""
    import resource

    out: dict[str, float] = {}
    if mode in ("time", "baseline"):
        t, c = time.perf_counter(), time.process_time()
        out["baseline_rows"] = _baseline(path)
        out["baseline_s"] = time.perf_counter() - t
        out["baseline_cpu_s"] = time.process_time() - c
    if mode in ("time", "import"):
        t, c = time.perf_counter(), time.process_time()
        out["import_steps"] = _import(path)
        out["import_s"] = time.perf_counter() - t
        out["import_cpu_s"] = time.process_time() - c
    # ru_maxrss is in KiB on Linux.
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def _measure(mode: str, path: Path) -> dict[str, float]:
    res = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--child", nargs=2, metavar=("MODE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(*args.child)
        return 0
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench-") as tmp:
        path = Path(tmp) / "log.jsonl"
        t = time.perf_counter()
        size = write_log(path, args.steps)
        print(
            f"wrote {args.steps} steps x {N_KEYS} keys, {size / 2**20:.0f} MiB "
            f"in {time.perf_counter() - t:.1f} s"
        )
        timing = _measure("time", path)
        mem_base = _measure("baseline", path)
        mem_imp = _measure("import", path)
    # CPU time of the process is the ratio's basis: on a shared machine wall time also measures
    # the neighbours. Both are printed.
    from rlvitals.importers._lines import fast_loads

    parser = "orjson" if fast_loads() else "json (stdlib)"
    ratio = timing["import_cpu_s"] / timing["baseline_cpu_s"]
    wall_ratio = timing["import_s"] / timing["baseline_s"]
    assert timing["import_steps"] == args.steps, timing
    print(
        f"json.loads baseline   {timing['baseline_cpu_s']:7.2f} s CPU  {timing['baseline_s']:7.2f} s wall"
        f"   peak RSS {mem_base['peak_mb']:6.0f} MB"
    )
    print(
        f"rlvitals load         {timing['import_cpu_s']:7.2f} s CPU  {timing['import_s']:7.2f} s wall"
        f"   peak RSS {mem_imp['peak_mb']:6.0f} MB"
    )
    print(
        f"ratio {ratio:.2f}x CPU, {wall_ratio:.2f}x wall (target <= {TIME_RATIO_TARGET:.0f}x)   "
        f"peak {mem_imp['peak_mb']:.0f} MB (target <= {PEAK_MB_TARGET} MiB); parser: {parser}"
    )
    ok = ratio <= TIME_RATIO_TARGET and mem_imp["peak_mb"] <= PEAK_MB_TARGET
    if args.steps == 1_000_000:
        fast = timing["import_cpu_s"] <= SECONDS_TARGET
        print(
            f"1,000,000 lines in {timing['import_cpu_s']:.2f} s CPU (target <= {SECONDS_TARGET:.0f} s)"
        )
        ok &= fast
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("RLVITALS_PROGRESS", "0")
    sys.exit(main())

"""veRL console import benchmark: a 100,000-step console log, streamed in bounded memory.

Targets (issue 3, veRL part; issue 14, target 4): a 100,000-step console log imports with memory
bounded by the series it holds (not by the file size), and within 2x the bare minimum of work
(read each line, split its ``key:value`` fields, ``float()`` each value, keep nothing), measured
in the same process. The 1,120-line real deepseek log imports in well under 1 s.

How it measures:
1. writes the log (veRL's ``step:N - key:value`` lines with 30 keys, Ray prefix and colour codes,
   plus one tqdm line per step) into a temporary directory, deleted at the end;
2. in a fresh subprocess, times the baseline and then ``rlvitals.importers.load`` on the same file
   (best of 3 each) and prints the ratio;
3. in another fresh subprocess, imports once and reads the peak resident set size
   (``ru_maxrss``) next to the size of the file and of the arrays kept;
4. times the real log when it is present (``--real PATH``; default: the shared deepseek log).

``--instructions`` also counts, under valgrind's callgrind, the instructions of the baseline and
of ``load()`` on a ``--instructions-steps`` log (default 10,000; callgrind runs ~50x slower), each
less those of a process that only imports and warms up: unlike wall time, the ratio does not move
with the machine's load.

Run: ``python benchmarks/bench_import_verl.py`` (``--steps N`` for a smaller file).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME_RATIO_TARGET = 2.0
REAL_LOG_TARGET_S = 1.0
DEFAULT_REAL = "/work/shared/real-logs/verl/verl_grpo_deepseek7b_gsm8k.log"
PREFIX = "\x1b[36m(TaskRunner pid=678203)\x1b[0m "
KEYS = (
    "global_seqlen/min", "global_seqlen/max", "global_seqlen/mean", "actor/entropy",
    "actor/pg_loss", "actor/pg_clipfrac", "actor/ppo_kl", "actor/kl_loss", "actor/grad_norm",
    "actor/lr", "critic/score/mean", "critic/score/max", "critic/score/min",
    "critic/rewards/mean", "critic/advantages/mean", "critic/advantages/max",
    "critic/advantages/min", "critic/returns/mean", "response_length/mean",
    "response_length/max", "response_length/min", "response_length/clip_ratio",
    "prompt_length/mean", "timing_s/gen", "timing_s/update_actor", "timing_s/step",
    "perf/total_num_tokens", "perf/time_per_step", "perf/throughput", "training/epoch",
)  # fmt: skip


def write_log(path: Path, steps: int, seed: int = 0) -> int:
    """Write ``steps`` console step lines (and as many tqdm lines); return the size in bytes."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        buf = []
        for step in range(1, steps + 1):
            fields = " - ".join(f"{k}:{rng.random() * 100:.3f}" for k in KEYS)
            buf.append(f"{PREFIX}step:{step} - {fields}")
            buf.append(f"{PREFIX}Training Progress: {step}/{steps} [00:01<00:00, 1.00it/s]")
            if len(buf) >= 10000:
                f.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf) + "\n")
    return path.stat().st_size


def _baseline(path: str) -> int:
    """The least work an importer must do: read, find step lines, split fields, parse floats."""
    n = 0
    with open(path, "rb") as f:
        for raw in f:
            if b"step:" not in raw:
                continue
            line = raw.decode("utf-8", "replace")
            body = line[line.index("step:") :].rstrip()
            for field in body.split(" - ")[1:]:
                float(field.rpartition(":")[2])
                n += 1
    return n


def _child_time(path: str) -> None:
    from rlvitals.importers import load

    best_base = best_imp = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        _baseline(path)
        best_base = min(best_base, time.perf_counter() - t)
        t = time.perf_counter()
        run = load(path)
        best_imp = min(best_imp, time.perf_counter() - t)
    assert run.manifest.format == "verl_console"
    print(f"{best_base:.4f} {best_imp:.4f} {run.n_steps}")


def _child_mem(path: str) -> None:
    import resource

    from rlvitals.importers import load

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run = load(path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kept = run.steps.nbytes + sum(v.nbytes for v in run.series.values())
    print(f"{before / 1024:.1f} {peak / 1024:.1f} {kept / 2**20:.1f}")


def _child_ir(what: str, path: str, warm: str) -> None:
    """What one callgrind process runs: imports and a warm-up ``load``, then ``what``."""
    from rlvitals.importers import load

    load(warm)
    if what == "baseline":
        _baseline(path)
    elif what == "load":
        load(path)


def _instructions(what: str, path: Path, warm: Path) -> int:
    """Instructions (callgrind's "Collected") of a ``_child_ir`` process, one BLAS thread."""
    child = [sys.executable, __file__, "--child-ir", what, str(path), str(warm)]
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *child],
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))


def _run_child(mode: str, path: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, __file__, f"--child-{mode}", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.split()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--real", default=DEFAULT_REAL, help="a real veRL console log to time")
    ap.add_argument("--instructions", action="store_true", help="also count instructions")
    ap.add_argument("--instructions-steps", type=int, default=10_000)
    ap.add_argument("--child-time", help=argparse.SUPPRESS)
    ap.add_argument("--child-mem", help=argparse.SUPPRESS)
    ap.add_argument("--child-ir", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind (apt-get install valgrind)")
    if args.child_ir:
        _child_ir(*args.child_ir)
        return 0
    if args.child_time:
        _child_time(args.child_time)
        return 0
    if args.child_mem:
        _child_mem(args.child_mem)
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "verl_console.log"
        size = write_log(path, args.steps)
        print(f"console log: {args.steps:,} steps x {len(KEYS)} keys, {size / 2**20:.1f} MiB")
        base, imp, n = _run_child("time", path)
        ratio = float(imp) / float(base)
        print(f"baseline split+float():   {float(base):8.3f} s")
        print(f"rlvitals load():          {float(imp):8.3f} s   ratio {ratio:.2f}x "
              f"(target <= {TIME_RATIO_TARGET:.0f}x); {int(n):,} steps")  # fmt: skip
        before, peak, kept = _run_child("mem", path)
        print(f"peak RSS: {float(peak):.0f} MiB (interpreter + rlvitals before load: "
              f"{float(before):.0f} MiB; series kept: {float(kept):.0f} MiB; file: "
              f"{size / 2**20:.0f} MiB)")  # fmt: skip
        ok = ratio <= TIME_RATIO_TARGET
        if args.instructions:
            small, warm = Path(tmp) / "small.log", Path(tmp) / "warm.log"
            write_log(small, args.instructions_steps)
            write_log(warm, 2, seed=1)
            n_ir = args.instructions_steps
            floor = _instructions("none", small, warm)
            base_ir = _instructions("baseline", small, warm) - floor
            load_ir = _instructions("load", small, warm) - floor
            print(f"instructions (callgrind, {n_ir:,} steps): baseline {base_ir / n_ir / 1e3:.1f} k"
                  f" a step, load() {load_ir / n_ir / 1e3:.1f} k a step, "
                  f"ratio {load_ir / base_ir:.2f}x")  # fmt: skip
    real = Path(args.real)
    if real.is_file():
        from rlvitals.importers import load

        load(real)  # warm: module imports
        best = float("inf")
        for _ in range(5):
            t = time.perf_counter()
            run = load(real)
            best = min(best, time.perf_counter() - t)
        print(f"real log {real.name}: {real.stat().st_size / 2**20:.1f} MiB, {run.n_steps:,} "
              f"training steps, {best * 1000:.0f} ms (target < {REAL_LOG_TARGET_S:.0f} s)")  # fmt: skip
        ok = ok and best < REAL_LOG_TARGET_S
    else:
        print(f"real log not found at {real}; skipped")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Flight recorder overhead: 1,000 steps x 512 groups x 16 rewards must cost < 1 s of CPU time.

Run: ``python benchmarks/bench_recorder.py [--steps 1000] [--groups 512] [--size 16]``

Measures total CPU time of the process (``time.process_time``: user + system, every thread)
for recording every step's per-group rewards with a synchronous ``Recorder`` (each record handed
to the OS before the call returns), and compares it with two baselines measured in the same run
on the same arrays:

- ``np.save`` of the step's rewards and group ids into a ``BytesIO`` (the cheapest
  serialisation numpy offers, no file system at all);
- ``rlvitals.signal.collapse_rate`` of the step (what computing ACR alone costs).

A second configuration also records prompt hashes, completion lengths, advantages, a row of
scalars and an event per step. Exit status 1 when the main configuration misses the target.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from rlvitals.recording import Manifest, Recorder, read_recording
from rlvitals.signal import collapse_rate

TARGET_CPU_S = 1.0
"""Issue 3: recorder overhead for 1,000 x 512 x 16 stays under 1 s of total CPU time."""
VARIANTS = 8
"""Distinct reward arrays cycled through (generated outside the timed loops)."""


def cpu_time(fn: Callable[[], None], repeats: int) -> float:
    """Best total CPU seconds of ``repeats`` runs of ``fn``."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=512)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    steps, k, g = args.steps, args.groups, args.size
    n = k * g

    rng = np.random.default_rng(0)
    pass_rate = rng.random((VARIANTS, k, 1))
    rewards = [
        (rng.random((k, g)) < pass_rate[v]).astype(np.float32).reshape(n) for v in range(VARIANTS)
    ]
    group_ids = np.repeat(np.arange(k), g)
    prompts = rng.integers(0, 2**63 - 1, size=k)
    lengths = rng.integers(1, 4096, size=n).astype(np.int32)
    advantages = [rng.standard_normal(n).astype(np.float32) for _ in range(VARIANTS)]

    def baseline_save() -> None:
        for s in range(steps):
            buf = io.BytesIO()
            np.save(buf, rewards[s % VARIANTS])
            np.save(buf, group_ids)

    def baseline_acr() -> None:
        for s in range(steps):
            collapse_rate(rewards[s % VARIANTS], group_ids)

    tmp = tempfile.mkdtemp(prefix="rlvitals-bench-")
    runs = 0

    def record(full: bool) -> Callable[[], None]:
        def go() -> None:
            nonlocal runs
            runs += 1
            path = os.path.join(tmp, f"run{runs}")
            with Recorder(path, Manifest(trainer="bench", group_size=g)) as rec:
                for s in range(steps):
                    r = rewards[s % VARIANTS]
                    if full:
                        rec.log_scalars(s, {"loss": 0.1, "reward": 0.5, "grad_norm": 1.0})
                        rec.log_groups(
                            s,
                            r,
                            group_ids,
                            prompts=prompts,
                            lengths=lengths,
                            advantages=advantages[s % VARIANTS],
                        )
                        rec.log_event(s, "tick", "step done", step_s=0.1)
                    else:
                        rec.log_groups(s, r, group_ids)
            if rec.stats["dropped"]:
                raise SystemExit(f"recorder dropped records: {rec.stats}")

        return go

    t_save = cpu_time(baseline_save, args.repeats)
    t_acr = cpu_time(baseline_acr, args.repeats)
    t_rec = cpu_time(record(False), args.repeats)
    t_full = cpu_time(record(True), args.repeats)

    last = os.path.join(tmp, f"run{runs}")
    size = sum(os.path.getsize(os.path.join(last, f)) for f in os.listdir(last))
    t0 = time.perf_counter()
    run = read_recording(last)
    t_read = time.perf_counter() - t0
    assert run.groups is not None and run.groups.n_groups == steps * k

    print(
        f"recorder: {steps:,} steps x {k} groups x {g} rewards (float32); "
        f"CPU time (process_time), best of {args.repeats}"
    )
    print(f"baseline np.save to BytesIO:        {t_save:7.3f} s")
    print(f"baseline ACR (collapse_rate):       {t_acr:7.3f} s")
    print(
        f"Recorder.log_groups:                {t_rec:7.3f} s   "
        f"ratio {t_rec / t_save:5.2f}x np.save, {t_rec / t_acr:5.2f}x ACR   "
        f"(target < {TARGET_CPU_S:.1f} s)"
    )
    print("  + prompts, lengths, advantages,")
    print(
        f"    scalars and an event per step:  {t_full:7.3f} s   "
        f"ratio {t_full / t_save:5.2f}x np.save"
    )
    print(f"read back (wall): {t_read:.3f} s for {size / 2**20:.1f} MiB")
    ok = t_rec < TARGET_CPU_S
    print("PASS" if ok else "FAIL")
    shutil.rmtree(tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

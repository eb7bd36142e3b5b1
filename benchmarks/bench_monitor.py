"""Cost of ``Monitor.observe`` per step: 512 groups x 16 rewards (target < 1 ms per step).

    python benchmarks/bench_monitor.py [--groups 512] [--size 16] [--steps 300] [--rounds 5]

Two streams of ``--steps`` steps (float32 binary rewards, pass rates drawn per prompt), each
step also logging six trainer scalars: a healthy one, and one whose every reward is 0 from the
middle step on (half of its checks see a collapse: the detectors' dearest case; the incident is
opened and updated, and the conditions it points to are followed and told). Measured in the same run, rounds alternating:

- baseline: GRPO advantages of the same batch (``rlvitals.advantages``, what a trainer computes
  every step anyway) and the numpy reference ``(r - mean) / (std + eps)`` over ``(N, G)``;
- ``observe``, ingest only (``check_every=0``): the per-group reduction and the window;
- ``observe`` with the defaults (the collapse family every 3 steps, the whole catalogue every
  15), amortised over the steps, on the healthy stream and on the collapsing one: the numbers
  the target is about;
- one fast check and one full check over the 200-step window, alone.

Times are CPU time of this process (``time.process_time``: every thread, user + system), so a
shared machine's load inflates them far less than wall time. Prints the median over rounds of
each per-step time and its ratio to the GRPO advantages.
Exits 1 when the default ``observe`` reaches the target on either stream.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time

import numpy as np

TARGET_MS = 1.0


def stream(n_groups: int, size: int, steps: int, seed: int = 0, collapse: bool = True):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 0.7, size=n_groups)
    batches = []
    for s in range(1, steps + 1):
        r = (rng.random((n_groups, size)) < p[:, None]).astype(np.float32)
        if collapse and s > steps // 2:
            r[:] = 0.0
        batches.append(r.reshape(-1))
    ids = np.repeat(np.arange(n_groups, dtype=np.int64), size)
    return batches, ids


def scalars(s: int) -> dict[str, float]:
    return {
        "loss": 0.1,
        "grad_norm": 0.5,
        "entropy": 1.0 - s * 1e-3,
        "kl": 0.01,
        "learning_rate": 1e-6,
        "length_mean": 300.0,
    }


def run_monitor(batches, ids, **kw) -> tuple[float, object]:
    from rlvitals import Manifest, Monitor

    mon = Monitor(
        Manifest(trainer="bench", group_size=int(ids.shape[0] // (ids.max() + 1))), sinks=[], **kw
    )
    t0 = time.process_time()
    for s, r in enumerate(batches, 1):
        mon.observe(s, r, ids, values=scalars(s))
    per = (time.process_time() - t0) / len(batches)
    return per, mon


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=512)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # the alerts' log lines are not what is measured
    import rlvitals

    batches, ids = stream(a.groups, a.size, a.steps)
    healthy, _ = stream(a.groups, a.size, a.steps, collapse=False)
    g = a.size

    def grpo() -> float:
        t0 = time.process_time()
        for r in batches:
            rlvitals.advantages(r, ids)
        return (time.process_time() - t0) / len(batches)

    def numpy_ref() -> float:
        t0 = time.process_time()
        for r in batches:
            v = r.reshape(-1, g)
            (v - v.mean(1, keepdims=True)) / (v.std(1, ddof=1, keepdims=True) + 1e-4)
        return (time.process_time() - t0) / len(batches)

    res: dict[str, list[float]] = {
        k: [] for k in ("grpo", "numpy", "ingest", "healthy", "observe", "fast", "full")
    }
    checks = None
    for _ in range(a.rounds):
        res["grpo"].append(grpo())
        res["numpy"].append(numpy_ref())
        res["ingest"].append(run_monitor(batches, ids, check_every=0)[0])
        res["healthy"].append(run_monitor(healthy, ids)[0])
        per, mon = run_monitor(batches, ids)
        res["observe"].append(per)
        checks = (
            mon.checks,
            len(mon.alerts),
            [(e.kind, e.condition) for e in mon.conditions.timeline],
        )
        t0 = time.process_time()
        for _ in range(20):
            mon.diagnose(fast=True)
        res["fast"].append((time.process_time() - t0) / 20)
        t0 = time.process_time()
        for _ in range(20):
            mon.diagnose()
        res["full"].append((time.process_time() - t0) / 20)
    med = {k: statistics.median(v) for k, v in res.items()}
    base = med["grpo"]
    print(
        f"Monitor.observe: {a.groups} groups x {a.size} rewards (float32) + 6 scalars per step, "
        f"{a.steps} steps, median of {a.rounds} rounds"
    )
    rows = [
        ("baseline: rlvitals.advantages (GRPO)", "grpo"),
        ("baseline: numpy (r - mean) / (std + eps)", "numpy"),
        ("observe, ingest only (check_every=0)", "ingest"),
        ("observe, defaults, healthy stream", "healthy"),
        ("observe, defaults, collapse from mid-run", "observe"),
        ("one fast check (collapse family)", "fast"),
        ("one full check (whole catalogue)", "full"),
    ]
    for label, key in rows:
        print(f"{label:<44} {med[key] * 1e3:8.3f} ms   ratio {med[key] / base:6.2f}x GRPO")
    ok = max(med["observe"], med["healthy"]) * 1e3 < TARGET_MS
    print(
        f"checks run (collapsing stream): {checks[0]}, alerts: {checks[1]}, conditions: "
        f"{', '.join(f'{c} {k}' for k, c in checks[2]) or 'none'}; observe "
        f"{med['healthy'] * 1e3:.3f} / {med['observe'] * 1e3:.3f} ms per step (healthy / "
        f"collapsing; target < {TARGET_MS:g} ms): {'PASS' if ok else 'OVER'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

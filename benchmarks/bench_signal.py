"""ACR + GRPO advantages on 1,000,000 groups x 16 rewards (float32), against one numpy pass.

    python benchmarks/bench_signal.py [--groups 1000000] [--repeat 5]

Baseline, measured in the same run: ``rewards.reshape(-1, 16).std(axis=1)`` — one numpy pass
over the same array. Targets: within 3x of the baseline for dense equal-size groups, within 10x
for ragged groups (sizes 8..24, shuffled order). Prints the best-of-N time of each and the ratio.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import rlvitals


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n_groups, g = args.groups, args.size
    p = rng.random(n_groups, dtype=np.float32)
    rewards = (rng.random((n_groups, g), dtype=np.float32) < p[:, None]).astype(np.float32)
    rewards = rewards.reshape(-1)
    ids = np.repeat(np.arange(n_groups, dtype=np.int64), g)

    def baseline():
        rewards.reshape(-1, g).std(axis=1)

    def ours(r=rewards, i=ids):
        stats = rlvitals.group_stats(r, i)
        int(stats.collapsed.sum())  # ACR
        rlvitals.advantages_from_stats(stats, "grpo")

    # Ragged: sizes 8..24 (mean 16), shuffled rows: the general path.
    sizes = rng.integers(8, 25, size=n_groups)
    rids = np.repeat(np.arange(n_groups, dtype=np.int64), sizes)
    rrew = (rng.random(rids.size, dtype=np.float32) < p[rids]).astype(np.float32)
    perm = rng.permutation(rids.size)
    rids, rrew = rids[perm], rrew[perm]

    base = best_of(baseline, args.repeat)
    dense = best_of(ours, args.repeat)
    ragged = best_of(lambda: ours(rrew, rids), args.repeat)
    print(f"rewards: {n_groups:,} groups x {g} (float32); best of {args.repeat}")
    print(f"baseline numpy std(axis=1):     {base * 1e3:8.1f} ms")
    print(
        f"rlvitals ACR + grpo, dense:     {dense * 1e3:8.1f} ms   ratio {dense / base:5.2f}x  (target <= 3x)"
    )
    print(
        f"rlvitals ACR + grpo, ragged:    {ragged * 1e3:8.1f} ms   ratio {ragged / base:5.2f}x  (target <= 10x)"
    )
    # Same check on the answers, so the benchmark measures real work.
    acr = rlvitals.collapse_rate(rewards, ids)
    ref = float(np.mean(rewards.reshape(-1, g).std(axis=1) == 0))
    assert abs(acr - ref) < 1e-9, (acr, ref)


if __name__ == "__main__":
    main()

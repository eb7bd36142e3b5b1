"""Time per call of every built-in estimator on 4,096 groups x 16 rewards, as a ratio to ``grpo``.

Target (issue 5): ``avspo`` within 1.5x of ``grpo`` measured in the same run. The step is built
so that AVSPO does its full work: about 60% of the groups are collapsed (solve-all or
solve-none) and every ``avspo`` call starts from ``tau_adapt = 0.5``, so every call triggers and
augments. Each estimator is timed as the best of ``--repeats`` rounds of ``--calls`` calls
(``rlvitals.estimate``, config validation included); the estimators take turns within each
round, and the time is the process's CPU time (one thread), so neighbours on a shared machine
inflate it less than wall time. numpy float32 and torch float32 (CPU) are both measured. The share of a TRL step spent in the estimator is ``benchmarks/bench_trl_step.py``.

Run: ``python benchmarks/bench_estimators.py`` (``--groups``, ``--group-size``, ``--calls``,
``--repeats``, ``--backend numpy|torch|both``). Exits 1 when avspo misses the target.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import rlvitals
from rlvitals.estimators import EstimatorName

AVSPO_TARGET = 1.5
"""avspo / grpo time per call must stay below this."""
METHODS = [e.value for e in EstimatorName]


def make_step(n_groups: int, group_size: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Binary rewards ``(n_groups * group_size,)`` float32 and dense group ids (int64).

    30% of prompts are always solved, 30% never, the rest have a uniform pass rate, which gives
    an ACR a little above 0.6.
    """
    rng = np.random.default_rng(seed)
    u = rng.random(n_groups)
    p = np.where(u < 0.3, 1.0, np.where(u < 0.6, 0.0, rng.random(n_groups)))
    rewards = (rng.random((n_groups, group_size)) < p[:, None]).astype(np.float32).ravel()
    ids = np.repeat(np.arange(n_groups, dtype=np.int64), group_size)
    return rewards, ids


def time_estimators(
    rewards: object, ids: object, *, calls: int, repeats: int, methods: list[str] = METHODS
) -> dict[str, float]:
    """Best-of-``repeats`` CPU seconds per call for each method (interleaved, order rotated per round)."""
    best = {m: float("inf") for m in methods}
    for m in methods:  # warm-up (imports, allocator)
        rlvitals.estimate(m, rewards, ids, state=_state(m))
    for rnd in range(repeats):
        shift = rnd % len(methods)  # no estimator always runs first (or after the same one)
        for m in methods[shift:] + methods[:shift]:
            state = _state(m)
            t0 = time.process_time()
            for _ in range(calls):
                rlvitals.estimate(m, rewards, ids, state=state)
            best[m] = min(best[m], (time.process_time() - t0) / calls)
    return best


def _state(method: str) -> object:
    return {"tau_adapt": 0.5} if method == "avspo" else None


def report(title: str, times: dict[str, float]) -> bool:
    """Print one table; return whether avspo met the target."""
    base = times["grpo"]
    print(title)
    for m, t in times.items():
        note = f"  (target <= {AVSPO_TARGET}x)" if m == "avspo" else ""
        print(f"  {m:<16} {t * 1e3:8.2f} ms   ratio {t / base:5.2f}x{note}")
    return times["avspo"] / base <= AVSPO_TARGET


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=4096)
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--backend", choices=["numpy", "torch", "both"], default="both")
    args = ap.parse_args(argv)

    rewards, ids = make_step(args.groups, args.group_size)
    _, m, _ = rlvitals.estimate("avspo", rewards, ids, state={"tau_adapt": 0.5})
    print(
        f"rewards: {args.groups:,} groups x {args.group_size} (float32), ACR {m['acr']:.2f}, "
        f"avspo K {m['avspo_k']:.0f}, {m['avspo_groups_augmented']:.0f} groups augmented; "
        f"best of {args.repeats} x {args.calls} calls"
    )
    ok = True
    if args.backend in ("numpy", "both"):
        times = time_estimators(rewards, ids, calls=args.calls, repeats=args.repeats)
        ok &= report("numpy:", times)
    if args.backend in ("torch", "both"):
        import torch

        torch.set_num_threads(1)
        tr, ti = torch.from_numpy(rewards), torch.from_numpy(ids)
        times = time_estimators(tr, ti, calls=args.calls, repeats=args.repeats)
        ok &= report("torch (CPU, 1 thread):", times)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Time per call of every built-in estimator: a big step (ratio to ``grpo``) and a small one.

Big step (issue 5): 4,096 groups x 16 rewards; target ``avspo`` within 1.5x of ``grpo``
measured in the same run. The step is built so that AVSPO does its full work: about 60% of the
groups are collapsed (solve-all or solve-none) and every ``avspo`` call starts from
``tau_adapt = 0.5``, so every call triggers and augments. Each estimator is timed as the best of
``--repeats`` rounds of ``--calls`` calls (``rlvitals.estimate``, config validation included);
the estimators take turns within each round, and the time is the process's CPU time (one
thread), so neighbours on a shared machine inflate it less than wall time. numpy float32 and
torch float32 (CPU) are both measured.

Small step (issue 14, target 5): 8 groups x G=8 float32 rewards, TRL's tiny step as its
trainer hands it over (numpy arrays on the host, the AVSPO state object of the previous step).
Printed per call: in a tight loop ("hot", the fixed per-call cost) and with the CPU caches
evicted before every call ("cold", 32 MiB written between calls, untimed: what a call costs
inside a training loop, whose model step evicts them), next to a baseline measured the same
way: the bare numpy GRPO formula ``(r - mean) / (std + eps)`` on the ``(8, 8)`` view. Target:
0.2 ms per call, hot and cold. The share of a real TRL step is ``benchmarks/bench_trl_step.py``.

Run: ``python benchmarks/bench_estimators.py`` (``--part big|small|both``, ``--groups``,
``--group-size``, ``--calls``, ``--repeats``, ``--backend numpy|torch|both``,
``--small-groups``, ``--small-group-size``). Exits 1 when a target is missed.
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
SMALL_TARGET = 0.2e-3
"""Seconds per call of every estimator on the small step (hot and cold)."""
EVICT_BYTES = 32 << 20
"""Written between two cold calls: far more than this machine's L2 (2 MiB per core)."""
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


def bare_grpo(view: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """The baseline: GRPO advantages of a dense ``(k, G)`` view in three numpy expressions."""
    return (view - view.mean(1, keepdims=True)) / (view.std(1, ddof=1, keepdims=True) + eps)


def time_small(fns: dict, *, calls: int, repeats: int, cold: bool) -> dict[str, float]:
    """Best-of-``repeats`` CPU seconds per call of each function (taking turns per round);
    ``cold``: the caches evicted before every call, outside the timed region."""
    junk = np.zeros(EVICT_BYTES // 8)
    best = {name: float("inf") for name in fns}
    for fn in fns.values():  # warm-up
        fn()
    for rnd in range(repeats):
        names = list(fns)
        names = names[rnd % len(names) :] + names[: rnd % len(names)]
        for name in names:
            fn, total = fns[name], 0.0
            for _ in range(calls):
                if cold:
                    junk += 1.0  # reads and writes every cache line of 32 MiB
                t0 = time.thread_time()
                fn()
                total += time.thread_time() - t0
            best[name] = min(best[name], total / calls)
    return best


def small_section(args: argparse.Namespace) -> bool:
    """The small-step table (module docstring); True when every estimator meets the target."""
    from rlvitals.estimators import AvspoState

    rewards, ids = make_step(args.small_groups, args.small_group_size)
    view = rewards.reshape(args.small_groups, args.small_group_size)
    fns = {"bare numpy grpo": lambda: bare_grpo(view)}
    for m in METHODS:
        state = AvspoState(tau_adapt=0.5) if m == "avspo" else None
        fns[m] = lambda m=m, state=state: rlvitals.estimate(m, rewards, ids, state=state)
    hot = time_small(fns, calls=args.small_calls, repeats=args.repeats, cold=False)
    cold = time_small(fns, calls=args.small_calls // 10, repeats=args.repeats, cold=True)
    print(
        f"small step: {args.small_groups} groups x G={args.small_group_size} (float32), per call, "
        f"best of {args.repeats} rounds; CPU time; target <= {SMALL_TARGET * 1e3:.1f} ms"
    )
    print(f"  {'':<16} {'hot':>9} {'x bare':>7} {'cold':>11} {'x bare':>7}")
    ok = True
    for name in fns:
        h, c = hot[name], cold[name]
        base_h, base_c = hot["bare numpy grpo"], cold["bare numpy grpo"]
        if name != "bare numpy grpo":
            ok &= max(h, c) <= SMALL_TARGET
        print(
            f"  {name:<16} {h * 1e6:7.1f} us {h / base_h:6.1f}x {c * 1e6:9.1f} us {c / base_c:6.1f}x"
        )
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["big", "small", "both"], default="both")
    ap.add_argument("--groups", type=int, default=4096)
    ap.add_argument("--group-size", type=int, default=16)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--backend", choices=["numpy", "torch", "both"], default="both")
    ap.add_argument("--small-groups", type=int, default=8)
    ap.add_argument("--small-group-size", type=int, default=8)
    ap.add_argument("--small-calls", type=int, default=200, help="hot calls per round")
    args = ap.parse_args(argv)

    ok = True
    if args.part in ("small", "both"):
        ok &= small_section(args)
    if args.part == "small":
        return 0 if ok else 1
    rewards, ids = make_step(args.groups, args.group_size)
    _, m, _ = rlvitals.estimate("avspo", rewards, ids, state={"tau_adapt": 0.5})
    print(
        f"rewards: {args.groups:,} groups x {args.group_size} (float32), ACR {m['acr']:.2f}, "
        f"avspo K {m['avspo_k']:.0f}, {m['avspo_groups_augmented']:.0f} groups augmented; "
        f"best of {args.repeats} x {args.calls} calls"
    )
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

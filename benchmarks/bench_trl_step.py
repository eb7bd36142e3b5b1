"""Share of a tiny-model TRL GRPO step spent in rlvitals: the estimator (target < 0.5%) and the
live guard's callback (target: its own cost <= 1.5 ms a step, judged in absolute time).

Trains the tiny Qwen2 of ``tests/trl_ddp_script.py`` (1 layer, hidden 16, char tokenizer; CPU)
with :class:`rlvitals.integrations.trl.RlvitalsGRPOTrainer` for ``--steps`` steps per estimator,
with :class:`RlvitalsCallback` recording the run and running the doctor every 10 steps.

Measured in the same run:
- ``estimator``: CPU time inside the estimator call, host copy included
  (``trainer.rlvitals_cpu_seconds``), per step and as a share of the CPU time of
  ``trainer.train()`` (one torch thread, so CPU time is not inflated by neighbours on a shared
  machine; the wall-time share is printed too);
- ``callback``: CPU time inside the callback's hooks (recording, the doctor) as a share;
- ``plain``: the same run with TRL's own ``GRPOTrainer`` and no callback, for reference.

Guard overhead (``--part guard``): TRL's own ``GRPOTrainer``, the same seed and data, trained
``--repeats`` times each without rlvitals, with ``RlvitalsCallback(...).attach`` at its defaults
(recording every row and every group, the live monitor with its defaults: the collapse family
every 3 steps, the catalogue every 15, all of it in the training process), alternating so that
the machine's load hits both alike. Printed: the median CPU time of the training process
and its ratio to the plain runs (target <= 1.02), the wall-time ratio, the ratios of the runs
of one round (paired: a slow spell of the machine hits both; their median, middle half and a
90% bootstrap interval of the median say how far the ratio of medians can be trusted; not the
target), the callback's own CPU
time as a share of its run (the same quantity measured inside the run, far less noisy), and that
time per step in ms and as a share of a 1 s step (issue 24's target: <= 1.5 ms, <= 0.2%: the
guard's cost judged in absolute time, as a real step of a second or more sees it).

A tiny model on CPU makes a step short, so the share is an upper bound of what a real model
sees. Run: ``python benchmarks/bench_trl_step.py`` (``--part``, ``--steps``, ``--groups``,
``--group-size``, ``--repeats``). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import warnings
from pathlib import Path

SHARE_TARGET = 0.005
"""Estimator time / training time must stay under this (issue 14; it was 1%)."""
GUARD_TARGET = 0.02
"""Issue 14's bound on how much longer the tiny run may take with the guard's callback (printed
for information: issue 24 decided the guard's cost is judged in absolute time per step, not as
a share of a 30-40 ms toy step)."""
CALLBACK_MS = 1.5
"""Issue 24's target: the callback's own CPU per step, in the training process, on the tiny
model (0.15% of a 1 s step)."""
DOCTOR_EVERY = 10
HARNESS = Path(__file__).resolve().parent.parent / "tests" / "trl_ddp_script.py"


def _harness():
    spec = importlib.util.spec_from_file_location("rlvitals_trl_harness", HARNESS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(h, tmp: Path, estimator: str | None, a: argparse.Namespace, on: str = "host") -> dict:
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    from rlvitals.integrations.trl import RlvitalsCallback, RlvitalsGRPOTrainer

    tok = h.tiny_tokenizer()
    name = f"{estimator}-{on}" if estimator else "plain"
    args = h.grpo_args(
        tmp / name,
        max_steps=a.steps,
        per_device_train_batch_size=a.groups * a.group_size,
        num_generations=a.group_size,
        max_completion_length=a.new_tokens,
        logging_steps=1,
    )
    common = dict(
        model=h.tiny_model(tok),
        reward_funcs=[h.reward_has_digit, h.reward_short],
        args=args,
        train_dataset=h.train_dataset(),
        processing_class=tok,
    )
    if estimator is None:
        trainer = GRPOTrainer(**common)
        cb = None
    else:
        cb = RlvitalsCallback(tmp / f"{name}-rec", doctor_every=DOCTOR_EVERY)
        trainer = RlvitalsGRPOTrainer(
            **common, estimator=estimator, estimator_on=on, callbacks=[cb]
        )
    trainer.remove_callback(PrinterCallback)
    cpu = time.process_time()
    trainer.train()
    cpu = time.process_time() - cpu
    runtime = trainer.state.log_history[-1]["train_runtime"]
    out = {"name": name, "runtime": runtime, "cpu": cpu, "steps": trainer.state.global_step}
    if cb is not None:
        out["estimator_s"] = trainer.rlvitals_seconds
        out["estimator_cpu"] = trainer.rlvitals_cpu_seconds
        out["callback_s"] = cb.seconds
        out["callback_cpu"] = cb.cpu_seconds
        out["errors"] = trainer.rlvitals_guard.total + cb.guard.total
    return out


GUARD_MODES = ("plain", "callback")
"""No rlvitals; ``RlvitalsCallback(...).attach`` at its defaults."""


def _guard_run(h, tmp: Path, mode: str, a: argparse.Namespace, i: int) -> dict:
    """One plain GRPOTrainer run, without rlvitals or with the guard's callback attached."""
    from transformers import PrinterCallback
    from trl import GRPOTrainer

    from rlvitals.integrations.trl import RlvitalsCallback

    tok = h.tiny_tokenizer()
    args = h.grpo_args(
        tmp / f"guard-{mode}-{i}",
        max_steps=a.steps,
        per_device_train_batch_size=a.groups * a.group_size,
        num_generations=a.group_size,
        max_completion_length=a.new_tokens,
        logging_steps=1,
    )
    trainer = GRPOTrainer(
        model=h.tiny_model(tok),
        reward_funcs=[h.reward_has_digit, h.reward_short],
        args=args,
        train_dataset=h.train_dataset(),
        processing_class=tok,
    )
    trainer.remove_callback(PrinterCallback)
    cb = None
    if mode != "plain":
        cb = RlvitalsCallback(tmp / f"guard-rec-{mode}-{i}", sinks=[]).attach(trainer)
    cpu = time.process_time()
    wall = time.perf_counter()
    trainer.train()
    out = {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}
    if cb is not None:
        out["cb_cpu"] = cb.cpu_seconds
        out["checks"] = cb.monitor.checks
        out["errors"] = cb.guard.total
    return out


def _bootstrap_median(xs: list[float], rounds: int = 2000) -> tuple[float, float]:
    """5th and 95th percentiles of the median of ``xs`` resampled with replacement (seeded)."""
    import random
    import statistics

    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(rounds))
    return medians[int(0.05 * rounds)], medians[int(0.95 * rounds) - 1]


def guard_overhead(h, a: argparse.Namespace) -> bool:
    """The guard section (module docstring); True when the callback is within the targets
    (ratio of medians and its own share; its own ms per step)."""
    import statistics

    print(
        f"guard overhead: plain GRPOTrainer, {a.steps} steps x {a.groups} groups x "
        f"G={a.group_size}, {a.repeats} runs each, alternating; CPU time of trainer.train() in "
        "the training process"
    )
    runs: dict[str, list[dict]] = {m: [] for m in GUARD_MODES}
    with tempfile.TemporaryDirectory() as d:
        _guard_run(h, Path(d), "callback", a, -1)  # warm-up: imports, the detector catalogue
        for i in range(a.repeats):
            order = GUARD_MODES[i % 2 :] + GUARD_MODES[: i % 2]
            for mode in order:
                runs[mode].append(_guard_run(h, Path(d), mode, a, i))
    base = statistics.median(r["cpu"] for r in runs["plain"])
    base_wall = statistics.median(r["wall"] for r in runs["plain"])
    print(
        f"  {'plain':<11} {base:6.2f} s CPU, {base_wall:6.2f} s wall (runs: "
        + ", ".join(f"{r['cpu']:.2f}" for r in runs["plain"])
        + ")"
    )
    ok = True
    for mode in GUARD_MODES[1:]:
        rs = runs[mode]
        cpu = statistics.median(r["cpu"] for r in rs)
        wall = statistics.median(r["wall"] for r in rs)
        share = statistics.median(r["cb_cpu"] / r["cpu"] for r in rs)
        per_step = statistics.median(r["cb_cpu"] for r in rs) / a.steps
        ratio = cpu / base
        # the same round's runs paired: a slow spell of the machine hits both of a pair
        paired = sorted(r["cpu"] / p["cpu"] for r, p in zip(rs, runs["plain"]))
        quarter = len(paired) // 4
        low, high = _bootstrap_median(paired)
        print(
            f"  {mode:<11} {cpu:6.2f} s CPU, {wall:6.2f} s wall (runs: "
            + ", ".join(f"{r['cpu']:.2f}" for r in rs)
            + f"): ratio of medians {ratio:.3f} CPU, {wall / base_wall:.3f} wall (paired by "
            f"round: median {statistics.median(paired):.3f}, middle half {paired[quarter]:.3f}-"
            f"{paired[-1 - quarter]:.3f}, 90% bootstrap interval of the median {low:.3f}-"
            f"{high:.3f}); its own CPU "
            f"{100 * share:.2f}% of the run ({1000 * per_step:.2f} ms/step, "
            f"{100 * per_step:.3f}% of a 1 s step); "
            f"{rs[0]['checks']} checks per run, hook errors {sum(r['errors'] for r in rs)}"
        )
        toy = ratio <= 1 + GUARD_TARGET and share < GUARD_TARGET
        ok = per_step <= CALLBACK_MS / 1000
    print(
        f"  target (callback at its defaults): own cost <= {CALLBACK_MS} ms a step "
        f"({CALLBACK_MS / 10:.2f}% of a 1 s step): {'met' if ok else 'NOT met'}; "
        f"for information, within {100 * GUARD_TARGET:.0f}% of this toy step (ratio and own "
        f"share): {'yes' if toy else 'no'}"
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--part", choices=("all", "estimator", "guard"), default="all")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--groups", type=int, default=8, help="prompts per step")
    p.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--new-tokens", type=int, default=16, help="max_completion_length")
    p.add_argument("--repeats", type=int, default=5, help="runs with and without the guard")
    a = p.parse_args(argv)
    h = _harness()
    h.set_offline_env()
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import logging

    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("rlvitals").setLevel(logging.ERROR)  # the guard's alerts are not measured
    if a.part == "guard":
        return 0 if guard_overhead(h, a) else 1
    print(
        f"tiny Qwen2 GRPO on CPU: {a.steps} steps x {a.groups} groups x G={a.group_size}, "
        f"{a.new_tokens} new tokens; doctor every {DOCTOR_EVERY} steps"
    )
    failed = False
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        plain = _run(h, tmp, None, a)
        print(
            f"plain GRPOTrainer:         {plain['runtime']:6.2f} s "
            f"({1000 * plain['cpu'] / plain['steps']:.0f} ms CPU/step)"
        )
        for est, on in (("grpo", "host"), ("avspo", "host"), ("avspo", "device")):
            r = _run(h, tmp, est, a, on)
            share = r["estimator_cpu"] / r["cpu"]
            ok = share < SHARE_TARGET
            if on == "host":  # the default; "device" is printed for comparison
                failed |= not ok
            print(
                f"rlvitals {est:<6} on {on:<6}: {r['runtime']:6.2f} s; estimator "
                f"{1000 * r['estimator_cpu'] / r['steps']:.2f} ms CPU/step = {100 * share:.2f}% "
                f"of CPU (wall {100 * r['estimator_s'] / r['runtime']:.2f}%; target < "
                f"{100 * SHARE_TARGET:.1f}%: {'ok' if ok else 'over'}); callback "
                f"{1000 * r['callback_cpu'] / r['steps']:.2f} ms CPU/step = "
                f"{100 * r['callback_cpu'] / r['cpu']:.2f}%; hook errors {r['errors']}"
            )
    if a.part == "all":
        failed |= not guard_overhead(h, a)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

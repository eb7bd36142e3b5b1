"""Share of a tiny-model TRL GRPO step spent in the rlvitals estimator (target < 1%).

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

A tiny model on CPU makes a step short, so the share is an upper bound of what a real model
sees. Run: ``python benchmarks/bench_trl_step.py`` (``--steps``, ``--groups``, ``--group-size``).
Exits 1 when an estimator's share reaches the target.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
import warnings
from pathlib import Path

SHARE_TARGET = 0.01
"""Estimator time / training time must stay under this."""
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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--groups", type=int, default=8, help="prompts per step")
    p.add_argument("--group-size", type=int, default=8, help="completions per prompt (G)")
    p.add_argument("--new-tokens", type=int, default=16, help="max_completion_length")
    a = p.parse_args(argv)
    h = _harness()
    h.set_offline_env()
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import transformers

    transformers.logging.set_verbosity_error()
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
                f"{100 * SHARE_TARGET:.0f}%: {'ok' if ok else 'over'}); callback "
                f"{1000 * r['callback_cpu'] / r['steps']:.2f} ms CPU/step = "
                f"{100 * r['callback_cpu'] / r['cpu']:.2f}%; hook errors {r['errors']}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

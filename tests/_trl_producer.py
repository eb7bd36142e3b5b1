"""Real TRL producers for the importer tests (not a test module; loaded by the test files).

``real_grpo_run(out_dir)`` trains a tiny Qwen2 (built from a config, character-level tokenizer)
with TRL's real ``GRPOTrainer`` on CPU for a few steps with ``logging_steps=2``, an eval set and
``log_completions=True``, then saves ``trainer_state.json`` with ``Trainer.save_state()`` (which
calls ``TrainerState.save_to_json``). TRL 1.16 itself writes the completions tables to
``<output_dir>/completions/completions_<step:05d>.parquet`` on every log call.

``synthetic_state(path, n_steps)`` writes a long GRPO-shaped log with the real writer,
``transformers.TrainerState.save_to_json``.

The test files share one run per process through :func:`shared_grpo_run`. The tiny tokenizer,
model and prompts are the TRL harness's (tests/trl_ddp_script.py, loaded by tests/conftest.py).
"""

from __future__ import annotations

import atexit
import math
import os
import random
import shutil
import tempfile
from pathlib import Path

import rlvitals_tests_trl_harness as H  # loaded by conftest.py

__all__ = ["ARGS_NAME", "GRPO", "real_grpo_run", "shared_grpo_run", "synthetic_state"]

# The run's configuration, which the tests compare the importer's output with.
GRPO = {
    "max_steps": 6,
    "logging_steps": 2,
    "eval_steps": 3,
    "num_generations": 4,
    "per_device_train_batch_size": 8,  # 2 prompts x 4 generations per step
    "per_device_eval_batch_size": 4,
    "max_completion_length": 6,
    "beta": 0.04,
    "scale_rewards": "none",
    "loss_type": "dr_grpo",
}

ARGS_NAME = "training_args.json"
_SHARED: dict[str, Path] = {}


# Own names: TRL names the reward columns and metrics after the functions (tests read them).
def _reward_has_digit(completions, **kwargs):
    return H.reward_has_digit(completions)


def _reward_short(completions, **kwargs):
    return H.reward_short(completions)


def real_grpo_run(out_dir: Path) -> Path:
    """Train a tiny GRPO run into ``out_dir`` and return it (holds ``trainer_state.json``)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    tok = H.tiny_tokenizer()
    model = H.tiny_model(tok, seed=0)
    # With beta > 0 TRL loads the reference model from the policy's path: save it first.
    model_dir = Path(out_dir).parent / "tiny-qwen2"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    prompts = H.PROMPTS
    train = Dataset.from_dict({"prompt": prompts})
    evald = Dataset.from_dict({"prompt": prompts[:2]})
    args = GRPOConfig(
        output_dir=str(out_dir),
        max_steps=GRPO["max_steps"],
        logging_steps=GRPO["logging_steps"],
        eval_strategy="steps",
        eval_steps=GRPO["eval_steps"],
        per_device_train_batch_size=GRPO["per_device_train_batch_size"],
        per_device_eval_batch_size=GRPO["per_device_eval_batch_size"],
        num_generations=GRPO["num_generations"],
        max_completion_length=GRPO["max_completion_length"],
        beta=GRPO["beta"],
        scale_rewards=GRPO["scale_rewards"],
        loss_type=GRPO["loss_type"],
        log_completions=True,
        num_completions_to_print=0,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        bf16=False,
        use_cpu=True,
        activation_checkpointing=False,  # transformers 5 name of gradient_checkpointing
        dataloader_num_workers=0,
        seed=0,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=[_reward_has_digit, _reward_short],
        args=args,
        train_dataset=train,
        eval_dataset=evald,
        processing_class=tok,
    )
    # A model this small runs fastest on one thread (and CI's 2 cores are shared).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trainer.train()
    finally:
        torch.set_num_threads(threads)
    trainer.save_state()  # -> TrainerState.save_to_json(output_dir/trainer_state.json)
    # The GRPO arguments as a readable JSON file, written by transformers' own serialiser, kept
    # outside output_dir so that tests choose whether the importer can see it.
    (Path(out_dir).parent / ARGS_NAME).write_text(args.to_json_string(), encoding="utf-8")
    return Path(out_dir)


def shared_grpo_run() -> Path:
    """One real GRPO run per process, in a temporary directory the tests must not modify."""
    if "run" not in _SHARED:
        tmp = tempfile.mkdtemp(prefix="rlvitals-trl-")
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        out = Path(tmp) / "grpo-out"
        _SHARED["run"] = real_grpo_run(out)
    return _SHARED["run"]


# A realistic subset of what TRL 1.16's GRPOTrainer logs per training row (the real run above
# logs ~28 keys; the writer's indent=2 path is pure Python, so the long log keeps it shorter).
_TRAIN_KEYS = (
    "clip_ratio/region_mean",
    "completions/clipped_ratio",
    "completions/mean_length",
    "entropy",
    "frac_reward_zero_std",
    "kl",
    "reward_std",
    "rewards/accuracy/mean",
)


def synthetic_state(path: Path, n_steps: int, *, eval_every: int = 500, seed: int = 0) -> dict:
    """Write an ``n_steps`` GRPO log with ``TrainerState.save_to_json``; return what was written.

    Logs every step; an eval row every ``eval_every`` steps; ``grad_norm`` is NaN on every
    1000th step (bare ``NaN`` in the JSON); a final summary row. Returns
    ``{"reward": [per-step reward], "nan_steps": [...], "eval_steps": [...]}``.
    """
    from transformers import TrainerState

    rng = random.Random(seed)
    rows: list[dict] = []
    rewards, nan_steps, eval_steps = [], [], []
    for step in range(1, n_steps + 1):
        reward = min(1.0, 0.1 + step / n_steps + rng.uniform(-0.05, 0.05))
        row = {k: rng.random() for k in _TRAIN_KEYS}
        row.update(
            reward=reward,
            epoch=step / n_steps,
            step=step,
            loss=rng.uniform(-0.1, 0.1),
            grad_norm=rng.uniform(0.1, 2.0),
            learning_rate=1e-6 * (1 - step / n_steps),
            num_tokens=float(step * 4096),
            step_time=rng.uniform(0.5, 1.5),
        )
        if step % 1000 == 0:
            row["grad_norm"] = math.nan
            nan_steps.append(step)
        rewards.append(reward)
        rows.append(row)
        if step % eval_every == 0:
            rows.append(
                {
                    "eval_loss": 0.1,
                    "eval_reward": reward / 2,
                    "eval_runtime": 3.2,
                    "eval_samples_per_second": 10.0,
                    "eval_steps_per_second": 1.0,
                    "epoch": step / n_steps,
                    "step": step,
                }
            )
            eval_steps.append(step)
    rows.append(
        {
            "epoch": 1.0,
            "step": n_steps,
            "total_flos": 0.0,
            "train_loss": 0.0123,
            "train_runtime": 5000.0,
            "train_samples_per_second": 3.2,
            "train_steps_per_second": 4.0,
        }
    )
    state = TrainerState(
        epoch=1.0,
        global_step=n_steps,
        max_steps=n_steps,
        logging_steps=1,
        eval_steps=eval_every,
        save_steps=500,
        train_batch_size=8,
        num_train_epochs=1,
        log_history=rows,
    )
    state.save_to_json(str(path))
    return {"reward": rewards, "nan_steps": nan_steps, "eval_steps": eval_steps}

"""Tiny-model harness for the TRL integration tests, and the ``torchrun`` target of the DDP test.

Importing this module is cheap and has no side effects (pytest collects it for doctests); TRL,
transformers and torch are imported inside the functions.

As a script (``torchrun --nproc_per_node 2 tests/trl_ddp_script.py OUT_DIR ESTIMATOR``) it trains
a tiny Qwen2 with :class:`rlvitals.integrations.trl.RlvitalsGRPOTrainer` and an
:class:`RlvitalsCallback` (recording into ``OUT_DIR/rec``) for a few steps on CPU (gloo) and
writes, per rank, ``OUT_DIR/rank<r>.json`` holding for every generation batch the global rewards
the trainer saw, the local advantages it trained on, its process slice, the estimator metrics and
the estimator state after the step. The test recomputes every step in a single process and
compares. ``python tests/trl_ddp_script.py estimate OUT_DIR METHODS`` (with ``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set) is the plain gloo worker of
``tests/test_distributed.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 +=?"
PROMPTS = [f"{a}+{b}=" for a in range(6) for b in range(4)]


def set_offline_env() -> None:
    """No model hub, no telemetry, no tokenizer threads fighting for 2 cores."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_MODE", "disabled")


def tiny_tokenizer():
    """Character-level tokenizer over :data:`ALPHABET` wrapped in ``PreTrainedTokenizerFast``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def one_thread_tokenizer():
    """Generator for a module-scoped test fixture: the tiny tokenizer, with torch pinned to one
    thread while the module's tests run (2 shared CI cores), restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_tokenizer()
    torch.set_num_threads(threads)


def tiny_model(tok, seed: int = 0):
    """A 1-layer Qwen2 with hidden size 16, built from a config (no download)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tok),
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            max_position_embeddings=64,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.eos_token_id,
            tie_word_embeddings=True,
        )
    )
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    return model


def reward_has_digit(completions, **kwargs) -> list[float]:
    """1 when the completion holds a digit: often all-0 or all-1 within a group (collapse)."""
    return [float(any(c.isdigit() for c in text)) for text in completions]


def reward_short(completions, **kwargs) -> list[float]:
    """1 for completions shorter than 4 characters."""
    return [1.0 if len(text) < 4 else 0.0 for text in completions]


def reward_prompt_parity(prompts, **kwargs) -> list[float]:
    """Depends on the prompt only: every group is collapsed (half at 1, half at 0)."""
    return [float(int(p[0]) % 2 == 0) for p in prompts]


def grpo_args(out_dir: str | Path, **overrides: Any):
    """A ``GRPOConfig`` for CPU: 2 prompts x 4 generations per device step, 6 new tokens."""
    from trl import GRPOConfig

    kw: dict[str, Any] = dict(
        output_dir=str(out_dir),
        max_steps=2,
        logging_steps=1,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=6,
        learning_rate=1e-3,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        bf16=False,
        use_cpu=True,
        gradient_checkpointing=False,
        dataloader_num_workers=0,
        seed=0,
        disable_tqdm=True,
        ddp_find_unused_parameters=False,
    )
    kw.update(overrides)
    return GRPOConfig(**kw)


def train_dataset(n: int | None = None):
    from datasets import Dataset

    return Dataset.from_dict({"prompt": PROMPTS[: n or len(PROMPTS)]})


DDP_STEPS = 3
"""Training steps of the torchrun run."""


def torchrun(out_dir: str | Path, estimator: str) -> list[list[dict[str, Any]]]:
    """Run this script under ``torchrun --nproc_per_node 2`` (gloo, 127.0.0.1, a free port) with
    ``estimator``; the records of rank 0 and rank 1. Fails with the processes' output tail."""
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TOKENIZERS_PARALLELISM="false",
    )
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd += ["--master_addr", "127.0.0.1", "--master_port", str(port), __file__]
    proc = subprocess.run(
        [*cmd, str(out_dir), estimator], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return [json.loads(Path(out_dir, f"rank{r}.json").read_text()) for r in range(2)]


def _main(out_dir: str, estimator: str) -> None:
    """One tiny GRPO run; every group of G=8 straddles the two ranks (4 rows each)."""
    set_offline_env()
    import torch

    from rlvitals.integrations.trl import RlvitalsCallback, RlvitalsGRPOTrainer

    torch.set_num_threads(1)
    rank = int(os.environ.get("RANK", "0"))
    records: list[dict[str, Any]] = []

    class Dumping(RlvitalsGRPOTrainer):
        def _rlvitals_after_estimate(self, info: dict[str, Any]) -> None:
            super()._rlvitals_after_estimate(info)
            dist = torch.distributed
            records.append(
                {
                    "rewards": info["rewards"].tolist(),
                    "local_advantages": info["local_advantages"].tolist(),
                    "slice": [info["slice"].start, info["slice"].stop],
                    "metrics": info["metrics"],
                    "state": info["state"],
                    "backend": dist.get_backend() if dist.is_initialized() else None,
                    "world_size": self.accelerator.num_processes,
                    # keyed estimators: the prompt ids the groups were filed under, and the
                    # sampler that drew them (pg_grpo: the posterior's)
                    "keys": list(getattr(self.rlvitals_config, "keys", None) or ()),
                    "sampler": type(self.rlvitals_sampler).__name__,
                }
            )

    tok = tiny_tokenizer()
    args = grpo_args(out_dir, max_steps=DDP_STEPS, per_device_train_batch_size=4, num_generations=8)
    trainer = Dumping(
        model=tiny_model(tok),
        reward_funcs=[reward_has_digit, reward_short],
        args=args,
        train_dataset=train_dataset(),
        processing_class=tok,
        estimator=estimator,
        estimator_config=DDP_ESTIMATOR_CONFIG.get(estimator),
        # Records on rank 0 only; the doctor at steps 2 and 3 makes every rank join the halt
        # agreement (an all_reduce): a rank left out would hang the run.
        callbacks=[RlvitalsCallback(Path(out_dir, "rec"), doctor_every=2, halt_on="critical")],
    )
    trainer.train()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(records))


DDP_ESTIMATOR_CONFIG = {
    "avspo": {"tau_adapt0": 0.1, "r_max": 2.0, "flat": "stratify"},
    "pg_grpo": {"r_max": 2.0},
}
"""Estimator config of the torchrun run: AVSPO with the lowest threshold, so it triggers; the
range of the two 0/1 reward functions TRL sums; groups collapsed at 1 (inside that range)
augmented too, so a step augments groups whichever value its groups collapse at. PG-GRPO with
that range, selecting each step's prompt from its posterior."""


# -- the plain gloo worker of tests/test_distributed.py -----------------------------------------


def split_steps(seed: int = 0) -> list[dict[str, Any]]:
    """Data-parallel steps whose groups straddle the rank boundary, with uneven rank sizes.

    Each step: ``rewards`` and ``group_ids`` of the global batch (rank order) and ``counts``
    (rows per rank). Binary rewards with many collapsed groups so that AVSPO triggers, one
    partial-credit step, one step with NaN (unscorable) rewards, one where rank 1 holds nothing.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    steps = []
    for i in range(6):
        g, k = 8, 5
        p = rng.choice([0.0, 1.0, 0.5], size=k, p=[0.3, 0.3, 0.4])
        r = (rng.random((k, g)) < p[:, None]).astype(np.float64).reshape(-1)
        if i == 2:
            r = np.round(rng.random(k * g) * 4) / 4  # partial credit
        if i == 3:
            r[[3, 17, 18]] = np.nan
        ids = np.repeat(np.arange(k) * 7 + 3, g)  # non-contiguous id values
        n = r.shape[0]
        cut = n if i == 4 else int(rng.integers(1, n - 1))
        steps.append({"rewards": r.tolist(), "group_ids": ids.tolist(), "counts": [cut, n - cut]})
    return steps


def _estimate_worker(out_dir: str, methods: str) -> None:
    """Run every method over :func:`split_steps` on this rank's rows; dump what it got back."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    out = {m: _estimate_steps(m, rank) for m in methods.split(",")}
    dist.destroy_process_group()
    Path(out_dir, f"estimate_rank{rank}.json").write_text(json.dumps(out))


def _estimate_steps(method: str, rank: int) -> list[dict[str, Any]]:
    import numpy as np
    import torch

    from rlvitals.integrations.distributed import estimate_distributed

    state = None
    records = []
    for i, step in enumerate(split_steps()):
        sl = slice(sum(step["counts"][:rank]), sum(step["counts"][: rank + 1]))
        rewards = np.asarray(step["rewards"])[sl]
        ids = np.asarray(step["group_ids"])[sl]
        if i % 2:  # torch float32 input on odd steps, numpy float64 on even ones
            rewards, ids = torch.tensor(rewards, dtype=torch.float32), torch.tensor(ids)
        adv, metrics, state = estimate_distributed(method, rewards, ids, state=state)
        records.append(
            {
                "advantages": np.asarray(adv.tolist(), dtype=np.float64).tolist(),
                "kind": type(adv).__module__.split(".")[0],
                "dtype": str(adv.dtype),
                "metrics": metrics,
                "state": None if state is None else state.to_dict(),
            }
        )
    return records


if __name__ == "__main__":
    if sys.argv[1] == "estimate":
        _estimate_worker(sys.argv[2], sys.argv[3])
    else:
        _main(sys.argv[1], sys.argv[2])

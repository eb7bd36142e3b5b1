"""Run TRL 1.16's real ``AsyncGRPOTrainer`` on CPU, for tests/test_trl_integration.py.

The trainer's training loop (its dataloader, collator, loss, optimizer step, logging and
callbacks) is TRL's, unchanged. What a CPU test cannot have is replaced, through the injection
points TRL itself offers or at the one place a CUDA kernel is loaded:

- ``rollout_worker``: :class:`StubWorker` (TRL's ``RolloutWorkerProtocol``) samples random short
  completions instead of asking a vLLM server, and scores every group with TRL's own
  ``_AsyncRolloutLoop._score_group``, so the rewards and advantages (population std, eps 1e-8)
  are exactly what TRL computes;
- ``weight_transfer``: :class:`NoTransfer`, a no-op (TRL's docstring names "a no-op stub in
  tests" as its use);
- the FlashAttention-3 varlen kernel behind TRL's tree attention (``packing._flash_attn``, a Hub
  kernel, CUDA only) by :func:`varlen_attention`, the same causal attention per packed segment
  in plain torch; and ``get_peak_flops_per_device`` (a CUDA device query, for MFU logging).

Importing this module has no side effects; :func:`patch_for_cpu` applies the two replacements.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from pathlib import Path
from typing import Any

__all__ = ["NoTransfer", "StubWorker", "async_trainer", "patch_for_cpu", "varlen_attention"]


def varlen_attention(q, k, v, cu_q, cu_k, max_q, max_k, softmax_scale=None, causal=True, **kw):
    """``flash_attn_varlen_func`` in torch: causal attention within each packed segment,
    bottom-right aligned as FlashAttention aligns it when queries are fewer than keys."""
    import torch

    out = torch.empty_like(q)
    hq, hk = q.shape[1], k.shape[1]
    for i in range(cu_q.shape[0] - 1):
        qs, qe, ks, ke = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        qi, ki, vi = q[qs:qe].transpose(0, 1), k[ks:ke].transpose(0, 1), v[ks:ke].transpose(0, 1)
        if hk != hq:
            ki, vi = ki.repeat_interleave(hq // hk, 0), vi.repeat_interleave(hq // hk, 0)
        lq, lk = qi.shape[1], ki.shape[1]
        mask = torch.ones(lq, lk, dtype=torch.bool).tril(diagonal=lk - lq) if causal else None
        o = torch.nn.functional.scaled_dot_product_attention(
            qi, ki, vi, attn_mask=mask, scale=softmax_scale
        )
        out[qs:qe] = o.transpose(0, 1)
    return out


class _Kernel:
    flash_attn_varlen_func = staticmethod(varlen_attention)


def patch_for_cpu(monkeypatch) -> None:
    """Replace the CUDA-only pieces (module docstring) for the duration of a test."""
    from trl.experimental.async_grpo import async_grpo_trainer, packing

    monkeypatch.setattr(packing, "_flash_attn", lambda: _Kernel)
    monkeypatch.setattr(async_grpo_trainer, "get_peak_flops_per_device", lambda acc, dtype: None)


class NoTransfer:
    """TRL's ``WeightTransferProtocol``, doing nothing (there is no vLLM server)."""

    def init_weight_transfer(self) -> None: ...

    def pause(self) -> None: ...

    def send_weights(self, iterator) -> None:
        for _ in iterator:
            pass

    def resume(self) -> None: ...

    def destroy(self) -> None: ...


class StubWorker:
    """TRL's ``RolloutWorkerProtocol``: random completions, scored by TRL's own code.

    Args:
        reward_funcs: TRL reward functions ``(prompts, completions, **kw) -> list[float]``.
        tok: the tokenizer.
        prompts: prompts, cycled.
        group_size: completions per prompt (``num_generations``).

    Attributes:
        groups: the scored groups so far, ``(group_id, rewards, advantages)``.
    """

    def __init__(self, reward_funcs: list, tok: Any, prompts: list[str], group_size: int):
        from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

        self.rollout_buffer: queue.Queue = queue.Queue(maxsize=64)
        self.metrics_queue: queue.Queue = queue.Queue()
        self.version = 0
        scorer = object.__new__(_AsyncRolloutLoop)  # only _score_group is used
        scorer.reward_funcs = list(reward_funcs)
        scorer.reward_func_names = [f.__name__ for f in reward_funcs]
        scorer._env_reward_types = []
        scorer._provides_rollout_reward = False
        self.scorer, self.tok, self.prompts, self.group_size = scorer, tok, prompts, group_size
        self.groups: list[tuple[int, list[float], list[float]]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="stub-rollouts", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def update_model_version(self, version: int) -> None:
        self.version = version

    def check_health(self, stale_after_s: float) -> None: ...

    def _run(self) -> None:
        import numpy as np
        from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence

        rng = np.random.default_rng(0)
        gid = 0
        while not self._stop.is_set():
            prompt = self.prompts[gid % len(self.prompts)]
            p_ids = self.tok(prompt)["input_ids"]
            texts, ids, seqs = [], [], []
            for j in range(self.group_size):
                c = [int(x) for x in rng.integers(3, len(self.tok), size=int(rng.integers(2, 6)))]
                texts.append(self.tok.decode(c))
                ids.append(c)
                mask = [0] * len(p_ids) + [1] * len(c)
                logp = [0.0] * len(p_ids) + [-3.6] * len(c)
                seqs.append([TrainingSequence(p_ids + c, mask, logp, (gid, j))])
            group = RolloutGroup(
                prompts=[prompt] * self.group_size,
                reward_kwargs={},
                completions=texts,
                completions_ids=ids,
                completions_sequences=seqs,
                tool_call_counts=[0] * self.group_size,
                tool_failure_counts=[0] * self.group_size,
                model_version=self.version,
                group_id=gid,
                env_rewards=[None] * self.group_size,
                rollout_rewards=[None] * self.group_size,
            )
            samples = asyncio.run(self.scorer._score_group(group))
            self.groups.append(
                (gid, [s.metrics["reward"] for s in samples], [s.advantage for s in samples])
            )
            for s in samples:
                while not self._stop.is_set():
                    try:
                        self.rollout_buffer.put(s, timeout=0.1)
                        break
                    except queue.Full:
                        pass
            gid += 1


def async_trainer(tmp: Path, tok: Any, model: Any, reward_funcs: list, *, callbacks=None, **args):
    """A real ``AsyncGRPOTrainer`` over the tiny model (saved to ``tmp/model``), G = 4."""
    import rlvitals_tests_trl_harness as H  # loaded by tests/conftest.py
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

    model_dir = tmp / "model"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    kw: dict[str, Any] = dict(
        output_dir=str(tmp / "out"),
        max_steps=10,
        per_device_train_batch_size=16,
        num_generations=4,
        token_budget=0,  # fixed-count micro-batches: no vLLM server to ask for max_model_len
        max_staleness=10_000,
        report_to="none",
        logging_steps=1,
        use_cpu=True,
        bf16=False,
        dtype="float32",
        max_completion_length=6,
        learning_rate=1e-3,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    kw.update(args)
    worker = StubWorker(reward_funcs, tok, H.PROMPTS, kw["num_generations"])
    trainer = AsyncGRPOTrainer(
        model=str(model_dir),
        reward_funcs=reward_funcs,
        args=AsyncGRPOConfig(**kw),
        train_dataset=H.train_dataset(),
        processing_class=tok,
        rollout_worker=worker,
        weight_transfer=NoTransfer(),
        callbacks=callbacks,
    )
    return trainer, worker

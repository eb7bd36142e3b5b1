"""What rlvitals reads from one TRL generation batch, and how it maps to groups.

Facts about TRL 1.16's ``GRPOTrainer`` this relies on (``_generate_and_score_completions``):

- ``_calculate_rewards`` returns ``rewards_per_func`` ``(B, F)`` already gathered over every
  process (``accelerate.utils.gather``), in process order, so every rank sees the global batch.
- Groups are the consecutive runs of ``num_generations`` rows of that global batch
  (``num_generations_eval`` in evaluation); TRL normalises with ``view(-1, G)``.
- With ``multi_objective_aggregation="sum_then_normalize"`` the reward of a completion is the
  weighted ``nansum`` over reward functions, NaN when every function returned None.
- This process trains on rows ``process_index * n_local : (process_index + 1) * n_local``.
- After scoring, TRL appends the global prompts and advantages to its ``_logs`` deques.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from rlvitals._text import prompt_id

__all__ = ["GroupBatch", "combined_rewards", "group_ids", "group_prompt_ids", "process_slice"]


@dataclass
class GroupBatch:
    """One generation batch, global over processes, as a recording wants it.

    Attributes:
        step: the first optimizer step trained on this batch (``global_step + 1``).
        mode: ``"train"`` or ``"eval"``.
        rewards: ``(n,)`` float32 tensor, combined reward per completion, NaN = unscorable.
        group_ids: ``(n,)`` int64 (tensor or numpy array), ``row // G``.
        group_size: G.
        prompts: ``(k,)`` prompt ids per group, or None.
        advantages: ``(n,)`` the advantages the trainer uses (global), or None.
        metrics: the estimator's metrics, empty when TRL's own advantages were used.
    """

    step: int
    mode: str
    rewards: Any
    group_ids: Any
    group_size: int
    prompts: list[str] | None = None
    advantages: Any = None
    metrics: dict[str, float] | None = None


def combined_rewards(rewards_per_func: Any, weights: Any) -> Any:
    """``(B, F)`` rewards per function → ``(B,)`` weighted sum, NaN where every function gave None."""
    import torch

    w = weights.to(device=rewards_per_func.device, dtype=rewards_per_func.dtype)
    rewards = (rewards_per_func * w.unsqueeze(0)).nansum(dim=1)
    unscorable = torch.isnan(rewards_per_func).all(dim=1)
    return rewards.masked_fill(unscorable, float("nan"))


def process_slice(process_index: int, n_local: int) -> slice:
    """Rows of the global batch this process trains on.

    >>> process_slice(1, 8)
    slice(8, 16, None)
    """
    return slice(process_index * n_local, (process_index + 1) * n_local)


def group_prompt_ids(trainer: Any, n_total: int, group_size: int) -> list[str] | None:
    """Prompt id of every group, read from the tail of TRL's ``_logs["prompt"]`` deque."""
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, dict) or "prompt" not in logs or len(logs["prompt"]) < n_total:
        return None
    dq = logs["prompt"]
    first = len(dq) - n_total  # a deque indexes near its ends in O(1): read one row per group
    return [_prompt_id(dq[first + i]) for i in range(0, n_total, group_size)]


def global_advantages_from_logs(trainer: Any, n_total: int) -> list[float] | None:
    """TRL's global advantages of the last batch, from the tail of ``_logs["advantages"]``."""
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, dict) or len(logs.get("advantages", ())) < n_total:
        return None
    return list(logs["advantages"])[-n_total:]


def replace_logged_advantages(trainer: Any, values: list[float]) -> None:
    """Make TRL's completions table show the advantages actually trained on."""
    logs = getattr(trainer, "_logs", None)
    if not isinstance(logs, dict) or len(logs.get("advantages", ())) < len(values):
        return
    dq = logs["advantages"]
    for _ in range(len(values)):
        dq.pop()
    dq.extend(values)


def _prompt_id(prompt: Any) -> str:
    """:func:`rlvitals._text.prompt_id`, remembered for text prompts (a run samples the same
    prompts again and again; chat prompts, lists of messages, are hashed each time)."""
    return _text_prompt_id(prompt) if type(prompt) is str else prompt_id(prompt)


_text_prompt_id = functools.lru_cache(maxsize=1 << 14)(prompt_id)


@functools.lru_cache(maxsize=16)
def group_ids(n_total: int, group_size: int) -> Any:
    """``row // G`` for a batch of ``n_total`` rows (a read-only int64 array, made once per
    shape: TRL's groups are consecutive runs of G rows)."""
    import numpy as np

    ids = np.arange(n_total, dtype=np.int64) // group_size
    ids.flags.writeable = False
    return ids

"""Read a plain ``GRPOTrainer``'s scored batch without changing what it computes.

:func:`install_tap` wraps one trainer instance's ``_calculate_rewards`` (to keep the rewards of
each reward function) and ``_generate_and_score_completions`` (to hand the batch, TRL's own
advantages included, to the callback once it is scored). Used by
:meth:`~rlvitals.integrations.trl.RlvitalsCallback.attach`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals.integrations.trl._batch import (
    GroupBatch,
    combined_rewards,
    global_advantages_from_logs,
    group_ids,
    group_prompt_ids,
)

__all__ = ["install_tap"]


def install_tap(trainer: Any, callback: Any) -> None:
    """Wrap ``trainer``'s ``_calculate_rewards`` and ``_generate_and_score_completions`` so that
    every scored training batch reaches ``callback`` (an :class:`RlvitalsCallback`)."""
    if getattr(trainer, "_rlvitals_tapped", False):
        return
    calc = trainer._calculate_rewards
    score = trainer._generate_and_score_completions
    box: dict[str, Any] = {}

    def calculate_rewards(*args: Any, **kwargs: Any) -> Any:
        rewards_per_func = calc(*args, **kwargs)
        box["rewards_per_func"] = rewards_per_func
        return rewards_per_func

    def generate_and_score(inputs: Any) -> Any:
        box.clear()
        output = score(inputs)
        # timed as the callback's own, reading the batch included; failures contained there
        callback._timed("recording groups", _tap_batch, trainer, box, callback)
        return output

    trainer._calculate_rewards = calculate_rewards
    trainer._generate_and_score_completions = generate_and_score
    trainer._rlvitals_tapped = True


def _tap_batch(trainer: Any, box: dict[str, Any], callback: Any) -> None:
    rewards_per_func = box.get("rewards_per_func")
    if rewards_per_func is None:
        return
    if not trainer.model.training or not callback.record_groups or not callback._is_main:
        return  # what rlvitals_groups would drop (evaluation batches): nothing to compute
    rewards = combined_rewards(rewards_per_func, trainer.reward_weights)
    n = int(rewards.shape[0])
    g = trainer.num_generations
    adv = global_advantages_from_logs(trainer, n)
    callback._groups(
        GroupBatch(
            step=int(trainer.state.global_step) + 1,
            mode="train",
            rewards=rewards,
            group_ids=group_ids(n, g),
            group_size=g,
            prompts=group_prompt_ids(trainer, n, g),
            advantages=None if adv is None else np.array(adv, dtype=np.float64),
        )
    )

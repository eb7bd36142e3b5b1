"""PG-GRPO's selection on TRL's train dataloader: each step's prompts drawn by ``P(mixed)``.

``RlvitalsGRPOTrainer(..., estimator="pg_grpo")`` (``select=True``, the default) replaces the
``RepeatSampler`` of TRL 1.16's ``GRPOTrainer._get_train_sampler`` with a
:class:`PosteriorSampler` that draws from the estimator's live posterior
(:func:`rlvitals.estimators.pg_grpo.selection_weights`). Under data parallelism every rank
computes the advantages, and so the posterior, from the same gathered rewards and prompt keys
(:meth:`RlvitalsGRPOMixin._rlvitals_set_keys`), and draws with the same seed, so every rank's
sampler yields the same global batch, which accelerate splits as it splits TRL's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlvitals.integrations.trl._batch import _prompt_id

__all__ = ["PosteriorSampler", "posterior_sampler"]


class PosteriorSampler(torch.utils.data.Sampler):
    """Draws each step's prompts with probability ``q`` from ``pg_grpo``'s posterior
    (:func:`rlvitals.estimators.pg_grpo.selection_weights`: ``q ∝ eps + (1 - eps) P(mixed)``),
    in the order TRL's ``RepeatSampler`` yields them.

    A drop-in for what ``GRPOTrainer._get_train_sampler`` returns in TRL 1.16
    (``trl/trainer/grpo_trainer.py``; ``RepeatSampler`` in ``trl/trainer/utils.py``): it yields
    dataset indices, each of a step's ``batch_size`` distinct prompts ``group_size`` times in a
    row, the block ``repeat_count`` times, and has the same length per epoch. Unlike
    ``RepeatSampler`` it is lazy: a step's prompts are drawn (without replacement, numpy's
    ``Generator.choice``) when the dataloader asks for them, from the estimator state of that
    moment (``state_of()``). The dataloader fetches one batch ahead, so the posterior a step
    is drawn from lacks the last step's rewards. On resume from a checkpoint the posterior is
    the saved one but the draws start a new epoch's stream: the prompts after a resume are not
    those of an uninterrupted run.

    Args:
        prompts: the dataset's prompts ``(N,)``; keys are the recording's prompt ids of each
            (the SHA-1 prefix of ``repr(prompt)``, the keys the trainer gives the estimator).
        group_size: G. batch_size: prompts per generation batch (all processes together).
        repeat_count: TRL's ``num_iterations * steps_per_generation``.
        state_of, config_of: return the estimator's current state and ``PgGrpoConfig``.
        seed: seed of the draws (epoch e uses ``seed + e``).
        read_keys: the key whose posterior each prompt is selected by (the lab's
            shuffled-keys control); None = its own.

    Attributes:
        last_q: prompt key -> ``N q`` (1 = uniform) at its last draw.
    """

    def __init__(
        self,
        prompts: list[Any],
        *,
        group_size: int,
        batch_size: int,
        repeat_count: int,
        state_of: Callable[[], Any],
        config_of: Callable[[], Any],
        seed: int = 0,
        read_keys: list[str] | None = None,
    ):
        self.keys = [_prompt_id(p) for p in prompts]
        if read_keys is not None and len(read_keys) != len(self.keys):
            raise ValueError(f"read_keys holds {len(read_keys)} keys for {len(self.keys)} prompts")
        if len(self.keys) < batch_size:
            raise ValueError(
                f"pg_grpo selection draws {batch_size} distinct prompts a step but the dataset "
                f"holds {len(self.keys)}"
            )
        self.read_keys = self.keys if read_keys is None else [str(k) for k in read_keys]
        self.group_size = int(group_size)
        self.batch_size = int(batch_size)
        self.repeat_count = int(repeat_count)
        self.state_of, self.config_of = state_of, config_of
        self.seed = int(seed)
        self.epoch = 0
        self.last_q: dict[str, float] = {}

    def __len__(self) -> int:
        n = len(self.keys)
        return (n // self.batch_size) * self.batch_size * self.group_size * self.repeat_count

    def __iter__(self):
        from rlvitals.estimators.pg_grpo import selection_weights

        rng = np.random.default_rng(self.seed + self.epoch)
        self.epoch += 1
        n = len(self.keys)
        for _ in range(n // self.batch_size):
            q = selection_weights(
                self.state_of(), self.read_keys, self.config_of(), self.group_size
            )
            chunk = rng.choice(n, size=self.batch_size, replace=False, p=q)
            for i in chunk:
                self.last_q[self.keys[i]] = float(n * q[i])
            for _ in range(self.repeat_count):
                for i in chunk:
                    for _ in range(self.group_size):
                        yield int(i)

    def weights(self, keys: tuple[str, ...]) -> tuple[float, ...]:
        """Importance weights ``1 / (N q)`` of a step's groups, normalised to mean 1."""
        w = np.array([1.0 / self.last_q.get(k, 1.0) for k in keys], dtype=np.float64)
        return tuple(float(x) for x in w / w.mean())


def posterior_sampler(
    trainer: Any, dataset: Any, read_keys: list[str] | None = None
) -> PosteriorSampler:
    """The :class:`PosteriorSampler` of a TRL ``GRPOTrainer`` (with the rlvitals mixin) over
    ``dataset``: TRL's batch geometry, the trainer's seed, its live estimator state."""
    args = trainer.args
    return PosteriorSampler(
        [row["prompt"] for row in dataset],
        group_size=trainer.num_generations,
        batch_size=args.generation_batch_size // trainer.num_generations,
        repeat_count=trainer.num_iterations * args.steps_per_generation,
        state_of=lambda: trainer.rlvitals_state,
        config_of=lambda: trainer.rlvitals_config,
        seed=args.seed,
        read_keys=read_keys,
    )

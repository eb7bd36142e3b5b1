"""Trainer facts: what a trainer's configuration says about a run, one function per trainer.

Every importer that finds a configuration (a launch command's flags, a W&B config, MLflow params,
a TensorBoard ``args`` text, a TRL args file) and the TRL callback turn it into the same
:class:`TrainerFacts` — group size, estimator and advantage scale (:mod:`rlvitals.vocabulary`),
KL coefficient, reward range, whether the trainer filters zero-variance groups — with the
``facts`` function of that trainer's module (:mod:`~rlvitals.trainers.trl`,
:mod:`~rlvitals.trainers.verl`, :mod:`~rlvitals.trainers.openrlhf`), and :func:`apply_facts`
puts them in the run's :class:`~rlvitals.recording.Manifest`.

>>> f = facts_from_config({"actor_rollout_ref": {"rollout": {"n": "5"}}, "algorithm.adv_estimator": "grpo"})
>>> f.trainer, f.group_size, f.estimator, f.adv_scale
('verl', 5, 'grpo', 'group_std')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals.trainers import (
    ms_swift,
    nemo_rl,
    open_instruct,
    openrlhf,
    prime_rl,
    skyrl,
    slime,
    trl,
    verl,
)
from rlvitals.trainers._base import (
    Trainer,
    TrainerFacts,
    apply_facts,
    as_bool,
    as_float,
    as_int,
    as_str,
    has_prefix,
    lookup,
    reward_range,
)

__all__ = [
    "POST_FILTER_TRAINERS",
    "TRAINERS",
    "Trainer",
    "TrainerFacts",
    "apply_facts",
    "as_bool",
    "as_float",
    "as_int",
    "as_str",
    "facts_from_config",
    "has_prefix",
    "lookup",
    "reward_range",
    "trainer_from_keys",
]

_TRAINERS = (verl, nemo_rl, skyrl, slime, openrlhf, open_instruct, prime_rl, ms_swift, trl)
"""Tried in this order: each recognises its configuration by a key only it has (slime before
OpenRLHF, which share ``n_samples_per_prompt``; ms-swift before TRL, which share
``num_generations``)."""

TRAINERS: dict[str, Trainer] = {mod.TRAINER.name: mod.TRAINER for mod in _TRAINERS}
"""Every trainer module's declaration (``TRAINER`` in ``trainers/<name>.py``), by name."""

POST_FILTER_TRAINERS = frozenset(name for name, t in TRAINERS.items() if t.post_filter)
"""Trainers whose logged collapse metrics describe the batch *after* their filter."""


def facts_from_config(config: Mapping[str, Any] | None) -> TrainerFacts | None:
    """The :class:`TrainerFacts` of a configuration of any trainer, or None when it is none.

    The trainer is recognised by a key only it has: veRL ``actor_rollout_ref``, NeMo-RL
    ``grpo.num_generations_per_prompt``, SkyRL ``generator.n_samples_per_prompt``, slime
    ``num_steps_per_rollout``, OpenRLHF ``n_samples_per_prompt``, open-instruct
    ``num_samples_per_prompt_rollout``, prime-rl ``rollouts_per_example``, ms-swift
    ``rlhf_type``, TRL (GRPO/RLOO configs) ``num_generations``.
    """
    if not isinstance(config, Mapping) or not config:
        return None
    for mod in _TRAINERS:
        if mod.recognise(config):
            return mod.facts(config)
    return None


def trainer_from_keys(keys) -> str | None:
    """The trainer whose logged keys these are, when they are unmistakable (its own step key
    and one of its own metric names, as its ``TRAINER.log_keys`` declares them), else None.
    For exports that carry no configuration (W&B history and chart CSVs).

    >>> trainer_from_keys(["train/global_step", "train/frac_reward_zero_std", "_step"])
    'trl'
    >>> trainer_from_keys(["train/reward", "_step"]) is None
    True
    """
    have = set(keys)
    for name, t in TRAINERS.items():
        steps, marks = t.log_keys
        if have.intersection(steps) and have.intersection(marks):
            return name
    return None

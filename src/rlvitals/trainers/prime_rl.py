"""prime-rl (orchestrator config with ``rollouts_per_example``): facts of a run.

Read from PrimeIntellect-ai/prime-rl ``orchestrator/advantage.py`` @ 072062cc and
``orchestrator/algo/advantage.py`` (newer): the advantage is ``reward - group mean`` with no std
division (Dr. GRPO); G is ``rollouts_per_example`` (``orchestrator.`` prefixed in a combined
config; per-env ``group_size`` in newer versions); there is no reference-model KL term in the
default loss. Zero-advantage rollouts are dropped by default since PR #2192 (the
``zero_advantage`` / ``advantage`` filter, ``enforce=True``); older versions had
``buffer.online_difficulty_filtering`` (default false), which is read when stated.

>>> f = facts({"orchestrator": {"rollouts_per_example": 8}})
>>> f.trainer, f.group_size, f.estimator, f.adv_scale, f.filters_zero_var
('prime_rl', 8, 'dr_grpo', 'none', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_int, lookup

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "prime_rl",
    knobs={
        "group_size": "rollouts_per_example",
    },
    mitigations={
        "dynamic_sampling": "prime-rl's zero-advantage filter (on by default: check it is not disabled)",
    },
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

_G_KEYS = ("rollouts_per_example", "orchestrator.rollouts_per_example")
_OLD_FILTER_KEYS = (
    "buffer.online_difficulty_filtering",
    "orchestrator.buffer.online_difficulty_filtering",
    "online_difficulty_filtering",
)


def recognise(config: Mapping[str, Any]) -> bool:
    return any(lookup(config, k) is not None for k in _G_KEYS)


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of a prime-rl orchestrator config (nested, dotted or slashed)."""
    g = next((as_int(lookup(config, k)) for k in _G_KEYS if lookup(config, k) is not None), None)
    filters = True
    for k in _OLD_FILTER_KEYS:
        v = as_bool(lookup(config, k))
        if v is not None:
            filters = v
            break
    return TrainerFacts(
        trainer="prime_rl",
        group_size=g,
        estimator="dr_grpo",
        adv_scale="none",
        kl_coef=0.0,
        filters_zero_var=filters,
    )

"""NeMo-RL (``examples/configs/grpo_math_1B.yaml``, a ``grpo:`` section): facts of a run.

Read from NVIDIA-NeMo/RL ``nemo_rl/algorithms/grpo.py`` @ 002cdc27 and
``nemo_rl/algorithms/advantage_estimator.py``: G is ``grpo.num_generations_per_prompt``; the
advantage is the group mean (leave-one-out with ``use_leave_one_out_baseline``, the default)
divided by the population std where it is > 0 (``normalize_rewards``, the default), so the
default estimator is ``grpo_loo``; newer versions name the estimator in
``grpo.adv_estimator.name`` (``grpo``, ``gdpo``, ``reinforce_plus_plus``). The KL coefficient is
``loss_fn.reference_policy_kl_penalty``; ``grpo.use_dynamic_sampling`` (default false) drops
zero-std prompts and refills the batch.

>>> f = facts({"grpo": {"num_generations_per_prompt": 16}, "loss_fn": {"reference_policy_kl_penalty": 0.01}})
>>> f.trainer, f.group_size, f.estimator, f.adv_scale, f.kl_coef, f.filters_zero_var
('nemo_rl', 16, 'grpo_loo', 'group_std', 0.01, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str, lookup

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "nemo_rl",
    knobs={
        "group_size": "grpo.num_generations_per_prompt",
        "kl_coef": "loss_fn.reference_policy_kl_penalty",
    },
    mitigations={
        "dynamic_sampling": "dynamic sampling: grpo.use_dynamic_sampling=true",
    },
    post_filter=True,
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""


def recognise(config: Mapping[str, Any]) -> bool:
    return lookup(config, "grpo.num_generations_per_prompt") is not None


def _flag(config: Mapping[str, Any], name: str, default: bool) -> bool:
    for key in (f"grpo.adv_estimator.{name}", f"grpo.{name}"):
        v = as_bool(lookup(config, key))
        if v is not None:
            return v
    return default


def estimator(config: Mapping[str, Any]) -> str:
    """The rlvitals name of the configured advantage (see the module docstring)."""
    name = as_str(lookup(config, "grpo.adv_estimator.name")) or "grpo"
    if name == "reinforce_plus_plus":
        baseline = _flag(config, "minus_baseline", True)
        return "reinforce_plus_plus_baseline" if baseline else "reinforce_plus_plus"
    if name != "grpo":
        return vocabulary.canonical(name) or name
    norm = _flag(config, "normalize_rewards", True)
    loo = _flag(config, "use_leave_one_out_baseline", True)
    return {(True, True): "grpo_loo", (True, False): "grpo", (False, True): "rloo"}.get(
        (norm, loo), "dr_grpo"
    )


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of a NeMo-RL master config (nested, or flattened with dots or slashes)."""
    name = estimator(config)
    return TrainerFacts(
        trainer="nemo_rl",
        group_size=as_int(lookup(config, "grpo.num_generations_per_prompt")),
        estimator=name,
        adv_scale=vocabulary.scale_of(name),
        kl_coef=as_float(lookup(config, "loss_fn.reference_policy_kl_penalty")),
        filters_zero_var=bool(as_bool(lookup(config, "grpo.use_dynamic_sampling"))),
    )

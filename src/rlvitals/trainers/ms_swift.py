"""ms-swift (``swift rlhf --rlhf_type grpo``; its ``args.json``): facts of a run.

Read from ms-swift 4.6.0 (PyPI) ``swift/arguments/rlhf_args.py`` and
``swift/rl_core/advantage.py``: G is ``num_generations`` (default 8); ``advantage_estimator``
``grpo`` (default), ``rloo``, ``reinforce_plus_plus``, scaled by ``scale_rewards`` (``group``,
``batch``, ``none``; unset = tied to the estimator); the KL coefficient is ``beta`` (unset =
0.04 for GRPO); ``dynamic_sample`` (default false) resamples zero-std groups (DAPO), so the
trained batch looks clean. Its ``reward_std`` is the mean of the per-group stds, except under
``scale_rewards="batch"``.

>>> f = facts({"rlhf_type": "grpo", "num_generations": 8, "beta": None})
>>> f.trainer, f.group_size, f.estimator, f.kl_coef, f.reward_std_kind
('ms_swift', 8, 'grpo', 0.04, 'group_mean')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "ms_swift",
    knobs={
        "group_size": "--num_generations",
        "temperature": "--temperature",
        "length_limit": "--max_completion_length",
        "kl_coef": "--beta",
    },
    post_filter=True,
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

DEFAULT_BETA = 0.04


def recognise(config: Mapping[str, Any]) -> bool:
    return "rlhf_type" in config or "global_step/max_steps" in config


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of an ms-swift ``args.json``."""
    est = as_str(config.get("advantage_estimator")) or "grpo"
    scale = as_str(config.get("scale_rewards"))
    if scale not in ("group", "batch", "none"):
        scale = None
    if est == "grpo":
        name, adv_scale = vocabulary.resolve(
            "dr_grpo" if scale == "none" else "grpo", scale_rewards=scale
        )
    else:
        name = vocabulary.canonical(est) or est
        adv_scale = vocabulary.scale_of(name)
    beta = as_float(config.get("beta"))
    if beta is None and est == "grpo":
        beta = DEFAULT_BETA
    return TrainerFacts(
        trainer="ms_swift",
        group_size=as_int(config.get("num_generations")),
        estimator=name,
        adv_scale=adv_scale,
        scale_rewards=scale,
        kl_coef=beta,
        filters_zero_var=bool(as_bool(config.get("dynamic_sample"))),
        reward_std_kind="batch" if scale == "batch" else "group_mean",
    )

"""slime (THUDM/slime command-line arguments): facts of a run.

Read from THUDM/slime ``slime/ray/rollout.py`` @ a51f071 (``_post_process_rewards``) and its
argument parser: G is ``--n-samples-per-prompt``; ``--advantage-estimator`` ``grpo``/``gspo``
divide by the group std (unbiased, eps 1e-6) unless ``--disable-grpo-std-normalization``;
``reinforce_plus_plus``, ``reinforce_plus_plus_baseline``, ``ppo``; the KL coefficient is
``--kl-loss-coef`` with ``--use-kl-loss``, else ``--kl-coef`` (in the reward); a
``--dynamic-sampling-filter-path`` (default none) drops groups, e.g.
``check_reward_nonzero_std``. ``--rollout-batch-size`` prompts per rollout are the denominator of
its ``rollout/zero_std/count_*`` counts; ``--num-steps-per-rollout`` train steps per rollout.

>>> f = facts({"n_samples_per_prompt": 8, "rollout_batch_size": 32, "advantage_estimator": "gspo", "num_steps_per_rollout": 1})
>>> f.trainer, f.group_size, f.estimator, f.adv_scale, f.filters_zero_var
('slime', 8, 'grpo', 'group_std', False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str, lookup

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "slime",
    log_keys=(("rollout/step",), ("rollout/raw_reward", "rollout/response_len/mean")),
    knobs={
        "group_size": "--n-samples-per-prompt",
        "kl_coef": "--kl-loss-coef (with --use-kl-loss)",
    },
    mitigations={
        "dynamic_sampling": "--dynamic-sampling-filter-path (a filter that drops zero-variance groups)",
    },
    post_filter=True,
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

_MARKS = ("num_steps_per_rollout", "rollout_function_path", "dynamic_sampling_filter_path")


def _get(config: Mapping[str, Any], name: str) -> Any:
    v = lookup(config, name)
    return lookup(config, name.replace("_", "-")) if v is None else v


def recognise(config: Mapping[str, Any]) -> bool:
    return _get(config, "n_samples_per_prompt") is not None and any(
        k in config or k.replace("_", "-") in config for k in _MARKS
    )


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of slime's arguments (``vars(args)``, or the flags of a launch command)."""
    raw = as_str(_get(config, "advantage_estimator")) or "grpo"
    name = "grpo" if raw in ("grpo", "gspo") else raw
    if name == "grpo" and as_bool(_get(config, "disable_grpo_std_normalization")):
        name = "dr_grpo"
    if name == "ppo":
        name = "gae"
    name = vocabulary.canonical(name) or name
    if as_bool(_get(config, "use_kl_loss")):
        kl = as_float(_get(config, "kl_loss_coef"))
    else:
        kl = as_float(_get(config, "kl_coef"))
    return TrainerFacts(
        trainer="slime",
        group_size=as_int(_get(config, "n_samples_per_prompt")),
        estimator=name,
        adv_scale=vocabulary.scale_of(name),
        kl_coef=kl,
        filters_zero_var=as_str(_get(config, "dynamic_sampling_filter_path")) is not None,
    )

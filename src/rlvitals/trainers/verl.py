"""veRL (Hydra config with ``actor_rollout_ref``): facts of a run.

Read from veRL 0.9.1 ``verl/trainer/config/ppo_trainer.yaml`` and
``verl/trainer/ppo/core_algos.py``: G is ``actor_rollout_ref.rollout.n``; the estimator is
``algorithm.adv_estimator`` (``grpo`` with ``algorithm.norm_adv_by_std_in_grpo=False`` is
Dr. GRPO; the flag also reaches ``grpo_passk``, while ``grpo_vectorized`` and ``gdpo`` ignore it); the KL coefficient is ``actor_rollout_ref.actor.kl_loss_coef`` when
``actor_rollout_ref.actor.use_kl_loss``, else ``algorithm.kl_ctrl.kl_coef`` when
``algorithm.use_kl_in_reward``; both switches default to false, so a configuration that states
one false and leaves the other unstated (a launch command's overrides) has no KL term. The DAPO
recipe's ``algorithm.filter_groups.enable`` drops zero-variance groups. ``data.max_response_length``,
``data.max_prompt_length`` and ``data.train_batch_size`` are kept in the facts' config.

The configuration comes from a launch command's Hydra overrides or from the whole resolved config
veRL prints at start (``verl/trainer/main_ppo.py``: ``pprint(OmegaConf.to_container(config,
resolve=True))``), read by :mod:`rlvitals.importers.verl_console`.

>>> f = facts({"actor_rollout_ref.rollout.n": 5, "actor_rollout_ref.actor.use_kl_loss": True,
...            "actor_rollout_ref.actor.kl_loss_coef": 0.001, "algorithm.adv_estimator": "grpo"})
>>> f.group_size, f.kl_coef, f.estimator, f.adv_scale
(5, 0.001, 'grpo', 'group_std')
>>> facts({"data": {"max_response_length": 1024}, "algorithm": {"adv_estimator": "grpo",
...        "norm_adv_by_std_in_grpo": False, "filter_groups": {"enable": True}}}).config
{'data.max_response_length': 1024}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import (
    Trainer,
    TrainerFacts,
    as_bool,
    as_float,
    as_int,
    as_str,
    has_prefix,
    lookup,
    reward_range,
)

__all__ = ["TRAINER", "facts", "kl_coef", "recognise"]

TRAINER = Trainer(
    "verl",
    log_keys=(("training/global_step",), ("critic/score/mean", "actor/pg_loss")),
    knobs={
        "group_size": "actor_rollout_ref.rollout.n",
        "temperature": "actor_rollout_ref.rollout.temperature",
        "length_limit": "data.max_response_length",
        "kl_coef": "actor_rollout_ref.actor.kl_loss_coef (with actor_rollout_ref.actor.use_kl_loss=True)",
        "learning_rate": "actor_rollout_ref.actor.optim.lr",
        "clip_higher": "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "entropy_bonus": "actor_rollout_ref.actor.entropy_coeff (e.g. 0.001)",
        "mask_truncated": "reward_model.overlong_buffer.enable=True (DAPO overlong shaping)",
        "grad_clip": "actor_rollout_ref.actor.grad_clip=1.0",
        "adv_norm": "algorithm.norm_adv_by_std_in_grpo",
        "loss_agg": "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "warmup": "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
        "precision": "bf16 in the actor's FSDP mixed-precision settings",
        "ppo_epochs": "actor_rollout_ref.actor.ppo_epochs / ppo_mini_batch_size",
    },
    mitigations={
        "avspo": "AVSPO: algorithm.adv_estimator=rlvitals_avspo (install rlvitals in the veRL environment: pip install -e '.[verl]' from an rlvitals checkout; docs/verl.md)",
        "dynamic_sampling": "DAPO dynamic sampling: algorithm.filter_groups.enable=True (algorithm.filter_groups.metric=acc)",
    },
    post_filter=True,
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

_KEPT = ("data.max_response_length", "data.max_prompt_length", "data.train_batch_size")
"""Settings kept in ``manifest.config`` under their dotted names (the truncation advice and the
filtered share's denominator read them)."""


def recognise(config: Mapping[str, Any]) -> bool:
    return has_prefix(config, "actor_rollout_ref")


def kl_coef(config: Mapping[str, Any]) -> float | None:
    """The KL coefficient veRL applies (see the module docstring), or None when unknown."""
    use_loss = as_bool(lookup(config, "actor_rollout_ref.actor.use_kl_loss"))
    in_reward = as_bool(lookup(config, "algorithm.use_kl_in_reward"))
    if use_loss:
        return as_float(lookup(config, "actor_rollout_ref.actor.kl_loss_coef"))
    if in_reward:
        return as_float(lookup(config, "algorithm.kl_ctrl.kl_coef"))
    if use_loss is False or in_reward is False:
        return 0.0  # the other switch is off too, or unstated (default false)
    return None


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of a veRL configuration (nested, or flattened with dots or slashes)."""
    norm = as_bool(lookup(config, "algorithm.norm_adv_by_std_in_grpo"))
    name = vocabulary.from_verl(
        as_str(lookup(config, "algorithm.adv_estimator")), norm_adv_by_std=norm
    )
    scale = vocabulary.scale_of(name)
    if name == "grpo_passk" and norm is False:
        scale = vocabulary.Scale.NONE.value
    lo, hi = reward_range(config)
    filt = as_bool(lookup(config, "algorithm.filter_groups.enable"))
    kept = {k: as_int(lookup(config, k)) for k in _KEPT}
    return TrainerFacts(
        trainer="verl",
        group_size=as_int(lookup(config, "actor_rollout_ref.rollout.n")),
        estimator=name,
        adv_scale=scale,
        kl_coef=kl_coef(config),
        reward_min=lo,
        reward_max=hi,
        filters_zero_var=filt,
        config={k: v for k, v in kept.items() if v is not None},
    )

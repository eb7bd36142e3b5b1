"""SkyRL (``skyrl.train`` Hydra config: ``generator`` and ``trainer.algorithm``): facts of a run.

Read from ``skyrl`` 0.3.0 (PyPI) ``skyrl/train/config/config.py`` and ``utils/ppo_utils.py``:
G is ``generator.n_samples_per_prompt`` (default 5); ``trainer.algorithm.advantage_estimator``
(``grpo``, with ``grpo_norm_by_std=false`` Dr. GRPO; ``rloo``; ``reinforce++``; ``gae``); the KL
coefficient is ``trainer.algorithm.kl_loss_coef`` (default 0.001) when ``use_kl_loss`` (default
true); ``trainer.algorithm.zero_variance_filter`` (default false) masks zero-variance groups out
of the loss, and ``dynamic_sampling.type`` ``filter``/``replace`` drops them.

>>> f = facts({"generator": {"n_samples_per_prompt": 5}, "trainer": {"algorithm": {"advantage_estimator": "grpo"}}})
>>> f.trainer, f.group_size, f.estimator, f.kl_coef, f.filters_zero_var
('skyrl', 5, 'grpo', 0.001, False)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str, lookup

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "skyrl",
    log_keys=(("trainer/global_step",), ("reward/avg_raw_reward", "generate/batch_num_seq")),
    knobs={
        "group_size": "generator.n_samples_per_prompt",
        "kl_coef": "trainer.algorithm.kl_loss_coef (with trainer.algorithm.use_kl_loss=true)",
    },
    mitigations={
        "dynamic_sampling": "trainer.algorithm.dynamic_sampling.type=filter (or trainer.algorithm.zero_variance_filter=true)",
    },
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

DEFAULT_KL_LOSS_COEF = 0.001


def recognise(config: Mapping[str, Any]) -> bool:
    return lookup(config, "generator.n_samples_per_prompt") is not None and (
        lookup(config, "trainer.algorithm") is not None
        or lookup(config, "trainer.algorithm.advantage_estimator") is not None
    )


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of a SkyRL config (nested, dotted or slashed)."""
    alg = "trainer.algorithm."
    raw = as_str(lookup(config, alg + "advantage_estimator")) or "grpo"
    name = {"reinforce++": "reinforce_plus_plus"}.get(raw, raw)
    if name == "grpo" and as_bool(lookup(config, alg + "grpo_norm_by_std")) is False:
        name = "dr_grpo"
    name = vocabulary.canonical(name) or name
    use_loss = as_bool(lookup(config, alg + "use_kl_loss"))
    in_reward = as_bool(lookup(config, alg + "use_kl_in_reward"))
    if use_loss is not False:
        kl = as_float(lookup(config, alg + "kl_loss_coef"))
        kl = DEFAULT_KL_LOSS_COEF if kl is None else kl
    elif in_reward:
        kl = as_float(lookup(config, alg + "kl_coef"))
    else:
        kl = 0.0
    dyn = as_str(lookup(config, alg + "dynamic_sampling.type"))
    filters = bool(as_bool(lookup(config, alg + "zero_variance_filter"))) or dyn in (
        "filter",
        "replace",
    )
    return TrainerFacts(
        trainer="skyrl",
        group_size=as_int(lookup(config, "generator.n_samples_per_prompt")),
        estimator=name,
        adv_scale=vocabulary.scale_of(name),
        kl_coef=kl,
        filters_zero_var=filters,
    )

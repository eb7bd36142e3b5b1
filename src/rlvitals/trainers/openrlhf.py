"""OpenRLHF (``train_ppo_ray`` flags): facts of a run.

Read from OpenRLHF 0.8.11-0.11.2 ``openrlhf/cli/train_ppo_ray.py`` and
``trainer/ppo_utils/experience_maker.py``. G is ``--n_samples_per_prompt``; the estimator
``--advantage_estimator`` (default ``gae``; ``group_norm`` is GRPO: group mean and unbiased std;
``dr_grpo``, ``rloo``, ``reinforce`` (REINFORCE++), ``reinforce_baseline``); the KL coefficient
``--init_kl_coef`` (default 0.01, in the reward, or as a loss term with ``--use_kl_loss``);
``--dynamic_filtering`` keeps only groups whose mean score lies strictly inside a range, which
drops zero-variance groups of binary rewards. OpenRLHF 0.10 renamed the flags into namespaces
(``--rollout.n_samples_per_prompt``, ``--algo.advantage.estimator``, ``--algo.kl.init_coef``,
``--algo.dynamic_filtering_enable``); both spellings are read.

>>> f = facts({"n_samples_per_prompt": 8, "advantage_estimator": "group_norm", "init_kl_coef": 0})
>>> f.trainer, f.group_size, f.estimator, f.adv_scale, f.kl_coef
('openrlhf', 8, 'grpo', 'group_std', 0.0)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str, lookup

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "openrlhf",
    knobs={
        "group_size": "--n_samples_per_prompt",
        "temperature": "--temperature",
        "length_limit": "--generate_max_len",
        "kl_coef": "--init_kl_coef",
        "learning_rate": "--actor_learning_rate",
        "clip_higher": "--eps_clip_low_high 0.2 0.28",
        "entropy_bonus": "--entropy_loss_coef (e.g. 0.001)",
        "mask_truncated": "--overlong_buffer_len (DAPO overlong shaping)",
        "grad_clip": "--max_norm 1.0",
        "adv_norm": "--advantage_estimator",
        "warmup": "--lr_warmup_ratio",
        "precision": "--bf16",
        "ppo_epochs": "--max_epochs / --micro_train_batch_size",
    },
    mitigations={
        "avspo": "AVSPO: the recipe in docs/openrlhf.md (rlvitals.estimate('avspo', ...) in place of OpenRLHF's group normalisation)",
        "dynamic_sampling": "dynamic filtering: --dynamic_filtering --dynamic_filtering_reward_range 0 1",
    },
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""


KEYS = {
    "group_size": ("n_samples_per_prompt", "rollout.n_samples_per_prompt"),
    "estimator": ("advantage_estimator", "algo.advantage.estimator"),
    "kl_coef": ("init_kl_coef", "algo.kl.init_coef"),
    "filters": ("dynamic_filtering", "algo.dynamic_filtering_enable"),
}
"""Each fact's flag before and after OpenRLHF 0.10."""


def recognise(config: Mapping[str, Any]) -> bool:
    return any(lookup(config, k) is not None for k in KEYS["group_size"])


def _first(config: Mapping[str, Any], fact: str) -> Any:
    for key in KEYS[fact]:
        v = lookup(config, key)
        if v is not None:
            return v
    return None


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of OpenRLHF's flags (``{"n_samples_per_prompt": 8, ...}``)."""
    name = vocabulary.from_openrlhf(as_str(_first(config, "estimator")))
    return TrainerFacts(
        trainer="openrlhf",
        group_size=as_int(_first(config, "group_size")),
        estimator=name,
        adv_scale=vocabulary.scale_of(name),
        kl_coef=as_float(_first(config, "kl_coef")),
        filters_zero_var=as_bool(_first(config, "filters")),
    )

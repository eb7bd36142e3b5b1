"""open-instruct (``open_instruct/grpo_fast.py``; W&B config): facts of a run.

Read from allenai/open-instruct ``open_instruct/data_loader.py`` @ 006e4708
(``StreamingDataLoaderConfig``) and ``grpo_fast.py``: G is ``num_samples_per_prompt_rollout``;
``advantage_normalization_type`` ``standard`` divides by the population std (GRPO),
``centered`` does not (Dr. GRPO; the newer default); the KL coefficient is ``beta`` (0.05);
**``filter_zero_std_samples`` is on by default**: zero-std prompts are dropped before the
update, so the logged batch looks clean (``batch/filtered_prompts*``, ``real_batch_size_ratio``
tell how much was dropped). Its ``val/`` keys are training statistics
(:func:`rlvitals.recording.metrics.dialect_of`).

>>> f = facts({"num_samples_per_prompt_rollout": 4, "advantage_normalization_type": "centered"})
>>> f.trainer, f.group_size, f.estimator, f.adv_scale, f.filters_zero_var
('open_instruct', 4, 'dr_grpo', 'none', True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str

__all__ = ["TRAINER", "facts", "recognise"]

TRAINER = Trainer(
    "open_instruct",
    log_keys=(("training_step",), ("real_batch_size_ratio",)),
    knobs={
        "group_size": "--num_samples_per_prompt_rollout",
    },
    post_filter=True,
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

DEFAULT_BETA = 0.05
_ESTIMATORS = {"standard": "grpo", "centered": "dr_grpo", "maxrl": "max_rl", "max_rl": "max_rl"}


def recognise(config: Mapping[str, Any]) -> bool:
    return "num_samples_per_prompt_rollout" in config


def facts(config: Mapping[str, Any]) -> TrainerFacts:
    """The facts of open-instruct's arguments (its W&B config)."""
    raw = as_str(config.get("advantage_normalization_type"))
    name = _ESTIMATORS.get(raw or "", raw)
    filt = as_bool(config.get("filter_zero_std_samples"))
    beta = as_float(config.get("beta"))
    return TrainerFacts(
        trainer="open_instruct",
        group_size=as_int(config.get("num_samples_per_prompt_rollout")),
        estimator=name,
        adv_scale=vocabulary.scale_of(name),
        kl_coef=DEFAULT_BETA if beta is None and "beta" not in config else beta,
        filters_zero_var=True if filt is None else filt,
    )

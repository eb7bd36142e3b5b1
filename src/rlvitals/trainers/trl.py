"""TRL (``GRPOConfig``, and other configs with ``num_generations``): facts of a run.

Read from TRL 1.16.0 ``trl/trainer/grpo_config.py`` and ``grpo_trainer.py``: G is
``num_generations``; the KL coefficient is ``beta`` (default 0.0: no KL term); the advantages are ``rewards - group mean`` divided by the group std
(``scale_rewards="group"``, or ``True``), the batch std (``"batch"``) or nothing (``"none"``,
``False``); ``multi_objective_aggregation="normalize_then_sum"`` divides by a batch std as well.
``loss_type`` (``dapo``, ``dr_grpo``, ``grpo``, ``bnpo``) sets how the loss is averaged, not the
advantages. TRL filters no group.

>>> f = facts({"num_generations": "8", "beta": "0.0", "scale_rewards": "True"})
>>> f.trainer, f.group_size, f.kl_coef, f.scale_rewards, f.estimator, f.adv_scale
('trl', 8, 0.0, 'group', 'grpo', 'group_std')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlvitals import vocabulary
from rlvitals.trainers._base import Trainer, TrainerFacts, as_bool, as_float, as_int, as_str

__all__ = ["TRAINER", "facts", "recognise", "reward_std_kind", "scale_rewards", "version_tuple"]

TRAINER = Trainer(
    "trl",
    log_keys=(("train/global_step",), ("train/frac_reward_zero_std", "train/num_tokens")),
    knobs={
        "group_size": "num_generations",
        "temperature": "temperature",
        "length_limit": "max_completion_length",
        "kl_coef": "beta",
        "learning_rate": "learning_rate",
        "clip_higher": "epsilon_high=0.28",
        "mask_truncated": "mask_truncated_completions=True",
        "grad_clip": "max_grad_norm=1.0",
        "adv_norm": "scale_rewards",
        "loss_agg": "loss_type='dapo' (or 'dr_grpo')",
        "warmup": "warmup_ratio",
        "precision": "bf16=True (not fp16)",
        "ppo_epochs": "num_iterations / steps_per_generation",
    },
    mitigations={
        "avspo": "AVSPO: RlvitalsGRPOTrainer(..., estimator='avspo') from rlvitals.integrations.trl (pip install -e '.[trl]' from an rlvitals checkout; docs/trl.md)",
        "dynamic_sampling": "drop zero-variance groups: RlvitalsGRPOTrainer(..., estimator='zero_var_filter'), or resample them (rlvitals.estimators.dynamic_sampling)",
    },
)
"""What the advice names in this trainer (:class:`~rlvitals.trainers._base.Trainer`)."""

SCALE_CHOICES = ("group", "batch", "none")


def recognise(config: Mapping[str, Any]) -> bool:
    return "num_generations" in config


def scale_rewards(value: Any) -> str | None:
    """TRL's ``scale_rewards`` as ``group``/``batch``/``none`` (``True``/``False`` are the old
    ``group``/``none``), or None when it is neither.

    >>> scale_rewards("none"), scale_rewards("True"), scale_rewards(False), scale_rewards(2)
    ('none', 'group', 'none', None)
    """
    if isinstance(value, str) and value.strip().lower() in SCALE_CHOICES:
        return value.strip().lower()
    as_b = as_bool(value) if isinstance(value, (bool, str)) else None
    if as_b is not None:
        return "group" if as_b else "none"
    return None


def version_tuple(version: str | None) -> tuple[int, int, int] | None:
    """``"0.22.1"`` → ``(0, 22, 1)``; None when it is not a version.

    >>> version_tuple("1.16.0"), version_tuple("0.27.0.dev0"), version_tuple("x")
    ((1, 16, 0), (0, 27, 0), None)
    """
    if not isinstance(version, str):
        return None
    parts = []
    for p in version.strip().lstrip("v").split(".")[:3]:
        digits = ""
        for ch in p:
            if not ("0" <= ch <= "9"):
                break
            digits += ch
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        return None
    while len(parts) < 3:
        parts.append(0)
    return (parts[0], parts[1], parts[2])


def reward_std_kind(version: str | None, scale: str | None = None) -> str | None:
    """What TRL's logged ``reward_std`` is, by TRL version (``grpo_trainer.py`` of each release):

    - up to 0.21: ``group_mean``, the mean of the per-group stds;
    - 0.22.0-0.22.1: swapped branches: ``batch`` under ``scale_rewards="group"``, ``group_mean``
      under ``batch``/``none`` (TRL issue #3991);
    - 0.22.2-0.26: ``group_mean`` for ``group``/``none``, ``batch`` for ``batch``;
    - 0.27 on: ``batch``, the std of the whole step.

    None when the version is unknown (and, before 0.27, when ``scale`` is needed and unknown).

    >>> reward_std_kind("0.19.1"), reward_std_kind("0.24.0", "batch"), reward_std_kind("1.16.0")
    ('group_mean', 'batch', 'batch')
    """
    v = version_tuple(version)
    if v is None:
        return None
    if v < (0, 22, 0):
        return "group_mean"
    if v >= (0, 27, 0):
        return "batch"
    if scale is None:
        return None
    if v < (0, 22, 2):
        return "batch" if scale == "group" else "group_mean"
    return "batch" if scale == "batch" else "group_mean"


def facts(config: Mapping[str, Any], *, estimator: str | None = None) -> TrainerFacts:
    """The facts of a TRL configuration (a dict of ``GRPOConfig`` fields).

    Args:
        config: the fields, as values or strings (MLflow params, W&B config, an args file).
        estimator: the rlvitals estimator an :class:`RlvitalsGRPOTrainer` ran, when known;
            otherwise the estimator is the one TRL's own advantages amount to, and only when
            ``scale_rewards`` is stated.
    """
    scale = scale_rewards(config.get("scale_rewards"))
    aggregation = as_str(config.get("multi_objective_aggregation"))
    if estimator is not None:
        name, adv_scale = vocabulary.resolve(estimator, scale_rewards=scale)
    elif scale is not None:
        name = vocabulary.from_trl(scale_rewards=scale)
        adv_scale = vocabulary.trl_scale(scale_rewards=scale, aggregation=aggregation)
    else:
        name = adv_scale = None
    e = vocabulary.info(name)
    version = as_str(config.get("trl_version"))
    return TrainerFacts(
        trainer="trl",
        group_size=as_int(config.get("num_generations")),
        estimator=name,
        adv_scale=adv_scale,
        scale_rewards=scale,
        kl_coef=as_float(config.get("beta")),
        logging_steps=as_int(config.get("logging_steps")),
        filters_zero_var=e.filters if e is not None else (False if estimator is None else None),
        trainer_version=version,
        reward_std_kind=reward_std_kind(version, scale),
    )


def config_of(args: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The fields ``names`` of a ``GRPOConfig`` object (those it has) as a dict."""
    return {n: getattr(args, n) for n in names if hasattr(args, n)}

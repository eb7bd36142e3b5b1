"""What to try, in the trainer's own language: its config keys, arguments or flags.

A finding's actions name the setting to change in the trainer that produced the run (veRL
Hydra keys, TRL ``GRPOConfig`` arguments, OpenRLHF flags, ...), and fall back to a plain
description for a trainer rlvitals does not know. Detectors build their actions from
:func:`knob` and :func:`mitigation`, never from hard-coded trainer names.

>>> knob("group_size", "verl"), knob("group_size", "trl"), knob("group_size", None)
('actor_rollout_ref.rollout.n', 'num_generations', 'the group size (completions per prompt)')
>>> mitigation("avspo", "verl")
"AVSPO: algorithm.adv_estimator=rlvitals_avspo (install rlvitals in the veRL environment: pip install -e '.[verl]' from an rlvitals checkout; docs/verl.md)"
"""

from __future__ import annotations

__all__ = ["KNOBS", "knob", "mitigation", "set_knob"]

KNOBS: dict[str, dict[str, str]] = {
    "group_size": {
        "verl": "actor_rollout_ref.rollout.n",
        "trl": "num_generations",
        "openrlhf": "--n_samples_per_prompt",
        "nemo_rl": "grpo.num_generations_per_prompt",
        "prime_rl": "rollouts_per_example",
        "skyrl": "generator.n_samples_per_prompt",
        "slime": "--n-samples-per-prompt",
        "ms_swift": "--num_generations",
        "open_instruct": "--num_samples_per_prompt_rollout",
        None: "the group size (completions per prompt)",
    },
    "temperature": {
        "verl": "actor_rollout_ref.rollout.temperature",
        "trl": "temperature",
        "openrlhf": "--temperature",
        "ms_swift": "--temperature",
        None: "the sampling temperature",
    },
    "length_limit": {
        "verl": "data.max_response_length",
        "trl": "max_completion_length",
        "openrlhf": "--generate_max_len",
        "ms_swift": "--max_completion_length",
        None: "the generation length limit",
    },
    "kl_coef": {
        "verl": "actor_rollout_ref.actor.kl_loss_coef (with actor_rollout_ref.actor.use_kl_loss=True)",
        "trl": "beta",
        "openrlhf": "--init_kl_coef",
        "ms_swift": "--beta",
        "nemo_rl": "loss_fn.reference_policy_kl_penalty",
        "skyrl": "trainer.algorithm.kl_loss_coef (with trainer.algorithm.use_kl_loss=true)",
        "slime": "--kl-loss-coef (with --use-kl-loss)",
        None: "the KL coefficient",
    },
    "learning_rate": {
        "verl": "actor_rollout_ref.actor.optim.lr",
        "trl": "learning_rate",
        "openrlhf": "--actor_learning_rate",
        None: "the learning rate",
    },
    "clip_higher": {
        "verl": "actor_rollout_ref.actor.clip_ratio_high=0.28",
        "trl": "epsilon_high=0.28",
        "openrlhf": "--eps_clip_low_high 0.2 0.28",
        None: "a higher upper clip range (DAPO clip-higher, eps_high ~0.28)",
    },
    "entropy_bonus": {
        "verl": "actor_rollout_ref.actor.entropy_coeff (e.g. 0.001)",
        "openrlhf": "--entropy_loss_coef (e.g. 0.001)",
        None: "a small entropy bonus",
    },
    "mask_truncated": {
        "verl": "reward_model.overlong_buffer.enable=True (DAPO overlong shaping)",
        "trl": "mask_truncated_completions=True",
        "openrlhf": "--overlong_buffer_len (DAPO overlong shaping)",
        None: "masking truncated completions out of the loss (or an overlong penalty)",
    },
    "grad_clip": {
        "verl": "actor_rollout_ref.actor.grad_clip=1.0",
        "trl": "max_grad_norm=1.0",
        "openrlhf": "--max_norm 1.0",
        None: "gradient clipping (max norm 1.0)",
    },
    "adv_norm": {
        "verl": "algorithm.norm_adv_by_std_in_grpo",
        "trl": "scale_rewards",
        "openrlhf": "--advantage_estimator",
        None: "the advantage normalisation (group vs batch std)",
    },
    "loss_agg": {
        "verl": "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "trl": "loss_type='dapo' (or 'dr_grpo')",
        None: "a token-level loss aggregation (DAPO / Dr. GRPO) instead of a per-sequence mean",
    },
    "warmup": {
        "verl": "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio",
        "trl": "warmup_ratio",
        "openrlhf": "--lr_warmup_ratio",
        None: "the learning-rate warm-up",
    },
    "precision": {
        "verl": "bf16 in the actor's FSDP mixed-precision settings",
        "trl": "bf16=True (not fp16)",
        "openrlhf": "--bf16",
        None: "bf16 rather than fp16 (or loss scaling)",
    },
    "ppo_epochs": {
        "verl": "actor_rollout_ref.actor.ppo_epochs / ppo_mini_batch_size",
        "trl": "num_iterations / steps_per_generation",
        "openrlhf": "--max_epochs / --micro_train_batch_size",
        None: "the PPO epochs (or mini-batches) per rollout batch",
    },
}
"""Concept → trainer → the setting that controls it (``None``: a plain description)."""


def knob(concept: str, trainer: str | None) -> str:
    """The setting of ``trainer`` that controls ``concept`` (a key of :data:`KNOBS`)."""
    table = KNOBS[concept]
    return table.get(trainer, table[None])


def set_knob(concept: str, trainer: str | None, verb: str, detail: str = "") -> str:
    """``"raise the group size (completions per prompt): num_generations"``: ``verb``, the
    plain description, ``detail``, then the trainer's setting when rlvitals knows it.

    >>> set_knob("temperature", "verl", "raise", " a little (e.g. 1.0 -> 1.1)")
    'raise the sampling temperature a little (e.g. 1.0 -> 1.1): actor_rollout_ref.rollout.temperature'
    """
    name = knob(concept, trainer)
    plain = KNOBS[concept][None]
    return f"{verb} {plain}{detail}" + ("" if name == plain else f": {name}")


_MITIGATIONS: dict[str, dict[str, str]] = {
    "avspo": {
        "trl": "AVSPO: RlvitalsGRPOTrainer(..., estimator='avspo') from rlvitals.integrations.trl "
        "(pip install -e '.[trl]' from an rlvitals checkout; docs/trl.md)",
        "verl": "AVSPO: algorithm.adv_estimator=rlvitals_avspo (install rlvitals in the veRL "
        "environment: pip install -e '.[verl]' from an rlvitals checkout; docs/verl.md)",
        "openrlhf": "AVSPO: the recipe in docs/openrlhf.md (rlvitals.estimate('avspo', ...) in "
        "place of OpenRLHF's group normalisation)",
        None: "AVSPO: rlvitals.estimate('avspo', rewards, group_ids, state=state) in place of "
        "your advantage computation (docs/estimators.md)",
    },
    "dynamic_sampling": {
        "verl": "DAPO dynamic sampling: algorithm.filter_groups.enable=True "
        "(algorithm.filter_groups.metric=acc)",
        "openrlhf": "dynamic filtering: --dynamic_filtering --dynamic_filtering_reward_range 0 1",
        "trl": "drop zero-variance groups: RlvitalsGRPOTrainer(..., estimator='zero_var_filter'), "
        "or resample them (rlvitals.estimators.dynamic_sampling)",
        "nemo_rl": "dynamic sampling: grpo.use_dynamic_sampling=true",
        "skyrl": "trainer.algorithm.dynamic_sampling.type=filter (or "
        "trainer.algorithm.zero_variance_filter=true)",
        "slime": "--dynamic-sampling-filter-path (a filter that drops zero-variance groups)",
        "prime_rl": "prime-rl's zero-advantage filter (on by default: check it is not disabled)",
        None: "filter zero-variance groups and resample (DAPO dynamic sampling; "
        "rlvitals.estimators.dynamic_sampling)",
    },
}


def mitigation(name: str, trainer: str | None) -> str:
    """How to turn on mitigation ``name`` (``avspo``, ``dynamic_sampling``) in ``trainer``."""
    table = _MITIGATIONS[name]
    return table.get(trainer, table[None])

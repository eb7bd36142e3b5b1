"""What to try, in the trainer's own language: its config keys, arguments or flags.

A finding's actions name the setting to change in the trainer that produced the run (veRL
Hydra keys, TRL ``GRPOConfig`` arguments, OpenRLHF flags, ...), and fall back to a plain
description for a trainer rlvitals does not know. Each trainer declares its settings in its own
module (``TRAINER`` in ``rlvitals/trainers/<name>.py``, docs/trainers.md); this module holds the
concepts and reads the table from those declarations. Detectors build their actions from
:func:`knob` and :func:`mitigation`, never from hard-coded trainer names.

>>> knob("group_size", "verl"), knob("group_size", "trl"), knob("group_size", None)
('actor_rollout_ref.rollout.n', 'num_generations', 'the group size (completions per prompt)')
>>> mitigation("avspo", "verl")
"AVSPO: algorithm.adv_estimator=rlvitals_avspo (install rlvitals in the veRL environment: pip install -e '.[verl]' from an rlvitals checkout; docs/verl.md)"
"""

from __future__ import annotations

from rlvitals.trainers import TRAINERS

__all__ = ["CONCEPTS", "KNOBS", "MITIGATIONS", "knob", "mitigation", "set_knob"]

CONCEPTS: dict[str, str] = {
    "group_size": "the group size (completions per prompt)",
    "temperature": "the sampling temperature",
    "length_limit": "the generation length limit",
    "kl_coef": "the KL coefficient",
    "learning_rate": "the learning rate",
    "clip_higher": "a higher upper clip range (DAPO clip-higher, eps_high ~0.28)",
    "entropy_bonus": "a small entropy bonus",
    "mask_truncated": "masking truncated completions out of the loss (or an overlong penalty)",
    "grad_clip": "gradient clipping (max norm 1.0)",
    "adv_norm": "the advantage normalisation (group vs batch std)",
    "loss_agg": "a token-level loss aggregation (DAPO / Dr. GRPO) instead of a per-sequence mean",
    "warmup": "the learning-rate warm-up",
    "precision": "bf16 rather than fp16 (or loss scaling)",
    "ppo_epochs": "the PPO epochs (or mini-batches) per rollout batch",
}
"""Every concept the advice may ask to change, described plainly (for a trainer that does not
name its setting)."""

KNOBS: dict[str, dict[str | None, str]] = {
    concept: {
        **{name: t.knobs[concept] for name, t in TRAINERS.items() if concept in t.knobs},
        None: plain,
    }
    for concept, plain in CONCEPTS.items()
}
"""Concept → trainer → the setting that controls it (``None``: a plain description), read from
each trainer's declaration (``TRAINER.knobs`` in ``rlvitals/trainers/<name>.py``)."""


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


MITIGATIONS = {
    "avspo": "AVSPO: rlvitals.estimate('avspo', rewards, group_ids, state=state) in place of "
    "your advantage computation (docs/estimators.md)",
    "dynamic_sampling": "filter zero-variance groups and resample (DAPO dynamic sampling; "
    "rlvitals.estimators.dynamic_sampling)",
}
"""How to turn each mitigation on where the trainer declares no way of its own."""


def mitigation(name: str, trainer: str | None) -> str:
    """How to turn on mitigation ``name`` (``avspo``, ``dynamic_sampling``) in ``trainer``."""
    plain = MITIGATIONS[name]
    t = TRAINERS.get(trainer) if trainer is not None else None
    return t.mitigations.get(name, plain) if t is not None else plain

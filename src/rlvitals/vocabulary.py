"""The estimator vocabulary: every advantage estimator rlvitals knows, by what it divides.

One place knows each estimator's name, its advantage *scale* and which trainer settings mean it.
The estimator registry, :func:`rlvitals.signal.advantages`, the vitals, the trainer facts of each
importer, the TRL trainer and callback, and the collapse gates all read it. A detector reads the
scale, never a list of names: what matters for judging ``adv_std`` is what the advantages were
divided by.

Scales (:class:`Scale`):

- ``group_std``: ``(r - baseline_j) / (std_j + eps)`` — GRPO. While groups vary, ``adv_std`` is
  about 1 by construction and falls toward 0 as groups collapse.
- ``batch_std``: centred (per group, or by a critic) and divided by one std over the whole batch
  (TRL ``scale_rewards="batch"``, veRL ``masked_whiten``: PPO/GAE, REINFORCE++). ``adv_std`` is at
  most about 1 and shrinks with the share of live groups, not to 0 on its own.
- ``none``: not divided (Dr. GRPO, RLOO, ReMax, GPG): ``adv_std`` is about the reward std.
- ``virtual``: divided by the std over real plus virtual samples (AVSPO): collapsed groups get a
  uniform non-zero advantage, so ``adv_zero_frac`` stays low and ``adv_std`` can be small while
  the signal is alive.

Each trainer's names: TRL (``scale_rewards``, ``multi_objective_aggregation``; read in
``trl/trainer/grpo_trainer.py``, TRL 1.16.0, ``_generate_and_score_completions``), veRL
(``algorithm.adv_estimator`` with ``algorithm.norm_adv_by_std_in_grpo``; read in
``verl/trainer/ppo/core_algos.py``, veRL 0.9.1), OpenRLHF (``--advantage_estimator``).

>>> resolve("grpo", scale_rewards="batch")
('grpo', 'batch_std')
>>> from_trl(scale_rewards="none"), from_verl("grpo", norm_adv_by_std=False)
('dr_grpo', 'dr_grpo')
>>> from_openrlhf("group_norm"), scale_of("avspo")
('grpo', 'virtual')
"""

from __future__ import annotations

import enum

from rlvitals._record import record

__all__ = [
    "ESTIMATOR_INFO",
    "EstimatorInfo",
    "Scale",
    "add",
    "from_openrlhf",
    "from_trl",
    "from_verl",
    "info",
    "resolve",
    "scale_of",
]


class Scale(str, enum.Enum):
    """What an estimator divides the centred rewards by (module docstring)."""

    GROUP_STD = "group_std"
    BATCH_STD = "batch_std"
    NONE = "none"
    VIRTUAL = "virtual"


@record(frozen=True)
class EstimatorInfo:
    """One estimator of the vocabulary.

    Attributes:
        name: the rlvitals name (a registered estimator's name where rlvitals implements it).
        scale: what the advantages are divided by.
        group_baseline: True when the baseline comes from the prompt's group, so G = 1 leaves
            nothing to learn from (GRPO-family); False for critic or batch baselines (PPO/GAE,
            REINFORCE++, ReMax).
        filters: True when the estimator itself drops zero-variance groups from the loss.
        summary: one line.
        aliases: other trainers' names for the same estimator.
    """

    name: str
    scale: Scale
    group_baseline: bool = True
    filters: bool = False
    summary: str = ""
    aliases: tuple[str, ...] = ()


ESTIMATOR_INFO: dict[str, EstimatorInfo] = {
    e.name: e
    for e in (
        # rlvitals' own estimators (rlvitals.estimators)
        EstimatorInfo(
            "grpo",
            Scale.GROUP_STD,
            summary="GRPO: (r - mean_j) / (std_j + eps)",
            aliases=("group_norm", "grpo_vectorized", "gspo"),
        ),
        EstimatorInfo("dr_grpo", Scale.NONE, summary="Dr. GRPO: r - mean_j"),
        EstimatorInfo(
            "rloo",
            Scale.NONE,
            summary="RLOO: r - mean of the other members",
            aliases=("rloo_vectorized",),
        ),
        EstimatorInfo(
            "avspo", Scale.VIRTUAL, summary="AVSPO: virtual samples in collapsed groups' statistics"
        ),
        EstimatorInfo(
            "avspo_released",
            Scale.VIRTUAL,
            summary="AVSPO as released: one virtual sample per collapsed group",
        ),
        EstimatorInfo(
            "history_baseline",
            Scale.VIRTUAL,
            summary="DBB-style: (u - p_k) / sqrt(p_k (1 - p_k)), p_k a discounted Beta-Bernoulli "
            "pass rate of the prompt; its pseudo-counts act as virtual samples, so collapsed "
            "groups keep a uniform non-zero advantage",
        ),
        EstimatorInfo(
            "zero_var_filter",
            Scale.GROUP_STD,
            filters=True,
            summary="GRPO with zero-variance groups dropped from the loss",
        ),
        # other trainers' estimators rlvitals recognises (veRL core_algos names)
        EstimatorInfo(
            "gae",
            Scale.BATCH_STD,
            group_baseline=False,
            summary="PPO: critic baseline (GAE), advantages whitened over the batch",
        ),
        EstimatorInfo(
            "reinforce_plus_plus",
            Scale.BATCH_STD,
            group_baseline=False,
            summary="REINFORCE++: returns whitened over the batch",
            aliases=("reinforce", "reinforce++"),
        ),
        EstimatorInfo(
            "reinforce_plus_plus_baseline",
            Scale.BATCH_STD,
            summary="REINFORCE++ baseline: group mean off, then batch whitening",
            aliases=("reinforce_baseline",),
        ),
        EstimatorInfo(
            "gdpo",
            Scale.BATCH_STD,
            summary="GDPO: per-reward group normalisation, then batch whitening",
        ),
        EstimatorInfo("grpo_passk", Scale.GROUP_STD, summary="GRPO for pass@k"),
        EstimatorInfo(
            "grpo_loo",
            Scale.GROUP_STD,
            summary="NeMo-RL's default: leave-one-out mean, divided by the population std of "
            "the others where it is > 0",
        ),
        EstimatorInfo(
            "max_rl",
            Scale.NONE,
            summary="MaxRL: (r - mean_j) / mean_j (prime-rl, open-instruct)",
            aliases=("maxrl",),
        ),
        EstimatorInfo(
            "remax", Scale.NONE, group_baseline=False, summary="ReMax: greedy-rollout baseline"
        ),
        EstimatorInfo("opo", Scale.NONE, summary="OPO: length-weighted group baseline"),
        EstimatorInfo("gpg", Scale.NONE, summary="GPG: alpha (r - mean_j), no std division"),
        EstimatorInfo("optimal_token_baseline", Scale.NONE, summary="token-level optimal baseline"),
        EstimatorInfo(
            "tir_optimal_token_baseline",
            Scale.NONE,
            summary="multi-turn token-level optimal baseline",
        ),
    )
}
"""Every estimator of the vocabulary by rlvitals name."""

_ALIASES: dict[str, str] = {a: e.name for e in ESTIMATOR_INFO.values() for a in e.aliases}
_SCALES = frozenset(s.value for s in Scale)


def add(entry: EstimatorInfo) -> None:
    """Add an estimator to the vocabulary (what ``register_estimator(..., scale=...)`` does for
    an estimator of one's own); a name (or alias) already known raises."""
    taken = {entry.name, *entry.aliases} & {*ESTIMATOR_INFO, *_ALIASES}
    if taken:
        raise ValueError(f"estimator name(s) {sorted(taken)} already in the vocabulary")
    ESTIMATOR_INFO[entry.name] = entry
    _ALIASES.update({a: entry.name for a in entry.aliases})


def info(name: str | None) -> EstimatorInfo | None:
    """The vocabulary entry of ``name`` (an rlvitals name or a trainer's alias), or None."""
    if not name:
        return None
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    return ESTIMATOR_INFO.get(key)


def canonical(name: str | None) -> str | None:
    """The rlvitals name of ``name`` when the vocabulary knows it, else ``name`` unchanged."""
    e = info(name)
    return e.name if e is not None else name


def resolve(
    estimator: str | None, *, scale_rewards: str | None = None, scale: str | None = None
) -> tuple[str | None, str | None]:
    """``(estimator name, scale)`` from what a run says about its advantages.

    Args:
        estimator: the estimator's name (any trainer's), or None.
        scale_rewards: TRL's ``scale_rewards`` when known: ``batch`` makes a GRPO run
            batch-scaled; ``none`` with no estimator named means Dr. GRPO.
        scale: a scale stated by the source (a recording's manifest); wins when it is one of
            :class:`Scale`'s values.
    """
    name = canonical(estimator)
    if name is None and scale_rewards in ("group", "batch", "none"):
        name = from_trl(scale_rewards=scale_rewards)
    if scale in _SCALES:
        return name, scale
    e = info(name)
    if e is None:
        return name, None
    if e.scale is Scale.GROUP_STD and scale_rewards in ("batch", "none"):
        # TRL-style scale_rewards given to a GRPO estimator (rlvitals' grpo has the field too)
        return name, (Scale.BATCH_STD if scale_rewards == "batch" else Scale.NONE).value
    return name, e.scale.value


def scale_of(estimator: str | None, *, scale_rewards: str | None = None) -> str | None:
    """The advantage scale of ``estimator`` (see :func:`resolve`), or None when unknown."""
    return resolve(estimator, scale_rewards=scale_rewards)[1]


def from_trl(*, scale_rewards: str | bool | None = "group") -> str:
    """The estimator a plain TRL ``GRPOTrainer`` uses, in rlvitals names.

    TRL 1.16 computes ``rewards - group mean``, divided by the group std (``"group"``), the batch
    std (``"batch"``) or nothing (``"none"``); ``True``/``False`` are the old ``"group"`` and
    ``"none"``. ``loss_type`` (``dr_grpo``, ``dapo``, ...) changes how the loss is averaged, not
    the advantages. ``batch`` is GRPO with a batch scale (:func:`resolve`).
    """
    if isinstance(scale_rewards, bool):
        scale_rewards = "group" if scale_rewards else "none"
    return "dr_grpo" if scale_rewards == "none" else "grpo"


def trl_scale(*, scale_rewards: str | bool | None = "group", aggregation: str | None = None) -> str:
    """The advantage scale of a plain TRL ``GRPOTrainer`` (see :func:`from_trl`).

    ``multi_objective_aggregation="normalize_then_sum"`` normalises each reward function per
    group, sums, and divides the sum by its batch std: a batch scale.
    """
    if isinstance(scale_rewards, bool):
        scale_rewards = "group" if scale_rewards else "none"
    if aggregation == "normalize_then_sum" or scale_rewards == "batch":
        return Scale.BATCH_STD.value
    return Scale.NONE.value if scale_rewards == "none" else Scale.GROUP_STD.value


def from_verl(adv_estimator: str | None, *, norm_adv_by_std: bool | None = None) -> str | None:
    """The rlvitals name of a veRL ``algorithm.adv_estimator``.

    ``algorithm.norm_adv_by_std_in_grpo=False`` turns ``grpo`` into Dr. GRPO (veRL 0.9.1's
    ``grpo_vectorized`` ignores the flag). veRL's own registered names (``rlvitals_<name>``,
    :mod:`rlvitals.integrations.verl`) map back to ``<name>``. Unknown names come back unchanged.

    >>> from_verl("grpo_vectorized", norm_adv_by_std=False), from_verl("rlvitals_avspo")
    ('grpo', 'avspo')
    """
    if not adv_estimator:
        return None
    raw = str(adv_estimator).strip()
    if raw.startswith("rlvitals_"):
        raw = raw[len("rlvitals_") :]
    if raw == "grpo" and norm_adv_by_std is False:
        return "dr_grpo"
    return canonical(raw) or raw


def from_openrlhf(advantage_estimator: str | None) -> str | None:
    """The rlvitals name of an OpenRLHF ``--advantage_estimator`` (``group_norm`` is GRPO)."""
    if not advantage_estimator:
        return None
    return canonical(str(advantage_estimator).strip())

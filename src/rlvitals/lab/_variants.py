"""The lab's variant estimators: AVSPO with other virtual rewards (``lab_avspo_virtual``, the
ablation) and posterior-guided GRPO with one ingredient randomised (``lab_pg_control``, the
negative controls).

He et al. (ICML 2026) ablate the virtual rewards of AVSPO: stratified (theirs), uniform-random,
fixed ``0.5 r_max`` and exponential; stratified wins in their table. This estimator is ``avspo``
(gate, K and adaptive threshold unchanged: it calls the registered ``avspo`` for them) with the
K virtual rewards of every augmented group replaced:

- ``virtual="stratified"``: exactly ``avspo``;
- ``"uniform"``: K values drawn uniformly in [r_min, r_max] (numpy, seeded by ``seed`` and the
  step, so a run is reproducible);
- ``"fixed"``: K copies of ``r_min + 0.5 (r_max - r_min)`` (0.5 r_max for binary rewards).

``lab_pg_control`` is ``pg_grpo`` (:mod:`rlvitals.estimators.pg_grpo`) with random signs on
collapsed groups or another prompt's posterior (class :class:`PgControlConfig`).

Both are registered when the lab trainer is imported (lab runs only), so the package's
estimator list is unchanged elsewhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals._array import as_mask, where
from rlvitals.estimators import (
    ESTIMATORS,
    AvspoConfig,
    advantages_with_virtual,
    get_estimator,
    register_estimator,
    stratified_k,
)
from rlvitals.estimators.common import check_choice, common_metrics, to_like
from rlvitals.estimators.pg_grpo import PgGrpoConfig, to_host

__all__ = ["CONTROL_CHOICES", "VIRTUAL_CHOICES", "AvspoVirtualConfig", "PgControlConfig"]

NAME = "lab_avspo_virtual"
VIRTUAL_CHOICES = ("stratified", "uniform", "fixed")


@dataclass(frozen=True)
class AvspoVirtualConfig(AvspoConfig):
    """Knobs of ``lab_avspo_virtual``: every :class:`~rlvitals.estimators.AvspoConfig` field,
    plus:

    Attributes:
        virtual (str, default "stratified"): ``"stratified"``, ``"uniform"`` or ``"fixed"``
            virtual rewards (module docstring).
        seed (int, default 0): seed of the uniform draws.
    """

    virtual: str = "stratified"
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("virtual", self.virtual, VIRTUAL_CHOICES)


def _as(parent: type, config: Any, **over: Any) -> Any:
    """``config``, an instance of a subclass of the config ``parent``, as a ``parent`` (its
    fields, ``over`` replacing some): what the registered estimator the variant calls takes."""
    names = [f.name for f in dataclasses.fields(parent)]
    return parent(**{**{n: getattr(config, n) for n in names}, **over})


def lab_avspo_virtual(rewards: Any, group_ids: Any, config: AvspoVirtualConfig, state=None):
    """``avspo`` with the virtual rewards of ``config.virtual``; same state and metrics."""
    adv, metrics, new_state = get_estimator("avspo")(
        rewards, group_ids, _as(AvspoConfig, config), state
    )
    if config.virtual == "stratified" or not metrics["avspo_triggered"]:
        return adv, metrics, new_state
    stats = signal.group_stats(rewards, group_ids, ddof=config.ddof, tau=config.tau)
    t = stats.torch
    gate = float(metrics["avspo_acr_gate"])
    count = np.asarray(stats.count.tolist() if t else stats.count)
    collapsed = np.asarray(stats.collapsed.tolist() if t else stats.collapsed, dtype=bool)
    rng = np.random.default_rng([config.seed, int(new_state.step)])
    span = config.r_max - config.r_min
    for c in np.unique(count[collapsed]):
        k = stratified_k(int(c), gate, config.alpha)
        if config.virtual == "uniform":
            virtual = config.r_min + span * rng.random(k)
        else:
            virtual = np.full(k, config.r_min + 0.5 * span)
        augment = collapsed & (count == c)
        part = advantages_with_virtual(
            rewards, group_ids, virtual, augment=augment, eps=config.eps, ddof=config.ddof
        )
        rows = stats.spread(as_mask(augment, stats.rewards, t))
        adv = where(rows, part, adv, t)
    out = common_metrics(stats, adv, tau=config.tau, r_min=config.r_min, r_max=config.r_max)
    metrics.update(out)
    return adv, metrics, new_state


if NAME not in ESTIMATORS:
    register_estimator(
        NAME,
        AvspoVirtualConfig,
        state_cls=get_estimator("avspo").state_cls,
        summary="AVSPO with stratified, uniform-random or fixed virtual rewards (lab ablation)",
        scale="virtual",
        ranged=True,
    )(lab_avspo_virtual)


# --------------------------------------------------------------------------------------------
# Negative controls of posterior-guided GRPO (issue 26.7): ``lab_pg_control``

CONTROL_NAME = "lab_pg_control"
CONTROL_CHOICES = ("random_sign", "shuffled_keys")


@dataclass(frozen=True)
class PgControlConfig(PgGrpoConfig):
    """Knobs of ``lab_pg_control``: every :class:`~rlvitals.estimators.pg_grpo.PgGrpoConfig`
    field, plus:

    Attributes:
        control (str, default "random_sign"): ``"random_sign"``: each collapsed group's
            advantage gets a random sign (one per group, its size kept), so the baseline's
            direction carries no information; ``"shuffled_keys"``: the posterior a group is
            scored against is the one under ``read_keys`` (another prompt's), while the
            counts still update under ``keys`` (its own).
        seed (int, default 0): seed of the random signs (with the step). Set per run by the
            lab trainer.
        read_keys (tuple or None, default None): with ``shuffled_keys``, the key whose
            posterior each group reads, in the order of ``keys``; None = ``keys``. Set per step
            by the lab trainer.
    """

    control: str = "random_sign"
    seed: int = 0
    read_keys: tuple | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("control", self.control, CONTROL_CHOICES)


def lab_pg_control(rewards: Any, group_ids: Any, config: PgControlConfig, state=None):
    """``pg_grpo`` with one ingredient randomised (``config.control``); same state and metrics.

    ``random_sign``: the advantages of ``pg_grpo``, each collapsed group's multiplied by an
    independent ±1 (numpy, seeded by ``seed`` and the step). ``shuffled_keys``: the advantages
    ``pg_grpo`` gives when every group reads the posterior of its ``read_keys`` entry; the next
    state is the one ``pg_grpo`` reaches under the groups' own ``keys``.
    """
    pg = get_estimator("pg_grpo")
    own = _as(PgGrpoConfig, config)
    adv, metrics, new_state = pg(rewards, group_ids, own, state)
    if config.control == "shuffled_keys":
        if config.read_keys is not None:
            read = _as(PgGrpoConfig, config, keys=tuple(config.read_keys))
            adv, metrics, _ = pg(rewards, group_ids, read, state)
        return adv, metrics, new_state
    stats = signal.group_stats(to_host(rewards), to_host(group_ids), tau=config.tau)
    collapsed = np.asarray(stats.collapsed, dtype=bool)
    rng = np.random.default_rng([config.seed, int(new_state.step)])
    signs = np.where(collapsed & (rng.random(collapsed.size) < 0.5), -1.0, 1.0)
    rows = to_like(stats.spread(signs), adv)  # float32 advantages stay float32
    return adv * rows, metrics, new_state


if CONTROL_NAME not in ESTIMATORS:
    register_estimator(
        CONTROL_NAME,
        PgControlConfig,
        state_cls=get_estimator("pg_grpo").state_cls,
        summary="pg_grpo with random signs on collapsed groups or shuffled prompt keys "
        "(lab negative controls)",
        scale="virtual",
        ranged=True,
    )(lab_pg_control)

"""AVSPO with other virtual rewards, for the lab's ablation: ``lab_avspo_virtual``.

He et al. (ICML 2026) ablate the virtual rewards of AVSPO: stratified (theirs), uniform-random,
fixed ``0.5 r_max`` and exponential; stratified wins in their table. This estimator is ``avspo``
(gate, K and adaptive threshold unchanged: it calls the registered ``avspo`` for them) with the
K virtual rewards of every augmented group replaced:

- ``virtual="stratified"``: exactly ``avspo``;
- ``"uniform"``: K values drawn uniformly in [r_min, r_max] (numpy, seeded by ``seed`` and the
  step, so a run is reproducible);
- ``"fixed"``: K copies of ``r_min + 0.5 (r_max - r_min)`` (0.5 r_max for binary rewards).

It is registered when the lab trainer is imported (lab runs only), so the package's estimator
list is unchanged elsewhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals._array import where
from rlvitals.estimators import (
    ESTIMATORS,
    AvspoConfig,
    advantages_with_virtual,
    get_estimator,
    register_estimator,
    stratified_k,
)
from rlvitals.estimators._common import check_choice, common_metrics

__all__ = ["VIRTUAL_CHOICES", "AvspoVirtualConfig"]

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


def _avspo_config(config: AvspoVirtualConfig) -> AvspoConfig:
    names = [f.name for f in dataclasses.fields(AvspoConfig)]
    return AvspoConfig(**{n: getattr(config, n) for n in names})


def lab_avspo_virtual(rewards: Any, group_ids: Any, config: AvspoVirtualConfig, state=None):
    """``avspo`` with the virtual rewards of ``config.virtual``; same state and metrics."""
    adv, metrics, new_state = get_estimator("avspo")(
        rewards, group_ids, _avspo_config(config), state
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
        rows = stats.spread(_like(augment, stats.rewards, t))
        adv = where(rows, part, adv, t)
    out = common_metrics(stats, adv, tau=config.tau, r_min=config.r_min, r_max=config.r_max)
    metrics.update(out)
    return adv, metrics, new_state


def _like(mask: np.ndarray, like: Any, t: bool) -> Any:
    if t:
        import torch

        return torch.as_tensor(mask, dtype=torch.bool, device=like.device)
    return mask


if NAME not in ESTIMATORS:
    register_estimator(
        NAME,
        AvspoVirtualConfig,
        state_cls=get_estimator("avspo").state_cls,
        summary="AVSPO with stratified, uniform-random or fixed virtual rewards (lab ablation)",
        scale="virtual",
        ranged=True,
    )(lab_avspo_virtual)

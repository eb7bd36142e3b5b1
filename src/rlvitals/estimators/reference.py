"""Reference estimators: ``grpo``, ``dr_grpo`` and ``rloo``, matching TRL and veRL numerically.

- GRPO (Shao et al., "DeepSeekMath", arXiv 2402.03300): ``A_i = (r_i - mean_j) / (std_j + eps)``.
  TRL 1.x (``GRPOTrainer``, ``scale_rewards="group"``): unbiased ``nanstd``, ``eps = 1e-4``, NaN
  advantages set to 0. veRL (``compute_grpo_outcome_advantage``): unbiased ``torch.std``,
  ``epsilon = 1e-6``, and a group of one member is given mean 0 and std 1 (``singleton="verl"``).
- Dr. GRPO (Liu et al., "Understanding R1-Zero-Like Training", arXiv 2503.20783):
  ``A_i = r_i - mean_j`` (TRL ``scale_rewards="none"``, veRL ``norm_adv_by_std_in_grpo=False``).
- RLOO (Ahmadian et al., arXiv 2402.14740): ``A_i = r_i - mean of the other members``.

``grpo`` with ``scale_rewards="batch"`` is TRL's batch scaling: centred per group, divided by the
std of every reward in the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlvitals import signal
from rlvitals._array import isnan, where
from rlvitals.estimators._base import EstimatorName, register_estimator
from rlvitals.estimators.common import (
    DEFAULT_R_MAX,
    DEFAULT_R_MIN,
    check_choice,
    check_shared,
    common_metrics,
)
from rlvitals.signal import DEFAULT_EPS, DEFAULT_TAU

__all__ = ["DrGrpoConfig", "GrpoConfig", "RlooConfig", "reference_advantages"]

SCALE_CHOICES = ("group", "batch", "none")
SINGLETON_CHOICES = ("zero", "verl")


@dataclass(frozen=True)
class GrpoConfig:
    """Knobs of ``grpo`` (Shao et al. 2024).

    Attributes:
        eps (float, default 1e-4): added to the std in the denominator. 1e-4 is TRL's value;
            veRL's ``compute_grpo_outcome_advantage`` uses ``epsilon=1e-6``.
        tau (float, default 1e-6): collapse tolerance on a group's reward std (DESIGN.md 3.1);
            decides ACR only, never the advantages.
        ddof (int, default 1): 1 = unbiased std (TRL ``nanstd``, veRL ``torch.std``); 0 =
            population std.
        scale_rewards (str, default "group"): TRL's option. ``"group"``: divide by the group std;
            ``"batch"``: divide by the std of all rewards of the step; ``"none"``: no division
            (Dr. GRPO).
        singleton (str, default "zero"): a group with one scorable member. ``"zero"``: advantage
            0 (TRL: its std is NaN and ``nan_to_num`` zeroes it); ``"verl"``: mean 0 and std 1,
            i.e. ``r / (1 + eps)`` (``r`` without std scaling), as veRL does.
        r_min (float, default 0.0), r_max (float, default 1.0): reward range, used to split ACR
            into solve_none / solve_all / flat.
    """

    eps: float = DEFAULT_EPS
    tau: float = DEFAULT_TAU
    ddof: int = 1
    scale_rewards: str = "group"
    singleton: str = "zero"
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX

    def __post_init__(self) -> None:
        check_shared(self)
        check_choice("scale_rewards", self.scale_rewards, SCALE_CHOICES)
        check_choice("singleton", self.singleton, SINGLETON_CHOICES)
        if self.singleton == "verl" and self.scale_rewards == "batch":
            raise ValueError(
                "singleton='verl' applies to scale_rewards 'group' or 'none' (veRL "
                "has no batch scaling), got scale_rewards='batch'"
            )


@dataclass(frozen=True)
class DrGrpoConfig:
    """Knobs of ``dr_grpo`` (Liu et al. 2025): ``A_i = r_i - mean_j``, no std division.

    Attributes:
        tau (float, default 1e-6): collapse tolerance (ACR only).
        singleton (str, default "zero"): a one-member group gets 0 (``"zero"``) or its reward
            ``r`` (``"verl"``: veRL sets that group's mean to 0).
        r_min (float, default 0.0), r_max (float, default 1.0): reward range for the ACR split.
    """

    tau: float = DEFAULT_TAU
    singleton: str = "zero"
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX

    def __post_init__(self) -> None:
        check_shared(self)
        check_choice("singleton", self.singleton, SINGLETON_CHOICES)


@dataclass(frozen=True)
class RlooConfig:
    """Knobs of ``rloo`` (Ahmadian et al. 2024): ``A_i = c/(c-1) (r_i - mean_j)``.

    Attributes:
        tau (float, default 1e-6): collapse tolerance (ACR only).
        r_min (float, default 0.0), r_max (float, default 1.0): reward range for the ACR split.
    """

    tau: float = DEFAULT_TAU
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX

    def __post_init__(self) -> None:
        check_shared(self)


def reference_advantages(
    stats: signal.GroupStats,
    *,
    scale_rewards: str = "group",
    eps: float = DEFAULT_EPS,
    singleton: str = "zero",
) -> Any:
    """``(n,)`` GRPO-family advantages of the rewards ``stats`` was computed from.

    Args:
        stats: :func:`rlvitals.signal.group_stats` of the step (its ``ddof`` is the std form).
        scale_rewards: ``"group"``, ``"batch"`` or ``"none"`` (see :class:`GrpoConfig`);
            ``"rloo"`` gives the leave-one-out baseline.
        singleton: ``"zero"`` or ``"verl"`` (see :class:`GrpoConfig`).

    The rows are centred on ``stats.mean`` and, for ``"group"``, scaled by ``stats.std``; AVSPO
    hands its augmented statistics (:meth:`~rlvitals.signal.GroupStats.with_virtual`) here, so
    every other group goes through the very same arithmetic as ``grpo``.
    """
    method = _METHODS[scale_rewards]
    adv = signal.advantages_from_stats(stats, method, eps)
    if singleton == "verl":
        t = stats.torch
        lone = stats.spread(stats.count == 1)
        if stats.has_nan:
            lone = lone & ~isnan(stats.rewards, t)
        if bool(lone.any()):
            rewards = stats.rewards
            lone_adv = rewards / (1.0 + eps) if method == "grpo" else rewards
            adv = where(lone, lone_adv, adv, t)
    return adv


_METHODS = {"group": "grpo", "batch": "batch", "none": "dr_grpo", "rloo": "rloo"}


def _metrics(stats: signal.GroupStats, adv: Any, cfg: Any) -> dict:
    return common_metrics(stats, adv, tau=cfg.tau, r_min=cfg.r_min, r_max=cfg.r_max)


@register_estimator(
    EstimatorName.GRPO.value,
    GrpoConfig,
    summary="(r - mean_j) / (std_j + eps), TRL and veRL's GRPO",
)
def grpo(rewards: Any, group_ids: Any, config: GrpoConfig, state: Any = None) -> tuple:
    """GRPO advantages ``(n,)`` and the common metrics; stateless (returns ``state=None``)."""
    stats = signal.group_stats(rewards, group_ids, ddof=config.ddof, tau=config.tau)
    adv = reference_advantages(
        stats, scale_rewards=config.scale_rewards, eps=config.eps, singleton=config.singleton
    )
    return adv, _metrics(stats, adv, config), None


@register_estimator(
    EstimatorName.DR_GRPO.value, DrGrpoConfig, summary="r - mean_j (Dr. GRPO), no std division"
)
def dr_grpo(rewards: Any, group_ids: Any, config: DrGrpoConfig, state: Any = None) -> tuple:
    """Dr. GRPO advantages ``(n,)`` and the common metrics; stateless."""
    stats = signal.group_stats(rewards, group_ids, tau=config.tau)
    adv = reference_advantages(stats, scale_rewards="none", eps=0.0, singleton=config.singleton)
    return adv, _metrics(stats, adv, config), None


@register_estimator(
    EstimatorName.RLOO.value, RlooConfig, summary="r - mean of the other group members (RLOO)"
)
def rloo(rewards: Any, group_ids: Any, config: RlooConfig, state: Any = None) -> tuple:
    """RLOO advantages ``(n,)`` and the common metrics; stateless."""
    stats = signal.group_stats(rewards, group_ids, tau=config.tau)
    adv = reference_advantages(stats, scale_rewards="rloo", eps=0.0)
    return adv, _metrics(stats, adv, config), None

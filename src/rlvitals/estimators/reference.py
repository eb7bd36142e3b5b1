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

import numpy as np

from rlvitals import signal
from rlvitals.estimators._base import EstimatorName, register_estimator
from rlvitals.estimators._common import (
    DEFAULT_R_MAX,
    DEFAULT_R_MIN,
    check_choice,
    check_inputs,
    check_number,
    check_range,
    common_metrics,
    isnan,
    nan_to_zero,
    where,
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
        check_number("eps", self.eps, lo=0.0)
        check_number("tau", self.tau, lo=0.0)
        check_choice("ddof", self.ddof, (0, 1))
        check_choice("scale_rewards", self.scale_rewards, SCALE_CHOICES)
        check_choice("singleton", self.singleton, SINGLETON_CHOICES)
        if self.singleton == "verl" and self.scale_rewards == "batch":
            raise ValueError("singleton='verl' applies to scale_rewards 'group' or 'none' (veRL "
                             "has no batch scaling), got scale_rewards='batch'")
        check_range(self.r_min, self.r_max)


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
        check_number("tau", self.tau, lo=0.0)
        check_choice("singleton", self.singleton, SINGLETON_CHOICES)
        check_range(self.r_min, self.r_max)


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
        check_number("tau", self.tau, lo=0.0)
        check_range(self.r_min, self.r_max)


def reference_advantages(
    rewards: Any,
    group_ids: Any,
    *,
    scale_rewards: str = "group",
    eps: float = DEFAULT_EPS,
    ddof: int = 1,
    tau: float = DEFAULT_TAU,
    singleton: str = "zero",
) -> tuple[Any, signal.GroupStats, Any, bool]:
    """GRPO-family advantages plus the group statistics they came from.

    Args:
        rewards: ``(n,)`` float (NaN = unscorable), numpy or torch.
        group_ids: ``(n,)`` group keys.
        scale_rewards: ``"group"``, ``"batch"`` or ``"none"`` (see :class:`GrpoConfig`);
            ``"rloo"`` gives the leave-one-out baseline.

    Returns:
        ``(advantages (n,), stats, rewards, is_torch)`` with ``rewards`` validated (cast to
        float when it was not).
    """
    stats, rewards, group_ids, t = prepare(rewards, group_ids, ddof=ddof, tau=tau)
    adv = advantages_from_stats(rewards, group_ids, stats, scale_rewards=scale_rewards, eps=eps,
                                ddof=ddof, singleton=singleton)
    return adv, stats, rewards, t


def prepare(rewards: Any, group_ids: Any, *, ddof: int = 1,
            tau: float = DEFAULT_TAU) -> tuple[signal.GroupStats, Any, Any, bool]:
    """``(stats, rewards, group_ids, is_torch)``: validated inputs and their group statistics."""
    rewards, group_ids, t = check_inputs(rewards, group_ids)
    return signal.group_stats(rewards, group_ids, ddof=ddof, tau=tau), rewards, group_ids, t


def advantages_from_stats(
    rewards: Any,
    group_ids: Any,
    stats: signal.GroupStats,
    *,
    scale_rewards: str = "group",
    eps: float = DEFAULT_EPS,
    ddof: int = 1,
    singleton: str = "zero",
) -> Any:
    """``(n,)`` GRPO-family advantages from given group statistics (see reference_advantages).

    The rows are centred on ``stats.mean`` and, for ``"group"``, scaled by ``stats.std``: AVSPO
    passes the statistics of its augmented groups here, so every other group goes through the
    very same arithmetic as ``grpo``.
    """
    t = not isinstance(rewards, np.ndarray)
    method = {"group": "grpo", "batch": "batch", "none": "dr_grpo", "rloo": "rloo"}[scale_rewards]
    adv = signal.advantages(rewards, group_ids, method, eps, ddof=ddof, stats=stats)
    if eps == 0 and method in ("grpo", "batch"):
        adv = nan_to_zero(adv, t)  # 0/0 in a collapsed group; TRL applies nan_to_num as well
    if singleton == "verl":
        lone = stats.spread(stats.count == 1) & ~isnan(rewards, t)
        if bool(lone.any()):
            lone_adv = rewards / (1.0 + eps) if method == "grpo" else rewards
            adv = where(lone, lone_adv, adv, t)
    return adv


def _metrics(rewards: Any, stats: signal.GroupStats, adv: Any, cfg: Any, t: bool) -> dict:
    return common_metrics(rewards, stats, adv, tau=cfg.tau, r_min=cfg.r_min, r_max=cfg.r_max,
                          torch_in=t)


@register_estimator(EstimatorName.GRPO.value, GrpoConfig,
                    summary="(r - mean_j) / (std_j + eps), TRL and veRL's GRPO")
def grpo(rewards: Any, group_ids: Any, config: GrpoConfig, state: Any = None) -> tuple:
    """GRPO advantages ``(n,)`` and the common metrics; stateless (returns ``state=None``)."""
    adv, stats, rewards, t = reference_advantages(
        rewards, group_ids, scale_rewards=config.scale_rewards, eps=config.eps,
        ddof=config.ddof, tau=config.tau, singleton=config.singleton,
    )
    return adv, _metrics(rewards, stats, adv, config, t), None


@register_estimator(EstimatorName.DR_GRPO.value, DrGrpoConfig,
                    summary="r - mean_j (Dr. GRPO), no std division")
def dr_grpo(rewards: Any, group_ids: Any, config: DrGrpoConfig, state: Any = None) -> tuple:
    """Dr. GRPO advantages ``(n,)`` and the common metrics; stateless."""
    adv, stats, rewards, t = reference_advantages(
        rewards, group_ids, scale_rewards="none", eps=0.0, tau=config.tau,
        singleton=config.singleton,
    )
    return adv, _metrics(rewards, stats, adv, config, t), None


@register_estimator(EstimatorName.RLOO.value, RlooConfig,
                    summary="r - mean of the other group members (RLOO)")
def rloo(rewards: Any, group_ids: Any, config: RlooConfig, state: Any = None) -> tuple:
    """RLOO advantages ``(n,)`` and the common metrics; stateless."""
    adv, stats, rewards, t = reference_advantages(rewards, group_ids, scale_rewards="rloo", eps=0.0,
                                         tau=config.tau)
    return adv, _metrics(rewards, stats, adv, config, t), None

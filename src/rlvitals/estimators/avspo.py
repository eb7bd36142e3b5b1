"""AVSPO: Adaptive Virtual Sample Policy Optimization, and the authors' released variant.

Paper: He et al., "Advantage Collapse in Group Relative Policy Optimization: Diagnosis and
Mitigation" (ICML 2026, arXiv 2605.21125); DESIGN.md 3.5 states it normatively.

Virtual rewards enter the normalisation statistics of collapsed groups only: they never appear in
the returned advantages (which are ``(n,)``, one per real completion) and cost no rollouts. One
step of ``avspo``:

1. ACR_t = share of the step's scorable groups that are collapsed (raw rewards; logged as ``acr``).
2. Gate: ``g_t = ACR_t``, or the mean of ACR over the last ``acr_window`` steps when the step holds
   few groups (see below); logged as ``avspo_acr_gate``. Trigger when ``g_t > tau_adapt``.
3. Every collapsed group of a triggered step at the reward range's bounds (all solved or all
   failed; see ``flat`` for partial credit) gets ``K_j = max(1, min(G_j, ceil(G_j g_t^alpha)))``
   virtual rewards, ``G_j`` its number of scorable completions.
4. Stratified virtual rewards ``v_k = r_min + (r_max - r_min)(1 - (k - 1)/K)``, ``k = 1..K``.
5. Real members of augmented groups: ``A_i = (r_i - mean') / (std' + eps)`` with mean' and std'
   over the G_j real plus K_j virtual rewards. Every other group gets exactly the ``grpo``
   advantages (same code path: bit for bit).
6. ``tau_adapt <- clip(tau_adapt + eta sign(dJ) (g_t - tau_adapt), lo, hi)``.

How this implementation resolves what the paper leaves open (each is a config field):

- ``r_max``/``r_min``: the reward range of the task (default [0, 1], binary), *not* the group's
  own extremes (an all-zero group would get all-zero virtual rewards and change nothing).
- Windowed gate (``windowed_gate``, ``acr_window``, ``few_groups``): with one prompt per step (the
  paper's setting) ACR_t is 0 or 1, so steps 2, 3 and 6 use the trailing mean of ACR over the last
  ``acr_window`` steps (this one included). ``"auto"`` does so when the step holds fewer than
  ``few_groups`` scorable groups; ``"always"``/``"never"`` force it. The windowed value feeds the
  trigger, K and the tau_adapt update alike; ``acr`` is always the step's own value.
- The performance signal J (``j_signal``): ``"reward_ema"`` (default) is an EMA of the batch mean
  reward with decay ``j_ema_decay``, initialised at the first step's mean, so dJ = 0 on the first
  step; ``"reward"`` uses the raw batch mean; ``"explicit"`` takes dJ from the ``delta_j`` field
  (e.g. the change of a validation accuracy the trainer measures).
- std form (``ddof``): 1 = unbiased over the augmented set (default; matches TRL/veRL's std and
  gives the ±1/3 of DESIGN.md), 0 = population.
- ``ceil`` is taken with a 1e-9 tolerance so that ``G g^alpha`` equal to an integer up to float
  round-off (``8 * 0.25**0.5``) is not rounded up.
- A step without a scorable group changes nothing: no trigger, no tau_adapt update, no history.

``avspo_released`` follows the authors' released code: every collapsed group, with no gate and no
adaptive threshold, gets one virtual reward ``r_min + r_max - c`` (``1 - c`` for binary rewards)
where c is its common value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals._array import as_mask, ceil, where
from rlvitals.estimators._base import EstimatorName, register_estimator
from rlvitals.estimators.common import (
    DEFAULT_R_MAX,
    DEFAULT_R_MIN,
    check_choice,
    check_int,
    check_number,
    check_range,
    check_shared,
    coerce_state,
    common_metrics,
)
from rlvitals.estimators.reference import reference_advantages
from rlvitals.signal import DEFAULT_EPS, DEFAULT_TAU

__all__ = [
    "AvspoConfig",
    "AvspoReleasedConfig",
    "AvspoState",
    "advantages_with_virtual",
    "stratified_k",
    "stratified_virtual_rewards",
]

# Hyperparameters of the paper (DESIGN.md 3.5).
TAU_ADAPT0 = 0.5
"""Initial adaptive threshold."""
ALPHA = 0.5
"""Exponent of the stratified K formula."""
ETA = 0.01
"""Step size of the tau_adapt update."""
TAU_ADAPT_MIN = 0.1
TAU_ADAPT_MAX = 0.9
"""Bounds of tau_adapt."""
ACR_WINDOW = 25
"""W of the windowed ACR gate (steps 2, 3, 6 with few groups per step)."""
# Resolutions of our own (documented in the module docstring).
FEW_GROUPS = 8
"""``windowed_gate="auto"`` uses the windowed ACR when a step holds fewer scorable groups."""
J_EMA_DECAY = 0.9
"""Decay of the EMA of the batch mean reward that serves as J."""
K_CEIL_TOL = 1e-9
"""``ceil(x - K_CEIL_TOL)``: an integer up to round-off is not rounded up."""

WINDOWED_CHOICES = ("auto", "always", "never")
FLAT_CHOICES = ("skip", "stratify")
J_SIGNAL_CHOICES = ("reward_ema", "reward", "explicit")


@dataclass(frozen=True)
class AvspoConfig:
    """Knobs of ``avspo`` (He et al. 2026, arXiv 2605.21125; DESIGN.md 3.5).

    Attributes:
        eps (float, default 1e-4): std epsilon of the advantages (TRL's; veRL uses 1e-6).
        tau (float, default 1e-6): collapse tolerance on a group's reward std (paper).
        ddof (int, default 1): std form over the augmented set and for ordinary groups; 1 =
            unbiased (TRL, veRL), 0 = population.
        r_min (float, default 0.0), r_max (float, default 1.0): the achievable reward range;
            virtual rewards are stratified across it. Not the group's own extremes.
        alpha (float, default 0.5): exponent in ``K = max(1, min(G, ceil(G ACR^alpha)))``
            (paper; beats 0.3, 0.7, 1.0 in its ablation).
        tau_adapt0 (float, default 0.5): initial adaptive threshold (paper); used when no state
            is passed.
        tau_adapt_min (float, default 0.1), tau_adapt_max (float, default 0.9): bounds of
            tau_adapt (paper).
        eta (float, default 0.01): step size of the tau_adapt update (paper).
        acr_window (int, default 25): W, steps in the windowed ACR gate (paper).
        windowed_gate (str, default "auto"): ``"auto"`` gates on the windowed ACR when the step
            holds fewer than ``few_groups`` scorable groups; ``"always"``; ``"never"``.
        few_groups (int, default 8): the ``"auto"`` threshold (ours: below 8 groups ACR_t moves
            in steps of more than 1/8).
        j_signal (str, default "reward_ema"): the performance J whose change drives tau_adapt:
            ``"reward_ema"`` (EMA of the batch mean reward), ``"reward"`` (batch mean reward),
            ``"explicit"`` (dJ given by ``delta_j``). The paper leaves J open.
        j_ema_decay (float, default 0.9): decay of the ``"reward_ema"`` EMA (ours).
        delta_j (float or None, default None): dJ for this step; required with
            ``j_signal="explicit"`` and refused otherwise.
        flat (str, default "skip"): what to do with a collapsed group whose common value lies
            strictly inside the reward range (partial credit, e.g. every completion scored 0.6).
            ``"skip"`` (ours): leave it as GRPO does (zero advantages). ``"stratify"``: the
            paper's formula for it too. Why: the paper's virtual rewards turn an all-solved
            group positive and an all-failed one negative (their mean lies strictly between the
            bounds whatever K is); for a group at c inside the range the sign of c minus that
            mean, (K+1)/(2K) of the range, flips with K, i.e. with the step's ACR (a group at
            0.6 gets +0.089 with K = 8 and -0.049 with K = 4). A direction that depends on how
            many other groups collapsed is not a learning signal, so by default only groups at
            r_min or r_max are augmented (for binary rewards that is every collapsed group).
    """

    eps: float = DEFAULT_EPS
    tau: float = DEFAULT_TAU
    ddof: int = 1
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX
    alpha: float = ALPHA
    tau_adapt0: float = TAU_ADAPT0
    tau_adapt_min: float = TAU_ADAPT_MIN
    tau_adapt_max: float = TAU_ADAPT_MAX
    eta: float = ETA
    acr_window: int = ACR_WINDOW
    windowed_gate: str = "auto"
    few_groups: int = FEW_GROUPS
    j_signal: str = "reward_ema"
    j_ema_decay: float = J_EMA_DECAY
    delta_j: float | None = None
    flat: str = "skip"

    def __post_init__(self) -> None:
        check_shared(self)
        check_number("alpha", self.alpha, lo=0.0, lo_open=True)
        check_number("tau_adapt_min", self.tau_adapt_min, lo=0.0, hi=1.0)
        check_number("tau_adapt_max", self.tau_adapt_max, lo=self.tau_adapt_min, hi=1.0)
        check_number("tau_adapt0", self.tau_adapt0, lo=self.tau_adapt_min, hi=self.tau_adapt_max)
        check_number("eta", self.eta, lo=0.0, hi=1.0)
        check_int("acr_window", self.acr_window, lo=1)
        check_choice("windowed_gate", self.windowed_gate, WINDOWED_CHOICES)
        check_int("few_groups", self.few_groups, lo=1)
        check_choice("j_signal", self.j_signal, J_SIGNAL_CHOICES)
        check_choice("flat", self.flat, FLAT_CHOICES)
        check_number("j_ema_decay", self.j_ema_decay, lo=0.0, hi=1.0, hi_open=True)
        if self.j_signal == "explicit":
            if self.delta_j is None:
                raise ValueError("j_signal='explicit' needs delta_j (the change of J this step)")
            check_number("delta_j", self.delta_j)
        elif self.delta_j is not None:
            raise ValueError(
                f"delta_j={self.delta_j!r} is only used with j_signal='explicit', "
                f"got j_signal={self.j_signal!r}"
            )


@dataclass(frozen=True)
class AvspoReleasedConfig:
    """Knobs of ``avspo_released`` (the authors' released code).

    Attributes:
        eps (float, default 1e-4): std epsilon.
        tau (float, default 1e-6): collapse tolerance.
        ddof (int, default 1): 1 = unbiased std over the augmented set, 0 = population.
        r_min (float, default 0.0), r_max (float, default 1.0): reward range; the virtual
            reward of a group of common value c is ``r_min + r_max - c`` (``1 - c`` if binary).
    """

    eps: float = DEFAULT_EPS
    tau: float = DEFAULT_TAU
    ddof: int = 1
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX

    def __post_init__(self) -> None:
        check_shared(self)


@dataclass(frozen=True)
class AvspoState:
    """What ``avspo`` carries from one step to the next; JSON-serialisable.

    Attributes:
        tau_adapt: the adaptive threshold for the next step.
        step: steps seen so far.
        acr_history: raw ACR of the last ``acr_window`` steps with a scorable group, oldest first.
        j_prev: the last value of J (``"reward_ema"``: the EMA; ``"reward"``: the mean reward);
            None before the first step.
    """

    tau_adapt: float = TAU_ADAPT0
    step: int = 0
    acr_history: tuple[float, ...] = field(default_factory=tuple)
    j_prev: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: ``json.dumps(state.to_dict())`` works."""
        return {
            "tau_adapt": float(self.tau_adapt),
            "step": int(self.step),
            "acr_history": [float(a) for a in self.acr_history],
            "j_prev": None if self.j_prev is None else float(self.j_prev),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AvspoState:
        """Inverse of :meth:`to_dict`; unknown or malformed entries raise ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"AVSPO state must be a dict, got {type(data).__name__}")
        valid = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise ValueError(f"unknown AVSPO state key(s) {unknown}; valid: {', '.join(valid)}")
        tau_adapt = data.get("tau_adapt", TAU_ADAPT0)
        check_number("tau_adapt", tau_adapt, lo=0.0, hi=1.0)
        step = data.get("step", 0)
        check_int("step", step, lo=0)
        history = data.get("acr_history", [])
        if not isinstance(history, (list, tuple)):
            raise ValueError(f"acr_history must be a list of numbers, got {history!r}")
        for a in history:
            check_number("acr_history entry", a, lo=0.0, hi=1.0)
        j_prev = data.get("j_prev")
        if j_prev is not None:
            check_number("j_prev", j_prev)
        return cls(
            tau_adapt=float(tau_adapt),
            step=int(step),
            acr_history=tuple(float(a) for a in history),
            j_prev=None if j_prev is None else float(j_prev),
        )


# --------------------------------------------------------------------------------------------
# Pure helpers (the algebra of DESIGN.md 3.5)


def stratified_k(group_size: int, acr: float, alpha: float = ALPHA) -> int:
    """Number of virtual samples ``K = max(1, min(G, ceil(G * acr**alpha)))``.

    >>> [stratified_k(8, a) for a in (0.01, 0.25, 0.5, 1.0)]
    [1, 4, 6, 8]
    """
    check_int("group_size", group_size, lo=1)
    check_number("acr", acr, lo=0.0, hi=1.0)
    return max(1, min(group_size, math.ceil(group_size * acr**alpha - K_CEIL_TOL)))


def stratified_virtual_rewards(
    k: int, r_min: float = DEFAULT_R_MIN, r_max: float = DEFAULT_R_MAX
) -> np.ndarray:
    """``(k,)`` stratified virtual rewards ``v_i = r_min + (r_max - r_min)(1 - (i - 1)/k)``.

    >>> stratified_virtual_rewards(4).tolist()
    [1.0, 0.75, 0.5, 0.25]
    """
    check_int("k", k, lo=1)
    check_range(r_min, r_max)
    frac = 1.0 - np.arange(k, dtype=np.float64) / k
    return r_min + (r_max - r_min) * frac


def _stratified_moments(k: Any, r_min: float, r_max: float) -> tuple[Any, Any]:
    """Mean and sum of squared deviations of the ``k`` stratified virtual rewards (elementwise).

    The values are ``r_min + d j/k`` for ``j = 1..k`` (``d = r_max - r_min``): mean
    ``r_min + d (k + 1)/(2k)``, squared deviations ``d^2 (k^2 - 1)/(12 k)``.
    """
    d = r_max - r_min
    return r_min + d * (k + 1) / (2 * k), d * d * (k * k - 1) / (12 * k)


def advantages_with_virtual(
    rewards: Any,
    group_ids: Any,
    virtual: Sequence[float],
    *,
    augment: Any = None,
    eps: float = DEFAULT_EPS,
    ddof: int = 1,
    tau: float = DEFAULT_TAU,
) -> Any:
    """Advantages ``(n,)`` when the groups in ``augment`` are joined by the ``virtual`` rewards.

    Args:
        rewards: ``(n,)`` float (NaN = unscorable), numpy or torch.
        group_ids: ``(n,)`` group keys.
        virtual: ``(K,)`` virtual rewards added to every augmented group's statistics.
        augment: ``(k,)`` bool over groups in sorted-id order; default: the collapsed groups.
        eps, ddof, tau: as in :class:`AvspoConfig`.

    Groups not augmented get the ``grpo`` advantages. For a homogeneous group of value c plus k
    copies of v (n = G + k, eps -> 0, ddof 1) every member gets
    ``sign(c - v) sqrt(k (n - 1) / (G n))``:

    >>> import numpy as np
    >>> adv = advantages_with_virtual(np.ones(8), np.zeros(8, dtype=int), [0.0], eps=0.0)
    >>> round(float(adv[0]), 12)
    0.333333333333
    """
    v = np.asarray(virtual, dtype=np.float64)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError(f"virtual must be a non-empty 1-D sequence of finite rewards, got {v!r}")
    check_number("eps", eps, lo=0.0)
    stats = signal.group_stats(rewards, group_ids, ddof=ddof, tau=tau)
    augment = stats.collapsed if augment is None else as_mask(augment, stats.rewards, stats.torch)
    if tuple(augment.shape) != (stats.n_groups,):
        raise ValueError(f"augment must be ({stats.n_groups},) bool, got {tuple(augment.shape)}")
    mean_v = float(v.mean())
    ss_v = float(((v - mean_v) ** 2).sum())
    return reference_advantages(stats.with_virtual(augment, float(v.size), mean_v, ss_v), eps=eps)


# --------------------------------------------------------------------------------------------
# The estimators


def _next_j(config: AvspoConfig, state: AvspoState, mean_reward: float) -> tuple[float, Any]:
    """``(dJ, J to store)`` for this step."""
    if config.j_signal == "explicit":
        return float(config.delta_j), state.j_prev
    if not math.isfinite(mean_reward):
        return 0.0, state.j_prev
    if config.j_signal == "reward" or state.j_prev is None:
        j_now = mean_reward
    else:
        j_now = config.j_ema_decay * state.j_prev + (1.0 - config.j_ema_decay) * mean_reward
    return (0.0 if state.j_prev is None else j_now - state.j_prev), j_now


def _sign(x: float) -> float:
    return float((x > 0) - (x < 0))


@register_estimator(
    EstimatorName.AVSPO.value,
    AvspoConfig,
    state_cls=AvspoState,
    summary="GRPO + stratified virtual rewards in collapsed groups, adaptive gate",
    ranged=True,
)
def avspo(rewards: Any, group_ids: Any, config: AvspoConfig, state: Any = None) -> tuple:
    """AVSPO advantages ``(n,)``, metrics and the next :class:`AvspoState`.

    The steps of the paper (DESIGN.md 3.5; the module docstring says how this resolves what the
    paper leaves open). Every per-group quantity is a ``(k,)`` array in sorted-id order.
    """
    cfg, state = (
        config,
        coerce_state(state, AvspoState, "avspo", AvspoState(tau_adapt=float(config.tau_adapt0))),
    )
    stats = signal.group_stats(rewards, group_ids, ddof=cfg.ddof, tau=cfg.tau)

    # Step 1: ACR_t, the share of the step's scorable groups that are collapsed (raw rewards).
    n_groups = int(stats.scorable.sum())
    acr_t = int(stats.collapsed.sum()) / n_groups if n_groups else math.nan
    history = (*state.acr_history, acr_t)[-cfg.acr_window :] if n_groups else state.acr_history

    # Step 2: the gate g_t (ACR_t, or its mean over the last W steps when the step holds few
    # groups) triggers when it exceeds tau_adapt; the collapsed groups at the range's bounds
    # are augmented (every collapsed group with flat="stratify").
    windowed = cfg.windowed_gate == "always" or (
        cfg.windowed_gate == "auto" and n_groups < cfg.few_groups
    )
    gate = float(np.mean(history)) if windowed and n_groups else acr_t
    tau_adapt = state.tau_adapt
    triggered = bool(n_groups) and gate > tau_adapt
    augment, masks = _to_augment(stats, cfg, triggered)
    n_aug = int(augment.sum()) if triggered else 0

    if n_aug:
        # Step 3: K_j = max(1, min(G_j, ceil(G_j g_t^alpha))) virtual samples per group.
        k = _virtual_counts(stats.count, gate, cfg.alpha, stats.torch)
        # Step 4: stratified virtual rewards v = r_min + (r_max - r_min)(1 - (i - 1)/K_j),
        # i = 1..K_j, given to the statistics by their mean and squared deviations.
        mean_v, ss_v = _stratified_moments(k, cfg.r_min, cfg.r_max)
        # Step 5: A_i = (r_i - mean') / (std' + eps) over the G_j real and K_j virtual
        # rewards, for the real rows only; every other group gets the grpo advantages.
        adv = reference_advantages(stats.with_virtual(augment, k, mean_v, ss_v), eps=cfg.eps)
        k_mean = float((k * augment).sum()) / n_aug
    else:
        adv = reference_advantages(stats, eps=cfg.eps)
        k_mean = 0.0

    # Step 6: tau_adapt <- clip(tau_adapt + eta sign(dJ) (g_t - tau_adapt), lo, hi).
    delta_j, j_now = _next_j(cfg, state, stats.batch_mean())
    new_tau = tau_adapt
    if n_groups:
        moved = tau_adapt + cfg.eta * _sign(delta_j) * (gate - tau_adapt)
        new_tau = min(cfg.tau_adapt_max, max(cfg.tau_adapt_min, moved))

    metrics = common_metrics(stats, adv, tau=cfg.tau, r_min=cfg.r_min, r_max=cfg.r_max, masks=masks)
    metrics.update(_own_metrics(tau_adapt, k_mean, n_aug, triggered, gate, windowed, delta_j))
    new_state = AvspoState(
        tau_adapt=float(new_tau), step=state.step + 1, acr_history=tuple(history), j_prev=j_now
    )
    return adv, metrics, new_state


def _to_augment(stats: signal.GroupStats, cfg: AvspoConfig, triggered: bool) -> tuple:
    """``(augment (k,) bool, split masks or None)``: the collapsed groups, or with ``flat="skip"``
    in a triggered step those at r_max or r_min (:class:`AvspoConfig`, ``flat``). The masks are
    handed on to ``common_metrics`` when they are the ones it would compute (tau a float)."""
    if cfg.flat != "skip" or not triggered:
        return stats.collapsed, None
    at_max, at_min = signal.split_masks(stats, r_min=cfg.r_min, r_max=cfg.r_max, tau=cfg.tau)
    return at_max | at_min, (at_max, at_min) if type(cfg.tau) is float else None


def _virtual_counts(count: Any, gate: float, alpha: float, t: bool) -> Any:
    """``(k,)`` K_j = max(1, min(G_j, ceil(G_j gate^alpha))), ``count`` being G_j."""
    k = ceil(count * gate**alpha - K_CEIL_TOL, t)
    k = where(k < 1, 1.0 + 0.0 * k, k, t)
    return where(k > count, count, k, t)


@register_estimator(
    EstimatorName.AVSPO_RELEASED.value,
    AvspoReleasedConfig,
    summary="one virtual reward r_min + r_max - c per collapsed group, no gate",
    ranged=True,
)
def avspo_released(
    rewards: Any, group_ids: Any, config: AvspoReleasedConfig, state: Any = None
) -> tuple:
    """Released-code AVSPO: advantages ``(n,)``, metrics, ``None`` (stateless)."""
    stats = signal.group_stats(rewards, group_ids, ddof=config.ddof, tau=config.tau)
    n_aug = int(stats.collapsed.sum())
    if n_aug:
        mean_v = config.r_min + config.r_max - stats.mean
        adv = reference_advantages(
            stats.with_virtual(stats.collapsed, 1.0, mean_v, 0.0), eps=config.eps
        )
    else:
        adv = reference_advantages(stats, eps=config.eps)
    metrics = common_metrics(stats, adv, tau=config.tau, r_min=config.r_min, r_max=config.r_max)
    metrics.update(avspo_k=1.0 if n_aug else 0.0, avspo_groups_augmented=float(n_aug))
    return adv, metrics, None


def _own_metrics(
    tau_adapt: float,
    k_mean: float,
    n_aug: int,
    triggered: bool,
    gate: float,
    windowed: bool,
    delta_j: float,
) -> dict[str, float]:
    """AVSPO's metrics besides the common ones."""
    return {
        "tau_adapt": float(tau_adapt),
        "avspo_k": k_mean,
        "avspo_groups_augmented": float(n_aug),
        "avspo_triggered": float(triggered),
        "avspo_acr_gate": float(gate),
        "avspo_windowed": float(windowed),
        "avspo_delta_j": float(delta_j),
    }

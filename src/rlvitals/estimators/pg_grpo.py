"""``pg_grpo``: posterior-guided GRPO — one discounted Beta posterior per prompt, used to give
groups that still collapse an advantage and to choose which prompts to roll out.

Ours (rlvitals issue 26). It extends the history baseline's state (:mod:`.history`, in the
spirit of DBB, Kim et al., arXiv 2603.18444) and answers the question AVSPO (He et al., ICML
2026, arXiv 2605.21125) raises: a collapsed group carries no contrast of its own, but the
prompt's history says how surprising it is. No extra rollouts are spent.

1. **Posterior.** Rewards are rescaled to ``u = (r - r_min) / (r_max - r_min)`` in [0, 1]. Every
   prompt key ``k`` keeps discounted pseudo-counts ``(a_k, b_k)``; a group adds ``s = sum u``
   successes and ``c - s`` failures after the old counts were multiplied by ``discount``. A
   prompt never seen starts from an **empirical-Bayes prior** fitted by the method of moments to
   the pass rates of the last ``prior_window`` groups (their binomial noise removed: with
   ``m`` their mean and ``v`` their variance, ``var(p) = (v - m (1 - m) / G) / (1 - 1 / G)``,
   strength ``kappa = m (1 - m) / var(p) - 1`` clipped to ``[prior_min, prior_max]``,
   ``a = m kappa``, ``b = (1 - m) kappa``); Beta(1, 1) until ``prior_min_groups`` were seen.
2. **Advantages.** A mixed group keeps GRPO's contrast, ``(r - mean) / (std + eps)`` (unbiased
   std, DESIGN.md 3.4). A group that still collapses gets
   ``A = (u - p⁻) / sqrt(p⁻ (1 - p⁻))``, with ``p⁻ = a / (a + b)`` the posterior mean **before**
   this group (the sample does not set its own baseline: unlike the history baseline, whose
   ``p`` includes the group), capped in size at GRPO's scale: ``|A| <= cap * sqrt((c - 1) / c)``,
   the RMS advantage GRPO gives the members of any mixed group of ``c`` completions, so a
   collapsed group never pushes harder than a mixed one. ``baseline=False`` gives collapsed
   groups 0 (GRPO), for the "selection only" ablation.
3. **Selection** (used by a trainer's sampler, :func:`selection_weights`): a prompt is drawn
   with probability ``q ∝ select_eps + (1 - select_eps) P(mixed)``, where
   ``P(mixed) = 1 - E[p^G + (1 - p)^G]`` under Beta(a, b) in closed form,
   ``E[p^G] = B(a + G, b) / B(a, b)`` and ``E[(1 - p)^G] = B(a, b + G) / B(a, b)``
   (:func:`p_mixed`). ``importance=True`` makes the trainer pass ``weights``, one per group,
   ``1 / (N q)`` normalised to mean 1 over the step, which multiply the advantages.

Prompt keys and weights: ``config.keys`` gives one key per group in sorted-group-id order (the
lab trainer sets it from the prompts, as for ``history_baseline``); None = the group ids are the
keys. The state (:class:`PgGrpoState`) is plain JSON, saved with TRL checkpoints by the
trainer. The maths runs in numpy float64 on the host; torch rewards get torch advantages back
on their device and dtype.

Reference values for tests: a first-visit collapsed group of G zeros under Beta(1, 1) has
``p⁻ = 1/2`` and ``A = -1`` before the cap, ``-sqrt(7/8) ≈ -0.935`` after it (G = 8, cap 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals.estimators._base import register_estimator
from rlvitals.estimators.common import (
    DEFAULT_R_MAX,
    DEFAULT_R_MIN,
    check_int,
    check_number,
    check_shared,
    coerce_state,
    common_metrics,
    to_like,
)
from rlvitals.estimators.history import DISCOUNT, group_keys, pool_counts, read_counts
from rlvitals.signal import DEFAULT_EPS, DEFAULT_TAU

__all__ = [
    "PgGrpoConfig",
    "PgGrpoState",
    "fit_prior",
    "p_mixed",
    "selection_weights",
    "to_host",
]

SELECT_EPS = 0.1
"""Share of the selection probability spread uniformly (ours; set before any run, not tuned:
the pre-registered study gives every arm zero tuning runs, docs/lab/preregistration.md)."""
CAP = 1.0
"""Collapsed groups' |A| at most this many times GRPO's RMS advantage sqrt((c - 1) / c)."""
PRIOR_WINDOW = 256
"""Recent group pass rates the empirical-Bayes prior is fitted on."""
PRIOR_MIN_GROUPS = 16
"""Groups seen before the fitted prior replaces Beta(1, 1)."""
PRIOR_MIN, PRIOR_MAX = 1.0, 100.0
"""Bounds of the fitted prior's strength a + b."""


@dataclass(frozen=True)
class PgGrpoConfig:
    """Knobs of ``pg_grpo`` (posterior-guided GRPO, rlvitals issue 26).

    Attributes:
        discount (float, default 0.9): in (0, 1]; a prompt's pseudo-counts are multiplied by it
            every step that draws it again (the history baseline's discount).
        cap (float, default 1.0): > 0; a collapsed group's |A| is at most
            ``cap * sqrt((c - 1) / c)``, GRPO's RMS advantage for a mixed group of c.
        baseline (bool, default True): give collapsed groups the posterior advantage; False
            leaves them at 0 as GRPO does (the "selection only" arm).
        select (bool, default True): a trainer that supports it draws prompts by
            :func:`selection_weights`; False = its own sampler (the "baseline only" arm).
        select_eps (float, default 0.1): in [0, 1]; uniform share of the selection
            probability (1 = uniform selection).
        importance (bool, default False): the trainer passes 1/q ``weights`` per group.
        prior_window (int, default 256): recent groups the unseen-prompt prior is fitted on.
        prior_min_groups (int, default 16): groups needed before the fitted prior is used.
        prior_min (float, default 1.0), prior_max (float, default 100.0): bounds of the
            fitted prior's strength ``a + b``.
        eps (float, default 1e-4): GRPO's std epsilon (TRL's value), and the posterior scale's.
        tau (float, default 1e-6): collapse tolerance (DESIGN.md 3.1).
        r_min (float, default 0.0), r_max (float, default 1.0): the reward range, mapped to
            [0, 1]; rewards outside it are refused (the estimator is ``ranged``).
        keys (tuple or None, default None): the prompt key of every group in sorted-group-id
            order; None = the group ids are the keys. Set per step by the trainer.
        weights (tuple or None, default None): importance weight of every group in the same
            order (``importance``); None = 1. Set per step by the trainer.
    """

    discount: float = DISCOUNT
    cap: float = CAP
    baseline: bool = True
    select: bool = True
    select_eps: float = SELECT_EPS
    importance: bool = False
    prior_window: int = PRIOR_WINDOW
    prior_min_groups: int = PRIOR_MIN_GROUPS
    prior_min: float = PRIOR_MIN
    prior_max: float = PRIOR_MAX
    eps: float = DEFAULT_EPS
    tau: float = DEFAULT_TAU
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX
    keys: tuple | None = None
    weights: tuple | None = None

    def __post_init__(self) -> None:
        check_number("discount", self.discount, lo=0.0, hi=1.0, lo_open=True)
        check_number("cap", self.cap, lo=0.0, lo_open=True)
        check_number("select_eps", self.select_eps, lo=0.0, hi=1.0)
        check_int("prior_window", self.prior_window, lo=1)
        check_int("prior_min_groups", self.prior_min_groups, lo=2)
        check_number("prior_min", self.prior_min, lo=0.0, lo_open=True)
        check_number("prior_max", self.prior_max, lo=self.prior_min)
        check_shared(self)
        for name in ("baseline", "select", "importance"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name in ("keys", "weights"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, (tuple, list)):
                raise ValueError(f"{name} must be None or a tuple (one per group), got {v!r}")
        if self.weights is not None:
            for w in self.weights:
                check_number("weights entry", w, lo=0.0)


@dataclass(frozen=True)
class PgGrpoState:
    """What ``pg_grpo`` carries from step to step; JSON-serialisable.

    Attributes:
        counts: prompt key (str) -> ``(a, b)`` after the last step that drew it.
        recent: pass rates (in [0, 1]) of the last ``prior_window`` groups, oldest first.
        group_size: the last step's group size (G of the selection's P(mixed)); 0 before.
        step: steps seen so far.
    """

    counts: dict[str, tuple[float, float]] = field(default_factory=dict)
    recent: tuple[float, ...] = ()
    group_size: int = 0
    step: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: ``{"step", "group_size", "recent": [...], "counts": {key: [a, b]}}``."""
        return {
            "step": int(self.step),
            "group_size": int(self.group_size),
            "recent": [float(x) for x in self.recent],
            "counts": {str(k): [float(a), float(b)] for k, (a, b) in self.counts.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PgGrpoState:
        """Inverse of :meth:`to_dict`; unknown or malformed entries raise ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"pg_grpo state must be a dict, got {type(data).__name__}")
        valid = {"step", "group_size", "recent", "counts"}
        unknown = sorted(set(data) - valid)
        if unknown:
            raise ValueError(f"unknown pg_grpo state key(s) {unknown}; valid: {sorted(valid)}")
        step, g = data.get("step", 0), data.get("group_size", 0)
        check_int("step", step, lo=0)
        check_int("group_size", g, lo=0)
        recent = data.get("recent", [])
        if not isinstance(recent, (list, tuple)):
            raise ValueError(f"recent must be a list of pass rates, got {recent!r}")
        for x in recent:
            check_number("recent entry", x, lo=0.0, hi=1.0)
        counts = read_counts(data.get("counts", {}))
        return cls(counts, tuple(float(x) for x in recent), int(g), int(step))


def fit_prior(recent: Any, group_size: int, config: PgGrpoConfig) -> tuple[float, float]:
    """The empirical-Bayes Beta prior ``(a, b)`` of a prompt never seen.

    Method of moments on recent group pass rates, their binomial noise (``m (1 - m) / G``)
    removed; Beta(1, 1) with fewer than ``prior_min_groups`` rates.

    >>> fit_prior([0.0, 1.0] * 10, 8, PgGrpoConfig())  # half solved, half not: a weak prior
    (0.5, 0.5)
    >>> fit_prior([0.5] * 3, 8, PgGrpoConfig())
    (1.0, 1.0)
    """
    x = np.asarray(recent, dtype=np.float64)
    if x.size < config.prior_min_groups or group_size < 2:
        return 1.0, 1.0
    m = float(np.clip(x.mean(), 1e-3, 1 - 1e-3))
    var_p = (float(x.var()) - m * (1 - m) / group_size) / (1 - 1 / group_size)
    kappa = m * (1 - m) / var_p - 1 if var_p > 0 else config.prior_max
    kappa = min(max(kappa, config.prior_min), config.prior_max)
    return m * kappa, (1 - m) * kappa


def _betaln(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def p_mixed(a: float, b: float, group_size: int) -> float:
    """P(a group of ``group_size`` is mixed) when its pass rate p ~ Beta(a, b):
    ``1 - B(a + G, b) / B(a, b) - B(a, b + G) / B(a, b)``.

    >>> round(p_mixed(1.0, 1.0, 8), 6)  # uniform p: E[p^8] = 1/9, twice
    0.777778
    """
    ln = _betaln(a, b)
    collapse = math.exp(_betaln(a + group_size, b) - ln) + math.exp(_betaln(a, b + group_size) - ln)
    return min(1.0, max(0.0, 1.0 - collapse))


def selection_weights(
    state: Any, keys: Any, config: PgGrpoConfig, group_size: int | None = None
) -> np.ndarray:
    """Selection probabilities ``q`` (summing to 1) of the prompts ``keys`` (n,).

    ``q ∝ select_eps + (1 - select_eps) P(mixed)``, the posterior of a seen key or the fitted
    prior of an unseen one. ``group_size`` defaults to the state's last G (8 before any step).

    >>> q = selection_weights(None, ["a", "b"], PgGrpoConfig())
    >>> [round(float(x), 3) for x in q]
    [0.5, 0.5]
    """
    st = coerce_state(state, PgGrpoState, "pg_grpo")
    g = int(group_size or st.group_size or 8)
    prior = fit_prior(st.recent, g, config)
    cache: dict[tuple[float, float], float] = {}
    w = np.empty(len(keys), dtype=np.float64)
    for i, k in enumerate(keys):
        ab = st.counts.get(str(k), prior)
        if ab not in cache:
            cache[ab] = p_mixed(ab[0], ab[1], g)
        w[i] = config.select_eps + (1.0 - config.select_eps) * cache[ab]
    total = w.sum()
    return w / total if total > 0 else np.full(len(keys), 1.0 / max(1, len(keys)))


def to_host(x: Any) -> np.ndarray:
    """``x`` as a host numpy array (a torch float tensor in float64)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if x.dtype.is_floating_point:
            x = x.double()
        return x.numpy()
    return np.asarray(x)


@register_estimator(
    "pg_grpo",
    PgGrpoConfig,
    state_cls=PgGrpoState,
    summary="posterior-guided GRPO: collapsed groups scored against the prompt's Beta posterior "
    "before the group, prompts drawn by P(mixed)",
    scale="virtual",
    ranged=True,
)
def pg_grpo(rewards: Any, group_ids: Any, config: PgGrpoConfig, state: Any = None) -> tuple:
    """Posterior-guided GRPO advantages ``(n,)``, metrics and the next :class:`PgGrpoState`."""
    state = coerce_state(state, PgGrpoState, "pg_grpo")
    like = rewards if hasattr(rewards, "detach") else None
    r = to_host(rewards).astype(np.float64)
    ids = to_host(group_ids)
    stats = signal.group_stats(r, ids, tau=config.tau)
    n_groups = stats.n_groups
    keys = group_keys(ids, n_groups, config.keys)
    span = config.r_max - config.r_min
    count = np.asarray(stats.count, dtype=np.float64)
    mean_u = (np.asarray(stats.mean, dtype=np.float64) - config.r_min) / span
    collapsed = np.asarray(stats.collapsed, dtype=bool)
    g = round(float(count[count > 0].max())) if (count > 0).any() else 0

    # Step 1: the posterior mean before this step, per group (seen key or fitted prior).
    prior = fit_prior(state.recent, g or state.group_size, config)
    before = [state.counts.get(k, prior) for k in keys]
    p_before = np.array([a / (a + b) for a, b in before], dtype=np.float64)

    # Step 2: GRPO for mixed groups, the capped posterior score for collapsed ones.
    centred = r - stats.spread(np.asarray(stats.mean, dtype=np.float64))
    std = np.asarray(stats.std, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        grpo = centred / (stats.spread(np.nan_to_num(std, nan=0.0)) + config.eps)
        u = (r - config.r_min) / span
        scale = np.sqrt(p_before * (1.0 - p_before)) + config.eps
        post = (u - stats.spread(p_before)) / stats.spread(scale)
        limit = config.cap * np.sqrt(np.where(count > 1, (count - 1) / count, 0.0))
    post = np.clip(post, -stats.spread(limit), stats.spread(limit))
    use_post = stats.spread(collapsed.astype(np.float64)) > 0.5
    if not config.baseline:
        post = np.zeros_like(post)
    adv = np.where(use_post, post, grpo)
    if config.weights is not None:
        if len(config.weights) != n_groups:
            raise ValueError(f"weights holds {len(config.weights)} entries for {n_groups} groups")
        adv = adv * stats.spread(np.asarray(config.weights, dtype=np.float64))
    adv = np.where(np.isfinite(r), adv, 0.0)  # unscorable completions get 0

    # Step 3: the posterior after this step (groups of one key pooled), recent pass rates.
    counts, n_seen, known = pool_counts(
        state.counts, keys, count, count * mean_u, count * (1.0 - mean_u), prior, config.discount
    )
    rates = [float(m) for c, m in zip(count, mean_u) if c > 0]
    recent = (*state.recent, *rates)[-config.prior_window :]

    scorable = count > 0
    on = use_post & np.isfinite(r)
    capped = np.abs(post[on]) >= stats.spread(limit)[on] - 1e-12
    metrics = common_metrics(stats, adv, tau=config.tau, r_min=config.r_min, r_max=config.r_max)
    metrics.update(
        pg_known_frac=known / n_seen if n_seen else math.nan,
        pg_p_before_mean=float(p_before[scorable].mean()) if scorable.any() else math.nan,
        pg_prior_strength=float(sum(prior)),
        pg_prompts=float(len(counts)),
        pg_capped_frac=float(capped.mean()) if capped.size and config.baseline else 0.0,
    )
    if like is not None or np.asarray(rewards).dtype.kind == "f":  # the rewards' kind and dtype
        adv = to_like(adv, like if like is not None else np.asarray(rewards))
    new_state = PgGrpoState(counts, recent, g or state.group_size, state.step + 1)
    return adv, metrics, new_state

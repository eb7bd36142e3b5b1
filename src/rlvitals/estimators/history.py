"""``history_baseline``: a discounted Beta–Bernoulli estimate of each prompt's pass rate as the
baseline, so a homogeneous group still carries a signal.

In the spirit of DBB (Kim et al., "Discounted Beta–Bernoulli Reward Estimation for
Sample-Efficient Reinforcement Learning with Verifiable Rewards", arXiv 2603.18444): a group's
own mean is a point estimate from G samples; it is exactly the group's reward when the group is
collapsed, so GRPO's advantages vanish. Here every prompt keeps discounted pseudo-counts of its
successes and failures across the steps that drew it, and the baseline is their posterior mean:

1. Rewards are rescaled to ``u = (r - r_min) / (r_max - r_min)`` in [0, 1]; a group of prompt
   key ``k`` adds ``s = sum u`` successes and ``f = c - s`` failures (``c`` its scorable
   completions; partial credit adds fractions, the Beta–Binomial moment match).
2. ``a_k <- discount * a_k + s``, ``b_k <- discount * b_k + f``; a prompt seen for the first time
   starts from ``a_k = prior_alpha``, ``b_k = prior_beta``. The discount is applied once per
   step that draws the prompt (the policy moved since: older evidence weighs less). Groups of
   one prompt in the same step are pooled.
3. ``p_k = a_k / (a_k + b_k)`` (this step's rewards included), and for every scorable member
   ``A_i = (u_i - p_k) / (sqrt(p_k (1 - p_k)) + eps)``: the reward's distance from the estimated
   pass rate in units of the estimated Bernoulli std. The prior keeps ``p_k`` strictly inside
   (0, 1), so the scale never collapses and a group of all zeros gets a negative advantage
   (all ones a positive one) whose size grows with the evidence that the prompt is solvable.

Prompt keys: ``config.keys`` gives one key per group in sorted-group-id order (what a trainer
that numbers its groups ``0..k-1`` every step must pass: the TRL lab trainer sets it from the
prompts); when it is None the group ids are the keys (e.g. string prompt ids with numpy). Keys
are stored as strings. The state (:class:`HistoryState`) is plain JSON (``to_dict``), so it is
checkpointed with the trainer. The estimator keeps one entry per prompt key ever seen.

Reference values for tests: a first-visit group of G zeros with the uniform prior and
discount 1 gets ``p = 1 / (G + 2)`` and every member ``-p / sqrt(p (1 - p)) = -1 / sqrt(G + 1)``
(``eps -> 0``): ``-1/3`` for G = 8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals._array import isnan, where
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
from rlvitals.signal import DEFAULT_EPS, DEFAULT_TAU

__all__ = [
    "DISCOUNT",
    "HistoryBaselineConfig",
    "HistoryState",
    "group_keys",
    "history_baseline",
    "pool_counts",
    "read_counts",
]

DISCOUNT = 0.9
"""Weight of a prompt's older evidence each time the prompt is drawn again (ours)."""
PRIOR_ALPHA = 1.0
PRIOR_BETA = 1.0
"""Beta(1, 1), the uniform prior over a new prompt's pass rate."""


@dataclass(frozen=True)
class HistoryBaselineConfig:
    """Knobs of ``history_baseline`` (DBB in spirit, Kim et al., arXiv 2603.18444).

    Attributes:
        discount (float, default 0.9): in (0, 1]; a prompt's pseudo-counts are multiplied by it
            every step that draws the prompt again, before this step's rewards are added
            (1 = no forgetting).
        prior_alpha (float, default 1.0), prior_beta (float, default 1.0): the Beta prior's
            pseudo-successes and pseudo-failures of a prompt seen for the first time (> 0; they
            keep the estimated pass rate strictly inside (0, 1)).
        eps (float, default 1e-4): added to the estimated std in the denominator (TRL's value).
        tau (float, default 1e-6): collapse tolerance; decides ACR only.
        r_min (float, default 0.0), r_max (float, default 1.0): the reward range, mapped to
            [0, 1] for the Beta–Bernoulli counts.
        keys (tuple or None, default None): the prompt key of every group in sorted-group-id
            order (``len == number of groups``); None = the group ids are the keys. Set per
            step by the trainer, like AVSPO's ``delta_j``.
    """

    discount: float = DISCOUNT
    prior_alpha: float = PRIOR_ALPHA
    prior_beta: float = PRIOR_BETA
    eps: float = DEFAULT_EPS
    tau: float = DEFAULT_TAU
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX
    keys: tuple | None = None

    def __post_init__(self) -> None:
        check_number("discount", self.discount, lo=0.0, hi=1.0, lo_open=True)
        check_number("prior_alpha", self.prior_alpha, lo=0.0, lo_open=True)
        check_number("prior_beta", self.prior_beta, lo=0.0, lo_open=True)
        check_shared(self)
        if self.keys is not None and not isinstance(self.keys, (tuple, list)):
            raise ValueError(f"keys must be None or a tuple of prompt keys, got {self.keys!r}")


@dataclass(frozen=True)
class HistoryState:
    """What ``history_baseline`` carries from step to step; JSON-serialisable.

    Attributes:
        counts: prompt key (str) -> ``(a, b)``, its discounted pseudo-successes and failures
            after the last step that drew it.
        step: steps seen so far.
    """

    counts: dict[str, tuple[float, float]] = field(default_factory=dict)
    step: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types: ``{"step": int, "counts": {key: [a, b]}}``."""
        return {
            "step": int(self.step),
            "counts": {str(k): [float(a), float(b)] for k, (a, b) in self.counts.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HistoryState:
        """Inverse of :meth:`to_dict`; unknown or malformed entries raise ValueError."""
        if not isinstance(data, dict):
            raise ValueError(f"history state must be a dict, got {type(data).__name__}")
        unknown = sorted(set(data) - {"step", "counts"})
        if unknown:
            raise ValueError(f"unknown history state key(s) {unknown}; valid: step, counts")
        step = data.get("step", 0)
        check_int("step", step, lo=0)
        return cls(counts=read_counts(data.get("counts", {})), step=int(step))


def read_counts(raw: Any) -> dict[str, tuple[float, float]]:
    """Per-prompt Beta counts from their JSON form ``{key: [a, b]}`` (a, b > 0); ValueError
    naming the entry otherwise. Shared by the estimators that keep a posterior per prompt."""
    if not isinstance(raw, dict):
        raise ValueError(f"counts must be a dict of key -> [a, b], got {raw!r}")
    counts: dict[str, tuple[float, float]] = {}
    for k, v in raw.items():
        if not (isinstance(v, (list, tuple)) and len(v) == 2):
            raise ValueError(f"counts[{k!r}] must be [a, b], got {v!r}")
        for x in v:
            check_number(f"counts[{k!r}] entry", x, lo=0.0, lo_open=True)
        counts[str(k)] = (float(v[0]), float(v[1]))
    return counts


def group_keys(group_ids: Any, n_groups: int, keys: Any) -> list[str]:
    """The prompt key of every group, in sorted-group-id order, as strings: a config's ``keys``
    (one per group) or, when None, the group ids themselves. Shared by the estimators that keep
    a posterior per prompt."""
    if keys is not None:
        if len(keys) != n_groups:
            raise ValueError(
                f"keys holds {len(keys)} prompt keys for {n_groups} groups "
                "(one per group, in sorted-group-id order)"
            )
        return [str(k) for k in keys]
    ids = group_ids.detach().cpu().numpy() if hasattr(group_ids, "detach") else group_ids
    return [str(k) for k in np.unique(np.asarray(ids))]


def pool_counts(
    counts: dict[str, tuple[float, float]],
    keys: list[str],
    count: np.ndarray,
    succ: np.ndarray,
    fail: np.ndarray,
    prior: tuple[float, float],
    discount: float,
) -> tuple[dict[str, tuple[float, float]], int, int]:
    """One step of the discounted counts: every scorable group's successes ``succ`` and failures
    ``fail`` (per group, ``count`` its scorable completions) pooled by prompt key, then
    ``a <- discount * a + s``, ``b <- discount * b + f`` per key seen, a new key starting from
    ``prior``. Returns ``(the new counts, keys seen this step, of which already known)``."""
    seen: dict[str, list[float]] = {}
    for key, c, s, f in zip(keys, count, succ, fail):
        if c > 0:
            acc = seen.setdefault(key, [0.0, 0.0])
            acc[0] += s
            acc[1] += f
    new = dict(counts)
    known = sum(1 for k in seen if k in new)
    for key, (s, f) in seen.items():
        a, b = new.get(key, prior)
        new[key] = (discount * a + s, discount * b + f)
    return new, len(seen), known


@register_estimator(
    "history_baseline",
    HistoryBaselineConfig,
    state_cls=HistoryState,
    summary="discounted Beta-Bernoulli pass rate per prompt as the baseline (DBB-style)",
    ranged=True,
)
def history_baseline(
    rewards: Any, group_ids: Any, config: HistoryBaselineConfig, state: Any = None
) -> tuple:
    """History-baseline advantages ``(n,)``, metrics and the next :class:`HistoryState`."""
    state = coerce_state(state, HistoryState, "history_baseline")
    stats = signal.group_stats(rewards, group_ids, tau=config.tau)
    t = stats.torch
    keys = group_keys(group_ids, stats.n_groups, config.keys)
    span = config.r_max - config.r_min

    # Steps 1-2: this step's successes and failures per prompt key, then the discounted counts.
    count = np.asarray(stats.count.tolist() if t else stats.count, dtype=np.float64)
    mean = np.asarray(stats.mean.tolist() if t else stats.mean, dtype=np.float64)
    succ = np.where(count > 0, count * (mean - config.r_min) / span, 0.0)
    prior = (config.prior_alpha, config.prior_beta)
    counts, n_seen, known = pool_counts(
        state.counts, keys, count, succ, count - succ, prior, config.discount
    )

    # Step 3: baseline p_k and scale sqrt(p_k (1 - p_k)) per group, spread to the rows.
    p = np.array(
        [counts[k][0] / sum(counts[k]) if c > 0 else 0.5 for k, c in zip(keys, count)],
        dtype=np.float64,
    )
    inv = 1.0 / (np.sqrt(p * (1.0 - p)) + config.eps)
    inv = np.where(count > 0, inv, 0.0)
    u = (stats.rewards - config.r_min) / span
    adv = (u - stats.spread(to_like(p, stats.rewards))) * stats.spread(to_like(inv, stats.rewards))
    if stats.has_nan:  # unscorable completions get 0
        adv = where(~isnan(stats.rewards, t), adv, 0.0, t)

    metrics = common_metrics(stats, adv, tau=config.tau, r_min=config.r_min, r_max=config.r_max)
    scorable = count > 0
    metrics.update(
        hist_known_frac=known / n_seen if n_seen else math.nan,
        hist_pass_mean=float(p[scorable].mean()) if scorable.any() else math.nan,
        hist_prompts=float(len(counts)),
    )
    return adv, metrics, HistoryState(counts=counts, step=state.step + 1)

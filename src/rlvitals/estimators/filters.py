"""Group filters: drop collapsed groups from the loss, or over-sample until a batch is informative.

- Zero-variance filtering (as in DAPO's dynamic sampling filter and "GRPO with filtering"): a
  collapsed group's advantages are all zero, so it only dilutes the loss. :func:`zero_variance_filter`
  returns a row keep mask and loss weights ``keep * n / n_kept``: a trainer that averages a per-row
  loss over all n rows gets, with the weights, the mean over the kept rows (the corrected
  denominator). The ``zero_var_filter`` estimator folds the weights into the GRPO advantages, which
  is the same thing for a loss linear in the advantages (no KL or entropy term; those are not
  re-weighted).
- DAPO-style dynamic sampling (Yu et al., "DAPO", arXiv 2503.14476): keep generating batches and
  keep the groups with ``0 < correct < G`` (not collapsed) until ``target_groups`` are kept or
  ``max_attempts`` batches were drawn. :class:`DynamicSampler` accumulates batches the trainer
  pushes; :func:`dynamic_sampling` drives a ``generate(attempt)`` callback.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvitals import signal
from rlvitals._array import isnan
from rlvitals.estimators._base import EstimatorName, register_estimator
from rlvitals.estimators.common import (
    DEFAULT_R_MAX,
    DEFAULT_R_MIN,
    check_choice,
    check_int,
    check_number,
    check_shared,
    common_metrics,
)
from rlvitals.estimators.reference import reference_advantages
from rlvitals.signal import DEFAULT_EPS, DEFAULT_TAU

__all__ = [
    "DynamicSampler",
    "DynamicSamplingResult",
    "FilterResult",
    "ZeroVarFilterConfig",
    "dynamic_sampling",
    "zero_variance_filter",
]

DEFAULT_MAX_ATTEMPTS = 10
"""Batches drawn at most by dynamic sampling (veRL's DAPO recipe: ``max_num_gen_batches``)."""


@dataclass(frozen=True)
class FilterResult:
    """Which rows of a step stay in the loss.

    Attributes:
        keep: ``(n,)`` bool, rows with a finite reward in a scorable, non-collapsed group.
        weights: ``(n,)`` float (rewards' dtype), ``keep * n / n_kept`` (all 0 when none kept).
        group_keep: ``(k,)`` bool per group, sorted-id order.
        n_groups: scorable groups; kept_groups: those kept.
        kept_rows: rows kept; n_rows: all rows.
    """

    keep: Any
    weights: Any
    group_keep: Any
    n_groups: int
    kept_groups: int
    kept_rows: int
    n_rows: int

    @property
    def kept_frac(self) -> float:
        """Kept groups / scorable groups (NaN when no group is scorable)."""
        return self.kept_groups / self.n_groups if self.n_groups else float("nan")


def zero_variance_filter(
    rewards: Any, group_ids: Any, *, tau: float = DEFAULT_TAU, stats: Any = None
) -> FilterResult:
    """Keep mask and loss weights that drop collapsed (zero-variance) groups.

    Args:
        rewards: ``(n,)`` float (NaN = unscorable), numpy or torch (stays on its device).
        group_ids: ``(n,)`` group keys.
        tau: collapse tolerance (DESIGN.md 3.1).
        stats: a :func:`rlvitals.signal.group_stats` result of the same rewards, to reuse
            (``rewards`` and ``group_ids`` are then not read).

    >>> import numpy as np
    >>> f = zero_variance_filter(np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1]))
    >>> f.keep.tolist(), f.weights.tolist(), f.kept_frac
    ([True, True, False, False], [2.0, 2.0, 0.0, 0.0], 0.5)
    """
    if stats is None:
        stats = signal.group_stats(rewards, group_ids, tau=tau)
    rewards, t = stats.rewards, stats.torch
    group_keep = stats.scorable & ~stats.collapsed
    keep = stats.spread(group_keep)
    if stats.has_nan:
        keep = keep & ~isnan(rewards, t)
    n_rows = int(rewards.shape[0])
    kept_rows = int(keep.sum())
    scale = n_rows / kept_rows if kept_rows else 0.0
    weights = keep.to(rewards.dtype) * scale if t else keep.astype(rewards.dtype) * scale
    return FilterResult(
        keep=keep,
        weights=weights,
        group_keep=group_keep,
        n_groups=int(stats.scorable.sum()),
        kept_groups=int(group_keep.sum()),
        kept_rows=kept_rows,
        n_rows=n_rows,
    )


@dataclass(frozen=True)
class ZeroVarFilterConfig:
    """Knobs of ``zero_var_filter``: GRPO advantages with collapsed groups dropped.

    Attributes:
        eps (float, default 1e-4), tau (float, default 1e-6), ddof (int, default 1),
            scale_rewards (str, default "group"): as in ``grpo`` (see GrpoConfig).
        rescale (bool, default True): multiply the kept rows' advantages by ``n / n_kept`` (the
            corrected loss denominator); False only zeroes the dropped rows.
        r_min (float, default 0.0), r_max (float, default 1.0): reward range for the ACR split.
    """

    eps: float = DEFAULT_EPS
    tau: float = DEFAULT_TAU
    ddof: int = 1
    scale_rewards: str = "group"
    rescale: bool = True
    r_min: float = DEFAULT_R_MIN
    r_max: float = DEFAULT_R_MAX

    def __post_init__(self) -> None:
        check_shared(self)
        check_choice("scale_rewards", self.scale_rewards, ("group", "batch", "none"))
        check_choice("rescale", self.rescale, (True, False))


@register_estimator(
    EstimatorName.ZERO_VAR_FILTER.value,
    ZeroVarFilterConfig,
    summary="GRPO with collapsed groups dropped and the loss denominator corrected",
)
def zero_var_filter(
    rewards: Any, group_ids: Any, config: ZeroVarFilterConfig, state: Any = None
) -> tuple:
    """Filtered GRPO advantages ``(n,)``, metrics (with kept_frac), ``None`` (stateless)."""
    stats = signal.group_stats(rewards, group_ids, ddof=config.ddof, tau=config.tau)
    adv = reference_advantages(stats, scale_rewards=config.scale_rewards, eps=config.eps)
    filt = zero_variance_filter(None, None, tau=config.tau, stats=stats)
    adv = adv * (filt.weights if config.rescale else filt.keep)
    metrics = common_metrics(stats, adv, tau=config.tau, r_min=config.r_min, r_max=config.r_max)
    metrics.update(
        kept_frac=filt.kept_frac,
        kept_rows_frac=filt.kept_rows / filt.n_rows,
        filter_scale=filt.n_rows / filt.kept_rows if filt.kept_rows else 0.0,
    )
    return adv, metrics, None


# --------------------------------------------------------------------------------------------
# DAPO-style dynamic sampling


@dataclass
class DynamicSamplingResult:
    """What dynamic sampling kept.

    Attributes:
        payloads: the payload of every batch drawn, in order (None when none was given).
        keep: ``(n_b,)`` bool row mask per batch: rows of kept groups, trimmed so that exactly
            ``min(target_groups, informative groups seen)`` groups are kept in all.
        kept_groups, target_groups, attempts, generated_groups: counts.
        full: whether ``target_groups`` groups were kept.
    """

    target_groups: int
    payloads: list[Any] = field(default_factory=list)
    keep: list[Any] = field(default_factory=list)
    kept_groups: int = 0
    attempts: int = 0
    generated_groups: int = 0

    @property
    def full(self) -> bool:
        return self.kept_groups >= self.target_groups

    def metrics(self) -> dict[str, float]:
        """Flat floats: ds_attempts, ds_kept_groups, ds_generated_groups, ds_keep_rate, ds_full."""
        rate = self.kept_groups / self.generated_groups if self.generated_groups else 0.0
        return {
            "ds_attempts": float(self.attempts),
            "ds_kept_groups": float(self.kept_groups),
            "ds_generated_groups": float(self.generated_groups),
            "ds_keep_rate": rate,
            "ds_full": float(self.full),
        }


class DynamicSampler:
    """Accumulate over-sampled batches until ``target_groups`` informative groups are kept.

    A group is informative when it is scorable and not collapsed (``0 < correct < G`` for binary
    rewards). Push batches with :meth:`add`; stop when :attr:`done`.

    >>> import numpy as np
    >>> s = DynamicSampler(target_groups=2, max_attempts=3)
    >>> s.add(np.array([1.0, 1.0, 1.0, 0.0]), np.array([0, 0, 1, 1])).tolist()
    [False, False, True, True]
    >>> s.done, s.add(np.array([0.0, 1.0, 1.0, 0.0]), np.array([0, 0, 1, 1])).tolist()
    (False, [True, True, False, False])
    >>> s.done, s.result().kept_groups
    (True, 2)
    """

    def __init__(
        self,
        target_groups: int,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        tau: float = DEFAULT_TAU,
    ):
        check_int("target_groups", target_groups, lo=1)
        check_int("max_attempts", max_attempts, lo=1)
        check_number("tau", tau, lo=0.0)
        self.max_attempts = int(max_attempts)
        self.tau = float(tau)
        self._result = DynamicSamplingResult(target_groups=int(target_groups))

    @property
    def full(self) -> bool:
        return self._result.full

    @property
    def done(self) -> bool:
        """Full, or out of attempts."""
        return self.full or self._result.attempts >= self.max_attempts

    def add(self, rewards: Any, group_ids: Any, payload: Any = None) -> Any:
        """Take one generated batch; return its ``(n,)`` keep mask (rewards' kind and device).

        Raises RuntimeError when the sampler is already done.
        """
        if self.done:
            raise RuntimeError(
                f"dynamic sampling is done ({self._result.kept_groups}/"
                f"{self._result.target_groups} groups kept after {self._result.attempts} of "
                f"{self.max_attempts} attempts); start a new DynamicSampler"
            )
        res = self._result
        stats = signal.group_stats(rewards, group_ids, tau=self.tau)
        filt = zero_variance_filter(None, None, tau=self.tau, stats=stats)
        group_keep = filt.group_keep
        room = res.target_groups - res.kept_groups
        if filt.kept_groups > room:
            # Trim to the first `room` informative groups (sorted-id order).
            rank = group_keep.cumsum(0) if hasattr(group_keep, "dim") else group_keep.cumsum()
            group_keep = group_keep & (rank <= room)
        keep = stats.spread(group_keep) & filt.keep
        res.attempts += 1
        res.generated_groups += filt.n_groups
        res.kept_groups += int(group_keep.sum())
        res.payloads.append(payload)
        res.keep.append(keep)
        return keep

    def result(self) -> DynamicSamplingResult:
        return self._result


def dynamic_sampling(
    generate: Callable[[int], tuple],
    target_groups: int,
    *,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    tau: float = DEFAULT_TAU,
    on_shortfall: str = "return",
) -> DynamicSamplingResult:
    """Call ``generate(attempt)`` until ``target_groups`` informative groups are kept.

    Args:
        generate: ``generate(attempt) -> (rewards (n,), group_ids (n,))`` or
            ``(rewards, group_ids, payload)``; the payload (e.g. the batch) is kept in the result.
        target_groups: informative groups wanted.
        max_attempts: cap on ``generate`` calls.
        on_shortfall: ``"return"`` the partial result (``result.full`` False) or ``"raise"``
            RuntimeError when the cap is hit first.

    >>> import numpy as np
    >>> batches = [np.array([1.0, 1.0, 0.0, 1.0]), np.array([0.0, 1.0, 0.0, 0.0])]
    >>> res = dynamic_sampling(lambda i: (batches[i], np.array([0, 0, 1, 1])), 2)
    >>> res.attempts, res.kept_groups, res.full
    (2, 2, True)
    """
    check_choice("on_shortfall", on_shortfall, ("return", "raise"))
    sampler = DynamicSampler(target_groups, max_attempts=max_attempts, tau=tau)
    while not sampler.done:
        out = generate(sampler.result().attempts)
        if not isinstance(out, tuple) or len(out) not in (2, 3):
            raise ValueError(
                "generate(attempt) must return (rewards, group_ids) or "
                f"(rewards, group_ids, payload), got {type(out).__name__}"
            )
        sampler.add(*out)
    res = sampler.result()
    if on_shortfall == "raise" and not res.full:
        raise RuntimeError(
            f"dynamic sampling kept {res.kept_groups}/{res.target_groups} groups "
            f"after {res.attempts} attempts (max_attempts={max_attempts})"
        )
    return res

"""Shared pieces of the estimators: config validation and the common metrics.

Public: an estimator written outside rlvitals (CONTRIBUTING.md, "Add an estimator") and the
lab's variants build their metrics with :func:`common_metrics` like the built-in ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals._array import check_tau
from rlvitals.signal import ZERO_ATOL, GroupStats

DEFAULT_R_MIN = 0.0
"""Minimum achievable reward (binary rewards: 0)."""
DEFAULT_R_MAX = 1.0
"""Maximum achievable reward (binary rewards: 1)."""

COMMON_METRICS = (
    "acr",
    "acr_residual",
    "acr_solve_all",
    "acr_solve_none",
    "acr_flat",
    "adv_std",
    "adv_zero_frac",
)
"""Metric names every estimator returns."""


# --------------------------------------------------------------------------------------------
# Config validation: errors quote the value and the allowed range.


def check_number(
    name: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
) -> None:
    """Raise ValueError unless ``value`` is a finite real number inside the given bounds."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, (int, float, np.integer, np.floating))
        and math.isfinite(float(value))
    )
    if ok and lo is not None:
        ok = value > lo if lo_open else value >= lo
    if ok and hi is not None:
        ok = value < hi if hi_open else value <= hi
    if not ok:
        left = "(" if lo_open else "["
        right = ")" if hi_open else "]"
        lo_s = "-inf" if lo is None else repr(lo)
        hi_s = "inf" if hi is None else repr(hi)
        raise ValueError(
            f"{name} must be a finite number in {left}{lo_s}, {hi_s}{right}, got {value!r}"
        )


def check_int(name: str, value: Any, *, lo: int) -> None:
    """Raise ValueError unless ``value`` is an integer >= ``lo``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {value!r}")


def check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    """Raise ValueError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def check_range(r_min: Any, r_max: Any) -> None:
    """Raise ValueError unless ``r_min < r_max`` are finite."""
    check_number("r_min", r_min)
    check_number("r_max", r_max)
    if not r_min < r_max:
        raise ValueError(f"need r_min < r_max, got r_min={r_min!r}, r_max={r_max!r}")


def check_shared(config: Any) -> None:
    """The knobs most estimator configs share, those ``config`` has: ``eps`` and ``tau`` (>= 0),
    ``ddof`` (0 or 1), and the reward range ``r_min < r_max``."""
    for name in ("eps", "tau"):
        if hasattr(config, name):
            check_number(name, getattr(config, name), lo=0.0)
    if hasattr(config, "ddof"):
        check_choice("ddof", config.ddof, (0, 1))
    check_range(config.r_min, config.r_max)


def to_like(a: np.ndarray, like: Any) -> Any:
    """numpy ``a`` in the kind (numpy or torch), dtype and device of ``like``."""
    if hasattr(like, "detach"):
        import torch

        return torch.as_tensor(a, dtype=like.dtype, device=like.device)
    return a.astype(like.dtype)


def coerce_state(state: Any, cls: type, owner: str, initial: Any = None) -> Any:
    """An estimator's state from what the caller passed: ``initial`` (default ``cls()``) for
    None, the state itself, or ``cls.from_dict`` of its JSON form; TypeError otherwise."""
    if state is None:
        return cls() if initial is None else initial
    if isinstance(state, cls):
        return state
    if isinstance(state, dict):
        return cls.from_dict(state)
    article = "an" if cls.__name__[0] in "AEIOU" else "a"
    raise TypeError(
        f"{owner} state must be {article} {cls.__name__}, its to_dict() or None, "
        f"got {type(state).__name__}"
    )


# --------------------------------------------------------------------------------------------
# The metrics every estimator logs


def common_metrics(
    stats: GroupStats,
    adv: Any,
    *,
    tau: float,
    r_min: float,
    r_max: float,
    masks: tuple[Any, Any] | None = None,
) -> dict[str, float]:
    """acr (raw, before mitigation) and its split, acr_residual, adv_std, adv_zero_frac.

    Args:
        stats: :func:`rlvitals.signal.group_stats` of the step's raw rewards with ``tau``.
        adv: ``(n,)`` the advantages the estimator returns.

    ``acr_residual`` is the share of scorable groups whose returned advantages are all
    ``|A| <= 1e-8`` (what is still wasted after mitigation). ``adv_std`` is the population std of
    the scorable completions' advantages. All fractions are NaN when no group is scorable.
    ``masks``: the ``split_masks(stats, r_min=r_min, r_max=r_max, tau=tau)`` the caller has
    already computed (same values), or None.
    """
    n_groups = int(stats.scorable.sum())
    adv_std, adv_zero = signal.advantage_stats(adv, stats.rewards if stats.has_nan else None)
    if n_groups == 0:
        nan = math.nan
        return {
            "acr": nan,
            "acr_residual": nan,
            "acr_solve_all": nan,
            "acr_solve_none": nan,
            "acr_flat": nan,
            "adv_std": adv_std,
            "adv_zero_frac": adv_zero,
        }
    # collapse_split's numbers, from the scorable count above
    at_max, at_min = masks or signal.split_masks(
        stats, r_min=r_min, r_max=r_max, tau=check_tau(tau)
    )
    n_col, n_all, n_none = int(stats.collapsed.sum()), int(at_max.sum()), int(at_min.sum())
    alive = stats.count_true(abs(adv) > ZERO_ATOL)
    dead = int(((alive == 0) & stats.scorable).sum())
    return split_metrics(n_groups, n_col, n_all, n_none, dead, adv_std, adv_zero)


def split_metrics(
    k: int, n_col: int, n_all: int, n_none: int, dead: int, adv_std: float, adv_zero: float
) -> dict[str, float]:
    """The common metrics from the counts over ``k`` scorable groups: collapsed ``n_col``, of
    which ``n_all`` at r_max and ``n_none`` at r_min, and ``dead`` with all-zero advantages."""
    return {
        "acr": n_col / k,
        "acr_residual": dead / k,
        "acr_solve_all": n_all / k,
        "acr_solve_none": n_none / k,
        "acr_flat": (n_col - n_all - n_none) / k,
        "adv_std": adv_std,
        "adv_zero_frac": adv_zero,
    }

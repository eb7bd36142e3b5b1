"""Shared pieces of the estimators: config validation and the common metrics."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlvitals import signal
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


# --------------------------------------------------------------------------------------------
# The metrics every estimator logs


def common_metrics(
    stats: GroupStats, adv: Any, *, tau: float, r_min: float, r_max: float
) -> dict[str, float]:
    """acr (raw, before mitigation) and its split, acr_residual, adv_std, adv_zero_frac.

    Args:
        stats: :func:`rlvitals.signal.group_stats` of the step's raw rewards with ``tau``.
        adv: ``(n,)`` the advantages the estimator returns.

    ``acr_residual`` is the share of scorable groups whose returned advantages are all
    ``|A| <= 1e-8`` (what is still wasted after mitigation). ``adv_std`` is the population std of
    the scorable completions' advantages. All fractions are NaN when no group is scorable.
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
    split = signal.collapse_split(None, None, tau, r_min=r_min, r_max=r_max, stats=stats)
    alive = stats.count_true(abs(adv) > ZERO_ATOL)
    residual = int(((alive == 0) & stats.scorable).sum()) / n_groups
    return {
        "acr": split.acr,
        "acr_residual": residual,
        "acr_solve_all": split.solve_all,
        "acr_solve_none": split.solve_none,
        "acr_flat": split.flat,
        "adv_std": adv_std,
        "adv_zero_frac": adv_zero,
    }

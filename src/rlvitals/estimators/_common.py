"""Shared pieces of the estimators: config validation, array helpers and the common metrics."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlvitals import signal
from rlvitals.signal import ADV_ZERO_ATOL, GroupStats

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


def check_number(name: str, value: Any, *, lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False, hi_open: bool = False) -> None:
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
        raise ValueError(f"{name} must be a finite number in {left}{lo_s}, {hi_s}{right}, "
                         f"got {value!r}")


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
# Array helpers (numpy and torch alike)


def is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def check_inputs(rewards: Any, group_ids: Any) -> tuple[Any, Any, bool]:
    """Bring inputs to one backend: ``(rewards as float, group_ids, is_torch)``.

    Tensors stay on their device (group ids given as numpy/lists for torch rewards are moved
    there); integer or bool rewards become float64. Shapes, NaN/inf and id types are checked by
    :func:`rlvitals.signal.group_stats`, which every estimator calls next.
    """
    if is_torch(rewards):
        import torch

        if not rewards.is_floating_point():
            rewards = rewards.double()
        if not is_torch(group_ids):
            group_ids = torch.as_tensor(np.asarray(group_ids), device=rewards.device)
        return rewards, group_ids, True
    rewards = np.asarray(rewards)
    if rewards.dtype.kind in "iub":
        rewards = rewards.astype(np.float64)
    elif rewards.dtype.kind != "f":
        raise ValueError(f"rewards must be numeric, got dtype {rewards.dtype}")
    return rewards, np.asarray(group_ids), False


def row_view(stats: GroupStats, x: Any) -> Any:
    """An ``(n,)`` row array as ``(k, G)`` when the layout is dense (a view), else as is."""
    return x.reshape(stats.n_groups, -1) if stats.index is None else x


def per_row(stats: GroupStats, per_group: Any) -> Any:
    """A ``(k,)`` per-group array broadcastable against :func:`row_view` arrays (no copy when
    dense)."""
    return per_group[:, None] if stats.index is None else per_group[stats.index]


def has_nan_rows(stats: GroupStats) -> bool:
    """Whether any row was unscorable (O(k): compares per-group counts with sizes)."""
    return bool((stats.count != stats.size).any())


def count_by_group(stats: GroupStats, mask: Any, torch_in: bool) -> Any:
    """``(k,)`` number of True rows of an ``(n,)`` bool mask in each group (sorted-id order)."""
    k = stats.n_groups
    if stats.index is None:  # dense layout: rows are k consecutive groups of equal size
        return mask.reshape(k, -1).sum(1)
    if torch_in:
        import torch

        out = torch.zeros(k, dtype=torch.int64, device=mask.device)
        return out.index_add_(0, stats.index, mask.to(torch.int64))
    return np.bincount(stats.index, weights=mask, minlength=k)


def where(cond: Any, a: Any, b: Any, torch_in: bool) -> Any:
    """``where`` for numpy and torch; ``b`` may be a Python scalar."""
    if torch_in:
        import torch

        if not is_torch(b):
            b = torch.as_tensor(b, dtype=a.dtype, device=a.device)
        return torch.where(cond, a, b)
    return np.where(cond, a, b)


def isnan(x: Any, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.isnan(x)
    return np.isnan(x)


def sqrt(x: Any, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.sqrt(x)
    return np.sqrt(x)


def ceil(x: Any, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.ceil(x)
    return np.ceil(x)


def nan_to_zero(adv: Any, torch_in: bool) -> Any:
    """Replace NaN advantages by 0 (TRL's ``nan_to_num`` after the division)."""
    return where(isnan(adv, torch_in), 0.0 * adv, adv, torch_in)


def batch_mean(stats: GroupStats) -> float:
    """Mean of the step's finite rewards from the group statistics (O(k), one scalar sync).

    NaN when no reward is finite.
    """
    total = float(stats.count.sum())  # unscorable groups count 0 (and have a NaN mean)
    if not total:
        return math.nan
    weighted = stats.count * stats.mean
    torch_in = is_torch(weighted)
    return float(where(stats.scorable, weighted, 0.0 * stats.count, torch_in).sum()) / total


# --------------------------------------------------------------------------------------------
# The metrics every estimator logs


def common_metrics(
    rewards: Any,
    stats: GroupStats,
    adv: Any,
    *,
    tau: float,
    r_min: float,
    r_max: float,
    torch_in: bool,
) -> dict[str, float]:
    """acr (raw, before mitigation) and its split, acr_residual, adv_std, adv_zero_frac.

    Args:
        rewards: ``(n,)`` the step's raw rewards (NaN = unscorable).
        stats: :func:`rlvitals.signal.group_stats` of ``rewards`` with ``tau``.
        adv: ``(n,)`` the advantages the estimator returns.

    ``acr_residual`` is the share of scorable groups whose returned advantages are all
    ``|A| <= 1e-8`` (what is still wasted after mitigation). ``adv_std`` is the population std of
    the scorable completions' advantages. All fractions are NaN when no group is scorable.
    """
    n_groups = int(stats.scorable.sum())
    adv_std, adv_zero = signal.advantage_stats(adv, rewards)
    if n_groups == 0:
        nan = math.nan
        return {"acr": nan, "acr_residual": nan, "acr_solve_all": nan, "acr_solve_none": nan,
                "acr_flat": nan, "adv_std": adv_std, "adv_zero_frac": adv_zero}
    split = signal.collapse_split(rewards, None, tau, r_min=r_min, r_max=r_max, stats=stats)
    alive = count_by_group(stats, abs(adv) > ADV_ZERO_ATOL, torch_in)
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

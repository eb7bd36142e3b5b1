"""The array layer: the handful of operations rlvitals needs, for numpy and torch alike.

``signal`` and ``estimators`` work on numpy arrays or torch tensors (any device, no copies to
the host). This module is the only place that tells them apart. Inputs are validated once, by
:func:`validate`; everything downstream trusts them.

>>> import numpy as np
>>> r, g, t, nan = validate([1, 0, 1], [0, 0, 1])
>>> r.dtype, t, nan
(dtype('float64'), False, False)
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = [
    "all_finite",
    "as_mask",
    "cast",
    "ceil",
    "check_tau",
    "fmax",
    "full_like",
    "is_torch",
    "isnan",
    "quiet_numerics",
    "scan_nan",
    "sqrt",
    "validate",
    "where",
    "wide_dtype",
]


def is_torch(x: Any) -> bool:
    """True for a torch tensor (checked without importing torch)."""
    return type(x).__module__.startswith("torch")


def check_tau(tau: Any) -> float:
    """``tau`` as a float; ValueError unless it is a finite number >= 0."""
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not math.isfinite(tau):
        raise ValueError(f"tau must be a finite number >= 0, got {tau!r}")
    if tau < 0:
        raise ValueError(f"tau must be >= 0, got {tau!r}")
    return float(tau)


def validate(rewards: Any, group_ids: Any, *, scan: bool = True) -> tuple[Any, Any, bool, Any]:
    """Check one step's inputs; return ``(rewards, group_ids, is_torch, has_nan)``.

    Args:
        rewards: ``(n,)`` numeric, numpy-like or a torch tensor. Integer and bool rewards
            become float64; float32 stays float32.
        group_ids: ``(n,)`` integer group keys (strings too for numpy). For torch rewards, ids
            given as numpy or lists are moved to the rewards' device. Integral floats are
            accepted for numpy.

    Raises ValueError naming the problem: wrong shapes or lengths, an empty step, non-numeric
    rewards, non-integral ids, or a +/-inf reward (NaN marks an unscorable completion).
    ``scan=False`` leaves the rewards' values unread (``has_nan`` is None): the caller reads
    them itself and calls :func:`scan_nan` when a sum of them comes out non-finite.
    """
    torch_in = is_torch(rewards)
    if torch_in:
        import torch

        if not is_torch(group_ids):
            group_ids = torch.as_tensor(np.asarray(group_ids), device=rewards.device)
        if not rewards.is_floating_point():
            rewards = rewards.double()
        if group_ids.is_floating_point() or group_ids.is_complex():
            raise ValueError(f"group_ids must be integers for torch input, got {group_ids.dtype}")
    else:
        rewards = np.asarray(rewards)
        group_ids = np.asarray(group_ids)
        if rewards.dtype.kind not in "fiub":
            raise ValueError(f"rewards must be numeric, got dtype {rewards.dtype}")
        if rewards.dtype.kind != "f":
            rewards = rewards.astype(np.float64)
        if group_ids.dtype.kind == "f":
            if not np.all(np.isfinite(group_ids)) or np.any(group_ids != np.round(group_ids)):
                raise ValueError("group_ids must be integers or strings, got non-integral floats")
            group_ids = group_ids.astype(np.int64)
        elif group_ids.dtype.kind not in "iubUSO":
            raise ValueError(f"group_ids must be integers or strings, got dtype {group_ids.dtype}")
    if rewards.ndim != 1:
        raise ValueError(f"rewards must be 1-D (n,), got shape {tuple(rewards.shape)}")
    if group_ids.ndim != 1:
        raise ValueError(f"group_ids must be 1-D (n,), got shape {tuple(group_ids.shape)}")
    if rewards.shape[0] != group_ids.shape[0]:
        raise ValueError(
            f"rewards and group_ids differ in length: {rewards.shape[0]} != {group_ids.shape[0]}"
        )
    if rewards.shape[0] == 0:
        raise ValueError("rewards is empty: a step needs at least one completion")
    return rewards, group_ids, torch_in, scan_nan(rewards, torch_in) if scan else None


def scan_nan(rewards: Any, torch_in: bool) -> bool:
    """Whether ``rewards`` hold a NaN; ValueError for a +/-inf (see :func:`validate`)."""
    # One pass answers the common case (all finite); only then look closer.
    if torch_in:
        import torch

        if bool(torch.isfinite(rewards).all()):
            return False
        if bool(torch.isinf(rewards).any()):
            raise ValueError("rewards contain +/-inf; use NaN for unscorable completions")
        return True
    if np.isfinite(rewards).all():
        return False
    if np.isinf(rewards).any():
        raise ValueError("rewards contain +/-inf; use NaN for unscorable completions")
    return True


def wide_dtype(v: Any) -> Any:
    """float64 to accumulate torch sums in, except on devices without it (Apple MPS)."""
    import torch

    return v.dtype if v.device.type == "mps" else torch.float64


def cast(x: Any, like: Any, torch_in: bool) -> Any:
    """``x`` in the dtype of ``like``."""
    return x.to(like.dtype) if torch_in else x.astype(like.dtype, copy=False)


def where(cond: Any, a: Any, b: Any, torch_in: bool) -> Any:
    """``where(cond, a, b)``; ``b`` may be a Python scalar (kept in ``a``'s dtype)."""
    if torch_in:
        import torch

        if not is_torch(b):
            b = torch.as_tensor(b, dtype=a.dtype, device=a.device)
        return torch.where(cond, a, b)
    if not isinstance(b, np.ndarray) and isinstance(a, np.ndarray):
        b = a.dtype.type(b)
    return np.where(cond, a, b)


def isnan(x: Any, torch_in: bool) -> Any:
    return x.isnan() if torch_in else np.isnan(x)


def sqrt(x: Any, torch_in: bool, *, inplace: bool = False) -> Any:
    """``sqrt(x)``; ``inplace`` writes it into ``x``."""
    if torch_in:
        import torch

        return x.sqrt_() if inplace else torch.sqrt(x)
    return np.sqrt(x, out=x if inplace else None)


def fmax(x: Any, floor: float, torch_in: bool, *, inplace: bool = False) -> Any:
    """``max(x, floor)`` elementwise, ``floor`` where ``x`` is NaN (``where(x > floor, x,
    floor)``); ``inplace`` writes it into ``x``."""
    out = x if inplace else None
    if torch_in:
        import torch

        return torch.fmax(x, torch.full_like(x, floor), out=out)
    return np.fmax(x, floor, out=out)


def all_finite(x: Any, torch_in: bool) -> bool:
    """Whether every value of ``x`` is finite."""
    if torch_in:
        import torch

        return bool(torch.isfinite(x).all())
    return bool(np.isfinite(x).all())


def ceil(x: Any, torch_in: bool) -> Any:
    if torch_in:
        import torch

        return torch.ceil(x)
    return np.ceil(x)


def full_like(like: Any, value: float) -> Any:
    """A ``like``-shaped array filled with ``value`` (same backend, dtype, device)."""
    if is_torch(like):
        import torch

        return torch.full_like(like, value)
    return np.full_like(like, value)


def as_mask(mask: Any, like: Any, torch_in: bool) -> Any:
    """``mask`` as a bool array on ``like``'s backend (and device)."""
    if torch_in:
        import torch

        return torch.as_tensor(mask, dtype=torch.bool, device=like.device)
    return np.asarray(mask, dtype=bool)


@contextlib.contextmanager
def quiet_numerics() -> Iterator[None]:
    """Floating-point warnings off (numpy's errstate and its RuntimeWarnings, e.g. "mean of
    empty slice"): for code that judges or formats series with NaN and inf on purpose, so an
    extreme value never prints a warning on a successful run, nor raises under ``-W error``."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield

"""What every estimator call guarantees, whatever the estimator: no NaN ever leaves it.

:meth:`rlvitals.estimators.Estimator.__call__` runs each estimator through :func:`safe_call`:

1. Half precision (float16, bfloat16) rewards are widened to float32 before any statistic: a
   group's squared deviations overflow float16 once its spread passes ~256, and the advantages
   came out all zero with no word.
2. An estimator whose advantages depend on the declared reward range (``ranged``: AVSPO's
   virtual rewards, the history baseline's Beta counts) refuses rewards outside ``[r_min, r_max]``
   with :class:`RewardRangeError`, naming the values and the setting to change. Two 0/1 reward
   functions summed, as TRL sums them, give rewards up to 2: the history baseline turned that
   into NaN advantages and a negative pseudo-count that poisoned every later step of the prompt;
   AVSPO gave such groups a uniform push. The check runs before the estimator, so a refused step
   leaves the state as it was.
3. A float32 step with a reward beyond ±1e15 (:data:`F32_SAFE`) is computed in float64 and cast
   back: its squared deviations overflow float32, the std became inf and every advantage of the
   group a silent 0 (rewards of ±3e38 gave 0 or NaN). Advantages that are still not finite are
   recomputed in float64; if they stay non-finite (or overflow the input dtype when cast back)
   the call raises :class:`NonFiniteAdvantageError`. A non-finite advantage is never returned.

None of this depends on the warnings filter: the checks are comparisons, not warnings, and the
estimator runs under ``np.errstate(all="ignore")`` (lanes an estimator masks out, such as an
all-NaN group's virtual-sample count, may divide by zero; under ``-W error`` that warning was
an exception).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._array import is_torch
from rlvitals.errors import RlvitalsError

__all__ = ["NonFiniteAdvantageError", "RewardRangeError", "safe_call"]

_SHOWN = 4
"""Out-of-range rewards quoted in an error message."""


class RewardRangeError(RlvitalsError, ValueError):
    """Rewards outside the ``[r_min, r_max]`` an estimator was configured with."""


class NonFiniteAdvantageError(RlvitalsError, ArithmeticError):
    """An estimator produced NaN or inf advantages even in float64."""


def _is_half(rewards: Any) -> bool:
    if is_torch(rewards):
        import torch

        return rewards.dtype in (torch.float16, torch.bfloat16)
    return isinstance(rewards, np.ndarray) and rewards.dtype == np.float16


def _to(x: Any, like_or_dtype: Any) -> Any:
    if is_torch(x):
        return x.to(like_or_dtype)
    with np.errstate(all="ignore"):  # an overflow is caught by the finiteness check after it
        return np.asarray(x).astype(like_or_dtype, copy=False)


def _float32(x: Any) -> Any:
    if is_torch(x):
        import torch

        return x.to(torch.float32)
    return x.astype(np.float32)


def _float64(x: Any) -> Any:
    if is_torch(x):
        from rlvitals._array import wide_dtype

        return x.to(wide_dtype(x))  # float64 except on devices without it
    return np.asarray(x, dtype=np.float64)


def _all_finite(adv: Any) -> bool:
    if is_torch(adv):
        import torch

        return bool(torch.isfinite(adv).all())
    return bool(np.isfinite(adv).all())


def check_reward_range(rewards: Any, r_min: float, r_max: float, estimator: str) -> None:
    """Raise :class:`RewardRangeError` if a scorable reward lies outside ``[r_min, r_max]``.

    NaN rewards (unscorable completions) pass; other checks (shape, inf) belong to the
    estimator's own validation.

    >>> check_reward_range(np.array([0.0, 1.0, np.nan]), 0.0, 1.0, "avspo")
    """
    if is_torch(rewards):
        import torch

        r = rewards.detach()
        bad = (r < r_min) | (r > r_max)  # NaN compares False: unscorable rows pass
        if not bool(bad.any()):
            return
        values = r[bad].double().cpu().numpy()
        finite = r[~torch.isnan(r)].double()
        lo, hi = float(finite.min()), float(finite.max())
    else:
        r = np.asarray(rewards)
        if r.dtype.kind != "f":
            r = r.astype(np.float64)
        with np.errstate(invalid="ignore"):
            bad = (r < r_min) | (r > r_max)
        if not bad.any():
            return
        values = r[bad].astype(np.float64)
        lo, hi = float(np.nanmin(r)), float(np.nanmax(r))
    shown = ", ".join(f"{v:g}" for v in np.unique(values)[:_SHOWN])
    more = ", ..." if np.unique(values).size > _SHOWN else ""
    raise RewardRangeError(
        f"{estimator}: {values.size} reward(s) outside [r_min, r_max] = [{r_min:g}, {r_max:g}]: "
        f"{shown}{more} (min {lo:g}, max {hi:g}). This estimator's advantages depend on the "
        f"range: set r_min/r_max to what your reward functions can return (TRL sums several "
        f"reward functions: two 0/1 rewards give r_max=2), e.g. estimator_config="
        f"{{'r_min': {min(lo, r_min):g}, 'r_max': {max(hi, r_max):g}}} in RlvitalsGRPOTrainer "
        f"or +algorithm.rlvitals.r_max=... in veRL"
    )


def safe_call(
    fn: Any, rewards: Any, group_ids: Any, config: Any, state: Any, *, name: str, ranged: bool
) -> tuple[Any, dict[str, float], Any]:
    """``fn(rewards, group_ids, config, state)`` with the guarantees of the module docstring."""
    dtype = getattr(rewards, "dtype", None)
    narrow = _is_half(rewards)
    if narrow:
        rewards = _float32(rewards)
    if ranged:
        check_reward_range(rewards, config.r_min, config.r_max, name)
    if _is(rewards, "float32") and _max_abs(rewards) > F32_SAFE:
        # Squared deviations would overflow float32 (std -> inf, advantages silently 0).
        rewards, narrow = _float64(rewards), True
    with np.errstate(all="ignore"):  # masked-out lanes (an all-NaN group) may divide by 0
        adv, metrics, new_state = fn(rewards, group_ids, config, state)
        if not _all_finite(adv) and not _is(rewards, "float64"):
            rewards, narrow = _float64(rewards), True
            adv, metrics, new_state = fn(rewards, group_ids, config, state)
    if narrow:
        adv = _to(adv, dtype)
    if not _all_finite(adv):
        raise NonFiniteAdvantageError(
            f"{name}: advantages are not finite in {dtype} (rewards from {_span(rewards)}); "
            "none was returned to the trainer: rescale the rewards"
        )
    return adv, metrics, new_state


F32_SAFE = 1e15
"""Largest |reward| whose group statistics stay well inside float32 (squares of 1e15 are 1e30,
the float32 maximum 3.4e38); past it the step is computed in float64."""


def _is(x: Any, dtype: str) -> bool:
    """``x`` (numpy or torch) holds ``dtype`` (``"float32"``, ``"float64"``)."""
    if is_torch(x):
        import torch

        return x.dtype == getattr(torch, dtype)
    return getattr(x, "dtype", None) == np.dtype(dtype)


def _max_abs(x: Any) -> float:
    if is_torch(x):
        import torch

        return float(torch.nan_to_num(x.detach(), nan=0.0).abs().max())
    m = float(np.abs(x).max())
    return float(np.abs(np.nan_to_num(x, nan=0.0)).max()) if m != m else m  # NaN rows: 0


def _span(rewards: Any) -> str:
    r = rewards.detach().double().cpu().numpy() if is_torch(rewards) else np.asarray(rewards)
    r = r[~np.isnan(r)]
    return f"{float(r.min()):g} to {float(r.max()):g}" if r.size else "NaN only"

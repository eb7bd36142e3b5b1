"""What was read from a run: the summary ``rlvitals inspect`` prints, as plain data.

:func:`describe` says which importer read the run, its step axis, the configuration facts it
found (trainer, G, estimator and advantage scale, KL), every series with its coverage, the
per-group data, and what was not understood.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlvitals.recording.run import Run

__all__ = ["describe"]


def describe(run: Run) -> dict[str, Any]:
    """A JSON-ready summary of a :class:`~rlvitals.Run` (what ``rlvitals inspect`` prints).

    >>> from rlvitals.recording import RunBuilder
    >>> b = RunBuilder()
    >>> b.add_row(1, {"reward": 0.5, "mystery": 2.0})
    >>> d = describe(b.build())
    >>> d["series"], d["unknown_keys"]
    ({'mystery': 1.0, 'reward_mean': 1.0}, ['mystery'])
    """
    from rlvitals.importers import format_description, runs_of

    m = run.manifest
    return {
        "source": m.source,
        "format": m.format,
        "format_description": format_description(m.format),
        "trainer": m.trainer,
        "steps": _steps_info(_step_axis(run)),
        "step_key": m.step_key,
        "logging_steps": m.logging_steps,
        "trainer_version": m.trainer_version,
        "reward_std_kind": _reward_std_kind(run),
        "group_size": m.group_size,
        "scale_rewards": m.scale_rewards,
        "estimator": m.estimator,
        "adv_scale": m.adv_scale,
        "kl_coef": _f(m.kl_coef),
        "filters_zero_var": m.filters_zero_var,
        "reward_range": [_f(m.reward_min), _f(m.reward_max)],
        "series": {n: round(run.coverage(n), 4) for n in sorted(run.series)},
        "eval_steps": _steps_info(run.eval_steps),
        "eval_series": {n: round(run.coverage(n), 4) for n in sorted(run.eval_series)},
        "groups": _groups_info(run),
        "collapse_evidence": _collapse_evidence(run),
        "runs": runs_of(run),
        "events": len(run.events),
        "unknown_keys": list(run.unknown_keys),
        "warnings": list(run.warnings),
    }


_COLLAPSE_KEYS = (
    "zero_std_frac",
    "solve_all_frac",
    "solve_none_frac",
    "effective_frac",
    "filtered_frac",
    "filtered_groups",
    "kept_frac",
    "group_reward_std_mean",
    "adv_zero_frac",
    "adv_std",
    "reward_std",
)


def _step_axis(run: Run) -> np.ndarray:
    """The run's steps: its scalar rows', else (per-group data only) its groups'."""
    if run.steps.size or run.groups is None:
        return run.steps
    return run.groups.unique_steps()


def _reward_std_kind(run: Run) -> str | None:
    if not run.has("reward_std"):
        return None
    from rlvitals.vitals.filtering import reward_std_kind

    return reward_std_kind(run)


def _collapse_evidence(run: Run) -> list[str]:
    """The collapse-related series the run holds, best first (what the vitals can use)."""
    out = ["per-group rewards"] if run.groups is not None and run.groups.n_groups else []
    out += [k for k in _COLLAPSE_KEYS if run.has(k)]
    if run.has("adv_max") and run.has("adv_min"):  # veRL: max == min == 0 means all zero
        out.append("adv_max/adv_min")
    out += [k for k in run.unknown_keys if "zero_std/count_" in k or "dynamic_filter/drop_" in k]
    return out


def _f(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else str(x)
    return x


def _steps_info(steps: np.ndarray) -> dict[str, Any]:
    if steps.size == 0:
        return {"count": 0, "first": None, "last": None}
    return {"count": int(steps.size), "first": int(steps[0]), "last": int(steps[-1])}


def _groups_info(run: Run) -> dict[str, Any]:
    t = run.groups
    if t is None or t.n_groups == 0:
        return {"present": False}
    sizes = t.sizes()
    steps = t.unique_steps()
    return {
        "present": True,
        "groups": t.n_groups,
        "steps": int(steps.size),
        "first_step": int(steps[0]),
        "last_step": int(steps[-1]),
        "group_sizes": sorted({int(s) for s in np.unique(sizes)}),
        "completions": int(t.rewards.size),
        "advantages": t.advantages is not None,
        "prompts": t.prompt is not None,
    }

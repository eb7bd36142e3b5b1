"""The math of group statistics: group mean/std, the Advantage Collapse Rate, advantages.

Definitions follow DESIGN.md section 3 (normative) and He et al., "Advantage Collapse in Group
Relative Policy Optimization: Diagnosis and Mitigation" (ICML 2026, arXiv 2605.21125).

Every function takes a flat rewards array ``(n,)`` plus group ids ``(n,)``; groups may be ragged
and need not be contiguous. Inputs may be numpy arrays or torch tensors (any device; no copies to
the host), float32 or float64; outputs have the input's kind, device and float dtype.

Conventions, said once:

- ``std`` is the unbiased (N - 1) standard deviation unless ``ddof=0`` is passed.
- A NaN reward means "unscorable": it is left out of its group's statistics and its advantage is
  0 (TRL's convention). A group with no finite reward is *unscorable* and is left out of ACR.
- A group is *collapsed* (ACR counts it) when its unbiased std is ``<= tau`` (1e-6) or its
  rewards are equal up to float round-off; it gets zero advantages only when they are equal up
  to round-off (``0.6f + 0.1f`` vs ``0.7f``), so ``tau`` never erases a real spread: ``[1e6,
  1e6 + 1]`` keeps TRL's advantages. A group with one scorable reward is collapsed.

Modules: :mod:`~rlvitals.signal.groups` (statistics, collapse, split, expected collapse),
:mod:`~rlvitals.signal.advantages`, :mod:`~rlvitals.signal.series` (step-series rules);
``_ops`` holds the segment reductions of one batch layout.
"""

from rlvitals.signal.advantages import (
    ADVANTAGE_METHODS,
    DEFAULT_EPS,
    ZERO_ATOL,
    advantage_stats,
    advantage_stats_by,
    advantages,
    advantages_from_stats,
)
from rlvitals.signal.groups import (
    DEFAULT_TAU,
    ROUNDOFF_ULPS,
    CollapseSplit,
    GroupStats,
    collapse_mask,
    collapse_rate,
    collapse_split,
    excess_collapse,
    expected_acr,
    expected_collapse,
    group_stats,
    split_masks,
)
from rlvitals.signal.series import (
    DEFAULT_WINDOW,
    STALL_ACR,
    STALL_STEPS,
    acr_100,
    acr_volatility,
    bool_runs,
    cumulative_acr,
    stall_spans,
    windowed_acr,
)

__all__ = [
    "ADVANTAGE_METHODS",
    "DEFAULT_EPS",
    "DEFAULT_TAU",
    "DEFAULT_WINDOW",
    "ROUNDOFF_ULPS",
    "STALL_ACR",
    "STALL_STEPS",
    "ZERO_ATOL",
    "CollapseSplit",
    "GroupStats",
    "acr_100",
    "acr_volatility",
    "advantage_stats",
    "advantage_stats_by",
    "advantages",
    "advantages_from_stats",
    "bool_runs",
    "collapse_mask",
    "collapse_rate",
    "collapse_split",
    "cumulative_acr",
    "excess_collapse",
    "expected_acr",
    "expected_collapse",
    "group_stats",
    "split_masks",
    "stall_spans",
    "windowed_acr",
]

"""rlvitals: vital signs for GRPO / RLVR training runs.

Measure the learning signal (the Advantage Collapse Rate and friends), diagnose what went wrong
and since which step, and mitigate advantage collapse inside real trainers.
"""

from rlvitals._version import __version__
from rlvitals.errors import InputError, MissingExtraError, RlvitalsError
from rlvitals.estimators import estimate
from rlvitals.recording import Event, GroupTable, Manifest, Run, RunBuilder
from rlvitals.signal import (
    CollapseSplit,
    GroupStats,
    acr_100,
    acr_volatility,
    advantage_stats,
    advantages,
    collapse_mask,
    collapse_rate,
    collapse_split,
    cumulative_acr,
    excess_collapse,
    expected_acr,
    expected_collapse,
    group_stats,
    stall_spans,
    windowed_acr,
)

__all__ = [
    "CollapseSplit",
    "Event",
    "GroupStats",
    "GroupTable",
    "InputError",
    "Manifest",
    "MissingExtraError",
    "RlvitalsError",
    "Run",
    "RunBuilder",
    "__version__",
    "acr_100",
    "acr_volatility",
    "advantage_stats",
    "advantages",
    "collapse_mask",
    "collapse_rate",
    "collapse_split",
    "cumulative_acr",
    "estimate",
    "excess_collapse",
    "expected_acr",
    "expected_collapse",
    "group_stats",
    "stall_spans",
    "windowed_acr",
]

"""rlvitals: vital signs for GRPO / RLVR training runs.

Measure the learning signal (the Advantage Collapse Rate and friends), diagnose what went wrong
and since which step, and mitigate advantage collapse inside real trainers.
"""

from rlvitals._version import __version__
from rlvitals.config import load_config
from rlvitals.doctor import Diagnosis, DoctorConfig, diagnose, diagnose_path
from rlvitals.errors import InputError, MissingExtraError, RlvitalsError
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
from rlvitals.vitals import Vitals, compute_vitals

__all__ = [
    "CollapseSplit",
    "Diagnosis",
    "DoctorConfig",
    "Event",
    "GroupStats",
    "GroupTable",
    "InputError",
    "Manifest",
    "MissingExtraError",
    "RlvitalsError",
    "Run",
    "RunBuilder",
    "Vitals",
    "__version__",
    "acr_100",
    "acr_volatility",
    "advantage_stats",
    "advantages",
    "collapse_mask",
    "collapse_rate",
    "collapse_split",
    "compute_vitals",
    "cumulative_acr",
    "diagnose",
    "diagnose_path",
    "estimate",
    "excess_collapse",
    "expected_acr",
    "expected_collapse",
    "group_stats",
    "load_config",
    "stall_spans",
    "windowed_acr",
]


def __getattr__(name: str):
    # Estimators load on first use: the log-diagnosis path (the CLI) never needs them.
    if name == "estimate":
        from rlvitals.estimators import estimate

        return estimate
    raise AttributeError(f"module 'rlvitals' has no attribute {name!r}")

"""Vitals: series derived once per run that every detector reads (DESIGN.md 3.2-3.6)."""

from rlvitals.vitals.core import (
    DERIVED_SERIES,
    EVIDENCE_TIERS,
    MIN_JUDGE_STEPS,
    UnknownSeriesError,
    Vitals,
    compute_vitals,
    is_known_series,
)
from rlvitals.vitals.groups import GroupSeries, group_series
from rlvitals.vitals.rewards import RewardRange, acr_series, reward_range

__all__ = [
    "DERIVED_SERIES",
    "EVIDENCE_TIERS",
    "MIN_JUDGE_STEPS",
    "GroupSeries",
    "RewardRange",
    "UnknownSeriesError",
    "Vitals",
    "acr_series",
    "compute_vitals",
    "group_series",
    "is_known_series",
    "reward_range",
]

"""Vitals: series derived once per run that every detector reads (DESIGN.md 3.2-3.6)."""

from rlvitals.vitals.core import EVIDENCE_TIERS, MIN_JUDGE_STEPS, Vitals, compute_vitals
from rlvitals.vitals.groups import GroupSeries, group_series

__all__ = [
    "EVIDENCE_TIERS",
    "MIN_JUDGE_STEPS",
    "GroupSeries",
    "Vitals",
    "compute_vitals",
    "group_series",
]

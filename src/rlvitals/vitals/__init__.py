"""Vitals: series derived once per run that every detector reads."""

from rlvitals.vitals.groups import GroupSeries, group_series

__all__ = ["GroupSeries", "group_series"]

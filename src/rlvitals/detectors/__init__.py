"""The detector catalogue. See :mod:`rlvitals.detectors.base` for the framework."""

from rlvitals.detectors.base import DETECTORS, Detector, Finding, Severity, register

__all__ = ["DETECTORS", "Detector", "Finding", "Severity", "register"]

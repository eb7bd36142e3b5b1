"""Canonical metric names, the ``Run`` type and the recording directory."""

from rlvitals.recording.metrics import CANONICAL, canonical_key
from rlvitals.recording.run import Event, GroupTable, Manifest, Run, RunBuilder

__all__ = ["CANONICAL", "Event", "GroupTable", "Manifest", "Run", "RunBuilder", "canonical_key"]

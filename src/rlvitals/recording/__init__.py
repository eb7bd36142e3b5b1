"""Canonical metric names, the ``Run`` type and the recording directory."""

from rlvitals.recording.metrics import CANONICAL, canonical_key
from rlvitals.recording.reader import read_recording
from rlvitals.recording.run import Event, GroupTable, Manifest, Run, RunBuilder
from rlvitals.recording.writer import Recorder

__all__ = [
    "CANONICAL",
    "Event",
    "GroupTable",
    "Manifest",
    "Recorder",
    "Run",
    "RunBuilder",
    "canonical_key",
    "read_recording",
]

"""Canonical metric names, the ``Run`` type and the recording directory.

The reader and the writer load on first use (``import rlvitals.recording`` stays cheap).
"""

from __future__ import annotations

from rlvitals.recording.metrics import CANONICAL, canonical_key
from rlvitals.recording.run import Event, GroupTable, Manifest, Run, RunBuilder
from rlvitals.registry import lazy_exports

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

_LAZY = {"Recorder": "rlvitals.recording.writer", "read_recording": "rlvitals.recording.reader"}

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)

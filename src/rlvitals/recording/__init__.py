"""Canonical metric names, the ``Run`` type and the recording directory.

The reader and the writer load on first use (``import rlvitals.recording`` stays cheap).
"""

from __future__ import annotations

from typing import Any

from rlvitals.recording.metrics import CANONICAL, canonical_key
from rlvitals.recording.run import Event, GroupTable, Manifest, Run, RunBuilder
from rlvitals.registry import import_module

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


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'rlvitals.recording' has no attribute {name!r}")

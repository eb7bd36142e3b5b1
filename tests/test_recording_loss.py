"""RECORDING_LOSS: records the recorder dropped are reported by the doctor."""

from __future__ import annotations

import os
from contextlib import nullcontext

import numpy as np
import pytest

from rlvitals.doctor import diagnose
from rlvitals.recording import Recorder, read_recording


def _record(path, *, disk_full_groups: bool):
    path.mkdir()
    if disk_full_groups:
        if not os.path.exists("/dev/full"):
            pytest.fail("this test needs /dev/full (Linux)")
        os.symlink("/dev/full", path / "groups.rank0.bin")  # every group write fails: ENOSPC
    with pytest.warns(RuntimeWarning) if disk_full_groups else nullcontext(), Recorder(path) as rec:
        for step in range(1, 60):
            rec.log_scalars(step, {"reward": 0.5, "loss": 0.1})
            rec.log_groups(step, np.array([1.0, 0.0] * 4), np.repeat(np.arange(4), 2))
    if disk_full_groups:
        (path / "groups.rank0.bin").unlink()  # the reader refuses a stream that is a device
    return read_recording(path)


def test_dropped_records_are_reported(tmp_path):
    run = _record(tmp_path / "rec", disk_full_groups=True)
    (found,) = [f for f in diagnose(run).findings if f.id == "RECORDING_LOSS"]
    assert found.metrics["dropped_records"] == 59
    assert found.metrics["dropped_groups"] == 59 and found.metrics["dropped_scalars"] == 0
    assert "No space left" in found.message or "ENOSPC" in found.message or "28" in found.message


def test_complete_recording_is_silent(tmp_path):
    run = _record(tmp_path / "rec", disk_full_groups=False)
    assert not [f for f in diagnose(run).findings if f.id == "RECORDING_LOSS"]

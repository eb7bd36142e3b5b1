"""RECORDING_LOSS: records the recorder dropped are reported by the doctor."""

from __future__ import annotations

import errno

import numpy as np

from rlvitals.doctor import diagnose
from rlvitals.recording import Recorder, _files, read_recording


def _record(path, *, disk_full_groups: bool, monkeypatch=None):
    path.mkdir()
    if disk_full_groups:  # every group write fails: ENOSPC
        real = _files.write_all

        def full(fd, data):
            if data.startswith(b"RLVg"):
                raise OSError(errno.ENOSPC, "No space left on device")
            real(fd, data)

        monkeypatch.setattr(_files, "write_all", full)
    with Recorder(path) as rec:
        for step in range(1, 60):
            rec.log_scalars(step, {"reward": 0.5, "loss": 0.1})
            rec.log_groups(step, np.array([1.0, 0.0] * 4), np.repeat(np.arange(4), 2))
    return read_recording(path)


def test_dropped_records_are_reported(tmp_path, monkeypatch):
    run = _record(tmp_path / "rec", disk_full_groups=True, monkeypatch=monkeypatch)
    (found,) = [f for f in diagnose(run).findings if f.id == "RECORDING_LOSS"]
    assert found.metrics["dropped_records"] == 59
    assert found.metrics["dropped_groups"] == 59 and found.metrics["dropped_scalars"] == 0
    assert "No space left" in found.message or "ENOSPC" in found.message or "28" in found.message


def test_complete_recording_is_silent(tmp_path):
    run = _record(tmp_path / "rec", disk_full_groups=False)
    assert not [f for f in diagnose(run).findings if f.id == "RECORDING_LOSS"]

"""The live guard against real processes: killed mid-run, and running out of disk under ``-W error``.

- a monitored training process (tests/_guard_worker.py ``loop``) is SIGKILLed after its guard
  raised an alert: the recording reads back, and the doctor on it agrees with every alert the
  monitor had emitted before the kill (same incident, onset, detectors);
- a real tiny TRL run (``trl``) with the callback completes under ``-W error::RuntimeWarning``
  while its recording's files hit a size limit mid-run (every write past it fails, as on a full
  disk): issue 11's Done-when.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlvitals
from rlvitals.recording import read_recording

WORKER = Path(__file__).resolve().parent / "_guard_worker.py"


def _env() -> dict[str, str]:
    return dict(
        os.environ,
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )


def test_sigkill_mid_run_leaves_a_recording_the_doctor_agrees_with(tmp_path):
    sys.path.insert(0, str(WORKER.parent))
    from _guard_worker import BREAK_STEP

    proc = subprocess.Popen(
        [sys.executable, str(WORKER), "loop", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    alerts, last_step = [], 0
    deadline = time.monotonic() + 120
    try:
        for line in proc.stdout:
            msg = json.loads(line)
            if "kind" in msg:
                alerts.append(msg)
            last_step = msg["step"]
            # kill a while after the first alert, mid-step, without warning
            if alerts and last_step >= alerts[0]["step"] + 9:
                break
            assert time.monotonic() < deadline, "the worker did not alert in time"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()[-2000:]
    assert alerts, "the monitor must have alerted before the kill"

    run = read_recording(tmp_path / "rec")  # a torn last record is tolerated, not an error
    steps = run.groups.unique_steps()
    assert last_step <= steps[-1] + 1 and steps[0] == 1
    recorded = [e for e in run.events if e.kind == "alert"]
    assert [e.data["alert"] for e in recorded] == [a["kind"] for a in alerts]  # nothing lost

    post = rlvitals.diagnose(run)
    for alert in alerts:
        inc = alert["incident"]
        if inc is None:  # a condition's alert (the cause), not an incident's
            continue
        same = [
            i
            for i in post.incidents
            if i.theme == inc["theme"]
            and i.onset_step is not None
            and abs(i.onset_step - inc["onset_step"]) <= 2
        ]
        assert same, (alert["message"], [(i.theme, i.onset_step) for i in post.incidents])
        assert set(inc["detectors"]) <= set(same[0].ids), (inc["detectors"], same[0].ids)
    opened = alerts[0]["incident"]
    assert opened["theme"] == "collapse" and opened["onset_step"] == BREAK_STEP
    assert alerts[0]["step"] - BREAK_STEP <= 5 + 2  # told within sustain + 2


@pytest.mark.slow
def test_trl_run_under_w_error_completes_while_the_disk_fills(tmp_path):
    sys.path.insert(0, str(WORKER.parent))
    from _guard_worker import TRL_STEPS

    limit = 6000  # bytes per file: the scalars stream passes it after a few steps
    proc = subprocess.run(
        [
            sys.executable,
            "-W",
            "error::RuntimeWarning",
            str(WORKER),
            "trl",
            str(tmp_path),
            str(limit),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=600,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["global_step"] == TRL_STEPS  # training never saw the failure
    assert result["recorder_errors"] > 0 and result["dropped"] > 0  # the disk did fill mid-run
    assert result["guard"] == {} and result["estimator_guard"] == {}
    assert max(result["sizes"].values()) <= limit
    # Told once, through logging (stderr): the recorder's own line and the monitor's.
    told = [line for line in proc.stderr.splitlines() if "met I/O errors" in line]
    assert len(told) == 1, told
    assert "Traceback" not in proc.stderr
    run = read_recording(tmp_path / "rec", strict=False)  # what was written still reads
    assert run.n_steps > 0 and run.n_steps < TRL_STEPS
    assert any("dropped" in w or "lost" in w for w in run.warnings) or any(
        e.kind == "dropped" for e in run.events
    )

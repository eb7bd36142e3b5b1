"""``rlvitals watch``: follow a run while it is written, for real files and a real process.

- a recording directory written step by step by a live :class:`rlvitals.Monitor`;
- a growing JSONL log with a torn last line, then rotated (``mv`` + new file) and truncated
  (``copytruncate``): no step read before is lost, the torn line is read once complete;
- ``rlvitals watch`` in a subprocess, following a log another thread writes, redrawing the
  view (plain and live): the incident appears while the run is going, the exit code is the
  doctor's (0, 1, 2).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from rlvitals.cli import main
from rlvitals.guard.follow import RunFollower
from rlvitals.guard.monitor import Monitor
from rlvitals.recording import Manifest

G, K = 8, 6


def _row(step: int, broken_from: int = 60) -> dict:
    """A TRL-like log row; every group degenerate from ``broken_from`` on."""
    rng = np.random.default_rng(step)
    zsf = 1.0 if step >= broken_from else float(rng.uniform(0.0, 0.25))
    return {
        "step": step,
        "loss": 0.1,
        "reward": 0.0 if step >= broken_from else float(rng.uniform(0.3, 0.7)),
        "reward_std": 0.0 if step >= broken_from else 0.4,
        "frac_reward_zero_std": zsf,
    }


def _write(path: Path, steps, mode="a", torn: str = "") -> None:
    with open(path, mode, encoding="utf-8") as f:
        for s in steps:
            f.write(json.dumps(_row(s)) + "\n")
        f.write(torn)


def test_follows_a_recording_written_live(tmp_path, capsys):
    rec = tmp_path / "rec"
    mon = Monitor(Manifest(trainer="test", group_size=G), recording_dir=rec, sinks=[])
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(K), G)

    def steps(first, last):
        for s in range(first, last + 1):
            r = (rng.random((K, G)) < 0.5).astype(float)
            r[:, 0], r[:, 1] = 1.0, 0.0
            if s >= 70:
                r[:] = 0.0
            mon.observe(s, r.reshape(-1), ids, loss=0.1)
        mon.flush()

    steps(1, 60)
    assert main(["watch", str(rec), "--once"]) == 0
    out = capsys.readouterr().out
    assert "steps 1..60" in out and "no incident" in out and "ACR" in out
    steps(61, 90)  # the recording is still open: its writer has not closed it
    assert main(["watch", str(rec), "--once"]) == 1
    out = capsys.readouterr().out
    assert "Learning signal lost" in out and "steps 1..90" in out
    mon.close()


def test_torn_lines_rotation_and_truncation(tmp_path):
    log = tmp_path / "train.log"
    _write(log, range(1, 41), mode="w", torn='{"step": 41, "loss": 0.1, "rew')
    f = RunFollower(log)
    assert f.poll() and f.run.steps.tolist() == list(range(1, 41))  # the torn line waits
    assert not f.poll()  # nothing changed
    with open(log, "a", encoding="utf-8") as fh:  # the writer finishes the line
        fh.write('ard": 0.5}\n')
    assert f.poll() and f.run.steps.tolist() == list(range(1, 42))
    os.rename(log, tmp_path / "train.log.1")  # rotation: a new file begins
    _write(log, range(42, 61), mode="w")
    assert f.poll() and f.run.steps.tolist() == list(range(1, 61)) and f.rotations == 1
    with open(log, "r+", encoding="utf-8") as fh:  # copytruncate
        fh.truncate(0)
    _write(log, range(61, 81))
    assert f.poll() and f.run.steps.tolist() == list(range(1, 81)) and f.rotations == 2
    assert f.run.series["zero_std_frac"][-1] == 1.0
    log.write_text("not a log at all\n")  # replaced by something unreadable: the steps stay
    f.poll()
    assert f.run.steps.tolist() == list(range(1, 81))
    f2 = RunFollower(tmp_path / "nope.log")
    assert not f2.poll() and f2.run is None and "no such file" in str(f2.error)


def test_bad_input_exits_2(tmp_path, capsys):
    assert main(["watch", str(tmp_path / "missing.jsonl"), "--once"]) == 2
    (tmp_path / "x.bin").write_bytes(b"\x00\x01\x02" * 10)
    assert main(["watch", str(tmp_path / "x.bin"), "--once"]) == 2
    assert "rlvitals: error:" in capsys.readouterr().err


def _follow(tmp_path: Path, env_extra: dict[str, str], args: list[str]) -> tuple[int, str, float]:
    """Run ``rlvitals watch`` on a log a thread writes (10 steps every 0.1 s); returns the exit
    code, the output, and how long after the break the incident first showed."""
    log = tmp_path / "train.log"
    _write(log, range(1, 41), mode="w")
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="120", **env_extra)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvitals", "watch", str(log), "--interval", "0.2", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    broke = {}

    def writer():
        for first in range(41, 121, 10):
            time.sleep(0.3)
            if first >= 60 and "t" not in broke:
                broke["t"] = time.monotonic()
            _write(log, range(first, first + 10))

    t = threading.Thread(target=writer)
    t.start()
    seen = None
    out = b""
    for chunk in iter(lambda: proc.stdout.read1(4096), b""):
        out += chunk
        if seen is None and b"Learning signal lost" in out and "t" in broke:
            seen = time.monotonic() - broke["t"]
    proc.wait(60)
    t.join()
    return proc.returncode, out.decode("utf-8", "replace"), seen


def test_watch_follows_a_growing_log_plain(tmp_path):
    code, out, seen = _follow(tmp_path, {}, ["--plain", "--idle-exit", "3"])
    assert code == 1, out[-3000:]
    assert out.count("rlvitals watch") >= 3  # printed again at each change
    assert "steps 1..120" in out and seen is not None and seen < 10


def test_watch_live_view_redraws_in_place(tmp_path):
    code, out, seen = _follow(tmp_path, {"FORCE_COLOR": "1", "TERM": "xterm"}, ["--idle-exit", "3"])
    assert code == 1, out[-3000:]
    assert "\x1b[" in out  # drawn with terminal control sequences (rich.live)
    assert "Learning signal lost" in out and seen is not None

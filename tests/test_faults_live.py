"""Following and guarding live runs (issue 21, items 3 and 5): ``rlvitals watch`` on binary
formats, errors naming the user's file, unreadable or vanishing inputs; the live guard's halt."""

from __future__ import annotations

import gzip
import json
import shutil

import numpy as np
import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py

from rlvitals.cli import main
from rlvitals.errors import InputError
from rlvitals.guard import follow
from rlvitals.guard.follow import RunFollower
from rlvitals.guard.monitor import Monitor
from rlvitals.recording import Manifest


def _rows(steps) -> bytes:
    return b"".join(
        json.dumps({"step": s, "reward": (s % 5) / 4, "reward_std": 0.3, "loss": 0.1}).encode()
        + b"\n"
        for s in steps
    )


# --- item 5: watch on any format ---------------------------------------------------------------
def test_watch_hands_a_gzip_log_whole_to_its_importer(tmp_path):
    data = gzip.compress(_rows(range(1, 301)))
    assert b"\n" in data and not data.endswith(b"\n")  # a cut at a newline byte breaks it
    p = tmp_path / "train.jsonl.gz"
    p.write_bytes(data)
    f = RunFollower(p)
    assert f.poll(), f.error
    assert f.run.steps.tolist() == list(range(1, 301))
    assert not any("ends early" in w for w in f.run.warnings)  # read whole, not cut


def test_watch_reads_a_sqlite_store_whole(tmp_path):
    db = tmp_path / "mlflow.db"
    shutil.copy(P.produced("mlflow") / "mlflow.db", db)
    assert b"\n" in db.read_bytes()
    f = RunFollower(db, run="main")
    assert f.poll(), f.error
    assert f.run.has("reward_mean")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["mlflow.db"]


def test_watch_errors_name_the_users_file_not_a_copy(tmp_path):
    p = tmp_path / "history.csv"
    p.write_bytes(b"no,header,here\n1,2,3\n4,5")  # torn last line: read through a copy
    f = RunFollower(p, fmt="wandb_history")
    assert not f.poll()
    assert isinstance(f.error, InputError)
    assert f.error.path == str(p)
    assert "rlvitals-watch-" not in str(f.error)


def test_watch_unreadable_or_vanishing_file_is_one_line(tmp_path, monkeypatch, capsys):
    p = tmp_path / "train.jsonl"
    p.write_bytes(_rows(range(1, 20)))

    def denied(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(follow, "_is_text", denied)  # root reads a chmod 000 file: simulate it
    f = RunFollower(p)
    assert not f.poll()
    assert isinstance(f.error, InputError) and "Permission denied" in str(f.error)
    assert main(["watch", str(p), "--once"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(p) in err[0] and "Permission denied" in err[0]
    monkeypatch.undo()

    # gone between the look that saw it and the read
    g = RunFollower(p)
    stamp = g._stamp_now()
    p.unlink()
    monkeypatch.setattr(g, "_stamp_now", lambda: stamp)
    assert not g.poll()
    assert isinstance(g.error, InputError) and str(p) in str(g.error)


@pytest.mark.parametrize("name", ["train.jsonl.gz", "mlflow.db"])
def test_watch_once_on_binary_formats(tmp_path, capsys, name):
    p = tmp_path / name
    if name == "mlflow.db":
        shutil.copy(P.produced("mlflow") / "mlflow.db", p)
        args = ["--run", "main"]
    else:
        p.write_bytes(gzip.compress(_rows(range(1, 301))))
        args = []
    code = main(["watch", str(p), "--once", "--plain", "--fail-on", "never", *args])
    out = capsys.readouterr()
    assert code in (0, 2), out.err  # 2 only for "not judged": the read itself succeeded
    assert "Traceback" not in out.err and "cannot" not in out.err
    assert "rlvitals: error" not in out.err


# --- item 3: the live guard's halt names the last healthy step and its checkpoint ----------------
G, K = 8, 6
IDS = np.repeat(np.arange(K), G)


def _step_rewards(step: int, collapse_from: int) -> np.ndarray:
    rng = np.random.default_rng(step)
    r = (rng.random(K * G) < 0.5).astype(np.float32)
    r[::G], r[1::G] = 1.0, 0.0  # every group holds both outcomes
    if step >= collapse_from:
        r[:] = 0.0
    return r


def test_a_collapse_halts_with_its_last_healthy_step_and_checkpoint():
    mon = Monitor(
        Manifest(trainer="t", group_size=G),
        sinks=[],
        halt_on="collapse:12",
        checkpoints=lambda: [(s, f"ckpt-{s}") for s in range(10, 200, 10)],
    )
    for s in range(1, 141):
        if mon.should_stop:
            break
        mon.observe(s, _step_rewards(s, 70), IDS, loss=0.1, grad_norm=0.5)
    mon.close()
    assert mon.halted is not None and mon.halted.last_healthy_step == 69
    assert mon.halted.resume_from == "ckpt-60"
    assert 81 <= mon.halted.step <= 84  # 12 steps from 70 on (70-81), checked every 3 steps

"""MLflow importer: stores written by the real ``mlflow`` library (tests/_binary_producers.py).

The producer writes, into both an SQLite store (``mlflow.db``) and the legacy file store
(``mlruns/``; MLflow 3 refuses to write it unless ``MLFLOW_ALLOW_FILE_STORE=true``, which the
producer sets), an older "warmup" run and then the main run: TRL-shaped params, NaN and inf,
non-contiguous steps, an eval metric, and one metric logged twice at one step. The tests compare
the importer's output with those values; the SQLite file must come out byte-identical.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py

from rlvitals.errors import InputError
from rlvitals.importers import load, sniff
from rlvitals.importers import mlflow as ml


@pytest.fixture(scope="module")
def out() -> Path:
    return P.produced("mlflow")


def _value(run, name: str, step: int) -> float:
    steps = run.eval_steps if name.startswith("eval/") else run.steps
    idx = np.flatnonzero(steps == step)
    assert idx.size == 1, f"step {step} missing for {name}"
    return float(run.get(name)[idx[0]])


def _check_main(run) -> None:
    assert run.steps.tolist() == list(P.STEPS)
    for step in P.STEPS:
        for tag, value in P.train_row(step).items():
            if tag == "train/reward" and step == P.MLFLOW_REPEAT_STEP:
                value = -1.0  # logged again later at the same step: the later value wins
            got = _value(run, P.TRAIN_NAMES[tag], step)
            assert (math.isnan(got) and math.isnan(value)) or got == value, (tag, step, got)
    assert run.eval_steps.tolist() == sorted(P.EVAL)
    for step, value in P.EVAL.items():
        assert _value(run, "eval/reward_mean", step) == value
    assert run.manifest.trainer == "trl"
    assert run.manifest.group_size == P.TRL_CONFIG["num_generations"]
    assert run.manifest.kl_coef == P.TRL_CONFIG["beta"]
    assert run.manifest.scale_rewards == P.TRL_CONFIG["scale_rewards"]
    # MLflow keeps params as strings
    assert run.manifest.config["num_generations"] == str(P.TRL_CONFIG["num_generations"])
    assert set(run.manifest.config) == set(P.TRL_CONFIG)


def _warned_about_warmup(run) -> bool:
    return any("2 MLflow runs" in w and "(main)" in w and "(warmup)" in w for w in run.warnings)


@pytest.mark.parametrize("where", ["mlflow.db", ".", "mlruns"])
def test_store_matches_what_was_logged(out, where):
    path = out / where
    assert sniff(path).name == "mlflow"
    run = load(path)
    assert run.manifest.format == "mlflow"
    _check_main(run)
    assert _warned_about_warmup(run)
    assert any(e.kind == "note" and "(main)" in e.message for e in run.events)


def test_real_schema_is_what_the_reader_expects(out):
    con = sqlite3.connect(f"file:{out / 'mlflow.db'}?mode=ro", uri=True)
    try:
        cols = {r[1] for r in con.execute("PRAGMA table_info(metrics)")}
        assert {"key", "value", "timestamp", "run_uuid", "step", "is_nan"} <= cols
        assert {"run_uuid", "name", "start_time", "lifecycle_stage"} <= {
            r[1] for r in con.execute("PRAGMA table_info(runs)")
        }
        assert {"key", "value", "run_uuid"} <= {
            r[1] for r in con.execute("PRAGMA table_info(params)")
        }
        # how MLflow stores NaN and inf, which the reader undoes
        nan_rows = con.execute("SELECT value FROM metrics WHERE is_nan = 1").fetchall()
        assert nan_rows and all(v == 0 for (v,) in nan_rows)
        (inf,) = con.execute(
            "SELECT value FROM metrics WHERE key = 'train/grad_norm' AND step = 9"
        ).fetchone()
        assert inf == sys.float_info.max
    finally:
        con.close()


def test_run_id_chooses_a_run(out):
    con = sqlite3.connect(f"file:{out / 'mlflow.db'}?mode=ro", uri=True)
    try:
        (warmup,) = con.execute("SELECT run_uuid FROM runs WHERE name = 'warmup'").fetchone()
    finally:
        con.close()
    run = ml.load_mlflow(out / "mlflow.db", run_id=warmup)
    assert run.steps.tolist() == [0]
    assert run.get("reward_mean").tolist() == [42.0]
    assert run.manifest.config == {"num_generations": "2"}
    assert not run.warnings
    with pytest.raises(InputError, match="no run 'nope'"):
        ml.load_mlflow(out / "mlflow.db", run_id="nope")


def test_file_store_run_and_experiment_directories(out):
    exp = out / "mlruns" / "0"
    run = load(exp)
    _check_main(run)
    (main_dir,) = [
        d for d in exp.iterdir() if d.is_dir() and "run_name: main" in (d / "meta.yaml").read_text()
    ]
    run = load(main_dir)
    _check_main(run)
    assert not run.warnings


def test_sqlite_is_opened_read_only(out, tmp_path):
    db = tmp_path / "mlflow.db"
    shutil.copy(out / "mlflow.db", db)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    mtime = db.stat().st_mtime_ns
    db.chmod(0o444)
    tmp_path.chmod(0o555)  # not even a journal could be created next to it
    try:
        _check_main(load(db))
    finally:
        tmp_path.chmod(0o755)
        db.chmod(0o644)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert db.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


def test_sqlite_that_is_not_mlflow(tmp_path):
    db = tmp_path / "other.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE metrics (a, b)")
    con.commit()
    con.close()
    assert ml._sniff(db, db.read_bytes()[:100]) == 0.0
    with pytest.raises(InputError, match=r"not an MLflow store \(no table 'runs'"):
        load(db, fmt="mlflow")


def test_not_sqlite_and_empty_directory(tmp_path):
    p = tmp_path / "mlflow.db"
    p.write_text("hello")
    with pytest.raises(InputError, match="byte 0: not an SQLite database"):
        load(p, fmt="mlflow")
    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(InputError, match="no MLflow store"):
        load(d, fmt="mlflow")


def test_file_store_bad_and_torn_lines(out, tmp_path):
    src = next(d for d in (out / "mlruns" / "0").iterdir() if (d / "meta.yaml").is_file())
    run_dir = tmp_path / "run"
    shutil.copytree(src, run_dir)
    metric = run_dir / "metrics" / "train" / "reward"
    good = metric.read_bytes()
    metric.write_bytes(good + b"1700000000000 0.5")  # no newline: a live writer's torn line
    run = load(run_dir)
    assert any("torn last line" in w for w in run.warnings)
    metric.write_bytes(good + b"1700000000000 zero 3\n")
    lines = good.count(b"\n") + 1
    with pytest.raises(InputError, match=rf"reward:line {lines}: expected 'timestamp value step'"):
        load(run_dir)

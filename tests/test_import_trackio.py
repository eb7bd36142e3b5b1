"""trackio project databases written by the real ``trackio`` package (HOME in a temp dir)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from rlvitals import InputError
from rlvitals.importers import load, runs_of, sniff

pytest.importorskip("trackio")

SCRIPT = textwrap.dedent(
    """
    import trackio
    trackio.init(project="proj", name="trl-run", config={"num_generations": 4, "beta": 0.0})
    for s in range(1, 41):
        trackio.log({"profiling/Time taken: GRPOTrainer.x": 0.01})
        trackio.log({"train/reward": s / 40, "train/frac_reward_zero_std": 0.25,
                     "train/global_step": 2 * s})
    trackio.log({"eval/reward": 0.5, "train/global_step": 80})
    trackio.finish()
    trackio.init(project="proj", name="verl-run", config={"actor_rollout_ref": {"rollout": {"n": 5}}})
    for s in range(1, 31):
        trackio.log({"critic/score/mean": 0.1, "nested": {"x": 1.5}, "bad": float("nan")}, step=s)
    trackio.finish()
    """
)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    home = tmp_path_factory.mktemp("trackio-home")
    env = {**os.environ, "HOME": str(home), "TRACKIO_DIR": str(home / "tk"), "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, check=True, timeout=300, capture_output=True
    )
    return home / "tk" / "proj.db"


def test_two_runs_listed_the_latest_read(db):
    assert sniff(db).name == "trackio"
    r = load(db)
    assert len(runs_of(r)) == 2 and any("--run" in w for w in r.warnings)
    assert r.manifest.trainer == "verl" and r.manifest.group_size == 5
    assert r.steps.tolist() == list(range(1, 31)) and r.has("nested/x")


def test_trl_run_steps_from_train_global_step(db):
    r = load(db, run="trl-run")
    assert r.steps.tolist() == [2 * s for s in range(1, 41)]
    assert r.manifest.step_key == "train/global_step" and r.manifest.group_size == 4
    assert r.eval_steps.tolist() == [80]
    with pytest.raises(InputError, match="no run"):
        load(db, run="nope")

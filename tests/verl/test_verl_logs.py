"""veRL's own loggers as the producers: console lines and the ``file`` logger's JSONL, written by
``verl.utils.tracking.Tracking`` and read back by the rlvitals veRL importers."""

from __future__ import annotations

import contextlib
import io
import math

import numpy as np
import pytest
from verl.utils.tracking import Tracking

from rlvitals.importers import load, sniff

ROWS = {
    1: {
        "critic/score/mean": 0.25,
        "actor/entropy": np.float64(0.75),
        "actor/grad_norm": 0.5,
        "critic/advantages/max": 1.75,
        "critic/advantages/min": -1.75,
        "response_length/clip_ratio": 0.0,
        "val-core/openai/gsm8k/reward/mean@1": 0.125,
    },
    2: {
        "critic/score/mean": 0.5,
        "actor/entropy": 0.5,
        "actor/grad_norm": float("nan"),
        "critic/advantages/max": 0.0,
        "critic/advantages/min": 0.0,
        "response_length/clip_ratio": 0.03125,
        "global_seqlen/mean": 123.0,
    },
    3: {"critic/score/mean": -0.0, "actor/entropy": 0.0625, "actor/grad_norm": 2.0},
}


@pytest.fixture(scope="module")
def verl_logs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("verl-logs")
    jsonl = tmp / "file.jsonl"
    mp = pytest.MonkeyPatch()
    mp.setenv("VERL_FILE_LOGGER_PATH", str(jsonl))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        tracker = Tracking("proj", "exp", default_backend=["console", "file"])
        for step, row in ROWS.items():
            tracker.log(dict(row), step=step)
        tracker.logger["file"].finish()
    mp.undo()
    console = tmp / "console.log"
    console.write_text(out.getvalue())
    return console, jsonl


def _check(run):
    assert run.steps.tolist() == [1, 2, 3]
    np.testing.assert_allclose(run.series["reward_mean"], [0.25, 0.5, 0.0])
    np.testing.assert_allclose(run.series["entropy"], [0.75, 0.5, 0.0625])
    grad = run.series["grad_norm"]
    assert grad[0] == 0.5 and math.isnan(grad[1]) and grad[2] == 2.0
    np.testing.assert_allclose(run.series["adv_max"][:2], [1.75, 0.0])
    np.testing.assert_allclose(run.series["truncation_frac"][:2], [0.0, 0.03125])
    assert run.eval_steps.tolist() == [1]
    (name,) = run.eval_series
    assert run.eval_series[name].tolist() == [0.125]


def test_console_lines_from_verl_tracking(verl_logs):
    console, _ = verl_logs
    assert sniff(console).name == "verl_console"
    run = load(console)
    assert run.manifest.trainer == "verl"
    _check(run)


def test_file_logger_jsonl_from_verl_tracking(verl_logs):
    _, jsonl = verl_logs
    assert sniff(jsonl).name == "verl_file"
    run = load(jsonl)
    # orjson writes NaN as null: the file logger's NaN comes back as NaN (not logged)
    _check(run)


def test_rollout_dumps_from_verl_trainer_writer(tmp_path):
    """veRL's trainer writes ``<step>.jsonl`` rollout dumps with ``_write_generations``; the
    ``verl_rollouts`` importer groups their rows by prompt into per-group rewards."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    dump = tmp_path / "rollouts"
    prompts = ["What is 2+2?", "Name a prime.", "Spell cat."]
    g = 4
    scores_by_step = {
        1: [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0],
        2: [1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    }
    for step, scores in scores_by_step.items():
        inputs = [p for p in prompts for _ in range(g)]
        outputs = [f"answer {i}" for i in range(len(inputs))]
        RayPPOTrainer._write_generations(
            inputs, outputs, ["gt"] * len(inputs), scores, {"acc": scores}, str(dump), step
        )
    assert sniff(dump).name == "verl_rollouts"
    run = load(dump)
    groups = run.groups
    assert groups.n_groups == 6 and sorted(set(groups.step.tolist())) == [1, 2]
    assert groups.sizes().tolist() == [g] * 6
    for step, scores in scores_by_step.items():
        got = sorted(
            tuple(groups.rewards[groups.offsets[i] : groups.offsets[i + 1]].tolist())
            for i in np.flatnonzero(groups.step == step)
        )
        want = sorted(tuple(scores[j * g : (j + 1) * g]) for j in range(len(prompts)))
        assert got == want

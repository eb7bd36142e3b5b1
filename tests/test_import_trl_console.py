"""TRL console printout (``trl_console``): the lines transformers' real callbacks print."""

from __future__ import annotations

import contextlib
import io

import rlvitals_tests_format_producers as F  # loaded by conftest.py
from transformers.trainer_callback import PrinterCallback, TrainerState

from rlvitals.importers import load, sniff


def test_producer_matches_the_real_printer_callback():
    st = F.simulate(4)[1]
    logs = {**F.trl_row(st), "epoch": 0.5}
    out = io.StringIO()
    state = TrainerState()
    with contextlib.redirect_stdout(out):
        PrinterCallback().on_log(None, state, None, logs=dict(logs))
    assert out.getvalue().rstrip("\n") == F.trl_console_line(logs)


def test_steps_from_the_tqdm_bar_and_the_summary(tmp_path):
    run = F.simulate(60)
    p = F.write_trl_console(tmp_path / "train.log", run, logging_steps=2)
    assert sniff(p).name == "trl_console"
    r = load(p)
    assert r.steps.tolist() == list(range(2, 61, 2))
    assert r.manifest.logging_steps == 2 and "60 total steps" in r.manifest.step_key
    zsf = r.series["zero_std_frac"]
    assert abs(zsf[-1] - run[-1].zero_std_frac) < 1e-3
    assert "train_runtime" in r.manifest.config["summary"]
    assert any("line count x logging_steps" in w for w in r.warnings)


def test_transformers_4_bare_floats(tmp_path):
    p = F.write_trl_console(tmp_path / "t4.log", F.simulate(20), logging_steps=1, legacy=True)
    r = load(p)
    assert r.steps.tolist() == list(range(1, 21))
    assert r.has("reward_mean")


def test_printed_config_gives_logging_steps_and_group_size(tmp_path):
    p = F.write_trl_console(tmp_path / "c.log", F.simulate(30), logging_steps=3)
    text = "GRPOConfig(logging_steps=3, num_generations=8, beta=0.0, scale_rewards=group)\ntrl==0.19.1\n"
    p.write_text(text + p.read_text())
    r = load(p)
    assert r.steps.tolist()[:2] == [3, 6]
    assert r.manifest.group_size == 8 and r.manifest.trainer_version == "0.19.1"
    assert r.manifest.reward_std_kind == "group_mean"


def test_two_trainings_are_two_runs(tmp_path):
    a = F.write_trl_console(tmp_path / "a.log", F.simulate(10), logging_steps=1)
    b = F.write_trl_console(tmp_path / "b.log", F.simulate(20), logging_steps=1)
    p = tmp_path / "ab.log"
    p.write_text(a.read_text() + b.read_text())
    r = load(p)
    assert r.steps.tolist() == list(range(1, 21)) and any("--run" in w for w in r.warnings)
    assert load(p, run="1").n_steps == 10

"""TRL console printout (``trl_console``): the lines transformers' real callbacks print."""

from __future__ import annotations

import contextlib
import io
import re

import pytest
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
    # each line follows a frame of its own step: those are the steps, nothing is assumed
    assert r.manifest.logging_steps == 2 and "training bar" in r.manifest.step_key
    zsf = r.series["zero_std_frac"]
    assert abs(zsf[-1] - run[-1].zero_std_frac) < 1e-3
    assert "train_runtime" in r.manifest.config["summary"]
    assert not any("line count x logging_steps" in w for w in r.warnings)


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


def write_stopped_run(
    path, *, lines: int, every: int, reached: int, planned: int, buffered: bool, epochs: int = 3
):
    """A TRL run killed at step ``reached`` of ``planned`` (Ctrl-C: a traceback, no summary),
    logging every ``every`` steps: tqdm's training bar on stderr, one frame per step; the dict
    lines on stdout, ``epoch`` = step / steps per epoch. ``buffered``: stdout to a file is
    block-buffered, so the lines land in bursts of 16 among later frames (and the last burst
    at exit), as in a log captured with ``> log 2>&1``."""
    per_epoch = planned / epochs
    out: list[str] = []
    pending: list[str] = []
    for step in range(1, reached + 1):
        pct = 100 * step // planned
        out.append(
            f"\r  {pct}%|          | {step}/{planned} [00:{step % 60:02d}<81:00:00, 9.87s/it]"
        )
        if step % every == 0 and step // every <= lines:
            k = step // every
            logs = {"loss": 0.01 + k * 1e-4, "grad_norm": 0.2, "learning_rate": 1e-6 * k,
                    "reward": 0.3 + k / 200, "reward_std": 0.25, "frac_reward_zero_std": 0.5,
                    "kl": 1e-4 * k, "epoch": round(step / per_epoch, 6)}  # fmt: skip
            line = F.trl_console_line(logs)
            if buffered:
                pending.append(line)
                if len(pending) == 16:
                    out.append("\n" + "\n".join(pending) + "\n")
                    pending = []
            else:
                out.append("\r" + " " * 40 + "\r" + line + "\n")
    out.append(
        "\n" + "\n".join(pending) + "\nTraceback (most recent call last):\nKeyboardInterrupt\n"
    )
    path.write_text("".join(out), encoding="utf-8")
    return path


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_run_stopped_early_takes_its_steps_from_what_it_reached(tmp_path, buffered):
    """Issue 25.2: 49 lines of a run stopped at step 499 of a planned 29,790 were read as one
    line per 608 steps (the planned total over the lines): every duration ~60x too long."""
    p = write_stopped_run(
        tmp_path / "train.log", lines=49, every=10, reached=499, planned=29790, buffered=buffered
    )
    r = load(p)
    assert r.manifest.format == "trl_console"
    assert r.steps.tolist() == list(range(10, 491, 10))
    assert r.manifest.logging_steps == 10
    assert "29790" not in r.manifest.step_key or "stopped" in r.manifest.step_key


def test_a_finished_run_still_takes_the_planned_total(tmp_path):
    """The bar reached its total: the total over the lines is the logging interval."""
    p = write_stopped_run(
        tmp_path / "train.log", lines=30, every=8, reached=240, planned=240, buffered=True
    )
    r = load(p)
    assert r.steps.tolist() == list(range(8, 241, 8))
    assert "240 total steps / 30 lines" in r.manifest.step_key


def test_a_stopped_run_whose_lines_do_not_fill_what_it_reached(tmp_path):
    """Lines every 25 steps over 130 reached steps: 5 lines, and every L from 22 to 26 has
    5 x L <= 130 < 6 x L. The lines' epoch tells which: 3 epochs of 1000 / 3 steps planned,
    the last line at epoch 0.375 = 5 x 25 / 333.3."""
    p = write_stopped_run(
        tmp_path / "train.log", lines=5, every=25, reached=130, planned=1000, buffered=True
    )
    r = load(p)
    assert r.steps.tolist() == [25, 50, 75, 100, 125]
    assert any("stopped before its planned 1000" in w for w in r.warnings)
    no_epoch = tmp_path / "no_epoch.log"
    no_epoch.write_text(re.sub(r", 'epoch': '[^']*'", "", p.read_text()))
    assert load(no_epoch).steps.tolist() == [26, 52, 78, 104, 130]  # the largest that fits

"""OpenRLHF console importer.

Fixture lines follow OpenRLHF's Ray PPO trainer: ``logger.info(f"✨ Global step {n}: {status}")``
with its logging format ``LEVEL MM-DD HH:MM:SS file:line] message``, where ``status`` is a
Python dict whose repr is written by Python itself here (``repr(dict)``), plus the reprs numpy
and torch values take (``np.float64(0.5)``, ``tensor(0.5000)``).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from rlvitals.errors import InputError
from rlvitals.importers import IMPORTERS, load, sniff
from rlvitals.importers._console import parse_cli_flags, parse_dict_repr
from rlvitals.recording.metrics import canonical_key

TORCH_REPR = "tensor(0.5000)"
"""``repr(torch.tensor(0.5))``, as older OpenRLHF versions logged a 0-d tensor (importing torch
here would cost seconds)."""

PREFIX = "\x1b[36m(PPOTrainer pid=3141)\x1b[0m INFO 05-12 10:11:{:02d} ppo_trainer.py:412] "

COMMAND = """ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json='{"working_dir": "/openrlhf"}' \\
   -- python3 -m openrlhf.cli.train_ppo_ray \\
   --pretrain Qwen/Qwen2.5-Math-1.5B \\
   --advantage_estimator group_norm \\
   --n_samples_per_prompt 8 \\
   --init_kl_coef 0.001 \\
   --use_kl_loss \\
   --eps_clip_low_high 0.2 0.28 \\
   --actor_learning_rate 5e-7 \\
   --use_wandb False"""


def status(rng: random.Random, step: int) -> dict:
    return {
        "policy_loss": rng.uniform(-0.1, 0.1),
        "actor_lr": 5e-7,
        "entropy_loss": rng.uniform(0.1, 0.6),
        "kl": rng.uniform(0, 0.01),
        "ppo_clip_ratio": rng.uniform(0, 0.05),
        "ppo_kl": rng.uniform(-1e-4, 1e-4),
        "reward": rng.uniform(0, 1),
        "score": rng.uniform(0, 1),
        "return": rng.uniform(-1, 1),
        "response_length": rng.uniform(100, 900),
        "total_length": rng.uniform(200, 1200),
        "response_clip_ratio": rng.uniform(0, 0.3),
        "timing/step_total": rng.uniform(30, 90),
        "dynamic_filtering_pass_rate": rng.uniform(0.2, 1.0),
    }


def write_log(tmp_path: Path, n: int = 12, sparkle: bool = True) -> tuple[Path, dict]:
    rng = random.Random(3)
    lines = [COMMAND, "INFO 05-12 10:10:00 launcher.py:88] Started vLLM engines"]
    rows = {}
    mark = "✨ " if sparkle else ""
    for s in range(1, n + 1):
        st = status(rng, s)
        rows[s] = st
        lines.append(f"Episode [1/1]:  {s * 8}%|\u2588  | {s}/{n} [00:{s:02d}<01:00, 5.0s/it]")
        lines.append(PREFIX.format(s) + f"{mark}Global step {s}: {st!r}")
        if s % 4 == 0:
            ev = {"eval_gsm8k_pass1": 0.5 + s / 100, "eval_gsm8k_pass8": 0.9}
            lines.append(PREFIX.format(s) + f"Eval at step {s}: {ev!r}")
    p = tmp_path / "train.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p, rows


@pytest.mark.parametrize("sparkle", [True, False])
def test_reads_steps_and_maps_keys(tmp_path, sparkle):
    path, rows = write_log(tmp_path, sparkle=sparkle)
    assert sniff(path).name == "openrlhf_console"
    run = load(path)
    assert run.manifest.trainer == "openrlhf"
    assert run.steps.tolist() == list(range(1, 13))
    pairs = {
        "pg_loss": "policy_loss",
        "learning_rate": "actor_lr",
        "entropy": "entropy_loss",
        "kl": "kl",
        "clip_frac": "ppo_clip_ratio",
        "ppo_kl": "ppo_kl",
        "reward_mean": "reward",
        "length_mean": "response_length",
        "truncation_frac": "response_clip_ratio",
        "step_time": "timing/step_total",
    }
    for canon, raw in pairs.items():
        np.testing.assert_allclose(run.series[canon], [rows[s][raw] for s in range(1, 13)])
    assert {"score", "return", "total_length", "dynamic_filtering_pass_rate"} <= set(
        run.unknown_keys
    )
    assert run.eval_steps.tolist() == [4, 8, 12]
    np.testing.assert_allclose(run.eval_series["eval/gsm8k_pass1"], [0.54, 0.58, 0.62])


def test_launch_command_sets_manifest(tmp_path):
    path, _ = write_log(tmp_path, n=2)
    m = load(path).manifest
    assert m.group_size == 8
    assert m.estimator == "grpo"  # OpenRLHF's group_norm
    assert m.config["advantage_estimator"] == "group_norm"
    assert m.kl_coef == pytest.approx(0.001)
    assert m.config["use_kl_loss"] is True
    assert m.config["eps_clip_low_high"] == [0.2, 0.28]
    assert m.config["use_wandb"] is False
    assert m.config["entrypoint"] == "openrlhf.cli.train_ppo_ray"


def test_parse_cli_flags_equals_form_and_shell_stop():
    got = parse_cli_flags("--a=1 --b x --c ; --d 2")
    assert got == {"a": 1, "b": "x", "c": True}


def test_status_dict_reprs_of_real_values():
    text = repr(
        {
            "reward": np.float64(0.25),
            "kl": float("nan"),
            "x": float("-inf"),
            "n": np.int64(3),
            "flag": True,
            "generated_samples": ["some\ncompletion", 0.5],
            "none": None,
            "nested": {"a": 1},
        }
    ).replace("'none': None", f"'t': {TORCH_REPR}, 'none': None")
    got = parse_dict_repr(text)
    assert got["reward"] == 0.25 and got["n"] == 3.0 and got["flag"] == 1.0 and got["t"] == 0.5
    assert math.isnan(got["kl"]) and got["x"] == -math.inf
    assert set(got) == {"reward", "kl", "x", "n", "flag", "t"}


def test_status_dict_is_never_evaluated(tmp_path):
    target = tmp_path / "pwned"
    text = "{'a': __import__('os').system('touch " + str(target) + "'), 'b': (lambda: 1)(), 'c': 2}"
    assert parse_dict_repr(text) == {"c": 2.0}
    assert not target.exists()


@pytest.mark.parametrize(
    "bad",
    [
        "{'policy_loss': 0.1, 'kl': ",  # cut in the middle (but line complete)
        "{'a set', 'not a dict'}",
        "{'a': " + "[" * 5000 + "]" * 5000 + "}",  # too deeply nested for the parser
        "{'a': 1} trailing",
        "{'a': \x00}",
    ],
)
def test_bad_status_dict_names_file_and_line(tmp_path, bad):
    p = tmp_path / "bad.log"
    p.write_text(f"Global step 1: {{'kl': 0.1}}\nnoise\nGlobal step 2: {bad}\n")
    with pytest.raises(InputError) as e:
        load(p, fmt="openrlhf_console")
    assert str(e.value).startswith(f"{p}:line 3: ")


def test_ray_dedup_suffix_is_ignored(tmp_path):
    p = tmp_path / "dedup.log"
    p.write_text("(PPOTrainer pid=1) Global step 1: {'kl': 0.1} [repeated 2x across cluster]\n")
    assert load(p).series["kl"].tolist() == [0.1]


def test_torn_last_line_is_a_warning(tmp_path):
    p = tmp_path / "live.log"
    p.write_text("Global step 1: {'kl': 0.1}\nGlobal step 2: {'kl': 0.2}\nGlobal step 3: {'kl': 0.")
    run = load(p)
    assert run.steps.tolist() == [1, 2]
    assert any("torn last line" in w for w in run.warnings)


def test_no_step_lines_says_so(tmp_path):
    p = tmp_path / "empty_run.log"
    p.write_text(COMMAND + "\nINFO 05-12 10:10:00 launcher.py:88] Started vLLM engines\n")
    assert sniff(p).name == "openrlhf_console"
    with pytest.raises(InputError, match="no OpenRLHF step lines found"):
        load(p)


def test_step_number_out_of_range(tmp_path):
    p = tmp_path / "x.log"
    p.write_text("Global step 99999999999999999999: {'kl': 0.1}\n")
    with pytest.raises(InputError, match="out of range"):
        load(p, fmt="openrlhf_console")


def test_sniff_ignores_verl_and_verl_ignores_openrlhf(tmp_path):
    path, _ = write_log(tmp_path, n=2)
    verl_log = tmp_path / "verl.log"
    verl_log.write_text("step:1 - actor/entropy:0.300 - critic/score/mean:0.500\n")
    mine = IMPORTERS.get("openrlhf_console")
    assert mine.sniff(path, path.read_bytes()) == 0.9
    assert mine.sniff(verl_log, verl_log.read_bytes()) == 0.0
    assert IMPORTERS.get("verl_console").sniff(path, path.read_bytes()) == 0.0


@pytest.mark.parametrize(
    ("raw", "canon"),
    [
        ("train/policy_loss", "pg_loss"),
        ("train/kl", "kl"),
        ("train/reward", "reward_mean"),
        ("train/response_length", "length_mean"),
        ("train/actor_lr", "learning_rate"),
        ("train/entropy_loss", "entropy"),
        ("train/response_clip_ratio", "truncation_frac"),
        ("train/ppo_clip_ratio", "clip_frac"),
        ("train/timing/step_total", "step_time"),
    ],
)
def test_tensorboard_and_wandb_keys_are_aliased(raw, canon):
    """OpenRLHF sends the same keys to TensorBoard / W&B under ``train/``."""
    assert canonical_key(raw) == (canon, False, True)


MLFLOW_SCRIPT = """
import sys, mlflow
mlflow.set_tracking_uri("sqlite:///" + sys.argv[1])
with mlflow.start_run(run_name="openrlhf"):
    mlflow.log_params(dict(a.split("=", 1) for a in sys.argv[2:]))
    for step in range(1, 4):
        mlflow.log_metrics({"train/reward": 0.1 * step, "train/kl": 0.001}, step=step)
"""


def test_one_config_one_estimator_through_every_importer(tmp_path):
    """Renovation bug 2: the same OpenRLHF configuration gave estimator 'group_norm' through the
    W&B / MLflow / TensorBoard config path and 'grpo' through the console importer. Every path
    now goes through one trainer-facts function (rlvitals.trainers.openrlhf), and the logs
    here are written by the real writers (tensorboardX, mlflow)."""
    import json
    import os
    import subprocess
    import sys

    from tensorboardX import SummaryWriter

    console = tmp_path / "train.log"
    console.write_text(
        COMMAND
        + "\n"
        + PREFIX.format(1)
        + "✨ Global step 1: "
        + repr({"reward": 0.5, "kl": 0.0})
        + "\n"
    )
    flags = {k: v for k, v in load(console).manifest.config.items() if k != "entrypoint"}
    assert flags["n_samples_per_prompt"] == 8 and flags["advantage_estimator"] == "group_norm"
    tb = tmp_path / "tb"
    w = SummaryWriter(str(tb))
    w.add_text("args", json.dumps(flags))  # a TensorBoard run's config, as text
    for step in range(1, 4):
        w.add_scalar("train/reward", 0.1 * step, step)
    w.close()
    db = tmp_path / "mlflow.db"
    env = {**os.environ, "HOME": str(tmp_path), "MLFLOW_TRACKING_URI": ""}
    params = [f"{k}={v}" for k, v in flags.items() if not isinstance(v, list)]
    subprocess.run(
        [sys.executable, "-c", MLFLOW_SCRIPT, str(db), *params],
        check=True,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        timeout=300,
    )
    seen = {}
    for name, path in (("console", console), ("tensorboard", tb), ("mlflow", db)):
        m = load(path).manifest
        seen[name] = (m.trainer, m.group_size, m.estimator, m.adv_scale, m.kl_coef)
    assert set(seen.values()) == {("openrlhf", 8, "grpo", "group_std", 0.001)}, seen

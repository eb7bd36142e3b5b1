"""TRL importers on files written by the real producers.

One real ``GRPOTrainer`` run per test process (tests/_trl_producer.py): tiny Qwen2, character
tokenizer, CPU, 6 steps, ``logging_steps=2``, eval every 3 steps, ``log_completions=True``;
``trainer_state.json`` is saved by ``Trainer.save_state()`` and the completions tables by TRL.
The 20,000-step log is written by ``transformers.TrainerState.save_to_json``.
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_trl_producer as P  # loaded by conftest.py

from rlvitals import InputError, MissingExtraError, Run
from rlvitals.importers import load, sniff


@pytest.fixture(scope="session")
def grpo_run() -> Path:
    return P.shared_grpo_run()


@pytest.fixture(scope="session")
def state_json(grpo_run) -> dict:
    with open(grpo_run / "trainer_state.json", encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="session")
def long_log(tmp_path_factory):
    path = tmp_path_factory.mktemp("long") / "trainer_state.json"
    truth = P.synthetic_state(path, 20_000)
    return path, truth


def _copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


# ------------------------------------------------------------------------------ sniffing


def test_each_real_file_sniffs_to_its_format(grpo_run):
    comp = grpo_run / "completions"
    table = sorted(comp.glob("completions_*.parquet"))[0]
    assert sniff(grpo_run).name == "trl_state"
    assert sniff(grpo_run / "trainer_state.json").name == "trl_state"
    assert sniff(comp).name == "trl_completions"
    assert sniff(table).name == "trl_completions"


def test_sniffing_uses_content_not_the_file_name(grpo_run, tmp_path):
    renamed = tmp_path / "log.txt"
    shutil.copy(grpo_run / "trainer_state.json", renamed)
    assert sniff(renamed).name == "trl_state"
    table = sorted((grpo_run / "completions").glob("*.parquet"))[0]
    shutil.copy(table, tmp_path / "whatever.bin")
    assert sniff(tmp_path / "whatever.bin").name == "trl_completions"


# ------------------------------------------------------------------- trainer_state.json


def test_real_state_series_match_log_history(grpo_run, state_json):
    run = load(grpo_run / "trainer_state.json")
    hist = state_json["log_history"]
    train_rows = [r for r in hist if "loss" in r and "train_runtime" not in r]
    eval_rows = [r for r in hist if "eval_loss" in r]
    assert run.manifest.format == "trl_state" and run.manifest.trainer == "trl"
    # logging_steps=2 over 6 steps: training rows at 2, 4, 6 only.
    assert run.steps.tolist() == [r["step"] for r in train_rows] == [2, 4, 6]
    assert run.manifest.logging_steps == state_json["logging_steps"] == 2
    np.testing.assert_allclose(run.series["reward_mean"], [r["reward"] for r in train_rows])
    np.testing.assert_allclose(
        run.series["zero_std_frac"], [r["frac_reward_zero_std"] for r in train_rows]
    )
    np.testing.assert_allclose(run.series["loss"], [r["loss"] for r in train_rows])
    assert run.eval_steps.tolist() == [r["step"] for r in eval_rows] == [3, 6]
    np.testing.assert_allclose(
        run.eval_series["eval/reward_mean"], [r["eval_reward"] for r in eval_rows]
    )


def test_real_trl_keys_map_to_canonical_names(grpo_run):
    run = load(grpo_run)
    for name in (
        "reward_mean",
        "reward_std",
        "zero_std_frac",
        "kl",
        "entropy",
        "clip_frac",
        "length_mean",
        "length_max",
        "truncation_frac",
        "num_tokens",
        "step_time",
        "grad_norm",
        "loss",
        "learning_rate",
        "epoch",
    ):
        assert run.has(name), name
    assert any(n.startswith("reward/") and n.endswith("/mean") for n in run.series)
    for raw in ("reward", "frac_reward_zero_std", "completions/mean_length", "kl", "entropy"):
        assert raw not in run.unknown_keys


def test_summary_row_is_not_a_step(grpo_run, state_json):
    run = load(grpo_run)
    summary = state_json["log_history"][-1]
    assert "train_runtime" in summary and "train_loss" in summary
    last_train = [r for r in state_json["log_history"] if "loss" in r][-1]
    assert run.series["loss"][-1] == pytest.approx(last_train["loss"])
    assert run.series["loss"][-1] != pytest.approx(summary["train_loss"])
    assert run.manifest.config["summary"]["train_runtime"] == summary["train_runtime"]
    assert [e.kind for e in run.events] == ["summary"]
    assert "train_runtime" not in run.series


def test_eval_rows_do_not_make_training_gaps(grpo_run):
    run = load(grpo_run)
    assert 3 not in run.steps.tolist()  # eval-only step: its epoch must not become a train row
    assert np.isfinite(run.series["epoch"]).all()
    assert run.coverage("reward_mean") == 1.0


def test_state_scalars_go_to_config(grpo_run, state_json):
    cfg = load(grpo_run).manifest.config
    for k in ("global_step", "max_steps", "eval_steps", "train_batch_size", "num_train_epochs"):
        assert cfg[k] == state_json[k]
    assert cfg["max_steps"] == P.GRPO["max_steps"]


def test_grpo_config_only_when_known(grpo_run, tmp_path):
    run = load(grpo_run)
    assert run.manifest.kl_coef is None and run.manifest.scale_rewards is None
    assert run.manifest.estimator is None
    # A readable sibling (transformers' own args.to_json_string()) reveals it.
    d = _copy_run(grpo_run, tmp_path / "out")
    shutil.copy(grpo_run.parent / P.ARGS_NAME, d / P.ARGS_NAME)
    (d / "training_args.bin").write_bytes(b"\x80\x04not for unpickling")
    m = load(d).manifest
    assert m.group_size == P.GRPO["num_generations"]
    assert m.kl_coef == pytest.approx(P.GRPO["beta"])
    assert m.scale_rewards == "none" and m.estimator == "dr_grpo"
    assert m.config["args"]["loss_type"] == "dr_grpo"


def test_yaml_config_next_to_a_checkpoint(grpo_run, tmp_path):
    out = tmp_path / "out"
    for step in (2, 4):
        (out / f"checkpoint-{step}").mkdir(parents=True)
    shutil.copy(grpo_run / "trainer_state.json", out / "checkpoint-4" / "trainer_state.json")
    shutil.copy(grpo_run / "trainer_state.json", out / "checkpoint-2" / "trainer_state.json")
    (out / "grpo.yaml").write_text(
        "num_generations: 8\nscale_rewards: group\nloss_type: dapo\nbeta: 0.0\n"
    )
    assert sniff(out).name == "trl_state"
    run = load(out)
    assert run.manifest.source == str(out / "checkpoint-4" / "trainer_state.json")
    assert run.manifest.group_size == 8 and run.manifest.kl_coef == 0.0
    assert run.manifest.estimator == "grpo" and run.manifest.scale_rewards == "group"


def test_long_state_20000_steps(long_log):
    path, truth = long_log
    assert b"NaN" in path.read_bytes()  # the real writer emits bare NaN
    run = load(path)
    assert run.n_steps == 20_000
    assert run.steps[0] == 1 and run.steps[-1] == 20_000
    np.testing.assert_allclose(run.series["reward_mean"], truth["reward"])
    bad = np.flatnonzero(np.isnan(run.series["grad_norm"]))
    assert (run.steps[bad]).tolist() == truth["nan_steps"]
    assert run.eval_steps.tolist() == truth["eval_steps"] and len(truth["eval_steps"]) == 40
    assert run.manifest.logging_steps == 1
    assert "train_runtime" not in run.series and run.series["loss"][-1] != 0.0123
    assert run.coverage("reward_mean") == 1.0


def test_null_metric_becomes_nan(tmp_path):
    from transformers import TrainerState

    rows = [{"step": 1, "reward": 0.5, "kl": None}, {"step": 2, "reward": None, "kl": 0.1}]
    state = TrainerState(global_step=2, logging_steps=1, log_history=rows)
    state.save_to_json(str(tmp_path / "trainer_state.json"))
    run = load(tmp_path / "trainer_state.json")
    assert math.isnan(run.series["reward_mean"][1]) and math.isnan(run.series["kl"][0])


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"log_history": {"step": 1}}', "'log_history' is missing or not a list"),
        ('{"log_history": [1, 2]}', "log_history[0]"),
        ('{"log_history": [{"step": 1, "loss": 1.0},', "invalid JSON"),
        ("[]", "expected a JSON object"),
    ],
)
def test_bad_state_is_one_line_naming_the_file(tmp_path, text, needle):
    p = tmp_path / "trainer_state.json"
    p.write_text(text)
    with pytest.raises(InputError) as ei:
        load(p, "trl_state")
    msg = str(ei.value)
    assert msg.startswith(str(p)) and needle in msg and "\n" not in msg


def test_rows_without_step_are_skipped_with_a_warning(tmp_path):
    p = tmp_path / "trainer_state.json"
    p.write_text('{"log_history": [{"loss": 1.0}, {"step": 3, "loss": 2.0}]}')
    run = load(p)
    assert run.steps.tolist() == [3]
    assert any("without an integer 'step'" in w for w in run.warnings)


# ------------------------------------------------------------------ completions parquet


def _train_tables(grpo_run, state_json):
    import pandas as pd

    eval_steps = {r["step"] for r in state_json["log_history"] if "eval_loss" in r}
    out = []
    for f in sorted((grpo_run / "completions").glob("completions_*.parquet")):
        df = pd.read_parquet(f)
        if int(df["step"].iloc[0]) not in eval_steps:
            out.append(df)
    return out


def test_real_completions_become_groups(grpo_run, state_json):
    run = load(grpo_run)
    g = P.GRPO["num_generations"]
    tables = _train_tables(grpo_run, state_json)
    assert tables, "TRL wrote no training completions table"
    reward_cols = ["_reward_has_digit", "_reward_short"]
    expected = np.concatenate([df[reward_cols].sum(axis=1).to_numpy() for df in tables])
    t = run.groups
    assert t is not None and run.manifest.group_size == g
    assert (t.sizes() == g).all()
    np.testing.assert_allclose(t.rewards, expected)
    np.testing.assert_allclose(
        t.advantages, np.concatenate([df["advantage"].to_numpy() for df in tables])
    )
    assert t.unique_steps().tolist() == sorted({int(df["step"].iloc[0]) for df in tables})
    # TRL computed these advantages with scale_rewards="none" from its own groups: they are the
    # rewards minus their group mean only if our grouping is TRL's.
    for i in range(t.n_groups):
        a, b = t.offsets[i], t.offsets[i + 1]
        np.testing.assert_allclose(
            t.advantages[a:b], t.rewards[a:b] - t.rewards[a:b].mean(), atol=1e-6
        )
    assert any("eval completions" in w for w in run.warnings)


def test_completions_folder_alone(grpo_run, state_json):
    run = load(grpo_run / "completions")
    assert run.manifest.format == "trl_completions"
    assert run.groups.n_groups == sum(len(df) for df in _train_tables(grpo_run, state_json)) // 4
    assert run.manifest.config["trainer_state"].endswith("trainer_state.json")


def test_completions_without_state_warn_about_eval(grpo_run, tmp_path):
    table = sorted((grpo_run / "completions").glob("completions_*.parquet"))[0]
    shutil.copy(table, tmp_path / table.name)
    run = load(tmp_path / table.name)
    assert run.groups.n_groups >= 1 and run.manifest.group_size == 4
    assert any("cannot be told" in w for w in run.warnings)


def test_reward_weights_from_config(grpo_run, tmp_path):
    d = _copy_run(grpo_run, tmp_path / "out")
    args = json.loads((grpo_run.parent / P.ARGS_NAME).read_text())
    args["reward_weights"] = [2.0, 0.0]
    (d / P.ARGS_NAME).write_text(json.dumps(args))
    run = load(d)
    base = load(grpo_run)
    np.testing.assert_allclose(
        run.groups.rewards, 2 * base.groups.rewards - 2 * _short_column(grpo_run, base)
    )


def _short_column(grpo_run, base: Run) -> np.ndarray:
    import pandas as pd

    steps = set(base.groups.unique_steps().tolist())
    parts = []
    for f in sorted((grpo_run / "completions").glob("*.parquet")):
        df = pd.read_parquet(f)
        if int(df["step"].iloc[0]) in steps:
            parts.append(df["_reward_short"].to_numpy())
    return np.concatenate(parts)


def test_missing_pyarrow_names_the_extra(grpo_run, monkeypatch):
    table = sorted((grpo_run / "completions").glob("*.parquet"))[0]
    for mod in ("pyarrow", "pyarrow.parquet"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(MissingExtraError, match=r"pip install -e '\.\[parquet\]'"):
        load(table, "trl_completions")
    # The state is still readable; the tables are skipped with a note.
    run = load(grpo_run)
    assert run.groups is None and run.n_steps == 3
    assert any("rlvitals[parquet]" in w for w in run.warnings)


def test_parquet_that_is_not_trl(tmp_path):
    import pandas as pd

    p = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(p)
    with pytest.raises(InputError, match="no 'step' column"):
        load(p, "trl_completions")

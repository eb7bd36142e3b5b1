"""The lab end to end on tiny budgets: the base policy, real TRL runs, the experiments, the CLI.

Every run here is real GRPO (TRL's GRPOTrainer through RlvitalsGRPOTrainer) on the lab's tiny
model, warm-started for only a few steps (``smoke``): the numbers mean nothing, the plumbing is
what is tested. The slow test at the end runs the demo's real set-up and checks the doctor's
collapse onset against the lab's own per-group ACR (docs/lab.md).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import rlvitals
from rlvitals.cli import main
from rlvitals.lab.policy import Calibration, WarmStart, load_policy, prepare_base
from rlvitals.lab.train import PRESETS, Args, train
from rlvitals.recording import read_recording

SMOKE = PRESETS["smoke"]


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    """One base-policy cache for the session (shared by xdist workers: the build is locked)."""
    return tmp_path_factory.getbasetemp().parent / "rlvitals-lab-cache"


@pytest.fixture(scope="session")
def base(cache):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield prepare_base("sum", cache_dir=cache, warm=WarmStart(steps=SMOKE.warm_steps))
    torch.set_num_threads(threads)


def _args(tmp_path: Path, cache: Path, **kw) -> Args:
    kw.setdefault("name", kw.get("method", "grpo"))
    return Args(**{**vars(SMOKE), "out": str(tmp_path), "cache_dir": str(cache), **kw})


# -- the base policy ---------------------------------------------------------------------------


def test_base_policy_is_deterministic_and_cached(tmp_path):
    kw = dict(
        warm=WarmStart(steps=8, batch_size=8),
        calibration=Calibration(prompts_per_size=4, samples=2, eval_prompts=4),
    )
    a = prepare_base("sort", cache_dir=tmp_path / "a", **kw)
    b = prepare_base("sort", cache_dir=tmp_path / "b", **kw)
    assert a.pass_rates == b.pass_rates and a.level_rates == b.level_rates
    ma, _ = load_policy(a.path)
    mb, tok = load_policy(b.path)
    for (na, pa), (_, pb) in zip(ma.state_dict().items(), mb.state_dict().items()):
        assert torch.equal(pa, pb), na
    assert tok.decode(tok("12+3=")["input_ids"]) == "12+3="  # characters, no spaces between
    again = prepare_base("sort", cache_dir=tmp_path / "a", **kw)
    assert again.to_dict() == a.to_dict()
    assert len(a.levels) == 7 and a.meta["warm_start_seconds"] >= 0
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        prepare_base("sum", model=tmp_path, cache_dir=tmp_path / "c")


def test_any_local_hugging_face_model_can_be_the_policy(tmp_path, cache, base):
    """``--model PATH``: measured (not trained) and cached like the tiny model; here the tiny
    model's own directory stands in for a user's model."""
    small = Calibration(prompts_per_size=8, samples=2, eval_prompts=8)
    ext = prepare_base("sum", model=base.path, cache_dir=tmp_path / "c", calibration=small)
    assert not ext.tiny and ext.path == Path(base.path).resolve()
    assert "warm_start_seconds" not in ext.meta
    result = train(_args(tmp_path, cache, model=str(base.path), level=2), base=ext)
    assert result["base"]["path"] == str(ext.path)
    assert result["summary"]["generated"] == SMOKE.budget


# -- one run -----------------------------------------------------------------------------------


def test_a_run_spends_its_budget_and_records_groups_with_prompt_ids(tmp_path, cache, base):
    result = train(_args(tmp_path, cache, method="grpo", level=3), base=base)
    s = result["summary"]
    assert s["generated"] == SMOKE.budget and s["steps"] == SMOKE.budget // 64
    assert s["estimator_fallbacks"] == 0
    assert [e["step"] for e in result["evals"]] == [0, s["steps"]]
    run = read_recording(result["recording"])
    groups = run.groups
    assert groups.prompt is not None and all(len(p) == 12 for p in groups.prompt)
    assert np.bincount(groups.step)[1:].tolist() == [8] * s["steps"]
    # the lab's own ACR per step is the recording's, group by group
    for st in result["steps"]:
        sel = np.flatnonzero(groups.step == st["step"])
        rows = np.concatenate(
            [groups.rewards[groups.offsets[i] : groups.offsets[i + 1]] for i in sel]
        )
        ids = np.repeat(np.arange(sel.size), groups.sizes()[sel])
        assert rlvitals.collapse_rate(rows, ids) == pytest.approx(st["acr"])
    assert run.manifest.group_size == SMOKE.group_size
    assert "eval/reward_mean" in run.series_names()
    json.loads((tmp_path / "grpo" / "result.json").read_text())
    rlvitals.diagnose(run)  # the doctor reads a lab run like any other


def test_dynamic_sampling_counts_what_it_throws_away(tmp_path, cache, base):
    result = train(_args(tmp_path, cache, method="dapo", level=5, budget=64 * 6), base=base)
    s = result["summary"]
    steps = result["steps"]
    assert s["generated"] >= 64 * 6 and s["generated"] <= 64 * 6 + 64 * SMOKE.max_attempts
    assert sum(st["attempts"] for st in steps) == s["generated"] // 64
    assert s["steps"] <= 6
    assert s["wasted_fraction"] >= s["acr_residual_mean"] - 1e-9  # discarded ones are waste
    run = read_recording(result["recording"])
    assert run.groups.n_groups == s["generated"] // SMOKE.group_size  # pre-filter groups recorded


@pytest.mark.parametrize(
    ("method", "config"),
    [("history_baseline", {}), ("lab_avspo_virtual", {"virtual": "uniform", "tau_adapt0": 0.1})],
)
def test_other_estimators_train_without_falling_back(tmp_path, cache, base, method, config):
    result = train(
        _args(tmp_path, cache, method=method, estimator_config=config, level=5), base=base
    )
    assert result["summary"]["estimator_fallbacks"] == 0
    assert result["summary"]["acr_residual_mean"] <= result["summary"]["acr_mean"]


def test_a_failing_estimator_falls_back_to_trl_and_the_run_goes_on(tmp_path, cache, base):
    from dataclasses import dataclass

    from rlvitals.estimators import ESTIMATORS, register_estimator

    @dataclass(frozen=True)
    class BrokenConfig:
        """Attributes: none."""

    if "lab_test_broken" not in ESTIMATORS:

        @register_estimator("lab_test_broken", BrokenConfig, scale="group_std")
        def broken(rewards, group_ids, config, state):
            raise RuntimeError("broken on purpose")

    with warnings.catch_warnings():  # the guard reports the failure once; expected here
        warnings.simplefilter("ignore")
        result = train(_args(tmp_path, cache, method="lab_test_broken", level=3), base=base)
    s = result["summary"]
    assert s["estimator_fallbacks"] == s["steps"] and s["generated"] == SMOKE.budget
    assert all(st["acr"] is None for st in result["steps"])  # unknown, not made up


def test_assemble_pads_kept_rows_and_fills_a_short_batch():
    from rlvitals.lab._trainer import _assemble

    def batch(width: int, value: int) -> dict:
        return {
            "prompt_ids": torch.full((4, width), value),
            "prompt_mask": torch.ones(4, width, dtype=torch.long),
            "completion_ids": torch.full((4, width + 1), value),
            "completion_mask": torch.ones(4, width + 1, dtype=torch.long),
            "advantages": torch.arange(4, dtype=torch.float32) + value,
            "num_items_in_batch": torch.tensor(99),
        }

    a, b = batch(2, 10), batch(3, 20)
    keep = [np.array([False, False, True, True]), np.array([False, False, False, False])]
    out, adv = _assemble([a, b], keep, 4, pad_id=0)
    assert out["prompt_ids"].shape == (4, 3) and out["completion_ids"].shape == (4, 4)
    assert out["prompt_ids"][0].tolist() == [0, 10, 10]  # prompts pad on the left
    assert out["completion_ids"][0].tolist() == [10, 10, 10, 0]  # completions on the right
    assert adv.tolist() == [12.0, 13.0, 0.0, 0.0]  # filler rows teach nothing ...
    assert out["completion_mask"][2:].sum() == 0  # ... and add no tokens to the loss
    assert int(out["num_items_in_batch"]) == int(out["completion_mask"].sum())


# -- the experiments, through the CLI ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("experiment", ["compare", "predict", "ablate"])
def test_each_experiment_writes_its_folder(tmp_path, cache, base, experiment, capsys):
    out = tmp_path / experiment
    argv = ["lab", experiment, "--preset", "smoke", "--out", str(out), "--cache", str(cache)]
    assert main([*argv, "--workers", "1", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"# rlvitals lab: {experiment}" in text and "paper" in text
    doc = json.loads((out / f"{experiment}.json").read_text())
    assert doc["analysis"] and doc["paper"] and doc["machine"]["cpus"]
    assert (out / f"{experiment}.md").is_file()
    html = (out / f"{experiment}.html").read_text()
    assert "<svg" in html and "<table>" in html
    pngs = list(out.glob(f"{experiment}_*.png"))
    assert pngs and all(p.stat().st_size < 200_000 for p in pngs)
    # a second invocation reads every run back instead of training it again
    assert main([*argv, "--workers", "1", "--no-progress"]) == 0
    again = json.loads((out / f"{experiment}.json").read_text())
    assert again["runs_read_back"] == len(again["runs"])
    assert again["timing"] == doc["timing"]


def test_compare_analysis_pairs_methods_by_seed(tmp_path, cache, base):
    from rlvitals.lab.experiments import COMPARE, ComparePreset, compare

    preset = ComparePreset(5, ("grpo", "avspo"), (0, 1), COMPARE["smoke"].run)
    doc = compare(preset, out=tmp_path, workers=1, cache_dir=str(cache), show=False)
    a = doc["analysis"]
    assert set(a["arms"]) == {"grpo", "avspo"}
    vs = a["vs_reference"]["avspo"]
    assert vs["final_accuracy"]["n"] == 2
    assert {"acr_mean_reduction", "acr_residual_mean_reduction"} <= set(vs)
    assert a["arms"]["avspo"]["generated"]["mean"] == a["arms"]["grpo"]["generated"]["mean"]
    md = (tmp_path / "compare.md").read_text()
    assert "too few seeds to judge" in md  # two seeds never make a verdict


def test_lab_train_and_base_commands(tmp_path, cache, base, capsys):
    assert main(["lab", "base", "--preset", "smoke", "--cache", str(cache), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["path"] == str(base.path)
    argv = ["lab", "train", "--preset", "smoke", "--out", str(tmp_path), "--cache", str(cache)]
    assert main([*argv, "--method", "avspo", "--level", "4", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert '"method": "avspo"' in out and "rlvitals doctor" in out
    assert (tmp_path / "avspo" / "rlvitals" / "manifest.json").is_file()


@pytest.mark.parametrize(
    "argv",
    [
        ["lab", "compare", "--preset", "huge", "--out", "x"],
        ["lab", "predict", "--out", "x", "--workers", "0"],
        ["lab", "train", "--out", "x", "--method", "ppo"],
        ["lab", "train", "--out", "x", "--level", "9"],
        ["demo", "--preset", "long"],
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlvitals: error:")


def test_lab_without_an_experiment_prints_help(capsys):
    assert main(["lab"]) == 2
    assert "predict" in capsys.readouterr().out


@pytest.mark.slow
def test_demo_finds_the_collapse_where_the_lab_sees_it(tmp_path, cache, base, capsys):
    """The doctor, run on the demo's GRPO collapse, reports a collapse-family finding whose
    onset lies within 5 steps of the step where the lab's own per-group ACR crosses that
    finding's threshold (the smoke preset: a barely trained base policy, a hot learning rate)."""
    assert main(["demo", "--preset", "smoke", "--out", str(tmp_path), "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "GRPO" in out and "AVSPO" in out and "wasted rollouts" in out
    assert (tmp_path / "demo.html").is_file()
    for m in ("grpo", "avspo"):
        assert "<html" in (tmp_path / m / "report.html").read_text().lower()
    doc = json.loads((tmp_path / "demo.json").read_text())
    found = doc["runs"]["grpo"]["findings"]
    near = [f for f in found if f["onset_minus_lab"] is not None and abs(f["onset_minus_lab"]) <= 5]
    assert any(f["id"] == "DEGENERATE_GROUPS" for f in near), found

"""predict-v2 (issue 26.4): one common all-sizes evaluation set for every run, a fixed budget of
completions whatever G, the early ACR over the first 20% of the budget, and the slope with
level x G x T fixed effects; runs written before a new Args field are still read back."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from rlvitals.lab import stats
from rlvitals.lab.policy import WarmStart, prepare_base
from rlvitals.lab.train import PRESETS, Args

SMOKE = PRESETS["smoke"]


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp().parent / "rlvitals-lab-cache"


@pytest.fixture(scope="session")
def base(cache):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield prepare_base("sum", cache_dir=cache, warm=WarmStart(steps=SMOKE.warm_steps))
    torch.set_num_threads(threads)


def test_predict_v2_smoke(tmp_path, cache, base):
    from rlvitals.lab.experiments import PREDICT, predict

    p = PREDICT["v2-smoke"]
    doc = predict(p, out=tmp_path, workers=1, cache_dir=str(cache), show=False)
    runs = doc["runs"]
    assert len(runs) == len(p.levels) * len(p.group_sizes)
    assert {r["generated"] for r in runs} == {p.budget}  # the same budget whatever G
    assert {r["steps"] for r in runs} == {p.budget // (8 * g) for g in p.group_sizes}
    # one common evaluation set: the base policy scores the same on it in every run
    assert len({r["base_accuracy"] for r in runs}) == 1
    a = doc["analysis"]
    assert a["early"] == 0.2
    for r, pt in zip(runs, a["points"]):
        steps = json.loads((tmp_path / "runs" / r["name"] / "result.json").read_text())["steps"]
        early = [s["acr"] for s in steps if s["generated"] <= 0.2 * p.budget] or [steps[0]["acr"]]
        assert pt["acr_100"] == pytest.approx(np.mean(early))
    assert set(a["fixed_effects"]) == {"additive", "cells"}
    md = (tmp_path / "predict.md").read_text()
    assert "the early ACR" in md and "fixed effects" in md


def test_eval_set_is_checked(tmp_path, cache, base):
    from rlvitals.lab.train import train

    args = Args(**{**vars(SMOKE), "eval_set": "everything", "out": str(tmp_path)})
    with pytest.raises(ValueError, match="eval_set must be 'level' or 'common'"):
        train(args, base=base)


def test_fixed_effects_recover_a_slope_hidden_by_the_effects():
    rng = np.random.default_rng(0)
    levels = np.repeat(np.arange(6), 20)
    x = 0.1 * levels + 0.05 * rng.standard_normal(levels.size)
    y = -10.0 * levels - 30.0 * x + 0.5 * rng.standard_normal(levels.size)  # within: -30
    pooled = stats.ols(x.tolist(), y.tolist())["slope"]
    fe = stats.fixed_effects(x.tolist(), y.tolist(), [[f"L{v}"] for v in levels])
    assert pooled < -80  # the level effect dominates the pooled slope
    assert fe["lo"] < -30 < fe["hi"] and fe["p"] < 1e-6
    assert fe["df"] == levels.size - 6 - 1
    one_per_cell = stats.fixed_effects([0.1, 0.2], [1.0, 2.0], [["a"], ["b"]])
    assert one_per_cell["slope"] is None  # not identified


def test_runs_written_before_a_new_args_field_are_read_back(tmp_path):
    from rlvitals.lab._runner import _cached

    args = Args(name="r", out=str(tmp_path), budget=512)
    stored = json.loads(json.dumps(dataclasses.asdict(args)))
    del stored["eval_set"]  # written by an older rlvitals
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "result.json").write_text(json.dumps({"args": stored, "summary": {}}))
    assert _cached(args) is not None
    assert _cached(dataclasses.replace(args, eval_set="common")) is None
    assert _cached(dataclasses.replace(args, budget=1024)) is None

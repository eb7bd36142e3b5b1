"""Data-parallel estimation: two real gloo processes, groups split across ranks.

``estimate_distributed`` on each rank's share must give, bit for bit, the single-process result on
the global batch: the same advantages (each rank its own rows), the same metrics and the same
estimator state on every rank, step after step.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import rlvitals
from rlvitals.integrations.distributed import all_gather_1d, estimate_distributed, local_slice

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "trl_ddp_script.py"
METHODS = ("avspo", "grpo", "dr_grpo", "avspo_released")


def _load_script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rlvitals_trl_ddp_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _same(a, b) -> bool:
    """Equality that treats NaN as equal to NaN (for metrics and nested state)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.fixture(scope="module")
def gloo_results(tmp_path_factory):
    """Launch 2 gloo ranks once; return ``[rank0, rank1]`` records per method."""
    out = tmp_path_factory.mktemp("gloo")
    env = dict(
        os.environ,
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(_free_port()),
        WORLD_SIZE="2",
        OMP_NUM_THREADS="1",
    )
    procs = [
        subprocess.Popen(
            [sys.executable, str(SCRIPT), "estimate", str(out), ",".join(METHODS)],
            env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(2)
    ]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=120)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log[-3000:]
    return [json.loads((out / f"estimate_rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS)
def test_split_groups_equal_single_process_exactly(gloo_results, method):
    steps = _load_script().split_steps()
    state = None
    triggered = 0
    for i, step in enumerate(steps):
        rewards = np.asarray(step["rewards"])
        ids = np.asarray(step["group_ids"])
        if i % 2:
            rewards, ids = torch.tensor(rewards, dtype=torch.float32), torch.tensor(ids)
        ref_adv, ref_metrics, state = rlvitals.estimate(method, rewards, ids, state=state)
        ref_adv = np.asarray(ref_adv.tolist(), dtype=np.float64)
        ref_state = None if state is None else state.to_dict()
        for rank in range(2):
            got = gloo_results[rank][method][i]
            sl = local_slice(step["counts"], rank)
            assert np.array_equal(np.asarray(got["advantages"]), ref_adv[sl]), (method, i, rank)
            assert got["kind"] == ("torch" if i % 2 else "numpy")
            assert _same(got["metrics"], ref_metrics), (method, i, rank)
            assert _same(got["state"], ref_state), (method, i, rank)
        triggered += int(ref_metrics.get("avspo_triggered", 0) > 0)
    if method == "avspo":
        assert triggered > 0, "the test data must exercise the AVSPO trigger"
        assert state.step == len(steps)


@pytest.mark.slow
def test_per_rank_estimation_would_differ(gloo_results):
    """Guard against a vacuous test: estimating each rank's rows alone changes the result."""
    differs = 0
    for i, step in enumerate(_load_script().split_steps()):
        rewards, ids = np.asarray(step["rewards"]), np.asarray(step["group_ids"])
        sl = local_slice(step["counts"], 0)
        alone, _, _ = rlvitals.estimate("grpo", rewards[sl], ids[sl])
        differs += not np.allclose(alone, gloo_results[0]["grpo"][i]["advantages"])
    assert differs >= 3


def test_single_process_is_plain_estimate():
    rewards = np.array([1.0, 0.0, 1.0, 1.0, 0.5, 0.0])
    ids = np.array([0, 0, 1, 1, 2, 2])
    adv, metrics, state = estimate_distributed("avspo", rewards, ids)
    ref_adv, ref_metrics, ref_state = rlvitals.estimate("avspo", rewards, ids)
    assert np.array_equal(adv, ref_adv)
    assert _same(metrics, ref_metrics)
    assert state.to_dict() == ref_state.to_dict()


def test_local_slice_and_float_group_ids():
    assert local_slice([0, 4], 0) == slice(0, 0)
    assert local_slice([0, 4], 1) == slice(0, 4)
    with pytest.raises(ValueError, match="1-D"):
        all_gather_1d([torch.zeros(3), torch.zeros(2)])

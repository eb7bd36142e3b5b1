"""The veRL adapter against veRL's real registry and its real compute_grpo_outcome_advantage.

Runs only in the veRL environment (``tests/verl/setup_venv.sh``); the main suite passes
``--ignore=tests/verl``. The estimators are called the way veRL's ``compute_advantage`` calls a
registered estimator (``ray_trainer.compute_advantage``, veRL 0.9.1): keyword arguments
``token_level_rewards``, ``response_mask``, ``config`` (the ``algorithm`` config) and ``index``
(the ``uid`` of each response, a numpy array of str).
"""

from __future__ import annotations

import json
import sys
import uuid

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, get_adv_estimator_fn

import rlvitals
from rlvitals.integrations import verl as rv

T = 12  # response length


def batch(groups, seed=0):
    """(token_level_rewards (bs, T), response_mask (bs, T), uids (bs,) str) as veRL builds them:
    the score sits on the last response token; responses have random lengths."""
    gen = torch.Generator().manual_seed(seed)
    scores = torch.tensor([v for g in groups for v in g], dtype=torch.float32)
    bs = scores.shape[0]
    lengths = torch.randint(1, T + 1, (bs,), generator=gen)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).to(torch.int64)
    tlr = torch.zeros(bs, T)
    tlr[torch.arange(bs), lengths - 1] = scores
    names = [str(uuid.UUID(int=1000 + i)) for i in range(len(groups))]
    uids = np.array([names[i] for i, g in enumerate(groups) for _ in g], dtype=object)
    perm = torch.randperm(bs, generator=gen)  # veRL batches need not be group-contiguous
    return tlr[perm], mask[perm], uids[perm.numpy()]


GROUPS = [
    [1.0] * 8,
    [0.0] * 8,
    [0.5] * 8,  # collapsed
    [1, 0, 0, 1, 0, 0, 0, 0],
    [1, 1, 1, 0, 1, 1, 0, 1],
    [0.2, 0.9, 0.4, 0.4, 0.1, 0, 1, 0.7],
    [0.7],  # a lone response: veRL gives it mean 0, std 1
]


@pytest.fixture(autouse=True)
def _fresh_runs():
    rv.reset()
    yield
    rv.reset()


def call(name, tlr, mask, uids, config):
    return get_adv_estimator_fn(name)(
        token_level_rewards=tlr, response_mask=mask, config=config, index=uids
    )


def test_every_estimator_is_in_verls_registry():
    for verl_name, method in rv.VERL_NAMES.items():
        fn = get_adv_estimator_fn(verl_name)
        assert fn is core_algos.ADV_ESTIMATOR_REGISTRY[verl_name]
        assert fn.rlvitals_estimator == method
    assert set(rv.VERL_NAMES) >= {"rlvitals_grpo", "rlvitals_avspo", "rlvitals_avspo_released"}
    assert rv.register() == list(rv.VERL_NAMES)  # idempotent


def test_every_registered_estimator_gets_a_verl_name_history_baseline_included():
    """Regression (issue 24): the names came from a hand enum that lacked history_baseline."""
    from rlvitals.estimators import ESTIMATORS

    assert set(rv.VERL_NAMES.values()) >= set(ESTIMATORS.names())
    assert "rlvitals_history_baseline" in core_algos.ADV_ESTIMATOR_REGISTRY
    tlr, mask, uids = batch(GROUPS[:6], 0)
    config = AlgoConfig(adv_estimator="rlvitals_history_baseline")
    adv, _ = call("rlvitals_history_baseline", tlr, mask, uids, config)
    assert adv.shape == tlr.shape and torch.isfinite(adv).all()


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_rlvitals_grpo_matches_verls_compute_grpo_outcome_advantage(norm, seed):
    tlr, mask, uids = batch(GROUPS, seed)
    expect, expect_ret = compute_grpo_outcome_advantage(
        tlr.clone(), mask, uids, norm_adv_by_std_in_grpo=norm
    )
    config = AlgoConfig(adv_estimator="rlvitals_grpo", norm_adv_by_std_in_grpo=norm)
    adv, ret = call("rlvitals_grpo", tlr, mask, uids, config)
    assert adv.shape == expect.shape and adv.dtype == expect.dtype
    torch.testing.assert_close(adv, expect, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(ret, expect_ret, rtol=1e-6, atol=1e-6)
    assert not adv[mask == 0].any()
    if not norm:  # Dr. GRPO: the lone response keeps its score, as in veRL
        torch.testing.assert_close(
            get_adv_estimator_fn("rlvitals_dr_grpo")(
                token_level_rewards=tlr, response_mask=mask, index=uids
            )[0],
            expect,
            rtol=1e-6,
            atol=1e-6,
        )


def test_rlvitals_avspo_keeps_state_across_steps_and_equals_the_library():
    config = OmegaConf.create(
        {
            "adv_estimator": "rlvitals_avspo",
            "norm_adv_by_std_in_grpo": True,
            "rlvitals": {"tau_adapt0": 0.3, "j_signal": "explicit", "delta_j": 0.1},
        }
    )
    state = None
    for step in range(3):
        tlr, mask, uids = batch(GROUPS, seed=step)
        adv, _ = call("rlvitals_avspo", tlr, mask, uids, config)
        scores = tlr.sum(-1)
        codes = torch.as_tensor(np.unique(uids.astype(str), return_inverse=True)[1])
        lib, metrics, state = rlvitals.estimate(
            "avspo",
            scores,
            codes,
            state=state,
            eps=1e-6,
            tau_adapt0=0.3,
            j_signal="explicit",
            delta_j=0.1,
        )
        torch.testing.assert_close(adv, lib[:, None] * mask)
        assert rv.get_state() == state and state.step == step + 1
        got = rv.last_metrics()
        assert got["rlvitals/acr"] == metrics["acr"] == pytest.approx(4 / 7)  # lone one too
        assert got["rlvitals/avspo_triggered"] == 1.0
    assert rv.get_state().tau_adapt > 0.3  # dJ > 0: toward ACR 4/7


def test_state_file_resumes_with_the_same_tau_adapt(tmp_path):
    path = tmp_path / "ckpt" / "rlvitals_state.json"
    cfg = OmegaConf.create({"rlvitals": {"state_file": str(path), "j_signal": "reward"}})
    steps = [batch(GROUPS, seed=s) for s in range(4)]
    for tlr, mask, uids in steps[:2]:
        call("rlvitals_avspo", tlr, mask, uids, cfg)
    saved = json.loads(path.read_text())
    assert saved["estimator"] == "avspo" and saved["step"] == 2
    before = rv.get_state()
    rv.reset()  # a restarted driver process
    out = [call("rlvitals_avspo", *b, cfg)[0] for b in steps[2:]]
    rv.reset()
    plain = OmegaConf.create({"rlvitals": {"j_signal": "reward"}})
    ref = [call("rlvitals_avspo", *b, plain)[0] for b in steps]
    for a, b in zip(out, ref[2:]):
        torch.testing.assert_close(a, b)
    assert before.step == 2 and rv.get_state().step == 4


def test_record_dir_is_read_by_the_doctor_path(tmp_path):
    from rlvitals.recording import read_recording

    cfg = OmegaConf.create({"rlvitals": {"record_dir": str(tmp_path / "rec")}})
    for s in range(3):
        call("rlvitals_avspo_released", *batch(GROUPS, seed=s), cfg)
    rv.reset()  # closes the recorder
    run = read_recording(tmp_path / "rec")
    assert run.manifest.trainer == "verl" and run.manifest.estimator == "avspo_released"
    assert run.groups.sizes().tolist()[:7] == [8, 8, 8, 8, 8, 8, 1]


def test_knobs_come_from_algorithm_rlvitals_and_are_checked():
    tlr, mask, uids = batch(GROUPS)
    bad = OmegaConf.create({"rlvitals": {"alpah": 0.5}})
    with pytest.raises(ValueError, match=r"unknown config key\(s\) 'alpah' for 'avspo'"):
        call("rlvitals_avspo", tlr, mask, uids, bad)
    with pytest.raises(ValueError, match="norm_adv_by_std_in_grpo=False"):
        call("rlvitals_avspo", tlr, mask, uids, AlgoConfig(norm_adv_by_std_in_grpo=False))
    with pytest.raises(ValueError, match="uid of each response"):
        get_adv_estimator_fn("rlvitals_grpo")(token_level_rewards=tlr, response_mask=mask)
    eps = OmegaConf.create({"rlvitals": {"eps": 1e-4}})
    adv, _ = call("rlvitals_grpo", tlr, mask, uids, eps)
    ref, _ = compute_grpo_outcome_advantage(tlr.clone(), mask, uids, epsilon=1e-4)
    torch.testing.assert_close(adv, ref, rtol=1e-6, atol=1e-6)


def test_import_verl_alone_registers_through_the_plugin_entry_point(loaded_by_verl):
    """conftest.py imported veRL before anything imported rlvitals' adapter: veRL's own
    ``verl.plugins`` entry-point loading (what its TaskRunner actor does on ``import verl``)
    registered the estimators."""
    assert loaded_by_verl == (True, True)


def test_verl_use_external_modules_path():
    """With entry points off, ``VERL_USE_EXTERNAL_MODULES=rlvitals.integrations.verl`` makes
    ``import verl`` call ``import_external_libs`` on it; the same call, here, registers."""
    from verl.utils.import_utils import import_external_libs

    core_algos.ADV_ESTIMATOR_REGISTRY.pop("rlvitals_avspo")
    sys.modules.pop("rlvitals.integrations.verl")
    import_external_libs(["rlvitals.integrations.verl"])
    assert get_adv_estimator_fn("rlvitals_avspo").rlvitals_estimator == "avspo"


def test_knobs_from_the_environment_when_the_config_has_none(monkeypatch):
    tlr, mask, uids = batch(GROUPS)
    monkeypatch.setenv("RLVITALS_VERL_CONFIG", '{"eps": 1e-4, "run": "env"}')
    adv, _ = call("rlvitals_grpo", tlr, mask, uids, AlgoConfig())
    ref, _ = compute_grpo_outcome_advantage(tlr.clone(), mask, uids, epsilon=1e-4)
    torch.testing.assert_close(adv, ref, rtol=1e-6, atol=1e-6)
    assert rv.last_metrics("env")["rlvitals/acr"] == pytest.approx(4 / 7)
    monkeypatch.setenv("RLVITALS_VERL_CONFIG", "{eps: 1}")
    with pytest.raises(ValueError, match="RLVITALS_VERL_CONFIG must hold a JSON object"):
        call("rlvitals_grpo", tlr, mask, uids, AlgoConfig())

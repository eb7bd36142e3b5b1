"""PG-GRPO's negative controls and ablations in the lab (issue 26.7, pre-registration amendment 1):
``lab_pg_control`` (random signs on collapsed groups, shuffled prompt keys), the sampler reading
another prompt's posterior, the lab methods and presets, and real tiny TRL runs of each arm."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from rlvitals.estimators import get_estimator
from rlvitals.estimators.pg_grpo import PgGrpoConfig, PgGrpoState
from rlvitals.lab import _variants
from rlvitals.lab._variants import PgControlConfig

G = 8


def _call(name, rewards, ids, config, state=None):
    return get_estimator(name)(rewards, ids, config, state)


def _batch():
    """Three groups: all-wrong, mixed, all-right; keys a, b, c; a state that knows them."""
    r = np.concatenate([np.zeros(G), np.r_[np.ones(3), np.zeros(G - 3)], np.ones(G)])
    ids = np.repeat([0, 1, 2], G)
    state = PgGrpoState(
        counts={"a": (6.0, 2.0), "b": (3.0, 3.0), "c": (1.0, 7.0), "z": (4.0, 4.0)},
        recent=tuple([0.5] * 20),
        group_size=G,
        step=3,
    )
    return r, ids, state


def test_random_sign_keeps_sizes_flips_only_collapsed_groups_and_the_state():
    r, ids, state = _batch()
    keys = ("a", "b", "c")
    ref, _, ref_state = _call("pg_grpo", r, ids, PgGrpoConfig(keys=keys), state)
    signs = []
    for seed in range(12):
        cfg = PgControlConfig(keys=keys, control="random_sign", seed=seed)
        adv, _, new = _call(_variants.CONTROL_NAME, r, ids, cfg, state)
        assert np.allclose(np.abs(adv), np.abs(ref))  # sizes kept
        assert np.allclose(adv[G : 2 * G], ref[G : 2 * G])  # the mixed group is GRPO's
        assert new == ref_state  # the posterior moves as pg_grpo's
        for g in (0, 2):  # one sign per collapsed group
            row = adv[g * G : (g + 1) * G] / ref[g * G : (g + 1) * G]
            assert np.allclose(row, row[0])
            signs.append(row[0])
    assert {-1.0, 1.0} == {float(np.sign(s)) for s in signs}  # both signs occur
    again = _call(_variants.CONTROL_NAME, r, ids, PgControlConfig(keys=keys, seed=3), state)[0]
    same = _call(_variants.CONTROL_NAME, r, ids, PgControlConfig(keys=keys, seed=3), state)[0]
    assert np.array_equal(again, same)  # reproducible for its seed and step


def test_random_sign_with_torch_rewards_returns_torch():
    r, ids, state = _batch()
    cfg = PgControlConfig(keys=("a", "b", "c"), seed=1)
    adv, _, _ = _call(_variants.CONTROL_NAME, torch.tensor(r, dtype=torch.float32), ids, cfg, state)
    ref, _, _ = _call(_variants.CONTROL_NAME, r, ids, cfg, state)
    assert isinstance(adv, torch.Tensor) and adv.dtype == torch.float32
    assert np.allclose(adv.numpy(), ref, atol=1e-6)


def test_shuffled_keys_reads_another_posterior_and_updates_its_own():
    r, ids, state = _batch()
    keys, read = ("a", "b", "c"), ("c", "z", "a")
    cfg = PgControlConfig(keys=keys, read_keys=read, control="shuffled_keys")
    adv, _, new = _call(_variants.CONTROL_NAME, r, ids, cfg, state)
    as_read, _, _ = _call("pg_grpo", r, ids, PgGrpoConfig(keys=read), state)
    own, _, own_state = _call("pg_grpo", r, ids, PgGrpoConfig(keys=keys), state)
    assert np.allclose(adv, as_read)  # scored against the other prompts' posteriors
    assert not np.allclose(adv, own)  # which differ from their own here
    assert new == own_state  # counts filed under each prompt's own key
    assert new.counts["a"] != state.counts["a"] and new.counts["z"] == state.counts["z"]


def test_control_config_is_checked():
    with pytest.raises(ValueError, match="control"):
        PgControlConfig(control="random_keys")
    with pytest.raises(ValueError, match="select_eps"):
        PgControlConfig(select_eps=2.0)  # pg_grpo's own checks still apply


def test_sampler_selects_by_the_read_keys_posterior():
    from rlvitals._text import prompt_id
    from rlvitals.integrations.trl import PosteriorSampler

    prompts = [f"{i}+2=" for i in range(40)]
    keys = [prompt_id(p) for p in prompts]
    # prompts 0-3 look likely to give a mixed group; everything else looks hopeless
    state = PgGrpoState(
        counts={k: ((3.0, 3.0) if i < 4 else (0.2, 60.0)) for i, k in enumerate(keys)},
        group_size=4,
    )
    read = keys[20:24] + keys[4:20] + keys[:4] + keys[24:]  # prompts 20-23 read 0-3's counts

    def draw(read_keys):
        sampler = PosteriorSampler(
            prompts,
            group_size=4,
            batch_size=4,
            repeat_count=1,
            state_of=lambda: state,
            config_of=lambda: PgGrpoConfig(select_eps=0.0),
            seed=0,
            read_keys=read_keys,
        )
        return np.asarray(list(sampler)).reshape(-1, 4)[:, 0]

    own, shuffled = draw(None), draw(read)
    assert np.mean(own < 4) > 0.5
    assert np.mean((shuffled >= 20) & (shuffled < 24)) > 0.5 and np.mean(shuffled < 4) < 0.2
    with pytest.raises(ValueError, match="read_keys holds 3 keys for 40 prompts"):
        PosteriorSampler(
            prompts,
            group_size=4,
            batch_size=4,
            repeat_count=1,
            state_of=lambda: state,
            config_of=PgGrpoConfig,
            read_keys=keys[:3],
        )


def test_methods_and_presets_of_the_amendment():
    from rlvitals.lab.presets import COMPARE
    from rlvitals.lab.train import METHODS

    assert METHODS["pg_grpo_iw"].config == {"importance": True}
    assert METHODS["ctl_random_select"].config == {"select_eps": 1.0}
    assert METHODS["ctl_random_sign"].estimator == _variants.CONTROL_NAME
    assert METHODS["ctl_shuffled_keys"].config == {"control": "shuffled_keys"}
    full = COMPARE["full"]
    # the pre-registered ten arms are unchanged by the amendment
    assert len(full.methods) == 10 and not any(m.startswith("ctl_") for m in full.methods)
    assert "pg_grpo_iw" not in full.methods and full.reference == "grpo"
    controls = COMPARE["controls"]
    assert controls.reference == "pg_grpo" and controls.seeds == full.seeds
    assert controls.run == full.run and controls.level == full.level
    assert set(controls.methods) == {
        "pg_grpo",
        "pg_grpo_select",
        "pg_grpo_baseline",
        "pg_grpo_iw",
        "ctl_random_sign",
        "ctl_shuffled_keys",
        "ctl_random_select",
    }
    assert "pg_grpo" in COMPARE["quick"].methods  # CI's quick compare trains PG-GRPO


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp().parent / "rlvitals-lab-cache"


def _trained(tmp_path, cache, method, seed=0):
    """A real tiny TRL run of ``method`` on LM; returns (result, trainer)."""
    from rlvitals.lab import _trainer
    from rlvitals.lab.policy import WarmStart, prepare_base
    from rlvitals.lab.train import PRESETS, Args, train

    smoke = PRESETS["smoke"]
    seen = {}
    original = _trainer.LabMixin._lab_generate

    def spy(self, inputs):
        seen["trainer"] = self
        seen.setdefault("configs", []).append(self.rlvitals_config)
        return original(self, inputs)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    _trainer.LabMixin._lab_generate = spy
    try:
        base = prepare_base("sum", cache_dir=cache, warm=WarmStart(steps=smoke.warm_steps))
        args = Args(
            **{
                **vars(smoke),
                "out": str(tmp_path),
                "cache_dir": str(cache),
                "name": method,
                "method": method,
                "level": 7,
                "seed": seed,
            }
        )
        result = train(args, base=base)
    finally:
        _trainer.LabMixin._lab_generate = original
        torch.set_num_threads(threads)
    return result, seen


def test_a_real_run_of_the_shuffled_keys_control(tmp_path, cache):
    result, seen = _trained(tmp_path, cache, "ctl_shuffled_keys", seed=5)
    s = result["summary"]
    assert s["estimator_fallbacks"] == 0 and s["sampler"] == "posterior"
    assert s["estimator"] == _variants.CONTROL_NAME
    trainer = seen["trainer"]
    sampler = trainer.lab_sampler
    assert sampler.read_keys != sampler.keys  # other training prompts' keys
    assert set(sampler.read_keys) <= set(sampler.keys)
    cfg = seen["configs"][-1]
    assert cfg.control == "shuffled_keys" and cfg.seed == 5
    mapping = trainer._lab_read_map()
    assert cfg.read_keys == tuple(mapping[k] for k in cfg.keys)
    assert np.mean([a != b for a, b in zip(cfg.keys, cfg.read_keys)]) > 0.5


@pytest.mark.parametrize("method", ["ctl_random_sign", "ctl_random_select", "pg_grpo_iw"])
def test_a_real_run_of_each_other_arm(tmp_path, cache, method):
    result, seen = _trained(tmp_path, cache, method, seed=2)
    s = result["summary"]
    assert s["estimator_fallbacks"] == 0 and s["sampler"] == "posterior"
    assert s["generated"] == result["args"]["budget"]
    cfg = seen["configs"][-1]
    sampler = seen["trainer"].lab_sampler
    if method == "ctl_random_sign":
        assert cfg.seed == 2 and cfg.control == "random_sign"
    elif method == "ctl_random_select":
        assert cfg.select_eps == 1.0 and set(sampler.last_q.values()) == {1.0}  # uniform
    else:
        assert cfg.importance and cfg.weights is not None and len(cfg.weights) == len(cfg.keys)
        assert np.mean(cfg.weights) == pytest.approx(1.0)

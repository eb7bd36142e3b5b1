"""pg_grpo in veRL (issue 26.6): prompt keys through veRL's real ``compute_advantage`` and
``collate_fn``, and the posterior sampler on veRL's ``StatefulDataLoader``.

Runs in the veRL environment only (``tests/verl/setup_venv.sh``). A step is built as
``RayPPOTrainer.fit`` builds it (veRL 0.9.1): rows collated by ``collate_fn``, a fresh uuid4
uid per prompt, the batch repeated (interleaved) ``rollout.n`` times and reordered (as
``_balance_batch`` may), then ``ray_trainer.compute_advantage`` on the driver.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from torchdata.stateful_dataloader import StatefulDataLoader
from verl import DataProto
from verl.trainer.ppo import ray_trainer
from verl.utils.dataset.rl_dataset import collate_fn

import rlvitals
from rlvitals.estimators.pg_grpo import PgGrpoConfig
from rlvitals.integrations import verl as rv
from rlvitals.integrations import verl_sampler as vs

N, T = 8, 5  # rollout.n, response length
PROMPTS = [f"{a}+{b}=" for a in range(4) for b in range(4)]  # 16 prompts
ROWS = [  # as RLHFDataset returns them, a dummy tensor included
    {
        "prompt": p,
        "data_source": "sum",
        "extra_info": {"index": i},
        "dummy_tensor": torch.tensor([0], dtype=torch.uint8),
    }
    for i, p in enumerate(PROMPTS)
]


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    rv.reset()
    monkeypatch.setattr(ray_trainer, "compute_advantage", ray_trainer.compute_advantage)
    yield
    rv.reset()


def _algorithm(estimator="rlvitals_pg_grpo", **knobs):
    return OmegaConf.create(
        {
            "adv_estimator": estimator,
            "norm_adv_by_std_in_grpo": True,
            "gamma": 1.0,
            "lam": 1.0,
            "rlvitals": knobs,
        }
    )


def _pass_rate(i: int) -> float:
    """Prompts 0-3 always solved, 4-7 never, the rest half the time."""
    return 1.0 if i < 4 else 0.0 if i < 8 else 0.5


def _step(dataset, indices, rng, shuffle=True):
    """One fit step over dataset rows ``indices``: (batch, scores per row, row index per row)."""
    rows = collate_fn([dataset[i] for i in indices])
    batch = DataProto.from_single_dict(rows)
    batch.non_tensor_batch["uid"] = np.array([str(uuid.uuid4()) for _ in indices], dtype=object)
    batch = batch.repeat(repeat_times=N, interleave=True)
    which = np.repeat(np.asarray(indices), N)
    scores = np.array([rng.random() < _pass_rate(i) for i in which], dtype=np.float32)
    tlr = torch.zeros(len(which), T)
    tlr[:, -1] = torch.from_numpy(scores)
    batch.batch["token_level_rewards"] = tlr
    batch.batch["response_mask"] = torch.ones(len(which), T, dtype=torch.int64)
    if shuffle:  # _balance_batch reorders rows
        perm = rng.permutation(len(which))
        batch.reorder(torch.as_tensor(perm))
        scores, which = scores[perm], which[perm]
    return batch, scores, which


def _advantage(batch, config):
    # fit calls the module's global, which install() replaced
    out = ray_trainer.compute_advantage(
        batch, adv_estimator=config.adv_estimator, num_repeat=N, config=config
    )
    return out.batch["advantages"][:, -1].numpy()


def test_keyed_dataset_adds_the_key_and_leaves_the_rows_alone():
    ds = vs.KeyedDataset(ROWS)
    assert ds.keys == [vs.key_of(p) for p in PROMPTS]
    row = ds[3]
    assert row["extra_info"] == {"index": 3, vs.KEY_FIELD: vs.key_of(PROMPTS[3])}
    assert ROWS[3]["extra_info"] == {"index": 3}  # the wrapped row is not modified
    assert (
        vs.KeyedDataset(ROWS, keys=[f"k{i}" for i in range(16)])[0]["extra_info"][vs.KEY_FIELD]
        == "k0"
    )
    with pytest.raises(ValueError, match="keys holds 2 keys for 16 rows"):
        vs.KeyedDataset(ROWS, keys=["a", "b"])
    with pytest.raises(ValueError, match="no raw_prompt or prompt entry"):
        vs.KeyedDataset([{"question": "1+1="}])


def test_install_gives_pg_grpo_one_posterior_per_prompt_across_fresh_uids():
    ds = vs.KeyedDataset(ROWS)
    config = _algorithm()
    rng = np.random.default_rng(0)
    # without install(): the adapter's keys are the step's group codes, not prompts
    batch, _, _ = _step(ds, list(range(8)), rng)
    _advantage(batch, config)
    assert set(rv.get_state().counts) == {str(i) for i in range(8)}
    rv.reset()

    vs.install()
    assert vs.install() is ray_trainer.compute_advantage  # idempotent
    for _ in range(3):  # the same 8 prompts, new uids every step, rows reordered
        batch, scores, which = _step(ds, list(range(8)), rng)
        uids = batch.non_tensor_batch["uid"].copy()
        state_before = rv.get_state()
        adv = _advantage(batch, config)
        assert np.array_equal(batch.non_tensor_batch["uid"], uids)  # the batch is untouched
    state = rv.get_state()
    assert set(state.counts) == {ds.keys[i] for i in range(8)}
    a, b = state.counts[ds.keys[4]]  # never solved: Beta(1, 1) then failures only, discounted
    assert a == pytest.approx(0.9**3) and b == pytest.approx(0.9**3 + N * (1 + 0.9 + 0.81))
    # the advantages are the library's pg_grpo with these keys, from the state before the step
    codes = np.unique(uids.astype(str), return_inverse=True)[1]
    keys = vs.group_keys(uids, vs.batch_keys(batch.non_tensor_batch))
    want, _, _ = rlvitals.estimate(
        "pg_grpo", scores, codes, state=state_before, keys=keys, eps=rv.VERL_EPS
    )
    np.testing.assert_allclose(adv, np.asarray(want), rtol=1e-5, atol=1e-6)
    # a never-solved prompt's group now gets a negative advantage, an always-solved one positive
    assert (adv[which == 4] < 0).all() and (adv[which == 0] > 0).all()


def test_other_estimators_and_unkeyed_rows_pass_through():
    vs.install()
    rng = np.random.default_rng(1)
    batch, _, _ = _step(ROWS, list(range(8)), rng, shuffle=False)  # rows without keys
    _advantage(batch, _algorithm())
    assert set(rv.get_state().counts) == {str(i) for i in range(8)}
    rv.reset()
    batch, scores, _ = _step(vs.KeyedDataset(ROWS), list(range(8)), rng, shuffle=False)
    adv = _advantage(batch, _algorithm("rlvitals_grpo"))  # no keys field: unchanged call
    g = scores.reshape(8, N)
    want = (g - g.mean(1, keepdims=True)) / (g.std(1, ddof=1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(adv, want.reshape(-1), rtol=1e-5, atol=1e-5)


def test_a_uid_holding_two_prompts_is_refused():
    with pytest.raises(ValueError, match="holds rows of two prompts"):
        vs.group_keys(np.array(["u", "u"], dtype=object), np.array(["a", "b"], dtype=object))


def test_the_sampler_draws_by_the_adapters_posterior_and_resumes():
    ds = vs.KeyedDataset(ROWS)
    vs.install()
    config = _algorithm(select_eps=0.0)
    rng = np.random.default_rng(2)
    for start in (0, 8, 0, 8):  # the adapter sees every prompt twice
        batch, _, _ = _step(ds, list(range(start, start + 8)), rng)
        _advantage(batch, config)
    sampler = vs.PosteriorSampler(ds.keys, batch_size=4, config=PgGrpoConfig(select_eps=0.0))
    assert len(sampler) == 16
    loader = StatefulDataLoader(ds, batch_size=4, sampler=sampler, collate_fn=collate_fn)
    drawn = []
    for rows in loader:
        idx = [e["index"] for e in rows["extra_info"]]
        assert len(set(idx)) == 4  # distinct prompts within a batch
        drawn.extend(idx)
    mixed = np.mean([i >= 8 for i in drawn])  # P(mixed) ~ 0 for the always/never prompts
    assert mixed > 0.75, drawn  # uniform draws would give 0.5
    assert sampler.last_q is not None and sampler.last_q[8:].sum() > 0.75
    # resumable: a new loader from the saved state continues with the same batches
    it = iter(StatefulDataLoader(ds, batch_size=4, sampler=sampler, collate_fn=collate_fn))
    first = next(it)
    saved = sampler.state_dict()
    rest = [[e["index"] for e in r["extra_info"]] for r in it]
    again = vs.PosteriorSampler(ds.keys, batch_size=4, config=PgGrpoConfig(select_eps=0.0))
    again.load_state_dict(saved)
    assert saved["drawn"] >= 1 and first is not None
    resumed = list(again)
    assert [resumed[i : i + 4] for i in range(0, len(resumed), 4)] == rest[-len(resumed) // 4 :]


def test_sampler_before_any_step_is_uniform_and_checks_its_batch():
    sampler = vs.PosteriorSampler([f"k{i}" for i in range(10)], batch_size=5, run="none-yet")
    idx = list(sampler)
    assert len(idx) == 10  # 2 batches of 5, each without replacement
    assert len(set(idx[:5])) == 5 and len(set(idx[5:])) == 5
    assert np.allclose(sampler.last_q, 0.1)
    with pytest.raises(ValueError, match=r"batch_size must be in 1\.\.10"):
        vs.PosteriorSampler([f"k{i}" for i in range(10)], batch_size=11)

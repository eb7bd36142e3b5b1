"""Posterior-guided GRPO (``pg_grpo``, issue 26.6): its maths, its state, its range check, its
sampler, and one real tiny TRL run through the lab trainer."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.estimators import RewardRangeError, get_estimator
from rlvitals.estimators.pg_grpo import (
    PgGrpoConfig,
    PgGrpoState,
    fit_prior,
    p_mixed,
    selection_weights,
)

G = 8


def estimate(name, rewards, group_ids, config=None, state=None):
    """The registered estimator called with a config instance (through the safety layer)."""
    return get_estimator(name)(rewards, group_ids, config, state)


def _grpo(r: np.ndarray) -> np.ndarray:
    return (r - r.mean()) / (r.std(ddof=1) + 1e-4)


# -- the closed form -------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    a=st.floats(0.2, 20.0),
    b=st.floats(0.2, 20.0),
    g=st.integers(2, 16),
)
def test_p_mixed_closed_form_matches_monte_carlo(a, b, g):
    rng = np.random.default_rng(0)
    p = rng.beta(a, b, size=200_000)
    mc = 1.0 - np.mean(p**g + (1 - p) ** g)
    assert p_mixed(a, b, g) == pytest.approx(mc, abs=0.006)


def test_p_mixed_against_scipy_betaln():
    from scipy.special import betaln

    a, b, g = 2.5, 0.7, 8
    want = 1 - math.exp(betaln(a + g, b) - betaln(a, b)) - math.exp(betaln(a, b + g) - betaln(a, b))
    assert p_mixed(a, b, g) == pytest.approx(want, rel=1e-12)
    assert p_mixed(1.0, 1.0, g) == pytest.approx(1 - 2 / (g + 1))


def test_fit_prior_recovers_a_beta_population():
    rng = np.random.default_rng(1)
    p = rng.beta(2.0, 6.0, size=4000)
    rates = rng.binomial(G, p) / G  # what the groups show: binomial noise on top
    cfg = PgGrpoConfig(prior_window=4000)
    a, b = fit_prior(rates, G, cfg)
    assert a / (a + b) == pytest.approx(0.25, abs=0.02)
    assert a + b == pytest.approx(8.0, rel=0.2)


def test_selection_prefers_prompts_likely_to_give_a_mixed_group():
    state = PgGrpoState(counts={"easy": (50.0, 0.5), "mid": (3.0, 3.0), "hard": (0.5, 50.0)})
    q = selection_weights(state, ["easy", "mid", "hard"], PgGrpoConfig(select_eps=0.1), G)
    assert q.sum() == pytest.approx(1.0)
    assert q[1] > 5 * q[0] and q[1] > 5 * q[2]
    uniform = selection_weights(state, ["easy", "mid", "hard"], PgGrpoConfig(select_eps=1.0), G)
    assert np.allclose(uniform, 1 / 3)


# -- the advantages ------------------------------------------------------------------------------


def test_mixed_groups_keep_grpo_and_collapsed_ones_are_scored_against_the_posterior_before():
    state = PgGrpoState(counts={"k0": (1.0, 3.0), "k1": (9.0, 1.0)}, group_size=G)
    mixed = np.array([1, 0, 1, 0, 0, 0, 1, 0], dtype=float)
    r = np.concatenate([np.zeros(G), mixed])
    cfg = PgGrpoConfig(keys=("k0", "k1"), cap=100.0)
    adv, m, new = estimate("pg_grpo", r, np.repeat([0, 1], G), cfg, state)
    p = 0.25  # the posterior mean BEFORE the group, not after it
    assert adv[:G] == pytest.approx(np.full(G, -p / math.sqrt(p * (1 - p))), rel=1e-3)
    assert adv[G:] == pytest.approx(_grpo(mixed))
    assert new.counts["k0"] == pytest.approx((0.9 * 1.0, 0.9 * 3.0 + G))
    assert m["acr"] == 0.5 and m["acr_residual"] == 0.0


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(0.05, 50.0),
    b=st.floats(0.05, 50.0),
    value=st.sampled_from([0.0, 1.0]),
    cap=st.floats(0.1, 3.0),
)
def test_a_collapsed_group_never_pushes_harder_than_grpo_scale(a, b, value, cap):
    state = PgGrpoState(counts={"k": (a, b)}, group_size=G)
    cfg = PgGrpoConfig(keys=("k",), cap=cap)
    adv, _, _ = estimate("pg_grpo", np.full(G, value), np.zeros(G, int), cfg, state)
    limit = cap * math.sqrt((G - 1) / G)
    assert np.all(np.abs(adv) <= limit + 1e-9)
    assert np.allclose(adv, adv[0])  # one value for the whole group
    p = a / (a + b)
    assert np.sign(adv[0]) == np.sign(value - p) or abs(value - p) < 1e-9


def test_first_visit_reference_value_and_the_selection_only_arm():
    adv, m, _ = estimate("pg_grpo", np.zeros(G), np.zeros(G, int))
    assert adv == pytest.approx(np.full(G, -math.sqrt((G - 1) / G)))
    assert m["pg_capped_frac"] == 1.0
    adv, m, _ = estimate("pg_grpo", np.zeros(G), np.zeros(G, int), PgGrpoConfig(baseline=False))
    assert np.all(adv == 0) and m["acr_residual"] == 1.0


def test_importance_weights_multiply_each_groups_advantages():
    r = np.array([1, 0] * 4 + [0, 1] * 4, dtype=float)
    ids = np.repeat([0, 1], G)
    plain, _, _ = estimate("pg_grpo", r, ids)
    weighted, _, _ = estimate("pg_grpo", r, ids, PgGrpoConfig(weights=(0.5, 1.5)))
    assert weighted == pytest.approx(plain * np.repeat([0.5, 1.5], G))


def test_torch_in_torch_out():
    r = torch.tensor([0.0] * G + [1, 0] * (G // 2), dtype=torch.float32)
    ids = torch.arange(2 * G) // G
    adv, _, _ = estimate("pg_grpo", r, ids)
    ref, _, _ = estimate("pg_grpo", r.numpy().astype(np.float64), ids.numpy())
    assert adv.dtype == torch.float32 and np.allclose(adv.numpy(), ref, atol=1e-6)


# -- the state and the range ------------------------------------------------------------------


def test_state_round_trips_through_json_and_resumes_identically():
    rng = np.random.default_rng(2)
    ids = np.repeat(np.arange(4), G)
    cfg = PgGrpoConfig(keys=("a", "b", "c", "d"), prior_min_groups=2)
    state = None
    for _ in range(3):
        _, _, state = estimate("pg_grpo", rng.integers(0, 2, 4 * G).astype(float), ids, cfg, state)
    back = PgGrpoState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert back == state
    r = rng.integers(0, 2, 4 * G).astype(float)
    assert np.array_equal(
        estimate("pg_grpo", r, ids, cfg, state)[0], estimate("pg_grpo", r, ids, cfg, back)[0]
    )
    with pytest.raises(ValueError, match="unknown pg_grpo state"):
        PgGrpoState.from_dict({"nope": 1})
    with pytest.raises(ValueError, match="recent entry"):
        PgGrpoState.from_dict({"recent": [1.5]})


def test_rewards_outside_the_range_are_refused_before_the_state_moves():
    assert get_estimator("pg_grpo").ranged
    state = PgGrpoState(counts={"0": (1.0, 1.0)})
    with pytest.raises(RewardRangeError):
        estimate("pg_grpo", np.full(G, 2.0), np.zeros(G, int), None, state)
    assert state.counts == {"0": (1.0, 1.0)}
    adv, _, _ = estimate("pg_grpo", np.full(G, 2.0), np.zeros(G, int), PgGrpoConfig(r_max=2.0))
    assert np.all(adv > 0)


def test_config_errors_quote_the_value():
    with pytest.raises(ValueError, match="select_eps"):
        PgGrpoConfig(select_eps=1.5)
    with pytest.raises(ValueError, match="baseline"):
        PgGrpoConfig(baseline="yes")


# -- the sampler and a real TRL run ---------------------------------------------------------------


def test_posterior_sampler_yields_trl_repeat_order_and_follows_the_state():
    from rlvitals._text import prompt_id
    from rlvitals.integrations.trl import PosteriorSampler

    prompts = [f"{i}+1=" for i in range(40)]
    keys = [prompt_id(p) for p in prompts]
    state = PgGrpoState(
        counts={k: ((3.0, 3.0) if i < 4 else (0.2, 60.0)) for i, k in enumerate(keys)},
        group_size=4,
    )
    sampler = PosteriorSampler(
        prompts,
        group_size=4,
        batch_size=4,
        repeat_count=1,
        state_of=lambda: state,
        config_of=lambda: PgGrpoConfig(select_eps=0.0),
        seed=0,
    )
    idx = list(sampler)
    assert len(idx) == len(sampler) == 40 * 4
    blocks = np.asarray(idx).reshape(-1, 4)
    assert (blocks == blocks[:, :1]).all()  # each prompt G times in a row
    firsts = blocks[:, 0].reshape(-1, 4)
    assert all(len(set(row)) == 4 for row in firsts)  # distinct prompts within a step
    assert np.mean(firsts < 4) > 0.5  # the 4 likely-mixed prompts dominate
    w = sampler.weights(tuple(keys[:4]))
    assert np.mean(w) == pytest.approx(1.0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp().parent / "rlvitals-lab-cache"


def test_a_real_tiny_trl_run_with_pg_grpo(tmp_path, cache):
    from rlvitals.lab.policy import WarmStart, prepare_base
    from rlvitals.lab.train import PRESETS, Args, train
    from rlvitals.recording import read_recording

    smoke = PRESETS["smoke"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        base = prepare_base("sum", cache_dir=cache, warm=WarmStart(steps=smoke.warm_steps))
        args = Args(
            **{
                **vars(smoke),
                "out": str(tmp_path),
                "cache_dir": str(cache),
                "name": "pg",
                "method": "pg_grpo",
                "level": 7,
                "estimator_config": {"importance": True},
            }
        )
        result = train(args, base=base)
    finally:
        torch.set_num_threads(threads)
    s = result["summary"]
    assert s["estimator_fallbacks"] == 0 and s["sampler"] == "posterior"
    assert s["generated"] == smoke.budget and s["level_name"] == "LM"
    assert s["acr_residual_mean"] <= s["acr_mean"]
    run = read_recording(result["recording"])
    assert run.groups.prompt is not None and run.groups.n_groups == smoke.budget // G

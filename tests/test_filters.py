"""Group filters: zero-variance filtering (mask, weights, estimator) and DAPO dynamic sampling."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlvitals
from rlvitals.estimators import DynamicSampler, dynamic_sampling, zero_variance_filter

REWARDS = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, math.nan, 0.5, 0.5])
IDS = np.repeat([0, 1, 2, 3, 4, 5], 2)
# groups: 0 mixed, 1 all-1, 2 mixed, 3 all-0, 4 NaN + 0 (one scorable -> collapsed), 5 flat


def test_filter_keeps_rows_of_informative_groups_only():
    f = zero_variance_filter(REWARDS, IDS)
    assert f.keep.tolist() == [True, True, False, False, True, True] + [False] * 6
    assert f.group_keep.tolist() == [True, False, True, False, False, False]
    assert (f.n_groups, f.kept_groups, f.kept_rows, f.n_rows) == (6, 2, 4, 12)
    assert f.kept_frac == pytest.approx(1 / 3)
    np.testing.assert_allclose(f.weights, f.keep * 3.0)


@settings(max_examples=50, deadline=None)
@given(
    groups=st.lists(
        st.lists(st.sampled_from([0.0, 1.0, math.nan]), min_size=1, max_size=6),
        min_size=1,
        max_size=10,
    ),
    seed=st.integers(0, 100),
)
def test_weights_turn_a_mean_over_all_rows_into_a_mean_over_kept_rows(groups, seed):
    rewards = np.array([v for g in groups for v in g])
    ids = np.array([i for i, g in enumerate(groups) for _ in g])
    loss = np.random.default_rng(seed).normal(size=rewards.size)
    f = zero_variance_filter(rewards, ids)
    informative = [i for i, g in enumerate(groups) if len({v for v in g if not math.isnan(v)}) > 1]
    assert f.kept_groups == len(informative)
    if f.kept_rows:
        assert np.mean(f.weights * loss) == pytest.approx(loss[f.keep].mean())
    else:
        assert not f.weights.any()


def test_zero_var_filter_estimator_rescales_grpo_advantages():
    grpo, _, _ = rlvitals.estimate("grpo", REWARDS, IDS)
    adv, m, state = rlvitals.estimate("zero_var_filter", REWARDS, IDS)
    keep = zero_variance_filter(REWARDS, IDS).keep
    np.testing.assert_allclose(adv[keep], grpo[keep] * 3.0)
    assert not adv[~keep].any() and state is None
    assert m["kept_frac"] == pytest.approx(1 / 3) and m["kept_rows_frac"] == pytest.approx(1 / 3)
    assert m["filter_scale"] == 3.0
    assert m["acr"] == pytest.approx(4 / 6) and m["acr_residual"] == pytest.approx(4 / 6)
    adv, m, _ = rlvitals.estimate("zero_var_filter", REWARDS, IDS, rescale=False)
    np.testing.assert_allclose(adv, grpo)  # collapsed groups were already 0 under grpo


def test_all_collapsed_step_keeps_nothing_without_dividing_by_zero():
    rewards, ids = np.ones(6), np.repeat([0, 1, 2], 2)
    f = zero_variance_filter(rewards, ids)
    assert f.kept_frac == 0.0 and not f.weights.any()
    adv, m, _ = rlvitals.estimate("zero_var_filter", rewards, ids)
    assert not adv.any() and m["kept_frac"] == 0.0 and m["filter_scale"] == 0.0


def test_filter_on_torch_stays_on_device_and_dtype():
    f = zero_variance_filter(torch.tensor(REWARDS, dtype=torch.float32), torch.tensor(IDS))
    assert f.keep.dtype == torch.bool and f.weights.dtype == torch.float32
    assert f.keep.tolist() == zero_variance_filter(REWARDS, IDS).keep.tolist()


# --------------------------------------------------------------------------------------------
# Dynamic sampling


def batch(pattern):
    """Groups of 4 from a string: 'm' mixed, 'a' all correct, 'n' none correct."""
    rows = {"m": [1.0, 0.0, 0.0, 1.0], "a": [1.0] * 4, "n": [0.0] * 4}
    return np.array([v for c in pattern for v in rows[c]]), np.repeat(np.arange(len(pattern)), 4)


def test_sampler_fills_the_batch_and_trims_the_last_one():
    s = DynamicSampler(target_groups=3, max_attempts=5)
    k1 = s.add(*batch("ama"), payload="b1")
    assert k1.tolist() == [False] * 4 + [True] * 4 + [False] * 4
    assert not s.done
    k2 = s.add(*batch("mnmm"), payload="b2")  # three informative; only two fit
    assert k2.reshape(4, 4)[:, 0].tolist() == [True, False, True, False]
    assert s.full and s.done
    res = s.result()
    assert res.payloads == ["b1", "b2"] and res.kept_groups == 3
    assert res.metrics() == {
        "ds_attempts": 2.0,
        "ds_kept_groups": 3.0,
        "ds_generated_groups": 7.0,
        "ds_keep_rate": 3 / 7,
        "ds_full": 1.0,
    }
    with pytest.raises(RuntimeError, match="3/3 groups kept after 2 of 5 attempts"):
        s.add(*batch("m"))


def test_dynamic_sampling_stops_at_the_attempt_cap():
    calls = []

    def generate(attempt):
        calls.append(attempt)
        return (*batch("an"), attempt)

    res = dynamic_sampling(generate, target_groups=2, max_attempts=4)
    assert calls == [0, 1, 2, 3] and not res.full and res.kept_groups == 0
    assert res.payloads == [0, 1, 2, 3]
    with pytest.raises(RuntimeError, match="kept 0/2 groups after 4 attempts"):
        dynamic_sampling(generate, target_groups=2, max_attempts=4, on_shortfall="raise")
    with pytest.raises(ValueError, match="must return"):
        dynamic_sampling(lambda i: batch("m")[0], target_groups=1)


@settings(max_examples=40, deadline=None)
@given(
    batches=st.lists(st.text(alphabet="man", min_size=1, max_size=6), min_size=1, max_size=6),
    target=st.integers(1, 12),
)
def test_kept_groups_is_min_of_target_and_informative_seen(batches, target):
    res = dynamic_sampling(
        lambda i: batch(batches[i]), target_groups=target, max_attempts=len(batches)
    )
    seen, informative = 0, 0
    for b in batches[: res.attempts]:
        seen += len(b)
        informative += b.count("m")
    assert res.kept_groups == min(target, informative)
    assert sum(int(k.sum()) for k in res.keep) == 4 * res.kept_groups
    assert res.generated_groups == seen
    assert res.attempts == len(batches) or res.full


def test_sampler_validates_its_arguments():
    with pytest.raises(ValueError, match="target_groups must be an integer >= 1"):
        DynamicSampler(0)
    with pytest.raises(ValueError, match="max_attempts"):
        DynamicSampler(2, max_attempts=0)
    with pytest.raises(ValueError, match="on_shortfall"):
        dynamic_sampling(lambda i: batch("m"), 1, on_shortfall="warn")

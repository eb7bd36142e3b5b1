"""Tests for rlvitals.signal: hand-worked cases, an independent reference, and invariants."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlvitals
from rlvitals import signal as sig

# ----------------------------------------------------------------------------------------------
# An independent, deliberately naive reference: Python lists and the statistics module.


def ref_groups(rewards, ids):
    groups: dict = {}
    for i, (r, g) in enumerate(zip(rewards, ids)):
        groups.setdefault(g, []).append((i, float(r)))
    return groups


EPS64 = float(np.finfo(np.float64).eps)


def ref_equal(vals, eps=EPS64):
    """Equal up to round-off: within 4 machine epsilons of the magnitude (or a lone value)."""
    if len(vals) == 1:
        return True
    mean = sum(vals) / len(vals)
    return statistics.stdev(vals) <= 4 * eps * max(1.0, abs(mean))


def ref_collapsed(vals, tau=1e-6, eps=EPS64):
    vals = [v for v in vals if not math.isnan(v)]
    if not vals:
        return None  # unscorable
    return ref_equal(vals, eps) or statistics.stdev(vals) <= tau


def ref_acr(rewards, ids, tau=1e-6):
    flags = [ref_collapsed([v for _, v in m], tau) for m in ref_groups(rewards, ids).values()]
    flags = [f for f in flags if f is not None]
    return sum(flags) / len(flags)


def ref_advantages(rewards, ids, method="grpo", eps=1e-4, dtype_eps=EPS64):
    out = [0.0] * len(rewards)
    allv = [float(r) for r in rewards if not math.isnan(float(r))]
    bstd = statistics.stdev(allv) if len(allv) > 1 else 0.0
    for members in ref_groups(rewards, ids).values():
        vals = [v for _, v in members if not math.isnan(v)]
        if len(vals) <= 1 or ref_equal(vals, dtype_eps):
            continue  # nothing to learn: a lone member, or rewards equal up to round-off
        mean = sum(vals) / len(vals)
        std = statistics.stdev(vals)
        for i, v in members:
            if math.isnan(v):
                continue
            if method == "grpo":
                out[i] = (v - mean) / (std + eps)
            elif method == "dr_grpo":
                out[i] = v - mean
            elif method == "batch":
                out[i] = (v - mean) / (bstd + eps)
            elif method == "rloo":
                others = [w for j, w in members if j != i and not math.isnan(w)]
                out[i] = v - sum(others) / len(others)
    return out


# ----------------------------------------------------------------------------------------------
# Strategies: ragged batches with binary, partial-credit and float32-awkward rewards, some NaN.

REWARD_VALUES = [0.0, 1.0, 0.5, 0.1 + 0.2, 0.3, -1.0, 2.5, 0.25]


@st.composite
def batches(draw, allow_nan=True, min_groups=1):
    n_groups = draw(st.integers(min_groups, 12))
    rewards, ids = [], []
    for g in range(n_groups):
        size = draw(st.integers(1, 9))
        gid = draw(st.integers(-50, 50)) * 100 + g  # unique, unordered, may be negative
        base = draw(st.sampled_from(REWARD_VALUES))
        for _ in range(size):
            kind = draw(st.integers(0, 9))
            if kind < 4:
                r = base
            elif kind < 8:
                r = draw(st.sampled_from(REWARD_VALUES))
            elif kind < 9:
                r = draw(st.floats(-3, 3, allow_nan=False, width=32))
            else:
                r = math.nan if allow_nan else base
            rewards.append(r)
            ids.append(gid)
    order = draw(st.permutations(range(len(rewards))))
    r = np.array([rewards[i] for i in order], dtype=np.float64)
    i = np.array([ids[i] for i in order], dtype=np.int64)
    if not np.isfinite(r).any():
        r[0] = 1.0
    return r, i


# ----------------------------------------------------------------------------------------------
# Hand-worked examples (DESIGN.md)


def test_grpo_example_failed_sample_is_minus_1_5():
    adv = rlvitals.advantages(np.array([1.0, 1.0, 1.0, 0.0]), np.zeros(4, dtype=int))
    # unbiased std of [1,1,1,0] = 0.5; failed sample: (0 - 0.75) / (0.5 + 1e-4)
    assert adv[3] == pytest.approx(-0.75 / 0.5001)
    assert adv[3] == pytest.approx(-1.5, abs=1e-3)
    assert adv[:3] == pytest.approx([0.25 / 0.5001] * 3)


def test_population_std_option():
    s = sig.group_stats(np.array([1.0, 1.0, 1.0, 0.0]), np.zeros(4, dtype=int), ddof=0)
    assert float(s.std[0]) == pytest.approx(math.sqrt(3) / 4)


def test_collapse_rate_and_split_hand_example():
    r = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0.5, 0.5, 1, 0], dtype=np.float32)
    g = np.repeat([3, 1, 2, 0, 4, 5], 2)
    # groups: 3:(1,1) all, 1:(1,1) all, 2:(0,0) none, 0:(0,0) none, 4:(.5,.5) flat, 5:(1,0)
    s = rlvitals.collapse_split(r, g)
    assert (s.acr, s.solve_all, s.solve_none, s.flat) == pytest.approx((5 / 6, 2 / 6, 2 / 6, 1 / 6))
    assert s.n_groups == 6 and s.n_collapsed == 5
    assert rlvitals.collapse_rate(r, g) == pytest.approx(5 / 6)


def test_custom_reward_range_split():
    r = np.array([5.0, 5.0, -1.0, -1.0, 2.0, 2.0])
    g = np.repeat([0, 1, 2], 2)
    s = rlvitals.collapse_split(r, g, r_min=-1.0, r_max=5.0)
    assert (s.solve_all, s.solve_none, s.flat) == pytest.approx((1 / 3, 1 / 3, 1 / 3))


def test_float32_sums_are_not_split():
    a = np.float32(0.6) + np.float32(0.1)  # a partial-credit reward summed in float32
    b = np.float32(0.7)
    assert a != b  # the trap: bit-different but the same reward
    r = np.array([a, b, a, b], dtype=np.float32)
    assert rlvitals.collapse_rate(r, np.zeros(4, dtype=int)) == 1.0
    # and in float64
    r64 = np.array([0.1 + 0.2, 0.3])
    assert rlvitals.collapse_rate(r64, [0, 0]) == 1.0


def test_large_rewards_use_relative_tolerance():
    r = np.array([1000.0, 1000.0 + 1e-7], dtype=np.float64)
    assert rlvitals.collapse_rate(r, [0, 0]) == 1.0
    assert rlvitals.collapse_rate(np.array([1000.0, 1000.1]), [0, 0]) == 0.0
    # float32 round-off at large magnitude is equal rewards, not spread
    big = np.array([4500.0, 4500.0], dtype=np.float32) + np.array([0.0, 2.0**-11], np.float32)
    assert rlvitals.collapse_rate(big, [0, 0]) == 1.0
    assert rlvitals.advantages(big, [0, 0]).tolist() == [0.0, 0.0]


def test_tau_decides_acr_never_erases_real_spread():
    """Issue 10: estimate('grpo', [1e6, 1e6+1, 1e6, 1e6+1]) returned zeros where TRL gives
    +-0.866 (the collapse test turned relative above |mean| 1 and collapsed groups got zero
    advantages); [1000, 1000.0005] * 4 likewise."""
    for dtype in (np.float64, np.float32):
        r = np.array([1e6, 1e6 + 1, 1e6, 1e6 + 1], dtype=dtype)
        adv, metrics, _ = rlvitals.estimate("grpo", r, [0] * 4)
        np.testing.assert_allclose(adv, [-0.866, 0.866, -0.866, 0.866], atol=1e-3)
        assert metrics["acr"] == 0.0
    r = np.array([1000, 1000.0005] * 4)
    adv, _, _ = rlvitals.estimate("grpo", r, [0] * 8)
    std = float(np.std(r, ddof=1))
    np.testing.assert_allclose(adv, (r - r.mean()) / (std + 1e-4))  # TRL's formula
    # within tau: collapsed for ACR, yet its (tiny) advantages are not erased
    near = np.array([0.5, 0.5 + 1e-9])
    assert rlvitals.collapse_rate(near, [0, 0]) == 1.0
    assert rlvitals.advantages(near, [0, 0])[1] > 0


def test_nan_rewards_excluded_and_zero_advantage():
    r = np.array([1.0, np.nan, 0.0, 1.0, np.nan, np.nan])
    g = np.array([0, 0, 0, 1, 1, 2])
    adv = rlvitals.advantages(r, g)
    assert adv[1] == 0.0 and adv[4] == 0.0 and adv[5] == 0.0
    assert adv[0] == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-4))
    assert adv[3] == 0.0  # single scorable member
    # group 2 has no scorable reward: not counted; group 1 (one value) is collapsed
    assert rlvitals.collapse_rate(r, g) == pytest.approx(1 / 2)


def test_all_nan_step_is_an_error():
    with pytest.raises(ValueError, match="no group has a finite reward"):
        rlvitals.collapse_rate([math.nan, math.nan], [0, 0])


def test_string_group_ids_numpy():
    r = np.array([1.0, 0.0, 1.0, 1.0])
    assert rlvitals.collapse_rate(r, np.array(["a", "a", "b", "b"])) == 0.5


def test_dense_and_ragged_paths_agree():
    rng = np.random.default_rng(0)
    r = (rng.random(64) < 0.5).astype(np.float32)
    dense = np.repeat(np.arange(8), 8)
    shuffled = rng.permutation(64)
    a1 = rlvitals.advantages(r, dense)
    a2 = rlvitals.advantages(r[shuffled], dense[shuffled])
    np.testing.assert_allclose(a1[shuffled], a2, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rewards": [1.0, 0.0], "group_ids": [0]}, "differ in length"),
        ({"rewards": [], "group_ids": []}, "empty"),
        ({"rewards": [[1.0, 0.0]], "group_ids": [[0, 0]]}, "1-D"),
        ({"rewards": [1.0, 0.0], "group_ids": [0, 0], "tau": math.nan}, "tau must be finite"),
        ({"rewards": [1.0, 0.0], "group_ids": [0, 0], "tau": math.inf}, "tau must be finite"),
        ({"rewards": [1.0, 0.0], "group_ids": [0, 0], "tau": -1.0}, "tau must be >= 0"),
        ({"rewards": [1.0, math.inf], "group_ids": [0, 0]}, "inf"),
        ({"rewards": ["a", "b"], "group_ids": [0, 0]}, "numeric"),
        ({"rewards": [1.0, 0.0], "group_ids": [0.5, 1.0]}, "non-integral"),
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    if "tau" in kwargs and match.startswith("tau must be finite"):
        match = "tau must be a finite number"
    with pytest.raises(ValueError, match=match):
        rlvitals.collapse_rate(**kwargs)


def test_bad_method_and_eps():
    with pytest.raises(ValueError, match="unknown method 'ppo'"):
        rlvitals.advantages([1.0, 0.0], [0, 0], method="ppo")
    with pytest.raises(ValueError, match="eps"):
        rlvitals.advantages([1.0, 0.0], [0, 0], eps=-1)
    with pytest.raises(ValueError, match="ddof"):
        sig.group_stats([1.0, 0.0], [0, 0], ddof=2)


def test_dtype_and_kind_preserved():
    for dt in (np.float32, np.float64):
        a = rlvitals.advantages(np.array([1, 0, 1, 1], dtype=dt), [0, 0, 1, 1])
        assert isinstance(a, np.ndarray) and a.dtype == dt
    for dt in (torch.float32, torch.float64):
        a = rlvitals.advantages(torch.tensor([1.0, 0, 1, 1], dtype=dt), torch.tensor([0, 0, 1, 1]))
        assert isinstance(a, torch.Tensor) and a.dtype == dt


# ----------------------------------------------------------------------------------------------
# Agreement with the independent reference on random ragged batches


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from(sig.ADVANTAGE_METHODS))
def test_matches_reference(batch, method):
    r, g = batch
    assert rlvitals.collapse_rate(r, g) == pytest.approx(ref_acr(r.tolist(), g.tolist()))
    got = rlvitals.advantages(r, g, method=method)
    want = ref_advantages(r.tolist(), g.tolist(), method)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


@settings(max_examples=80, deadline=None)
@given(batches())
def test_matches_reference_float32(batch):
    r, g = batch
    r32 = r.astype(np.float32)
    ref = ref_advantages(
        r32.astype(np.float64).tolist(), g.tolist(), dtype_eps=float(np.finfo(np.float32).eps)
    )
    np.testing.assert_allclose(rlvitals.advantages(r32, g), ref, rtol=1e-4, atol=2e-5)
    assert rlvitals.collapse_rate(r32, g) == pytest.approx(
        ref_acr(r32.astype(np.float64).tolist(), g.tolist())
    )


# ----------------------------------------------------------------------------------------------
# Invariants


@settings(max_examples=150, deadline=None)
@given(batches(allow_nan=False))
def test_non_collapsed_grpo_group_has_mean_0_and_std_ratio(batch):
    r, g = batch
    eps = 1e-4
    adv = rlvitals.advantages(r, g, eps=eps)
    stats = sig.group_stats(r, g)
    for k, gid in enumerate(np.unique(g)):
        rows = g == gid
        if bool(stats.collapsed[k]) or rows.sum() < 2:
            continue
        a = adv[rows]
        std_j = float(stats.std[k])
        assert abs(a.mean()) < 1e-9
        assert a.std(ddof=1) == pytest.approx(std_j / (std_j + eps), rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_acr_in_unit_interval_and_split_sums(batch):
    r, g = batch
    s = rlvitals.collapse_split(r, g)
    assert 0.0 <= s.acr <= 1.0
    assert s.solve_all + s.solve_none + s.flat == pytest.approx(s.acr)
    assert min(s.solve_all, s.solve_none, s.flat) >= 0


@settings(max_examples=100, deadline=None)
@given(batches(), st.randoms(use_true_random=False))
def test_permutation_invariance(batch, rnd):
    r, g = batch
    perm = list(range(len(r)))
    rnd.shuffle(perm)
    perm = np.array(perm)
    assert rlvitals.collapse_rate(r[perm], g[perm]) == rlvitals.collapse_rate(r, g)
    for method in sig.ADVANTAGE_METHODS:
        a = rlvitals.advantages(r, g, method=method)
        b = rlvitals.advantages(r[perm], g[perm], method=method)
        np.testing.assert_allclose(a[perm], b, rtol=1e-12, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(batches(), st.sampled_from([np.float32, np.float64]))
def test_numpy_and_torch_agree(batch, dtype):
    r, g = batch
    r = r.astype(dtype)
    tdt = torch.float32 if dtype == np.float32 else torch.float64
    rt, gt = torch.tensor(r, dtype=tdt), torch.tensor(g)
    assert rlvitals.collapse_rate(rt, gt) == rlvitals.collapse_rate(r, g)
    for method in sig.ADVANTAGE_METHODS:
        a_np = rlvitals.advantages(r, g, method=method)
        a_t = rlvitals.advantages(rt, gt, method=method)
        assert a_t.dtype == tdt
        np.testing.assert_allclose(a_t.numpy(), a_np, rtol=1e-6, atol=1e-6)
    s_np, s_t = sig.group_stats(r, g), sig.group_stats(rt, gt)
    np.testing.assert_allclose(s_t.std.numpy(), s_np.std, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(s_t.collapsed.numpy(), s_np.collapsed)


def test_torch_dense_path_matches_numpy():
    r = (np.random.default_rng(1).random(32 * 16) < 0.3).astype(np.float32)
    g = np.repeat(np.arange(32), 16)
    np.testing.assert_allclose(
        rlvitals.advantages(torch.from_numpy(r), torch.from_numpy(g)).numpy(),
        rlvitals.advantages(r, g),
        rtol=1e-6,
        atol=1e-6,
    )


# ----------------------------------------------------------------------------------------------
# Advantage stats


def test_advantage_stats_and_nan_mask():
    adv = np.array([0.0, 0.0, 1.0, -1.0, 5.0])
    r = np.array([1.0, 1.0, 1.0, 0.0, np.nan])
    std, zero = sig.advantage_stats(adv, r)
    assert std == pytest.approx(math.sqrt(0.5))
    assert zero == 0.5
    with pytest.raises(ValueError):
        sig.advantage_stats(np.zeros((2, 2)))


def test_advantage_stats_all_collapsed_step():
    r = np.ones(16)
    g = np.repeat(np.arange(4), 4)
    std, zero = sig.advantage_stats(rlvitals.advantages(r, g))
    assert std == 0.0 and zero == 1.0


# ----------------------------------------------------------------------------------------------
# Expected collapse


@pytest.mark.parametrize("p, G", [(0.5, 4), (0.1, 8), (0.9, 16), (0.3, 2), (0.0, 5), (1.0, 3)])
def test_p0_matches_monte_carlo(p, G):
    rng = np.random.default_rng(12345)
    trials = 200_000
    correct = rng.binomial(G, p, size=trials)
    mc = np.mean((correct == 0) | (correct == G))
    exact = rlvitals.expected_collapse(p, G)
    assert exact == pytest.approx(p**G + (1 - p) ** G)
    # 5 standard errors of the Monte Carlo estimate (plus float slack)
    se = math.sqrt(max(exact * (1 - exact), 1e-12) / trials)
    assert abs(mc - exact) <= 5 * se + 1e-9


def test_expected_acr_mixture_monte_carlo():
    rng = np.random.default_rng(7)
    pass_rates = rng.random(50)
    sizes = rng.integers(2, 17, size=50)
    want = rlvitals.expected_acr(pass_rates, sizes)
    sims = [
        np.mean([(c == 0) | (c == n) for c, n in zip(rng.binomial(sizes, pass_rates), sizes)])
        for _ in range(4000)
    ]
    assert np.mean(sims) == pytest.approx(want, abs=0.01)


def test_expected_and_excess_validation():
    assert rlvitals.excess_collapse(0.6, 0.25) == pytest.approx(0.35)
    np.testing.assert_allclose(rlvitals.excess_collapse([0.5, 0.2], [0.1, 0.2]), [0.4, 0.0])
    assert math.isnan(rlvitals.expected_acr([math.nan], 8))
    with pytest.raises(ValueError):
        rlvitals.expected_collapse(1.5, 4)
    with pytest.raises(ValueError):
        rlvitals.expected_collapse(0.5, 0)


# ----------------------------------------------------------------------------------------------
# Series helpers


def test_cumulative_windowed_acr100():
    np.testing.assert_allclose(rlvitals.cumulative_acr([1, 1, 0], [2, 2, 4]), [0.5, 0.5, 0.25])
    acr = np.array([0.0, 1.0, np.nan, 1.0])
    np.testing.assert_allclose(rlvitals.windowed_acr(acr, window=2), [0.0, 0.5, 1.0, 1.0])
    series = np.r_[np.full(100, 0.2), np.full(100, 0.9)]
    assert rlvitals.acr_100(series) == pytest.approx(0.2)
    # sparse logging: every 10th step from 10; the first 100 steps are steps 10..100
    steps = np.arange(10, 2001, 10)
    sparse = np.where(steps <= 100, 0.4, 0.8)
    assert rlvitals.acr_100(sparse, steps) == pytest.approx(0.4)


def test_windowed_default_is_25():
    acr = np.r_[np.zeros(25), np.ones(25)]
    w = rlvitals.windowed_acr(acr)
    assert w[24] == 0.0 and w[49] == 1.0 and w[37] == pytest.approx(13 / 25)


def test_volatility_matches_brute_force():
    rng = np.random.default_rng(3)
    acr = rng.random(80)
    vol = rlvitals.acr_volatility(acr)
    assert np.isnan(vol[:24]).all()
    for t in range(24, 80):
        assert vol[t] == pytest.approx(np.std(acr[t - 24 : t + 1]), abs=1e-12)


def test_stall_rule():
    acr = np.r_[np.full(10, 0.1), np.full(51, 0.5), np.full(10, 0.1), np.full(50, 0.5)]
    # first run lasts 51 steps (> 50): a stall; the second lasts exactly 50: not a stall
    assert rlvitals.stall_spans(acr) == [(10, 60)]
    # sparse logging every 5 steps: 11 logged rows span 51 training steps
    steps = np.arange(0, 200, 5)
    vals = np.where((steps >= 50) & (steps <= 100), 0.6, 0.1)
    assert rlvitals.stall_spans(vals, steps) == [(50, 100)]


def test_series_validation():
    with pytest.raises(ValueError, match="window"):
        rlvitals.windowed_acr([0.1], window=0)
    with pytest.raises(ValueError, match="1-D"):
        rlvitals.acr_volatility(np.zeros((2, 2)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.1, 0.5, math.nan]), min_size=0, max_size=80),
    st.integers(1, 6),
    st.integers(1, 10),
)
def test_stall_spans_match_a_loop(values, stride, min_steps):
    acr = np.array(values, dtype=np.float64)
    steps = np.arange(acr.size) * stride
    want, i = [], 0
    kept = [(int(t), v) for t, v in zip(steps, acr) if not math.isnan(v)]
    while i < len(kept):
        if kept[i][1] <= 0.35:
            i += 1
            continue
        j = i
        while j + 1 < len(kept) and kept[j + 1][1] > 0.35:
            j += 1
        if kept[j][0] - kept[i][0] + 1 > min_steps:
            want.append((kept[i][0], kept[j][0]))
        i = j + 1
    assert rlvitals.stall_spans(acr, steps, min_steps=min_steps) == want


@pytest.mark.parametrize("method", sig.ADVANTAGE_METHODS)
def test_collapsed_groups_get_exact_zero_on_both_backends(method):
    # Found by hypothesis in CI: torch sums six float32 0.3s in another order than numpy, the
    # mean is 1 ulp off, and GRPO turned that round-off into advantages of 3e-4 on torch only.
    r = np.array([0.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3], dtype=np.float32)
    g = np.array([0, 1, 1, 1, 1, 1, 1])
    assert rlvitals.advantages(r, g, method=method).tolist() == [0.0] * 7
    assert (
        rlvitals.advantages(torch.tensor(r), torch.tensor(g), method=method).tolist() == [0.0] * 7
    )
    # Statistics accumulate in float64, so a live group centred on its mean agrees to the bit
    # (in float32 sums, 0.25 among six 0.3s put the two backends 4e-6 apart; second CI find).
    r = np.array([0.0, 0.0, 0.25, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3], dtype=np.float32)
    g = np.array([0, 1, 2, 2, 2, 2, 2, 2, 2])
    a_np = rlvitals.advantages(r, g, method=method)
    a_t = rlvitals.advantages(torch.tensor(r), torch.tensor(g), method=method)
    np.testing.assert_allclose(a_t.numpy(), a_np, rtol=1e-7, atol=1e-7)
    # Rewards within tau of each other count as collapsed for ACR, but a real difference keeps
    # the formula's (tiny) advantages whatever tau is: tau decides ACR only.
    near = np.array([0.5, 0.5 + 1e-9, 1.0, 0.0])
    ids = np.array([0, 0, 1, 1])
    assert rlvitals.advantages(near, ids, method=method)[1] > 0
    assert rlvitals.advantages(near, ids, method=method, tau=0.0)[1] > 0

"""The estimator registry, rlvitals.estimate and the reference estimators (grpo, dr_grpo, rloo).

References are written here from the definitions (DESIGN.md 3.4, TRL's and veRL's published
formulas), one group at a time with numpy, never by calling the code under test.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rlvitals
from rlvitals.estimators import (
    COMMON_METRICS,
    ESTIMATORS,
    EstimatorName,
    UnknownEstimatorError,
    get_estimator,
    register_estimator,
)

BUILTINS = [e.value for e in EstimatorName]


@pytest.fixture
def torch():
    """torch, for the tests that compare with it: imported here, not at the top, so the file
    collects and its numpy tests run where torch is not installed (the estimators need none)."""
    return pytest.importorskip("torch")


# --------------------------------------------------------------------------------------------
# Brute-force references


def ref_grpo(rewards, ids, *, eps=1e-4, ddof=1, scale="group", singleton="zero"):
    """Per-group loop: (r - mean) / (std + eps), NaN rows and lone members 0 (TRL)."""
    r = np.asarray(rewards, dtype=np.float64)
    ids = np.asarray(ids)
    out = np.zeros_like(r)
    finite = r[~np.isnan(r)]
    bstd = np.std(finite, ddof=ddof) if finite.size > ddof else 0.0
    for g in np.unique(ids):
        rows = np.flatnonzero((ids == g) & ~np.isnan(r))
        vals = r[rows]
        if vals.size == 0:
            continue
        if vals.size == 1:
            if singleton == "verl":
                out[rows] = vals / (1 + eps) if scale == "group" else vals
            continue
        centred = vals - vals.mean()
        if scale == "group":
            out[rows] = centred / (np.std(vals, ddof=ddof) + eps)
        elif scale == "batch":
            out[rows] = centred / (bstd + eps)
        else:
            out[rows] = centred
    return out


def ref_rloo(rewards, ids):
    r = np.asarray(rewards, dtype=np.float64)
    out = np.zeros_like(r)
    for g in np.unique(ids):
        rows = np.flatnonzero((np.asarray(ids) == g) & ~np.isnan(r))
        if rows.size < 2:
            continue
        vals = r[rows]
        out[rows] = vals - (vals.sum() - vals) / (rows.size - 1)
    return out


def ref_acr(rewards, ids, r_min=0.0, r_max=1.0):
    """(acr, solve_all, solve_none, flat) by the definition of DESIGN.md 3.2."""
    r = np.asarray(rewards, dtype=np.float64)
    n = col = at_max = at_min = 0
    for g in np.unique(ids):
        vals = r[(np.asarray(ids) == g) & ~np.isnan(r)]
        if vals.size == 0:
            continue
        n += 1
        if vals.size == 1 or np.std(vals, ddof=1) < 1e-9:
            col += 1
            at_max += abs(vals[0] - r_max) < 1e-9
            at_min += abs(vals[0] - r_min) < 1e-9
    return col / n, at_max / n, at_min / n, (col - at_max - at_min) / n


group_steps = st.lists(
    st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.25, math.nan]), min_size=1, max_size=9),
    min_size=1,
    max_size=12,
)


def flatten(groups, *, shuffle_seed=None):
    rewards = np.array([v for g in groups for v in g], dtype=np.float64)
    ids = np.array([i * 7 + 3 for i, g in enumerate(groups) for _ in g])
    if shuffle_seed is not None:
        perm = np.random.default_rng(shuffle_seed).permutation(rewards.size)
        rewards, ids = rewards[perm], ids[perm]
    return rewards, ids


# --------------------------------------------------------------------------------------------
# Registry and the one-call API


def test_registry_holds_every_builtin_with_documented_config():
    assert set(BUILTINS) <= set(ESTIMATORS.names())
    for name in BUILTINS:
        est = get_estimator(name)
        assert est.name == name
        assert dataclasses.is_dataclass(est.config_cls)
        assert est.config_cls.__dataclass_params__.frozen
        doc = est.config_cls.__doc__ or ""
        for f in dataclasses.fields(est.config_cls):
            assert f"{f.name} (" in doc, f"{name}: field {f.name} is not documented"
    assert get_estimator(EstimatorName.AVSPO) is get_estimator("avspo")


def test_unknown_method_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown estimator 'gpro'; valid: .*avspo.*grpo"):
        rlvitals.estimate("gpro", np.ones(2), np.zeros(2, dtype=int))
    with pytest.raises(KeyError):
        get_estimator("nope")
    assert issubclass(UnknownEstimatorError, rlvitals.RlvitalsError)


def test_unknown_config_key_lists_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown config key\(s\) 'epsilon' for 'grpo'; "
        r"valid: eps, tau, ddof",
    ):
        rlvitals.estimate("grpo", np.ones(2), np.zeros(2, dtype=int), epsilon=1e-6)
    with pytest.raises(ValueError, match=r"'eps'.*dr_grpo"):
        rlvitals.estimate("dr_grpo", np.ones(2), np.zeros(2, dtype=int), eps=1e-6)


@pytest.mark.parametrize(
    ("method", "config", "message"),
    [
        ("grpo", {"eps": -1.0}, r"eps must be a finite number in \[0.0, inf\], got -1.0"),
        ("grpo", {"tau": math.nan}, "tau must be a finite number"),
        (
            "grpo",
            {"scale_rewards": "sequence"},
            "scale_rewards must be one of 'group', 'batch', 'none', got 'sequence'",
        ),
        ("grpo", {"ddof": 2}, "ddof must be one of 0, 1, got 2"),
        ("grpo", {"r_min": 1.0, "r_max": 1.0}, "need r_min < r_max"),
        ("grpo", {"singleton": "verl", "scale_rewards": "batch"}, "singleton='verl'"),
        ("rloo", {"tau": -1}, "tau must be"),
    ],
)
def test_config_validation_quotes_value_and_range(method, config, message):
    with pytest.raises(ValueError, match=message):
        rlvitals.estimate(method, np.ones(2), np.zeros(2, dtype=int), **config)


def test_register_twice_raises_and_estimator_checks_config_type():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        pass

    name = "test_only_identity"
    register_estimator(name, Cfg)(lambda r, g, c, s: (r, {}, None))
    try:
        assert get_estimator(name).config_cls is Cfg
        with pytest.raises(ValueError, match="already registered"):
            register_estimator(name, Cfg)(lambda r, g, c, s: (r, {}, None))
        with pytest.raises(TypeError, match="needs a GrpoConfig"):
            get_estimator("grpo")(np.ones(2), np.zeros(2, dtype=int), Cfg())
    finally:  # leave the shared registry as the package built it
        ESTIMATORS._items.pop(name)


@pytest.mark.parametrize("method", BUILTINS)
def test_every_estimator_logs_the_common_metrics_as_floats(method):
    rewards = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0])
    adv, metrics, _ = rlvitals.estimate(method, rewards, np.repeat([0, 1, 2, 3], 2))
    assert adv.shape == rewards.shape
    assert set(COMMON_METRICS) <= set(metrics)
    assert all(type(v) is float for v in metrics.values()), metrics
    assert metrics["acr"] == 0.5
    assert metrics["acr_solve_all"] == 0.25 and metrics["acr_solve_none"] == 0.25
    assert metrics["acr_flat"] == 0.0


# --------------------------------------------------------------------------------------------
# Reference estimators against the definitions


@settings(max_examples=60, deadline=None)
@given(
    groups=group_steps,
    seed=st.integers(0, 3),
    ddof=st.sampled_from([0, 1]),
    scale=st.sampled_from(["group", "batch", "none"]),
)
def test_grpo_matches_per_group_reference(groups, seed, ddof, scale):
    rewards, ids = flatten(groups, shuffle_seed=seed)
    adv, metrics, state = rlvitals.estimate("grpo", rewards, ids, ddof=ddof, scale_rewards=scale)
    np.testing.assert_allclose(
        adv, ref_grpo(rewards, ids, ddof=ddof, scale=scale), rtol=1e-12, atol=1e-12
    )
    assert state is None
    if np.isnan(rewards).all():
        assert math.isnan(metrics["acr"])
        return
    acr, s_all, s_none, flat = ref_acr(rewards, ids)
    assert metrics["acr"] == pytest.approx(acr)
    assert (metrics["acr_solve_all"], metrics["acr_solve_none"], metrics["acr_flat"]) == (
        pytest.approx(s_all),
        pytest.approx(s_none),
        pytest.approx(flat),
    )
    if scale == "group":
        # Collapsed groups (and only they) keep all-zero advantages.
        assert metrics["acr_residual"] == pytest.approx(acr)


@settings(max_examples=40, deadline=None)
@given(groups=group_steps, seed=st.integers(0, 3))
def test_dr_grpo_and_rloo_match_references(groups, seed):
    rewards, ids = flatten(groups, shuffle_seed=seed)
    adv, _, _ = rlvitals.estimate("dr_grpo", rewards, ids)
    np.testing.assert_allclose(adv, ref_grpo(rewards, ids, scale="none"), atol=1e-12)
    adv, _, _ = rlvitals.estimate("rloo", rewards, ids)
    np.testing.assert_allclose(adv, ref_rloo(rewards, ids), atol=1e-12)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_grpo_matches_trl_formula(scale, torch):
    """TRL 1.x GRPOTrainer: (r - nanmean) / (nanstd + 1e-4), then nan_to_num, in float32.

    TRL's ``nanstd`` is re-stated here (importing trl costs tens of seconds); the real TRL step
    comparison lives in tests/test_trl_integration.py.
    """

    def nanstd(x, dim=None):  # trl.trainer.utils.nanstd: Bessel-corrected, NaN-aware
        mean = torch.nanmean(x, dim=dim, keepdim=True)
        var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
        count = torch.sum(~torch.isnan(x), dim=dim, keepdim=True)
        var = var * torch.where(count > 1, count / (count - 1), torch.full_like(var, math.nan))
        std = torch.sqrt(var)
        return std.squeeze(dim) if dim is not None else std.squeeze()

    g = 8
    gen = torch.Generator().manual_seed(0)
    rewards = (torch.rand(64 * g, generator=gen) < 0.3).float()
    rewards[:g] = 1.0  # one solve-all group
    rewards[5 * g + 2] = math.nan  # an unscorable completion
    grouped = rewards.view(-1, g)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(g)
    if scale == "batch":
        std = nanstd(rewards).expand_as(rewards)
    else:
        std = nanstd(grouped, dim=1).repeat_interleave(g)
    trl_adv = rewards - mean
    if scale != "none":
        trl_adv = trl_adv / (std + 1e-4)
    trl_adv = torch.nan_to_num(trl_adv, nan=0.0)
    method = "dr_grpo" if scale == "none" else "grpo"
    config = {} if scale == "none" else {"scale_rewards": scale}
    ids = torch.arange(64).repeat_interleave(g)
    adv, _, _ = rlvitals.estimate(method, rewards, ids, **config)
    assert adv.dtype == torch.float32
    torch.testing.assert_close(adv, trl_adv, rtol=1e-6, atol=1e-6)


def test_grpo_verl_mode_matches_verl_formula(torch):
    """veRL compute_grpo_outcome_advantage: torch.std, epsilon 1e-6, lone member: mean 0 std 1."""
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.7, 0.7, 0.3, 0.6])
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 3])
    expect = torch.empty_like(rewards)
    for g in ids.unique():
        rows = ids == g
        vals = rewards[rows]
        if vals.numel() == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = vals.mean(), vals.std()
        expect[rows] = (vals - mean) / (std + 1e-6)
    adv, _, _ = rlvitals.estimate("grpo", rewards, ids, eps=1e-6, singleton="verl")
    torch.testing.assert_close(adv, expect, rtol=1e-6, atol=1e-6)
    adv, _, _ = rlvitals.estimate("dr_grpo", rewards, ids, singleton="verl")
    assert adv[5].item() == pytest.approx(0.3) and adv[6].item() == pytest.approx(0.6)


# --------------------------------------------------------------------------------------------
# Backends, dtypes, awkward input


@pytest.mark.parametrize("method", BUILTINS)
def test_numpy_and_torch_agree_and_keep_dtype(method, torch):
    rng = np.random.default_rng(1)
    rewards = (rng.random(40 * 6) < 0.2).astype(np.float64)
    rewards[3] = math.nan
    ids = np.repeat(np.arange(40), 6)
    state = {"tau_adapt": 0.1} if method == "avspo" else None
    a_np, m_np, _ = rlvitals.estimate(method, rewards, ids, state=state)
    a_t, m_t, _ = rlvitals.estimate(
        method, torch.from_numpy(rewards), torch.from_numpy(ids), state=state
    )
    assert isinstance(a_t, torch.Tensor) and a_t.dtype == torch.float64
    np.testing.assert_allclose(a_t.numpy(), a_np, rtol=1e-12, atol=1e-12)
    assert m_np.keys() == m_t.keys()
    for k in m_np:
        assert m_np[k] == pytest.approx(m_t[k], rel=1e-9, nan_ok=True), k
    # float32 stays float32 and agrees to float32 precision.
    a32, _, _ = rlvitals.estimate(method, rewards.astype(np.float32), ids, state=state)
    t32, _, _ = rlvitals.estimate(
        method, torch.from_numpy(rewards.astype(np.float32)), torch.from_numpy(ids), state=state
    )
    assert a32.dtype == np.float32 and t32.dtype == torch.float32
    np.testing.assert_allclose(a32, a_np, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(t32.numpy(), a_np, rtol=1e-5, atol=1e-5)


def test_inputs_are_not_modified_and_ids_may_be_strings_or_unsorted():
    rewards = np.array([1.0, 0.0, math.nan, 1.0, 1.0, 0.0])
    ids = np.array(["b", "a", "b", "b", "a", "c"])
    before = rewards.copy()
    adv, _, _ = rlvitals.estimate("grpo", rewards, ids)
    np.testing.assert_array_equal(rewards, before)
    np.testing.assert_allclose(adv, ref_grpo(rewards, ids), atol=1e-12)
    assert adv[2] == 0.0  # NaN reward -> 0
    assert adv[5] == 0.0  # lone member -> 0


def test_integer_rewards_and_all_nan_step():
    adv, m, _ = rlvitals.estimate("grpo", np.array([1, 0, 1, 1]), np.array([0, 0, 1, 1]))
    assert adv.dtype == np.float64 and m["acr"] == 0.5
    adv, m, _ = rlvitals.estimate("grpo", np.full(4, math.nan), np.array([0, 0, 1, 1]))
    assert adv.tolist() == [0.0] * 4
    assert math.isnan(m["acr"]) and math.isnan(m["adv_std"])


@pytest.mark.parametrize(
    ("rewards", "ids", "message"),
    [
        (np.ones((2, 2)), np.zeros(4, dtype=int), "1-D"),
        (np.ones(3), np.zeros(2, dtype=int), "differ in length"),
        (np.array([1.0, math.inf]), np.zeros(2, dtype=int), "inf"),
        (np.array([]), np.array([], dtype=int), "empty"),
        (np.array(["x", "y"]), np.zeros(2, dtype=int), "numeric"),
    ],
)
def test_bad_input_is_a_value_error(rewards, ids, message):
    with pytest.raises(ValueError, match=message):
        rlvitals.estimate("grpo", rewards, ids)


def test_eps_zero_gives_zero_not_nan_in_collapsed_groups():
    adv, _, _ = rlvitals.estimate(
        "grpo", np.array([1.0, 1.0, 1.0, 0.0]), np.array([0, 0, 1, 1]), eps=0.0
    )
    assert not np.isnan(adv).any()
    np.testing.assert_allclose(adv, [0, 0, 1 / math.sqrt(2), -1 / math.sqrt(2)])

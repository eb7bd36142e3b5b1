"""AVSPO (He et al. 2026; DESIGN.md 3.5) and the released variant: algebra, trigger, threshold.

Expected values are worked out by hand or by brute force (concatenate the virtual rewards to the
group and take numpy's mean/std), never by calling the code under test.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlvitals
from rlvitals.estimators import (
    AvspoState,
    advantages_with_virtual,
    stratified_k,
    stratified_virtual_rewards,
)

G = 8


def brute(real, virtual, eps=1e-4, ddof=1):
    """Advantages of the real rewards against mean/std of real + virtual (numpy, float64)."""
    both = np.concatenate([np.asarray(real, float), np.asarray(virtual, float)])
    return (np.asarray(real, float) - both.mean()) / (both.std(ddof=ddof) + eps)


def step(groups):
    rewards = np.concatenate([np.asarray(g, dtype=np.float64) for g in groups])
    ids = np.concatenate([np.full(len(g), i) for i, g in enumerate(groups)])
    return rewards, ids


# Ten groups of 8: three solve-all, two solve-none, one flat at 0.5, four mixed -> ACR 0.6.
MIXED = [
    [1, 0, 0, 1, 0, 0, 0, 0],
    [1, 1, 1, 0, 1, 1, 0, 1],
    [0, 1, 0, 0, 0, 0, 0, 0],
    [1, 0, 1, 0, 1, 0, 1, 0],
]
COLLAPSED = [[1.0] * G, [1.0] * G, [1.0] * G, [0.0] * G, [0.0] * G, [0.5] * G]
STEP = step(COLLAPSED + MIXED)


# --------------------------------------------------------------------------------------------
# Algebra


@pytest.mark.parametrize(("c", "sign"), [(1.0, 1.0), (0.0, -1.0)])
def test_homogeneous_group_of_8_plus_one_virtual_gives_plus_minus_one_third(c, sign):
    rewards = np.full(G, c)
    ids = np.zeros(G, dtype=int)
    adv, metrics, state = rlvitals.estimate("avspo_released", rewards, ids, eps=0.0)
    np.testing.assert_allclose(adv, np.full(G, sign / 3), rtol=1e-12)
    assert state is None and metrics["avspo_groups_augmented"] == 1.0
    # "whatever v is": any single virtual value on the other side gives the same magnitude.
    for v in (0.3, -2.0, 7.5):
        adv = advantages_with_virtual(rewards, ids, [v], eps=0.0)
        np.testing.assert_allclose(adv, np.full(G, np.sign(c - v) / 3), rtol=1e-12)


@settings(max_examples=80, deadline=None)
@given(
    c=st.sampled_from([0.0, 1.0, 0.5, -0.75, 3.0]),
    v=st.sampled_from([0.0, 1.0, 0.2, -1.0]),
    g=st.integers(1, 16),
    k=st.integers(1, 8),
)
def test_general_formula_for_k_copies_of_one_virtual_value(c, v, g, k):
    if c == v:
        return
    n = g + k
    adv = advantages_with_virtual(np.full(g, c), np.zeros(g, dtype=int), [v] * k, eps=0.0)
    expected = np.sign(c - v) * math.sqrt(k * (n - 1) / (g * n))
    np.testing.assert_allclose(adv, np.full(g, expected), rtol=1e-10)


@settings(max_examples=60, deadline=None)
@given(
    real=st.lists(st.sampled_from([0.0, 0.25, 1.0, 2.0]), min_size=1, max_size=10),
    virtual=st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=6),
    ddof=st.sampled_from([0, 1]),
)
def test_augmented_statistics_equal_brute_force_concatenation(real, virtual, ddof):
    both = np.concatenate([real, virtual])
    if len(both) <= ddof:
        return
    adv = advantages_with_virtual(
        np.array(real), np.zeros(len(real), dtype=int), virtual, augment=[True], ddof=ddof
    )
    np.testing.assert_allclose(adv, brute(real, virtual, ddof=ddof), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("acr", "k"),
    # K = max(1, min(8, ceil(8 sqrt(acr)))), by hand: 8*sqrt(.1)=2.53, 8*sqrt(.6)=6.20, ...
    [(0.0, 1), (0.01, 1), (0.1, 3), (0.25, 4), (0.5, 6), (0.6, 7), (0.75, 7), (0.9, 8), (1.0, 8)],
)
def test_stratified_k(acr, k):
    assert stratified_k(G, acr) == k


def test_stratified_k_other_sizes_and_alpha():
    assert stratified_k(16, 0.25) == 8  # 16 * 0.5 exactly: not rounded up by round-off
    assert stratified_k(4, 0.49) == 3  # 4 * 0.7 = 2.8
    assert stratified_k(2, 1.0) == 2
    assert stratified_k(8, 0.5, alpha=1.0) == 4
    with pytest.raises(ValueError, match="acr must be"):
        stratified_k(8, 1.5)


def test_stratified_virtual_rewards():
    np.testing.assert_allclose(stratified_virtual_rewards(1), [1.0])
    np.testing.assert_allclose(stratified_virtual_rewards(4), [1.0, 0.75, 0.5, 0.25])
    np.testing.assert_allclose(
        stratified_virtual_rewards(7), [7 / 7, 6 / 7, 5 / 7, 4 / 7, 3 / 7, 2 / 7, 1 / 7]
    )
    np.testing.assert_allclose(stratified_virtual_rewards(4, -1.0, 1.0), [1.0, 0.5, 0.0, -0.5])


# --------------------------------------------------------------------------------------------
# One AVSPO step


def test_triggered_step_augments_collapsed_groups_with_stratified_rewards():
    rewards, ids = STEP
    # by default the flat [0.5] group (partial credit) is left alone: five groups augmented
    assert rlvitals.estimate("avspo", rewards, ids)[1]["avspo_groups_augmented"] == 5.0
    adv, m, state = rlvitals.estimate("avspo", rewards, ids, flat="stratify")
    assert m["acr"] == pytest.approx(0.6)
    assert m["avspo_acr_gate"] == pytest.approx(0.6) and m["avspo_windowed"] == 0.0
    assert m["avspo_triggered"] == 1.0 and m["tau_adapt"] == 0.5
    assert m["avspo_k"] == 7.0 and m["avspo_groups_augmented"] == 6.0
    virtual = [7 / 7, 6 / 7, 5 / 7, 4 / 7, 3 / 7, 2 / 7, 1 / 7]
    for j, group in enumerate(COLLAPSED):
        np.testing.assert_allclose(adv[ids == j], brute(group, virtual), rtol=1e-10)
    assert m["acr_residual"] == 0.0 and m["adv_zero_frac"] == 0.0
    assert isinstance(state, AvspoState) and state.step == 1


def test_non_collapsed_groups_are_bit_for_bit_grpo():
    rewards, ids = STEP
    for backend in ("numpy", "torch"):
        r = torch.from_numpy(rewards).float() if backend == "torch" else rewards
        i = torch.from_numpy(ids) if backend == "torch" else ids
        adv, m, _ = rlvitals.estimate("avspo", r, i)
        ref, _, _ = rlvitals.estimate("grpo", r, i)
        assert m["avspo_triggered"] == 1.0
        live = ids >= len(COLLAPSED)
        a, b = (adv.numpy(), ref.numpy()) if backend == "torch" else (adv, ref)
        assert np.array_equal(a[live], b[live])
        assert not np.array_equal(a[~live], b[~live])


@pytest.mark.parametrize("tau_adapt", [0.6, 0.75])
def test_no_augmentation_when_acr_does_not_exceed_tau_adapt(tau_adapt):
    rewards, ids = STEP  # ACR 0.6: equal to the threshold does not trigger
    adv, m, _ = rlvitals.estimate("avspo", rewards, ids, state={"tau_adapt": tau_adapt})
    ref, _, _ = rlvitals.estimate("grpo", rewards, ids)
    assert m["avspo_triggered"] == 0.0 and m["avspo_groups_augmented"] == 0.0
    assert m["avspo_k"] == 0.0
    assert np.array_equal(adv, ref)
    assert m["acr_residual"] == pytest.approx(0.6)


def test_virtual_samples_never_appear_in_the_output():
    """Output is (n,), one per real row, and follows the rows under any permutation."""
    rewards, ids = STEP
    adv, _, _ = rlvitals.estimate("avspo", rewards, ids)
    assert adv.shape == rewards.shape
    perm = np.random.default_rng(0).permutation(rewards.size)
    adv_p, _, _ = rlvitals.estimate("avspo", rewards[perm], ids[perm])
    np.testing.assert_allclose(adv_p, adv[perm], rtol=1e-12)


def test_ragged_groups_get_k_from_their_own_size_and_nan_rows_get_zero():
    groups = [[1.0] * 4, [0.0] * 8, [1.0, math.nan, 1.0], [1.0, 0.0, 1.0, 0.0]]
    rewards, ids = step(groups)  # ACR 0.75 with 4 groups: windowed (first step -> 0.75)
    adv, m, _ = rlvitals.estimate("avspo", rewards, ids)
    assert m["avspo_windowed"] == 1.0 and m["avspo_triggered"] == 1.0
    sq = math.sqrt(0.75)
    k4, k8, k2 = math.ceil(4 * sq), math.ceil(8 * sq), math.ceil(2 * sq)  # 4, 7, 2
    np.testing.assert_allclose(adv[ids == 0], brute([1.0] * 4, stratified_virtual_rewards(k4)))
    np.testing.assert_allclose(adv[ids == 1], brute([0.0] * 8, stratified_virtual_rewards(k8)))
    third = adv[ids == 2]
    assert third[1] == 0.0
    np.testing.assert_allclose(third[[0, 2]], brute([1.0, 1.0], stratified_virtual_rewards(k2)))


def test_reward_range_other_than_zero_one():
    rewards, ids = step([[-1.0] * 4, [-1.0] * 4, [1.0, -1.0, 1.0, -1.0]])
    adv, m, _ = rlvitals.estimate(
        "avspo", rewards, ids, r_min=-1.0, r_max=1.0, state={"tau_adapt": 0.5}
    )
    k = math.ceil(4 * math.sqrt(2 / 3))  # 4
    np.testing.assert_allclose(adv[ids == 0], brute([-1.0] * 4, [1.0, 0.5, 0.0, -0.5]))
    assert k == 4 and m["acr_solve_none"] == pytest.approx(2 / 3)


def test_float32_torch_and_numpy_agree():
    rewards, ids = STEP
    a64, _, _ = rlvitals.estimate("avspo", rewards, ids)
    t32, m, _ = rlvitals.estimate("avspo", torch.from_numpy(rewards).float(), torch.from_numpy(ids))
    n32, _, _ = rlvitals.estimate("avspo", rewards.astype(np.float32), ids)
    assert t32.dtype == torch.float32 and n32.dtype == np.float32
    np.testing.assert_allclose(t32.numpy(), a64, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(n32, a64, rtol=2e-6, atol=2e-6)
    assert m["avspo_k"] == 7.0


# --------------------------------------------------------------------------------------------
# The adaptive threshold and the windowed gate


@pytest.mark.parametrize(("delta_j", "expected"), [(0.2, 0.501), (-0.2, 0.499), (0.0, 0.5)])
def test_tau_adapt_moves_toward_acr_when_j_rises_and_away_when_it_falls(delta_j, expected):
    rewards, ids = STEP  # gate 0.6, tau 0.5: toward = +0.01 * 0.1
    _, m, state = rlvitals.estimate("avspo", rewards, ids, j_signal="explicit", delta_j=delta_j)
    assert m["avspo_delta_j"] == delta_j
    assert state.tau_adapt == pytest.approx(expected, abs=1e-12)


@settings(max_examples=30, deadline=None)
@given(
    plan=st.lists(
        st.tuples(st.integers(0, 10), st.floats(-1, 1, allow_nan=False)), min_size=1, max_size=40
    ),
    tau0=st.floats(0.1, 0.9),
    eta=st.sampled_from([0.01, 0.5, 1.0]),
)
def test_tau_adapt_stays_in_bounds(plan, tau0, eta):
    state = {"tau_adapt": tau0}
    for n_collapsed, delta_j in plan:
        groups = [[1.0] * 4] * n_collapsed + [[1.0, 0.0, 0.0, 0.0]] * (10 - n_collapsed)
        rewards, ids = step(groups)
        _, m, state = rlvitals.estimate(
            "avspo", rewards, ids, state=state, eta=eta, j_signal="explicit", delta_j=delta_j
        )
        assert 0.1 <= state.tau_adapt <= 0.9
        assert m["avspo_triggered"] == float(n_collapsed / 10 > m["tau_adapt"])


def test_tau_adapt_driven_by_reward_ema():
    state = None
    taus = []
    for i in range(6):  # mean reward rises every step; ACR stays 0.6 > tau
        groups = COLLAPSED[:3] + [[0.0] * G] * 3 + [[1.0] * (i + 1) + [0.0] * (G - i - 1)] * 4
        rewards, ids = step(groups)
        _, m, state = rlvitals.estimate("avspo", rewards, ids, state=state)
        taus.append(state.tau_adapt)
        if i == 0:
            assert m["avspo_delta_j"] == 0.0 and taus[0] == 0.5
        else:
            assert m["avspo_delta_j"] > 0
    assert all(b > a for a, b in itertools.pairwise(taus))  # toward ACR = 0.6


def test_windowed_gate_with_one_group_per_step():
    # One prompt per step (the paper's setting): ACR_t is 0 or 1; the gate is the window mean.
    collapsed, mixed = [1.0] * 4, [1.0, 0.0, 0.0, 0.0]
    seq = [collapsed, mixed, mixed, collapsed, collapsed]
    gates = [1.0, 1 / 2, 1 / 3, 2 / 4, 3 / 5]
    state = None
    for group, gate in zip(seq, gates):
        rewards, ids = step([group])
        _, m, state = rlvitals.estimate("avspo", rewards, ids, state=state, acr_window=25)
        assert m["avspo_windowed"] == 1.0
        assert m["avspo_acr_gate"] == pytest.approx(gate)
        collapsed_now = group is collapsed
        assert m["avspo_triggered"] == float(gate > m["tau_adapt"])
        assert m["avspo_groups_augmented"] == float(collapsed_now and gate > m["tau_adapt"])
    # A window of 2 forgets older steps; "never" gates on the step's own ACR.
    _, m, _ = rlvitals.estimate("avspo", *step([collapsed]), state=state, acr_window=2)
    assert m["avspo_acr_gate"] == pytest.approx(1.0)
    _, m, _ = rlvitals.estimate("avspo", *step([mixed]), state=state, windowed_gate="never")
    assert m["avspo_acr_gate"] == 0.0 and m["avspo_windowed"] == 0.0


# --------------------------------------------------------------------------------------------
# State


def test_state_round_trips_through_json_and_resumes_identically():
    rng = np.random.default_rng(3)
    steps = [(rng.random(12 * 4) < p).astype(float) for p in (0.1, 0.05, 0.5, 0.9, 0.95)]
    ids = np.repeat(np.arange(12), 4)
    state = None
    for r in steps[:3]:
        _, _, state = rlvitals.estimate("avspo", r, ids, state=state)
    restored = AvspoState.from_dict(json.loads(json.dumps(state.to_dict())))
    assert restored == state
    a, b = state, restored
    for r in steps[3:]:
        adv_a, m_a, a = rlvitals.estimate("avspo", r, ids, state=a)
        adv_b, m_b, b = rlvitals.estimate("avspo", r, ids, state=b.to_dict())
        assert np.array_equal(adv_a, adv_b) and m_a == m_b
    assert a == b and a.step == 5


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"tau_adapt": 2.0}, "tau_adapt must be"),
        ({"taus": 0.3}, "unknown AVSPO state key"),
        ({"acr_history": "0.5"}, "acr_history must be a list"),
        ({"step": -1}, "step must be an integer"),
    ],
)
def test_malformed_state_is_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        rlvitals.estimate("avspo", *STEP, state=bad)
    with pytest.raises(TypeError, match="AvspoState"):
        rlvitals.estimate("avspo", *STEP, state=[0.5])


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"delta_j": 0.1}, "only used with j_signal='explicit'"),
        ({"j_signal": "explicit"}, "needs delta_j"),
        ({"alpha": 0.0}, r"alpha must be a finite number in \(0.0, inf\]"),
        ({"tau_adapt0": 0.95}, "tau_adapt0 must be"),
        ({"windowed_gate": "sometimes"}, "windowed_gate must be one of"),
        ({"acr_window": 0}, "acr_window must be an integer >= 1"),
        ({"tau_adapt": 0.5}, r"unknown config key\(s\) 'tau_adapt'"),
    ],
)
def test_avspo_config_errors(config, message):
    with pytest.raises(ValueError, match=message):
        rlvitals.estimate("avspo", *STEP, **config)


def test_step_without_scorable_group_changes_nothing():
    _, m, state = rlvitals.estimate(
        "avspo",
        np.full(4, math.nan),
        np.array([0, 0, 1, 1]),
        state={"tau_adapt": 0.3, "acr_history": [0.5]},
    )
    assert state.tau_adapt == 0.3 and state.acr_history == (0.5,) and state.step == 1
    assert m["avspo_triggered"] == 0.0 and math.isnan(m["acr"])


# --------------------------------------------------------------------------------------------
# The released variant


def test_released_variant_has_no_gate_and_uses_the_complement():
    rewards, ids = step([[1.0] * 4, [0.0, 1.0, 0.0, 0.0], [0.25] * 4, [0.5] * 4])
    adv, m, _ = rlvitals.estimate("avspo_released", rewards, ids)
    np.testing.assert_allclose(adv[ids == 0], brute([1.0] * 4, [0.0]))
    np.testing.assert_allclose(adv[ids == 2], brute([0.25] * 4, [0.75]))
    assert np.all(adv[ids == 3] == 0.0)  # 1 - 0.5 = 0.5: the complement changes nothing
    ref, _, _ = rlvitals.estimate("grpo", rewards, ids)
    assert np.array_equal(adv[ids == 1], ref[ids == 1])
    assert m["acr"] == 0.75 and m["acr_residual"] == 0.25
    assert m["avspo_groups_augmented"] == 3.0
    adv, _, _ = rlvitals.estimate(
        "avspo_released", np.full(4, -1.0), np.zeros(4, dtype=int), r_min=-1.0, r_max=1.0
    )
    np.testing.assert_allclose(adv, brute([-1.0] * 4, [1.0]))


def _flat_group_advantage(n_collapsed_others: int, flat: str) -> float:
    """Advantage AVSPO gives a group stuck at 0.6 in a step of 8 groups of G=8 (one live group,
    the others all failed), with the gate forced open: more collapsed groups mean a larger K."""
    groups = [[0.6] * 8, [1, 0] * 4] + [[0.0] * 8] * n_collapsed_others
    groups += [[1, 0] * 4] * (6 - n_collapsed_others)
    r = np.array([v for grp in groups for v in grp], dtype=np.float64)
    g = np.repeat(np.arange(len(groups)), 8)
    adv, metrics, _ = rlvitals.estimate("avspo", r, g, tau_adapt0=0.1, flat=flat)
    return float(adv[0]), metrics["avspo_k"]


def test_partial_credit_group_never_gets_a_k_dependent_direction():
    """Issue 10: a group stuck at 0.6 got +0.089 with K = 8 and -0.049 with K = 4: the mean of
    the stratified virtual rewards, (K+1)/(2K), crosses 0.6 as K changes. By default (flat=
    "skip") only groups at the bounds are augmented; a flat group keeps GRPO's zero."""
    ks, signs = set(), set()
    for n in range(0, 7):
        a_skip, k = _flat_group_advantage(n, "skip")
        assert a_skip == 0.0
        a_paper, _ = _flat_group_advantage(n, "stratify")
        ks.add(k)
        signs.add(np.sign(round(a_paper, 12)))
    assert len(ks) > 1 and {-1.0, 1.0} <= signs  # the literal formula does flip: why we skip
    # binary groups are all at the bounds: "skip" augments every collapsed one, as the paper
    r = np.array([1.0] * 8 + [0.0] * 8 + [1, 0] * 4)
    g = np.repeat([0, 1, 2], 8)
    for flat in ("skip", "stratify"):
        adv, m, _ = rlvitals.estimate("avspo", r, g, tau_adapt0=0.1, flat=flat)
        assert m["avspo_groups_augmented"] == 2 and adv[0] > 0 > adv[8]

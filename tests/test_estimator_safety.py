"""No estimator puts NaN (or a silent zero) into a model (issue 21, item 2).

Rewards outside a ranged estimator's ``[r_min, r_max]`` are an error naming the values and the
setting; half precision is widened before any statistic; float32 overflow is computed in float64;
a non-finite advantage is never returned; all of it under any warnings filter.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals import estimate
from rlvitals.estimators import (
    ESTIMATORS,
    HistoryState,
    NonFiniteAdvantageError,
    RewardRangeError,
    get_estimator,
)

RANGED = ["avspo", "avspo_released", "history_baseline"]
BUILT_IN = ["grpo", "dr_grpo", "rloo", "zero_var_filter", *RANGED]


def test_the_ranged_estimators_are_declared():
    assert sorted(n for n in BUILT_IN if get_estimator(n).ranged) == sorted(RANGED)


@pytest.mark.parametrize("method", RANGED)
def test_two_summed_binary_rewards_are_refused_by_name(method):
    r = np.array([2.0] * 4 + [0.0, 1.0, 2.0, 1.0])
    with pytest.raises(RewardRangeError) as err:
        estimate(method, r, np.repeat([0, 1], 4))
    text = str(err.value)
    assert f"{method}: 5 reward(s) outside [r_min, r_max] = [0, 1]: 2 (min 0, max 2)" in text
    assert "'r_max': 2" in text and "max 2" in text


def test_history_baseline_state_is_untouched_by_a_refused_step_and_later_steps_are_finite():
    ids = np.repeat([0, 1], 4)
    good = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    _, _, state = estimate("history_baseline", good, ids)
    before = state.to_dict()
    with pytest.raises(RewardRangeError):
        estimate("history_baseline", np.full(8, 2.0), ids, state=state)
    assert state.to_dict() == before and all(a > 0 and b > 0 for a, b in state.counts.values())
    adv, _, _ = estimate("history_baseline", good, ids, state=state)
    assert np.isfinite(adv).all()
    # declared, the same rewards train: every pseudo-count stays positive
    adv, _, new = estimate("history_baseline", np.full(8, 2.0), ids, state=state, r_max=2.0)
    assert np.isfinite(adv).all() and (adv > 0).all()
    assert all(a > 0 and b > 0 for a, b in HistoryState.from_dict(new.to_dict()).counts.values())


def test_avspo_no_longer_pushes_out_of_range_groups_uniformly():
    """Before: a group all at 2 got a uniform +0.447 from the virtual rewards of [0, 1]."""
    r = np.array([2.0] * 8 + [0.0, 1.0] * 4)
    with pytest.raises(RewardRangeError):
        estimate("avspo_released", r, np.repeat([0, 1], 8))
    adv, _, _ = estimate("avspo_released", r, np.repeat([0, 1], 8), r_max=2.0)
    assert np.allclose(adv[:8], adv[0]) and adv[0] > 0  # all at the top: pushed up, as designed


@pytest.mark.parametrize("method", BUILT_IN)
def test_nan_rewards_pass_the_range_check(method):
    r = np.array([1.0, np.nan, 0.0, 1.0, 0.0, 0.0, np.nan, 0.0])
    adv, _, _ = estimate(method, r, np.repeat([0, 1], 4))
    assert np.isfinite(adv).all() and adv[1] == 0 and adv[6] == 0


def test_float16_rewards_with_a_wide_spread_are_not_zeroed():
    torch = pytest.importorskip("torch")  # installed in CI; torch float16 is what TRL hands over
    r = torch.tensor([0.0, 300.0, 0.0, 300.0, 1.0, 1.0, 1.0, 1.0], dtype=torch.float16)
    ids = torch.repeat_interleave(torch.arange(2), 4)
    adv, _, _ = estimate("grpo", r, ids)
    assert adv.dtype == torch.float16
    ref, _, _ = estimate("grpo", r.float(), ids)
    torch.testing.assert_close(adv.float(), ref, atol=1e-3, rtol=1e-3)
    assert float(adv[1]) > 0.8
    n16 = np.array([0.0, 300.0, 0.0, 300.0], dtype=np.float16)
    adv16, _, _ = estimate("grpo", n16, np.zeros(4, dtype=int))
    assert adv16.dtype == np.float16 and abs(float(adv16[1]) - 0.866) < 1e-3


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_float32_rewards_near_the_float32_limit_are_computed_in_float64(backend):
    r = np.array([3e38, -3e38, 3e38, -3e38], dtype=np.float32)
    ids = np.zeros(4, dtype=np.int64)
    if backend == "torch":
        torch = pytest.importorskip("torch")
        r, ids = torch.from_numpy(r), torch.from_numpy(ids)
    adv, metrics, _ = estimate("grpo", r, ids)
    assert adv.dtype == r.dtype
    assert np.allclose(np.asarray(adv).astype(float), [0.866, -0.866, 0.866, -0.866], atol=1e-3)
    assert metrics["acr"] == 0.0


def test_advantages_that_overflow_their_dtype_raise_instead_of_returning_inf():
    r = np.array([3e38, np.nan, 3e38, -3e38], dtype=np.float32)
    with pytest.raises(NonFiniteAdvantageError, match="rloo: advantages are not finite"):
        estimate("rloo", r, np.zeros(4, dtype=int))


def test_an_estimator_that_makes_nan_never_returns_it():
    from rlvitals.estimators import Estimator

    def broken(rewards, group_ids, config, state):
        return rewards * np.nan, {}, None

    est = Estimator("broken", get_estimator("grpo").config_cls, broken)
    with pytest.raises(NonFiniteAdvantageError, match="broken"):
        est(np.ones(4), np.zeros(4, dtype=int))


@pytest.mark.parametrize("filter_", ["error", "ignore", "default"])
def test_the_same_behaviour_under_any_warnings_filter(filter_):
    r32 = np.array([3e38, -3e38, 3e38, -3e38], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter(filter_)
        np.testing.assert_allclose(
            estimate("grpo", r32, np.zeros(4, dtype=int))[0][:2], [0.866, -0.866], atol=1e-3
        )
        with pytest.raises(RewardRangeError):
            estimate("history_baseline", np.full(4, 2.0), np.zeros(4, dtype=int))
        with pytest.raises(NonFiniteAdvantageError):
            estimate(
                "rloo",
                np.array([3e38, np.nan, 3e38, -3e38], dtype=np.float32),
                np.zeros(4, dtype=int),
            )


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(ESTIMATORS.names())),
    st.integers(1, 6),
    st.integers(1, 8),
    st.sampled_from([np.float16, np.float32, np.float64]),
    st.lists(
        st.one_of(
            st.sampled_from([0.0, 1.0, np.nan]),
            st.floats(-6e4, 6e4, allow_nan=False, allow_infinity=False, width=16),
            st.floats(allow_nan=False, allow_infinity=False, width=32),
        ),
        min_size=1,
        max_size=5,
    ),
    st.randoms(use_true_random=False),
)
def test_every_estimator_returns_finite_advantages_or_a_named_error(
    method, k, g, dtype, values, rnd
):
    r = np.array([rnd.choice(values) for _ in range(k * g)], dtype=np.float64)
    with np.errstate(over="ignore"):
        r = r.astype(dtype)
    if not np.isfinite(r[~np.isnan(r)]).all():  # inf after the cast: refused by validation
        return
    try:
        adv, _, _ = estimate(method, r, np.repeat(np.arange(k), g))
    except (RewardRangeError, NonFiniteAdvantageError):
        return
    assert adv.dtype == r.dtype and np.isfinite(adv).all()


@pytest.mark.parametrize("method", BUILT_IN)
def test_an_unscorable_group_is_the_same_under_warnings_as_errors(method):
    """An all-NaN group next to collapsed ones: AVSPO's masked lanes divided by zero and, under
    -W error, that RuntimeWarning was an exception (found by the CI's property test)."""
    r = np.array([np.nan] * 4 + [1.0] * 4 + [0.0, 1.0, 0.0, 1.0])
    ids = np.repeat([0, 1, 2], 4)
    expected, _, _ = estimate(
        method, r, ids, state={"tau_adapt": 0.1} if method == "avspo" else None
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, _, _ = estimate(
            method, r, ids, state={"tau_adapt": 0.1} if method == "avspo" else None
        )
    assert np.isfinite(got).all() and np.array_equal(got, expected)

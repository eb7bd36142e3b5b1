"""The plain-Python path of small dense steps (rlvitals.signal._small) against the numpy path.

The estimators take the plain-Python path for dense numpy steps of up to ``SMALL_MAX`` rows;
every result must be the numpy path's to the bit: advantages (bytes, dtype), metrics and state.
The numpy path is forced by setting ``SMALL_MAX`` to 0. Its own correctness is tested against
independent references in test_signal.py, test_estimators.py and test_avspo.py.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvitals_tests_ranges import covering  # loaded by conftest.py

import rlvitals
from rlvitals.estimators import AvspoState
from rlvitals.signal import _small
from rlvitals.signal._small import pairwise_sum, r32, small_step

# --------------------------------------------------------------------------------------------
# Helpers


def same(a, b) -> bool:
    """Bit-for-bit equality of estimator outputs (arrays by bytes, floats by repr)."""
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, AvspoState):
        return same(a.to_dict(), b.to_dict())
    return type(a) is type(b) and repr(a) == repr(b)


def run(method, rewards, ids, steps=1, state=None, **config):
    """``steps`` consecutive calls of ``method`` (state carried over)."""
    config = covering(method, rewards, config)
    out = []
    for _ in range(steps):
        adv, metrics, state = rlvitals.estimate(method, rewards, ids, state=state, **config)
        out.append((adv, metrics, state))
    return out


def both_paths(monkeypatch, method, rewards, ids, steps=1, state=None, **config):
    """``(plain-Python result, numpy result, whether the plain-Python path ran)``."""
    taken = []
    real = _small.small_step

    def spy(*args):
        step = real(*args)
        taken.append(step is not None)
        return step

    with monkeypatch.context() as m:
        m.setattr("rlvitals.estimators.reference.small_step", spy)
        m.setattr("rlvitals.estimators.avspo.small_step", spy)
        m.setattr("rlvitals.estimators.filters.small_step", spy)
        small = run(method, rewards, ids, steps, state, **config)
    with monkeypatch.context() as m:
        m.setattr(_small, "SMALL_MAX", 0)
        numpy_path = run(method, rewards, ids, steps, state, **config)
    return small, numpy_path, any(taken)


REWARDS = ("binary", "trl", "partial", "uniform", "mixed", "big", "tiny", "negative")


def make_rewards(rng, kind: str, k: int, g: int, dtype) -> np.ndarray:
    n = k * g
    p = rng.choice([0.0, 1.0, 0.5, rng.random()], size=k)
    if kind == "binary":
        r = (rng.random((k, g)) < p[:, None]).astype(np.float64)
    elif kind == "trl":  # two binary reward functions added: 0, 1 or 2
        r = (rng.random((k, g)) < p[:, None]) + (rng.random((k, g)) < 0.5)
    elif kind == "partial":
        r = rng.choice([0.0, 0.1 + 0.2, 0.25, 0.5, 0.7, 1.0], size=(k, g))
        r[rng.random(k) < 0.4] = 0.5  # some collapsed at a partial value
    elif kind == "uniform":
        r = rng.random((k, g))
    elif kind == "mixed":
        r = rng.normal(size=(k, g)) * 10.0 ** rng.uniform(-6, 6, size=(k, g))
    elif kind == "big":
        r = 1e6 + rng.integers(0, 3, size=(k, g))
    elif kind == "tiny":
        r = 0.5 + rng.integers(0, 2, size=(k, g)) * 1e-9
    else:  # negative
        r = -rng.integers(0, 4, size=(k, g)) / 4.0
    r = np.asarray(r, dtype=np.float64).reshape(n)
    return r.astype(dtype)


CONFIGS = {
    "grpo": [
        {},
        {"eps": 1e-6},
        {"ddof": 0},
        {"scale_rewards": "none"},
        {"r_min": -1.0, "r_max": 2.0},
        {"tau": 0.0},
        {"tau": 1e-3, "r_max": 2},
        {"r_min": np.float64(0.0)},  # a numpy scalar bound: the numpy path decides
    ],
    "dr_grpo": [{}],
    "rloo": [{}],
    "avspo": [
        {},
        {"flat": "stratify"},
        {"windowed_gate": "always"},
        {"ddof": 0, "r_min": -1.0, "r_max": 2.0},
        {"alpha": 1.0, "eps": 1e-6},
        {"j_signal": "reward"},
    ],
    "avspo_released": [{}, {"ddof": 0}, {"r_min": -1.0, "r_max": 2.0}],
    "zero_var_filter": [{}, {"rescale": False}, {"scale_rewards": "none", "ddof": 0}],
}
CASES = [(m, i) for m, cfgs in CONFIGS.items() for i in range(len(cfgs))]


# --------------------------------------------------------------------------------------------
# Building blocks


def test_pairwise_sum_is_numpys():
    rng = np.random.default_rng(0)
    for n in [*range(1, 140), 200, 255, 256, 257, 1000, 4099]:
        v = rng.normal(size=n) * 10.0 ** rng.uniform(-5, 5, n)
        assert pairwise_sum(v.tolist()) == float(np.add.reduce(v)), n
        v32 = v.astype(np.float32)
        assert pairwise_sum(v32.tolist(), rnd=r32) == float(np.add.reduce(v32)), n
        assert pairwise_sum(v.tolist()) / n == float(np.mean(v)), n


def test_r32_is_numpys_cast():
    rng = np.random.default_rng(1)
    v = rng.normal(size=10_000) * 10.0 ** rng.uniform(-40, 38, 10_000)
    assert [r32(x) for x in v.tolist()] == v.astype(np.float32).astype(np.float64).tolist()


def test_small_step_declines_what_it_cannot_match():
    plan = _small.plan_for(rlvitals.estimators.GrpoConfig(), "grpo", 1e-4, 1)
    ids = np.repeat(np.arange(8), 8)
    r = (np.random.default_rng(2).random(64) < 0.5).astype(np.float32)
    assert small_step(r, ids, plan) is not None
    assert small_step(r.astype(np.float16), ids, plan) is None  # float16: numpy path
    assert small_step(r, np.random.default_rng(3).permutation(ids), plan) is None  # not dense
    assert small_step(r, np.arange(64), plan) is None  # G = 1
    assert small_step(r.tolist(), ids, plan) is None  # not an array
    assert small_step(np.where(np.arange(64) == 5, np.nan, r), ids, plan) is None  # NaN
    assert small_step(np.where(np.arange(64) == 5, -0.0, r), ids, plan) is None  # -0.0
    big = _small.SMALL_MAX + 8
    assert small_step(np.zeros(big), np.zeros(big, int), plan) is None
    inexact = np.array([0.1, 0.2, 0.3, 0.7], dtype=np.float64)  # float64 0.1: sums round
    assert small_step(inexact, np.array([0, 0, 1, 1]), plan) is None
    assert _small.plan_for(rlvitals.estimators.GrpoConfig(eps=0.0), "grpo", 0.0, 1) is None


def test_layout_matches_ops():
    from rlvitals.signal._ops import Ops

    rng = np.random.default_rng(4)
    for ids in [
        np.repeat(np.arange(8), 8),
        np.repeat([3, 7, 9], 4),
        np.repeat([3, 3, 9], 4),
        np.repeat([9, 3], 4),
        np.array([0, 0, 1, 1, 1, 2]),
        np.array([5, 5, 5, 5]),
        np.repeat(np.arange(4), 3).astype(np.uint8),
        rng.permutation(np.repeat(np.arange(4), 4)),
    ]:
        assert _small._layout(ids) == Ops(ids, False).G, ids


# --------------------------------------------------------------------------------------------
# Whole estimators: plain-Python path == numpy path


@pytest.mark.parametrize("method, which", CASES)
def test_estimators_match_the_numpy_path(monkeypatch, method, which):
    config = CONFIGS[method][which]
    rng = np.random.default_rng(zlib.crc32(f"{method}{which}".encode()))
    taken = 0
    for kind in REWARDS:
        for dtype in (np.float32, np.float64):
            for k, g in ((8, 8), (1, 4), (3, 2), (5, 7), (16, 16), (2, 64), (2, 256)):
                r = make_rewards(rng, kind, k, g, dtype)
                ids = np.repeat(np.arange(k) * 3 + 1, g)
                state = {"tau_adapt": 0.3} if method == "avspo" else None
                small, ref, ran = both_paths(monkeypatch, method, r, ids, 3, state, **config)
                assert same(small, ref), (kind, dtype, k, g)
                taken += ran
    numpy_bound = type(config.get("r_min", 0.0)) is not float
    assert (taken == 0) if numpy_bound else (taken >= 20)  # binary-like rewards always qualify


def test_the_trl_step_takes_the_plain_path(monkeypatch):
    """8 groups x G=8 float32 rewards in {0, 1, 2}, as the TRL trainer passes them."""
    rng = np.random.default_rng(5)
    for method in ("grpo", "avspo", "avspo_released", "dr_grpo", "rloo", "zero_var_filter"):
        r = make_rewards(rng, "trl", 8, 8, np.float32)
        ids = np.arange(64) // 8
        small, ref, ran = both_paths(monkeypatch, method, r, ids, 5)
        assert ran and same(small, ref), method


def test_negative_zero_and_nan_steps_take_the_numpy_path(monkeypatch):
    r = np.array([0.0, -0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0], dtype=np.float32)
    ids = np.repeat([0, 1], 4)
    for method in ("grpo", "avspo"):
        small, ref, ran = both_paths(monkeypatch, method, r, ids)
        assert not ran and same(small, ref)
        assert np.signbit(small[0][0][1])  # the -0.0 row keeps numpy's -0.0 advantage
    r[3] = np.nan
    small, ref, ran = both_paths(monkeypatch, "grpo", r, ids)
    assert not ran and same(small, ref)


def test_memo_is_bounded_and_keyed_by_order_free_groups(monkeypatch):
    monkeypatch.setattr(_small, "_GROUPS_MAX_ROWS", 64)
    rng = np.random.default_rng(6)
    ids = np.repeat(np.arange(4), 8)
    for _ in range(50):
        r = rng.integers(0, 3, 32).astype(np.float32)
        small, ref, ran = both_paths(monkeypatch, "grpo", r, ids)
        assert ran and same(small, ref)
        assert sum(len(k[3]) for k in _small._GROUPS) <= 64
    r = np.array([0, 1, 1, 0, 0, 0, 1, 1], dtype=np.float32)  # the same multiset twice
    adv, _, _ = rlvitals.estimate("grpo", r, np.repeat([0, 1], 4))
    assert adv[:4].tolist() == adv[[4, 6, 7, 5]].tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["grpo", "avspo", "avspo_released", "rloo", "dr_grpo", "zero_var_filter"]),
    st.integers(1, 10),
    st.integers(2, 12),
    st.sampled_from([np.float32, np.float64]),
    st.lists(st.sampled_from([0.0, 1.0, 2.0, 0.5, 0.25, 0.3, -1.0, 3.0]), min_size=1, max_size=6),
    st.randoms(use_true_random=False),
)
def test_random_steps_match(method, k, g, dtype, values, rnd):
    rows = [rnd.choice(values) for _ in range(k * g)]
    r = np.array(rows, dtype=dtype)
    ids = np.repeat(np.arange(k), g)
    with pytest.MonkeyPatch.context() as m:
        small, ref, _ = both_paths(m, method, r, ids, 2)
    assert same(small, ref)


def test_results_are_finite_numbers():
    adv, metrics, _ = rlvitals.estimate(
        "avspo", np.ones(64, dtype=np.float32), np.arange(64) // 8, state={"tau_adapt": 0.1}
    )
    assert adv.dtype == np.float32 and all(type(v) is float for v in metrics.values())
    assert all(math.isfinite(v) for v in metrics.values())

"""The vectorised paths of rlvitals.signal and the estimators.

- ``group_stats`` reads the rewards for NaN and inf only when a group's sum is not finite; a
  step with neither never pays for the scan, and one with an inf raises before any warning.
- Large dense batches are worked in row blocks (``_ops.BLOCK``) and centred lazily; a tiny
  block size forces the blocked code on small inputs.
- ``estimate`` memoises validated configs.

Every comparison is bit for bit: arrays by bytes, floats by repr.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rlvitals_tests_ranges import covering  # loaded by conftest.py

import rlvitals
from rlvitals import signal as sig
from rlvitals.estimators import _base
from rlvitals.signal import _ops

METHODS = sig.ADVANTAGE_METHODS
ESTIMATORS = ("grpo", "dr_grpo", "rloo", "avspo", "avspo_released", "zero_var_filter")


def same(a, b) -> bool:
    if isinstance(a, (np.ndarray, torch.Tensor)):
        a, b = (x.numpy() if isinstance(x, torch.Tensor) else x for x in (a, b))
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if hasattr(a, "to_dict"):
        return same(a.to_dict(), b.to_dict())
    return type(a) is type(b) and repr(a) == repr(b)


def fields(stats):
    return [
        stats.count,
        stats.size,
        stats.mean,
        stats.std,
        stats.collapsed,
        stats.equal,
        stats.scorable,
        stats.index,
        stats.has_nan,
        stats.max,
        stats.min,
        stats.batch_mean(),
    ]


def everything(r, ids):
    """Every result of the signal functions and estimators that the fast paths touch."""
    out = []
    for ddof in (0, 1):
        for tau in (0.0, 1e-6, 1e-3):
            st_ = sig.group_stats(r, ids, ddof=ddof, tau=tau)
            out.append(fields(st_))
            out += [sig.advantages_from_stats(st_, m) for m in METHODS]
            out += [sig.advantages_from_stats(st_, m, eps=0.0) for m in METHODS]
    st_ = sig.group_stats(r, ids)
    aug = st_.with_virtual(st_.collapsed, 3.0, 0.5, 0.25)
    out += [fields(aug), sig.advantages_from_stats(aug, "grpo"), vars(sig.collapse_split(r, ids))]
    for est in ESTIMATORS:
        state = {"tau_adapt": 0.3} if est == "avspo" else None
        config = covering(est, r, {})
        for _ in range(2):
            adv, metrics, state = rlvitals.estimate(est, r, ids, state=state, **config)
            out.append((adv, metrics, state))
    return out


def rewards(rng, kind, n, dtype):
    if kind == "binary":
        r = (rng.random(n) < rng.random()).astype(np.float64)
    elif kind == "partial":
        r = rng.choice([0.0, 0.1 + 0.2, 0.3, 0.5, 1.0], size=n)
    elif kind == "mixed":
        r = rng.normal(size=n) * 10.0 ** rng.uniform(-6, 6, n)
    else:  # big: a spread of 1 at a magnitude where float32 (float16) spacing is coarse
        r = (1e3 if dtype == np.float16 else 1e6) + rng.integers(0, 2, n)
    r = r.astype(dtype)
    if kind == "mixed" and dtype == np.float16:
        r = np.clip(r, -1e4, 1e4).astype(dtype)
    return r


def test_nan_and_inf_steps_are_found_from_the_group_sums():
    r = np.array([1.0, np.nan, 0.0, 1.0], dtype=np.float32)
    st_ = sig.group_stats(r, np.array([0, 0, 1, 1]))
    assert st_.has_nan and st_.count.tolist() == [1.0, 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fast path warns of nothing before the error
        for ids in ([0, 0, 1, 1], [0, 1, 0, 1]):
            for bad in ([1.0, np.inf, 0.0, 1.0], [np.inf, -np.inf, 0.0, 1.0]):
                with pytest.raises(ValueError, match="inf"):
                    sig.group_stats(np.array(bad, dtype=np.float32), np.array(ids))
    big = np.array([1e308, 1e308, 1.0, 0.0])  # finite, but the group sum overflows
    ids = np.array([0, 0, 1, 1])
    assert same(fields(sig.group_stats(big, ids)), fields(sig.group_stats(big.tolist(), ids)))


@pytest.mark.parametrize("g", [1, 2, 3, 7, 16, 33, 300])
def test_blocked_dense_batches_match_whole_arrays(monkeypatch, g):
    rng = np.random.default_rng(g)
    k = max(3, 3000 // g)
    ids = np.repeat(np.arange(k), g)
    for kind in ("binary", "mixed"):
        for dtype in (np.float32, np.float64):
            r = rewards(rng, kind, k * g, dtype)
            with monkeypatch.context() as m:
                m.setattr(_ops, "BLOCK", 1 << 30)  # one block: the whole array
                whole = everything(r, ids)
            for block in (1, 64, 1000):
                with monkeypatch.context() as m:
                    m.setattr(_ops, "BLOCK", block)
                    assert sig.group_stats(r, ids)._centered is None
                    assert same(everything(r, ids), whole), (kind, dtype, block)


def _old_runs(ids, g):
    rows = ids.reshape(-1, g)
    return bool((rows == rows[:, :1]).all() and (rows[1:, 0] > rows[:-1, 0]).all())


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 40),
    st.integers(0, 3),
    st.integers(0, 10**6),
    st.sampled_from([3, 8, 64, 1 << 15]),
)
def test_run_check_is_the_broadcast_check(g, k, defects, seed, block):
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.sort(rng.choice(10 * k + 10, k, replace=False)), g)
    for _ in range(defects):
        i = rng.integers(ids.shape[0])
        ids[i] = ids[rng.integers(ids.shape[0])] + rng.integers(-1, 2)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(_ops, "BLOCK", block)
        ops = _ops.Ops(ids[:1], False)
        assert ops._runs(ids, g) == _old_runs(ids, g)
        t = _ops.Ops(torch.from_numpy(ids[:1]), True)
        assert t._runs(torch.from_numpy(ids), g) == _old_runs(ids, g)


def test_zero_threshold_is_the_same_in_float32_and_float64():
    """The fast metrics read |A| <= 1e-8 in float64 for float32 advantages too: no float32
    lies between float32(1e-8) and 1e-8, so the two tests agree on every float32."""
    t32 = np.float32(1e-8)
    near = np.array([t32, np.nextafter(t32, 1), np.nextafter(t32, 0), 0.0, -t32], np.float32)
    near = np.concatenate([near, -near])
    assert ((np.abs(near) > 1e-8) == (np.abs(near.astype(np.float64)) > 1e-8)).all()
    assert float(t32) < 1e-8 < float(np.nextafter(t32, 1))


def test_config_memo_keeps_types_apart():
    a = rlvitals.estimate("grpo", np.array([1.0, 0.0]), np.array([0, 0]), eps=1)
    b = rlvitals.estimate("grpo", np.array([1.0, 0.0]), np.array([0, 0]), eps=1.0)
    assert same(a, b)
    est = rlvitals.estimators.get_estimator("grpo")
    assert _base._config(est, {"ddof": 1}).ddof is 1  # noqa: F632
    assert _base._config(est, {"ddof": True}).ddof is True  # as given, not the cached 1
    with pytest.raises(ValueError, match="eps"):
        rlvitals.estimate("grpo", np.array([1.0, 0.0]), np.array([0, 0]), eps=math.nan)
    assert _base._config(est, {"eps": 0.0}) is _base._config(est, {"eps": 0.0})
    assert math.copysign(1.0, _base._config(est, {"eps": -0.0}).eps) < 0
    assert _base._config(est, {"eps": 0.0}).eps == 0.0
    assert type(_base._config(est, {"eps": 1}).eps) is int


def test_torch_in_torch_out_unchanged():
    r = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.5, 0.5], dtype=torch.bfloat16)
    ids = torch.tensor([0, 0, 1, 1, 2, 2])
    adv, metrics, _ = rlvitals.estimate("grpo", r, ids)
    assert isinstance(adv, torch.Tensor) and adv.dtype == torch.bfloat16
    assert metrics["acr"] == pytest.approx(2 / 3)
    r64 = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    np_adv = rlvitals.advantages(r64.numpy(), ids[:4].numpy())
    np.testing.assert_allclose(rlvitals.advantages(r64, ids[:4]).numpy(), np_adv, rtol=1e-15)

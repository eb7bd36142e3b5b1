"""``history_baseline`` (DBB in spirit, arXiv 2603.18444): algebra, a brute-force reference,
numpy against torch, state round trips.

Expected values come from a plain per-prompt loop written here (``reference``), never from the
code under test.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import rlvitals
from rlvitals import vocabulary
from rlvitals.estimators import ESTIMATORS, HistoryBaselineConfig, HistoryState


def reference(steps, *, discount=0.9, a0=1.0, b0=1.0, eps=1e-4, r_min=0.0, r_max=1.0):
    """Per step: advantages by the textbook loop (pool a step's groups per key, discount, add)."""
    counts: dict[str, list[float]] = {}
    out = []
    for rewards, keys in steps:
        rewards = np.asarray(rewards, dtype=np.float64)
        u = (rewards - r_min) / (r_max - r_min)
        step_counts: dict[str, list[float]] = {}
        for key in sorted(set(keys)):
            sel = [i for i, k in enumerate(keys) if k == key and not math.isnan(u[i])]
            if sel:
                s = float(sum(u[i] for i in sel))
                step_counts[key] = [s, len(sel) - s]
        for key, (s, f) in step_counts.items():
            a, b = counts.get(key, [a0, b0])
            counts[key] = [discount * a + s, discount * b + f]
        adv = np.zeros_like(u)
        for i, key in enumerate(keys):
            if math.isnan(u[i]) or key not in step_counts:
                continue
            a, b = counts[key]
            p = a / (a + b)
            adv[i] = (u[i] - p) / (math.sqrt(p * (1 - p)) + eps)
        out.append(adv)
    return out


def test_first_visit_homogeneous_group_gets_minus_one_over_sqrt_g_plus_one():
    for g in (2, 4, 8, 16):
        adv, m, _ = rlvitals.estimate(
            "history_baseline", np.zeros(g), np.zeros(g, dtype=int), discount=1.0, eps=0.0
        )
        assert np.allclose(adv, -1.0 / math.sqrt(g + 1))
        adv, _, _ = rlvitals.estimate(
            "history_baseline", np.ones(g), np.zeros(g, dtype=int), discount=1.0, eps=0.0
        )
        assert np.allclose(adv, 1.0 / math.sqrt(g + 1))
    assert m["acr"] == 1.0 and m["acr_residual"] == 0.0  # collapsed, but it still teaches


def test_history_makes_a_failed_group_of_a_solvable_prompt_more_negative():
    ids = np.array(["p"] * 8)
    _, _, state = rlvitals.estimate("history_baseline", np.ones(8), ids)
    adv, m, _ = rlvitals.estimate("history_baseline", np.zeros(8), ids, state=state)
    fresh, _, _ = rlvitals.estimate("history_baseline", np.zeros(8), ids)
    assert adv[0] < fresh[0] < 0
    assert m["hist_known_frac"] == 1.0


def test_the_estimator_never_mutates_the_state_it_is_given():
    ids = np.array(["a"] * 4 + ["b"] * 4)
    _, _, s1 = rlvitals.estimate("history_baseline", np.array([1.0, 0, 1, 1, 0, 0, 0, 0]), ids)
    before = json.dumps(s1.to_dict(), sort_keys=True)
    rlvitals.estimate("history_baseline", np.ones(8), ids, state=s1)
    assert json.dumps(s1.to_dict(), sort_keys=True) == before


keys_st = st.sampled_from(["p0", "p1", "p2", "p3"])
group_st = st.tuples(
    keys_st,
    st.lists(
        st.one_of(st.sampled_from([0.0, 1.0, 0.5, 0.25]), st.just(float("nan"))),
        min_size=1,
        max_size=6,
    ),
)
step_st = st.lists(group_st, min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(step_st, min_size=1, max_size=4),
    st.floats(0.5, 1.0),
    st.sampled_from([(0.0, 1.0), (-1.0, 3.0)]),
)
def test_matches_the_per_prompt_loop_over_steps(steps, discount, rng):
    r_min, r_max = rng
    state = None
    made = []
    for groups in steps:
        rewards, keys, gid = [], [], []
        for j, (key, rs) in enumerate(groups):
            rewards += [r_min + (r_max - r_min) * r if r == r else r for r in rs]
            keys += [key] * len(rs)
            gid += [j] * len(rs)
        made.append((rewards, keys, gid, [k for k, _ in groups]))
    expected = reference(
        [(r, k) for r, k, _, _ in made], discount=discount, r_min=r_min, r_max=r_max
    )
    for (rewards, _, gid, group_keys), want in zip(made, expected):
        adv, _, state = rlvitals.estimate(
            "history_baseline",
            np.asarray(rewards),
            np.asarray(gid),
            state=state,
            keys=tuple(group_keys),
            discount=discount,
            r_min=r_min,
            r_max=r_max,
        )
        assert np.allclose(adv, want, atol=1e-9), (adv, want)
        # state survives JSON, as in a checkpoint
        state = HistoryState.from_dict(json.loads(json.dumps(state.to_dict())))


def test_string_group_ids_are_the_keys_without_config_keys():
    rewards = np.array([1.0, 0.0, 0.0, 0.0, 1.0, 1.0])
    by_ids, _, s1 = rlvitals.estimate("history_baseline", rewards, np.array(["x"] * 3 + ["y"] * 3))
    by_keys, _, s2 = rlvitals.estimate(
        "history_baseline", rewards, np.repeat([0, 1], 3), keys=("x", "y")
    )
    assert np.allclose(by_ids, by_keys)
    assert s1.to_dict() == s2.to_dict()


def test_numpy_and_torch_agree_and_tensors_stay_tensors():
    rewards = np.array([1.0, 0.0, 1.0, np.nan, 0.0, 0.0, 0.0, 0.0])
    ids = np.repeat([0, 1], 4)
    a_np, m_np, _ = rlvitals.estimate("history_baseline", rewards, ids, keys=("a", "b"))
    a_t, m_t, _ = rlvitals.estimate(
        "history_baseline", torch.tensor(rewards), torch.tensor(ids), keys=("a", "b")
    )
    assert isinstance(a_t, torch.Tensor) and a_t.dtype == torch.float64
    assert np.allclose(a_np, a_t.numpy())
    assert a_np[3] == 0.0  # unscorable
    assert m_np == pytest.approx(m_t, nan_ok=True)
    a32, _, _ = rlvitals.estimate(
        "history_baseline", torch.tensor(rewards, dtype=torch.float32), torch.tensor(ids)
    )
    assert a32.dtype == torch.float32


def test_bad_config_keys_and_state_are_refused():
    with pytest.raises(ValueError, match="keys holds 1 prompt keys for 2 groups"):
        rlvitals.estimate("history_baseline", np.ones(4), np.repeat([0, 1], 2), keys=("a",))
    with pytest.raises(ValueError, match="discount"):
        HistoryBaselineConfig(discount=0.0)
    with pytest.raises(ValueError, match="prior_alpha"):
        HistoryBaselineConfig(prior_alpha=-1)
    with pytest.raises(ValueError, match="unknown config key"):
        rlvitals.estimate("history_baseline", np.ones(2), np.zeros(2, dtype=int), decay=0.5)
    with pytest.raises(ValueError, match="unknown history state key"):
        HistoryState.from_dict({"tau_adapt": 0.5})
    with pytest.raises(ValueError, match="must be"):
        HistoryState.from_dict({"counts": {"a": [1.0]}})
    with pytest.raises(TypeError):
        rlvitals.estimate("history_baseline", np.ones(2), np.zeros(2, dtype=int), state=3)
    # the dict form of a state is accepted, like avspo's
    _, _, s = rlvitals.estimate("history_baseline", np.ones(2), np.zeros(2, dtype=int))
    rlvitals.estimate("history_baseline", np.ones(2), np.zeros(2, dtype=int), state=s.to_dict())


def test_registered_with_a_documented_config_and_the_virtual_scale():
    est = ESTIMATORS.get("history_baseline")
    assert est.state_cls is HistoryState and est.scale == "virtual"
    assert vocabulary.scale_of("history_baseline") == "virtual"
    doc = HistoryBaselineConfig.__doc__ or ""
    for name in est.config_fields:
        assert f"{name} (" in doc, name

"""Vitals: the evidence chain of DESIGN.md 3.6, exact ACR from groups, derived series."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.recording import GroupTable, Manifest, RunBuilder
from rlvitals.signal import collapse_split
from rlvitals.vitals import EVIDENCE_TIERS, Vitals, compute_vitals


def _run(rows: dict[int, dict], manifest: Manifest | None = None, groups=None):
    b = RunBuilder(manifest)
    for step, values in rows.items():
        b.add_row(step, values)
    b.groups = groups
    return b.build()


def _groups(per_step: dict[int, list[list[float]]]) -> GroupTable:
    steps, rewards = [], []
    for s, gs in per_step.items():
        for g in gs:
            steps.append(s)
            rewards.append(g)
    return GroupTable.from_lists(steps, rewards)


def test_groups_tier_gives_exact_acr_and_split():
    groups = _groups(
        {
            1: [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]],
            2: [[1, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]],
        }
    )
    v = compute_vitals(_run({}, groups=groups))
    assert v.evidence == "groups"
    assert v.series["acr"].tolist() == [0.75, 0.5]
    assert v.series["acr_solve_all"].tolist() == [0.25, 0.25]
    assert v.series["acr_solve_none"].tolist() == [0.25, 0.25]
    assert v.series["acr_flat"].tolist() == [0.25, 0.0]
    assert v.group_size == 4
    # wasted rollouts: completions of collapsed groups (GRPO advantages recomputed)
    assert v.series["wasted_frac"].tolist() == [0.75, 0.5]


def test_group_steps_and_scalar_steps_are_merged():
    groups = _groups({2: [[1, 0]], 4: [[1, 1]]})
    v = compute_vitals(_run({1: {"loss": 0.1}, 2: {"loss": 0.2}, 3: {"loss": 0.3}}, groups=groups))
    assert v.steps.tolist() == [1, 2, 3, 4]
    assert np.isnan(v.series["loss"][3]) and v.series["loss"][2] == 0.3
    assert np.isnan(v.series["acr"][0]) and v.series["acr"][3] == 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(
            st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=2, max_size=6),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_groups_acr_matches_signal_per_step(data):
    per_step = {i + 1: gs for i, gs in enumerate(data)}
    v = compute_vitals(_run({}, groups=_groups(per_step)))
    for i, gs in enumerate(data):
        r = np.concatenate([np.asarray(g, float) for g in gs])
        gid = np.repeat(np.arange(len(gs)), [len(g) for g in gs])
        ref = collapse_split(r, gid)
        assert math.isclose(v.series["acr"][i], ref.acr)
        parts = (
            v.series["acr_solve_all"][i] + v.series["acr_solve_none"][i] + v.series["acr_flat"][i]
        )
        assert math.isclose(parts, ref.acr, abs_tol=1e-12)


def test_zero_std_frac_tier_and_expected_collapse():
    m = Manifest(group_size=4)
    v = compute_vitals(
        _run(
            {
                1: {"frac_reward_zero_std": 0.25, "reward": 0.5},
                2: {"frac_reward_zero_std": 0.5, "reward": 1.0},
            },
            m,
        )
    )
    assert v.evidence == "zero_std_frac"
    assert v.series["acr"].tolist() == [0.25, 0.5]
    assert v.series["expected_acr"].tolist() == [0.125, 1.0]  # P0 = p^4 + (1-p)^4
    assert v.series["excess_acr"].tolist() == [0.125, -0.5]
    assert v.acr_mean == pytest.approx(0.375)


def test_batch_trap_from_config_is_noted():
    m = Manifest(scale_rewards="batch", group_size=8)
    v = compute_vitals(_run({s: {"frac_reward_zero_std": 0.0} for s in range(1, 5)}, m))
    assert v.batch_trap
    assert any("scale_rewards='batch'" in n for n in v.notes)
    assert v.estimator == "grpo" and v.adv_scale == "batch_std"  # not unit-scaled


def test_batch_trap_from_values_only_zero_or_one():
    rows = {s: {"frac_reward_zero_std": float(s % 7 == 0)} for s in range(1, 40)}
    v = compute_vitals(_run(rows))
    assert v.batch_trap and any("only ever 0 or 1" in n for n in v.notes)
    rows = {s: {"frac_reward_zero_std": (s % 4) / 8} for s in range(1, 40)}
    assert not compute_vitals(_run(rows)).batch_trap


def test_advantage_tier_from_adv_zero_frac_and_verl_extremes():
    v = compute_vitals(
        _run(
            {
                1: {"adv_std": 0.9, "rlvitals/adv_zero_frac": 0.2},
                2: {"adv_std": 0.0, "rlvitals/adv_zero_frac": 1.0},
            }
        )
    )
    assert v.evidence == "advantages"
    assert v.series["acr"].tolist() == [0.2, 1.0]
    verl = {
        1: {"critic/advantages/max": 2.1, "critic/advantages/min": -1.5},
        2: {"critic/advantages/max": 0.0, "critic/advantages/min": 0.0},
    }
    v = compute_vitals(_run(verl))
    assert v.evidence == "advantages"
    assert v.series["adv_all_zero"].tolist() == [0.0, 1.0]
    assert v.series["adv_span"].tolist() == pytest.approx([3.6, 0.0])
    assert "acr" not in v.series  # max/min say nothing about the share of collapsed groups


def test_reward_std_and_loss_grad_tiers_and_none():
    v = compute_vitals(_run({1: {"reward_std": 0.4, "reward": 0.5}}, Manifest(group_size=8)))
    assert v.evidence == "reward_std" and "acr" not in v.series
    assert v.series["expected_acr"][0] == pytest.approx(2 * 0.5**8)
    v = compute_vitals(
        _run({1: {"loss": 0.0, "grad_norm": 0.0}, 2: {"loss": 0.1, "grad_norm": 0.3}})
    )
    assert v.evidence == "loss_grad_zero"
    assert v.series["zero_update"].tolist() == [1.0, 0.0]
    v = compute_vitals(_run({1: {"learning_rate": 1e-6}}))
    assert v.evidence == "none" and any("no collapse evidence" in n for n in v.notes)
    assert set(EVIDENCE_TIERS) >= {
        "groups",
        "zero_std_frac",
        "advantages",
        "reward_std",
        "loss_grad_zero",
        "none",
    }


def test_windowed_acr_volatility_acr100_and_summary_is_json():
    rows = {
        s: {"frac_reward_zero_std": 0.1 if s <= 100 else 0.9, "reward": 0.5} for s in range(1, 151)
    }
    v = compute_vitals(_run(rows), window=10)
    assert v.acr_100 == pytest.approx(0.1)
    assert v.series["acr_windowed"][-1] == pytest.approx(0.9)
    assert np.nanmax(v.series["acr_volatility"]) == pytest.approx(0.4)  # the 0.1 -> 0.9 edge
    s = v.summary()
    json.dumps(s, allow_nan=False)
    assert s["evidence"] == "zero_std_frac" and s["acr_100"] == pytest.approx(0.1)


def test_window_restricts_to_a_step_range():
    rows = {s: {"frac_reward_zero_std": s / 100} for s in range(1, 101)}
    v = compute_vitals(_run(rows))
    w = v.window(41, 60)
    assert isinstance(w, Vitals)
    assert w.steps.tolist() == list(range(41, 61))
    assert w.series["acr"].tolist() == pytest.approx([s / 100 for s in range(41, 61)])
    assert w.acr_mean == pytest.approx(0.505)
    assert v.n_steps == 100  # the original is untouched


def test_nan_rows_and_reward_range():
    rows = {
        1: {"reward": float("nan"), "frac_reward_zero_std": float("nan")},
        2: {"reward": 3.0, "frac_reward_zero_std": 0.5},
    }
    v = compute_vitals(_run(rows, Manifest(reward_min=-1.0, reward_max=4.0)))
    assert v.reward_range_known and v.series["pass_rate"][1] == pytest.approx(0.8)
    assert v.acr_mean == 0.5
    v = compute_vitals(_run(rows))  # unknown range: taken from what the rewards show
    assert not v.reward_range_known and (v.reward_min, v.reward_max) == (0.0, 3.0)
    assert any("taken from the mean reward seen" in n for n in v.notes)
    # a mean reward slightly over 1 widens the range to it, not to 2 (halving every pass rate)
    v = compute_vitals(_run({1: {"reward": 0.5}, 2: {"reward": 1.02}}))
    assert (v.reward_min, v.reward_max) == (0.0, 1.02)
    assert v.series["pass_rate"][0] == pytest.approx(0.5 / 1.02)
    v = compute_vitals(_run({1: {"reward": 0.5}, 2: {"reward": float("inf")}}))  # inf is no bound
    assert (v.reward_min, v.reward_max) == (0.0, 1.0)
    v = compute_vitals(_run({1: {"reward": 0.4}}))
    assert (v.reward_min, v.reward_max) == (0.0, 1.0)
    assert any("assumed [0, 1]" in n for n in v.notes)
    groups = _groups({1: [[-1, -1, 4, 4], [-1, -1, -1, -1]], 2: [[4, 4, 4, 4], [-1, 4, 4, 4]]})
    v = compute_vitals(_run({}, groups=groups))
    assert (v.reward_min, v.reward_max) == (-1.0, 4.0)
    assert v.series["acr_solve_none"].tolist() == [0.5, 0.0]
    assert v.series["acr_solve_all"].tolist() == [0.0, 0.5]


def test_too_short_and_log_every():
    v = compute_vitals(_run({s: {"reward": 0.5} for s in range(10, 300, 10)}))
    assert v.log_every == 10 and not v.too_short
    assert compute_vitals(_run({s: {"reward": 0.5} for s in range(1, 20)})).too_short

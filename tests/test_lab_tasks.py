"""The lab's tasks, levels and statistics: pure Python and numpy, no torch."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.lab import stats
from rlvitals.lab.tasks import (
    LEVEL_TARGETS,
    TASKS,
    get_task,
    level_mixture,
    make_prompts,
    partial_credit,
    split_of,
)


def test_levels_are_the_papers_pass_rates():
    assert LEVEL_TARGETS == (0.95, 0.80, 0.60, 0.40, 0.20, 0.05, 0.01)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_every_task_verifies_its_own_answers(name):
    task = get_task(name)
    rng = random.Random(1)
    for size in task.sizes:
        p = task.make(size, rng)
        assert task.reward(p, p.answer) == 1.0
        assert task.reward(p, " " + p.answer + "  and more") == 1.0  # leading space, trailing text
        assert task.reward(p, p.answer + "9") == 0.0
        if len(p.answer) > 1:  # one character wrong: partial credit in (0, 1)
            wrong = ("1" if p.answer[0] != "1" else "2") + p.answer[1:]
            assert task.reward(p, wrong) == 0.0
            assert 0.0 < task.reward(p, wrong, partial=True) < 1.0
        assert task.reward(p, "", partial=True) == 0.0
        assert len(p.answer) <= task.answer_chars


def test_sum_and_sort_answers():
    rng = random.Random(0)
    p = get_task("sort").make(5, rng)
    assert p.answer == "".join(sorted(p.prompt[:-1])) and p.prompt.endswith(">")
    q = get_task("sum").make(4, rng)
    assert int(q.answer) == sum(int(c) for c in q.prompt[:-1].split("+"))


def test_partial_credit_aligns_numbers_on_units():
    assert partial_credit("12", "12") == 1.0
    assert partial_credit("2", "12") == 0.5  # the units digit is right
    assert partial_credit("21", "12") == 0.0
    assert partial_credit("abc", "abd") == pytest.approx(2 / 3)


@pytest.mark.parametrize("name", sorted(TASKS))
def test_train_and_eval_prompts_never_overlap(name):
    task = get_task(name)
    mix = {2: 0.5, 3: 0.5}
    train = make_prompts(task, mix, 300, seed=0, split="train")
    held = make_prompts(task, mix, 60, seed=0, split="eval")
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert all(split_of(p.prompt) == "train" for p in train)
    assert all(split_of(p.prompt) == "eval" for p in held)
    # deterministic for a seed, different across seeds
    assert make_prompts(task, mix, 20, seed=3, split="train") == make_prompts(
        task, mix, 20, seed=3, split="train"
    )
    assert make_prompts(task, mix, 20, seed=3, split="train") != make_prompts(
        task, mix, 20, seed=4, split="train"
    )


def test_bad_split_and_unknown_task_are_refused():
    with pytest.raises(ValueError, match="split"):
        make_prompts(get_task("sum"), {2: 1.0}, 1, seed=0, split="test")
    with pytest.raises(ValueError, match="unknown task 'add'; valid: sum, sort"):
        get_task("add")


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.integers(1, 20), st.floats(0.0, 1.0), min_size=1, max_size=10),
    st.floats(0.0, 1.0),
)
def test_level_mixture_hits_the_target_when_it_is_bracketed(rates, target):
    mix = level_mixture(rates, target)
    assert abs(sum(mix.values()) - 1.0) < 1e-5
    got = sum(w * rates[s] for s, w in mix.items())
    lo, hi = min(rates.values()), max(rates.values())
    if lo <= target <= hi:
        assert got == pytest.approx(target, abs=1e-5)
    else:
        assert got == pytest.approx(hi if target > hi else lo)


# -- statistics --------------------------------------------------------------------------------


def test_mean_ci_brackets_the_mean_and_is_seeded():
    x = np.random.default_rng(0).normal(size=50)
    a, b = stats.mean_ci(x), stats.mean_ci(x)
    assert a == b and a["lo"] < a["mean"] < a["hi"] and a["n"] == 50
    assert stats.mean_ci([None, 1.0])["lo"] is None  # one value: no interval
    assert stats.mean_ci([])["mean"] is None


def test_pearson_matches_numpy_and_ols_recovers_a_line():
    rng = np.random.default_rng(1)
    x = rng.random(40)
    y = 3.0 - 2.0 * x + 0.1 * rng.normal(size=40)
    r = stats.pearson(x, y)
    assert r["r"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    assert r["lo"] <= r["r"] <= r["hi"] and r["r2"] == pytest.approx(r["r"] ** 2)
    fit = stats.ols(x, y)
    assert fit["slope"] == pytest.approx(-2.0, abs=0.15)
    assert fit["intercept"] == pytest.approx(3.0, abs=0.1)
    assert fit["r2"] == pytest.approx(r["r"] ** 2)
    assert stats.pearson([1, 1, 1], [1, 2, 3])["r"] is None


def test_paired_test_agrees_with_scipy_and_counts_wins():
    from scipy import stats as sps

    a = [0.5, 0.6, 0.55, 0.7, 0.65, 0.6]
    b = [0.4, 0.5, 0.56, 0.6, 0.5, 0.52]
    p = stats.paired(a, b)
    assert p["diff"] == pytest.approx(np.mean(np.subtract(a, b)))
    assert p["t_p"] == pytest.approx(sps.ttest_rel(a, b).pvalue)
    assert p["wilcoxon_p"] == pytest.approx(sps.wilcoxon(np.subtract(a, b)).pvalue)
    assert p["wins"] == 5 and p["n"] == 6
    same = stats.paired([1.0, 2.0], [1.0, 2.0])
    assert same["t_p"] is None and same["wilcoxon_p"] is None
    with pytest.raises(ValueError, match="differ in length"):
        stats.paired([1.0], [1.0, 2.0])


def test_holm_is_monotone_and_capped():
    adj = stats.holm({"a": 0.001, "b": 0.2, "c": 0.04, "d": None})
    assert adj["d"] is None
    assert adj["a"] == pytest.approx(0.003)
    assert adj["c"] == pytest.approx(0.08)
    assert adj["b"] == pytest.approx(0.2)
    assert all(v <= 1 for v in stats.holm({"x": 0.9, "y": 0.8}).values())


def test_the_mixed_level_is_the_explicit_mixture_whatever_the_calibration():
    """Issue 26.1: level 7 (LM) is sizes 3/10/13 at 0.3/0.4/0.3; its base rate is the
    mixture's weighted mean of the measured per-size pass rates."""
    from rlvitals.lab.policy import BasePolicy
    from rlvitals.lab.tasks import MIXED_LEVEL, MIXED_MIXTURE, level_name

    base = BasePolicy(
        path=Path("."),
        task="sum",
        pass_rates={3: 0.9, 10: 0.5, 13: 0.1},
        levels=[{3: 1.0}] * 7,
        level_rates=[0.9] * 7,
    )
    assert base.mixture(MIXED_LEVEL) == MIXED_MIXTURE == {3: 0.3, 10: 0.4, 13: 0.3}
    assert abs(base.level_rate(MIXED_LEVEL) - (0.27 + 0.2 + 0.03)) < 1e-12
    assert base.level_rate(2) == 0.9 and level_name(MIXED_LEVEL) == "LM"
    with pytest.raises(ValueError, match="or 7"):
        base.mixture(8)


def test_paired_t_interval_tost_and_smallest_detectable_effect():
    """Issue 26.2: t-intervals that cover, an equivalence test, the detectable effect."""
    from scipy import stats as sps

    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(400):
        d = rng.normal(1.0, 3.0, size=8)
        r = stats.paired(d, np.zeros(8), margin=2.0, n_boot=10)
        covered += r["lo"] <= 1.0 <= r["hi"]
    assert 0.92 <= covered / 400 <= 0.98  # a bootstrap over 8 seeds covers ~0.88
    d = rng.normal(0.0, 1.0, size=16)
    r = stats.paired(d, np.zeros(16), margin=2.0)
    assert r["tost_p"] < 0.05 and stats.decide({**r, "n": 16}) == "equivalent"
    se = d.std(ddof=1) / 4
    assert r["mde"] == pytest.approx((sps.t.ppf(0.975, 15) + sps.t.ppf(0.8, 15)) * se)
    far = stats.paired(d + 10, np.zeros(16), margin=2.0)
    assert far["tost_p"] > 0.5 and stats.decide(far) == "higher"

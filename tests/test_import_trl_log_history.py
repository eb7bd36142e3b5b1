"""A bare TRL ``log_history`` list: from a real TRL run, dumped as users dump it."""

from __future__ import annotations

import json

import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py
import rlvitals_tests_trl_producer as P
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals import InputError
from rlvitals.importers import load, runs_of, sniff


def test_real_trl_log_history(tmp_path):
    state = json.loads((P.shared_grpo_run() / "trainer_state.json").read_text())
    for indent in (None, 2):
        p = tmp_path / f"log_{indent}.json"
        with open(p, "w") as f:
            json.dump(state["log_history"], f, indent=indent)
        assert sniff(p).name == "trl_log_history"
        r = load(p)
        steps = sorted({row["step"] for row in state["log_history"] if "loss" in row})
        assert r.steps.tolist() == steps and r.manifest.step_key == "step"
        assert r.manifest.trainer == "trl" and r.has("zero_std_frac")


def test_runs_back_to_back_are_never_merged(tmp_path):
    run = F.simulate(40)
    p = F.write_log_history(tmp_path / "h.json", [run[:20], run])
    r = load(p)
    assert r.n_steps == 40 and len(runs_of(r)) == 2
    assert any("2 runs back to back" in w for w in r.warnings)
    r1 = load(p, run="1")
    assert r1.n_steps == 20 and r1.series["reward_mean"][-1] == pytest.approx(run[19].mean)
    with pytest.raises(InputError, match="no run '3'"):
        load(p, run="3")


def test_two_dumps_appended(tmp_path):
    run = F.simulate(10)
    p = tmp_path / "two.json"
    p.write_text(json.dumps(F.log_history(run)) + json.dumps(F.log_history(run)))
    assert len(runs_of(load(p))) == 2


def test_torn_array_is_an_input_error(tmp_path):
    p = tmp_path / "torn.json"
    p.write_text(json.dumps(F.log_history(F.simulate(5)))[:-40])
    with pytest.raises(InputError, match=r"torn|invalid JSON"):
        load(p, "trl_log_history")


# --- compact rows equal the dicts they stand for ---------------------------------------------


@settings(max_examples=150, deadline=None, database=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 9),
            st.dictionaries(
                st.sampled_from(["loss", "reward", "step", "eval_loss", "epoch", "mystery"]),
                st.one_of(
                    st.floats(allow_nan=False, width=64),
                    st.integers(-(10**400), 10**400),
                    st.sampled_from([None, "0.5", "nan", "x", True, [1]]),
                ),
                max_size=6,
            ),
            st.sampled_from(["train", "eval"]),
        ),
        max_size=30,
    )
)
def test_add_rows_is_add_row_of_each_dict(rows):
    """``_rows.add_rows`` of compact rows builds what ``add_row`` of the dicts builds."""
    import numpy as np

    from rlvitals.importers._rows import RowStore, add_rows
    from rlvitals.recording.run import RunBuilder

    drop = {"train": frozenset({"step"}), "eval": frozenset({"step", "epoch"})}
    store = RowStore()
    compact = [(s, store.row(r), drop[k]) for s, r, k in rows]
    want = RunBuilder()
    for s, r, k in rows:
        want.add_row(s, {a: v for a, v in r.items() if a not in drop[k]})
    got = RunBuilder()
    add_rows(got, compact)
    a, b = want.build(), got.build()
    assert a.steps.tolist() == b.steps.tolist() and a.eval_steps.tolist() == b.eval_steps.tolist()
    for x, y in ((a.series, b.series), (a.eval_series, b.eval_series)):
        assert sorted(x) == sorted(y)
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])

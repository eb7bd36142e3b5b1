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


def _curriculum(run: list, phases: int, per_phase: int, phase_value=lambda k: k) -> list[dict]:
    """A curriculum's ``log_history``: one trainer per phase on the same model, each phase's
    steps restarting at 1, every row tagged with its phase (the shape users write)."""
    rows: list[dict] = []
    for k in range(phases):
        part = [
            F.Step(**{**vars(st), "step": i + 1})
            for i, st in enumerate(run[k * per_phase :][:per_phase])
        ]
        for row in F.log_history(part):
            rows.append({**row, "phase": phase_value(k), "phase_task_id": f"task_{k}"})
    return rows


def test_a_curriculum_is_one_run_with_its_steps_continuing(tmp_path):
    """Issue 25.2: the phases of one model's curriculum (a 'phase' field, steps restarting
    each phase) were four unrelated runs and the doctor judged only the last."""
    run = F.simulate(45)
    p = tmp_path / "training_log.json"
    p.write_text(json.dumps(_curriculum(run, 3, 15)))
    r = load(p)
    assert r.steps.tolist() == list(range(1, 46))
    assert r.series["reward_mean"].tolist() == pytest.approx([st.mean for st in run])
    starts = [
        (e.step, e.data["phase"], e.data["phase_task_id"]) for e in r.events if e.kind == "phase"
    ]
    assert starts == [(1, 0, "task_0"), (16, 1, "task_1"), (31, 2, "task_2")]
    phases = r.manifest.config["phases"]
    assert [(ph["first_step"], ph["last_step"], ph["offset"]) for ph in phases] == [
        (1, 15, 0), (16, 30, 15), (31, 45, 30)
    ]  # fmt: skip
    assert not runs_of(r) and not any("back to back" in w for w in r.warnings)
    assert not any("non-numeric" in w for w in r.warnings)
    assert any("3 curriculum phases" in w and "--split-phases" in w for w in r.warnings)
    # named phases too
    q = tmp_path / "named.json"
    q.write_text(json.dumps(_curriculum(run, 3, 15, lambda k: ["easy", "medium", "hard"][k])))
    assert load(q).steps.tolist() == list(range(1, 46))


def test_split_phases_reads_a_curriculum_as_separate_runs(tmp_path):
    from rlvitals.importers.trl_log_history import load_trl_log_history

    run = F.simulate(45)
    p = tmp_path / "training_log.json"
    p.write_text(json.dumps(_curriculum(run, 3, 15)))
    r = load_trl_log_history(p, split_phases=True)
    assert r.steps.tolist() == list(range(1, 16)) and len(runs_of(r)) == 3
    first = load_trl_log_history(p, run="1", split_phases=True)
    assert first.series["reward_mean"].tolist() == pytest.approx([st.mean for st in run[:15]])


def test_runs_that_repeat_a_phase_or_lack_it_are_not_a_curriculum(tmp_path):
    run = F.simulate(40)
    same = _curriculum(run, 2, 20, lambda k: 0)  # the same phase twice: two runs, not one
    p = tmp_path / "same.json"
    p.write_text(json.dumps(same))
    assert len(runs_of(load(p))) == 2 and load(p).n_steps == 20
    part = _curriculum(run, 2, 20)
    for row in part[:21]:
        row.pop("phase")
    q = tmp_path / "part.json"
    q.write_text(json.dumps(part))
    assert len(runs_of(load(q))) == 2


def test_split_phases_through_load_and_the_doctor_cli(tmp_path, capsys):
    """``load(..., split_phases=True)`` and ``rlvitals doctor --split-phases`` read the phases
    as separate runs; without the flag the doctor judges the whole curriculum."""
    from rlvitals.cli import main

    run = F.simulate(60)
    p = tmp_path / "training_log.json"
    p.write_text(json.dumps(_curriculum(run, 3, 20)))
    assert load(p).n_steps == 60
    split = load(p, split_phases=True)
    assert split.n_steps == 20 and len(runs_of(split)) == 3
    assert load(p, run="2", split_phases=True).n_steps == 20
    F.write_generic(tmp_path / "plain.jsonl", run)  # a format without phases ignores the flag
    assert load(tmp_path / "plain.jsonl", split_phases=True).n_steps == 60
    argv = ["doctor", str(p), "--format", "json", "--allow-unjudged", "--no-progress"]
    main(argv)
    joined = json.loads(capsys.readouterr().out)
    main([*argv, "--split-phases"])
    phases = json.loads(capsys.readouterr().out)
    assert joined["vitals"]["steps"] == 60 and phases["vitals"]["steps"] == 20

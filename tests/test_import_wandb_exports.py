"""W&B chart CSV exports and run-history exports (pandas' real ``to_csv`` / ``to_parquet``)."""

from __future__ import annotations

import math

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.importers import load, runs_of, sniff
from rlvitals.recording.run import RunBuilder


def test_chart_csv_several_runs(tmp_path):
    run = F.simulate(30)
    p = F.write_wandb_chart(
        tmp_path / "wandb_export_2026-01-01T10_00_00.csv", run, runs=("a", "b - c")
    )
    assert sniff(p).name == "wandb_chart"
    r = load(p)
    assert r.steps.tolist() == list(range(1, 31)) and r.has("zero_std_frac")
    assert [x["name"] for x in runs_of(r)] == ["a", "b - c"]
    assert load(p, run="b - c").has("reward_mean")
    assert any("x axis is W&B's Step" in w for w in r.warnings)


def test_history_csv_and_parquet_trainer_step(tmp_path):
    run = F.simulate(30)
    df = F.history_frame(run)
    for p in (tmp_path / "h.csv", tmp_path / "h.parquet"):
        df.to_csv(p) if p.suffix == ".csv" else df.to_parquet(p)
        assert sniff(p).name == "wandb_history"
        r = load(p)
        assert r.steps.tolist() == list(range(1, 31))
        assert r.manifest.step_key == "train/global_step"
        assert "profiling/Time taken: GRPOTrainer._prepare_inputs" in r.series


# --- the columnar paths equal the row-by-row ones -------------------------------------------

_KEYS = ("reward", "train/kl", "eval_reward", "val/thing", "mystery", "eval/loss")
_rows = st.lists(
    st.tuples(
        st.integers(-3, 12),
        st.dictionaries(
            st.sampled_from(_KEYS),
            st.floats(allow_nan=True, allow_infinity=True, width=64),
            max_size=len(_KEYS),
        ),
    ),
    max_size=40,
)


def _same_run(a, b):
    assert a.steps.tolist() == b.steps.tolist() and a.eval_steps.tolist() == b.eval_steps.tolist()
    for x, y in ((a.series, b.series), (a.eval_series, b.eval_series)):
        assert sorted(x) == sorted(y)
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    assert sorted(a.unknown_keys) == sorted(b.unknown_keys)


@settings(max_examples=150, deadline=None, database=None)
@given(rows=_rows, cut=st.integers(0, 40))
def test_add_columns_is_add_row_per_row(rows, cut):
    """``RunBuilder.add_columns`` (the CSV importers' path) builds what ``add_row`` builds, in
    two calls too (later rows of a repeated step win either way)."""
    by_row = RunBuilder()
    for s, r in rows:
        by_row.add_row(s, r)
    by_col = RunBuilder()
    for part in (rows[:cut], rows[cut:]):
        steps = np.array([s for s, _ in part], dtype=np.int64)
        cols = {}
        for k in _KEYS:
            at = [i for i, (_, r) in enumerate(part) if k in r]
            if at:
                cols[k] = (np.array(at), np.array([part[i][1][k] for i in at]))
        by_col.add_columns(steps, cols)
    _same_run(by_row.build(), by_col.build())


@settings(max_examples=60, deadline=None, database=None)
@given(
    cells=st.lists(
        st.lists(
            st.sampled_from(["", "0.5", "nan", "NaN", "inf", "-1e3", "abc", " 2 ", "null", "7"]),
            min_size=3,
            max_size=3,
        ),
        max_size=30,
    )
)
def test_history_csv_cells_read_as_the_builder_reads_them(tmp_path_factory, cells):
    """Every cell of a W&B history CSV becomes what ``add_row`` makes of the same text."""
    import csv
    import io

    from rlvitals.importers import load

    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["_step", "_runtime", "train/reward", "loss", "kl"])
    for i, row in enumerate(cells):
        w.writerow([i, 1.0, *row])
    p = tmp_path_factory.mktemp("h") / "h.csv"
    p.write_text(out.getvalue())
    want = RunBuilder()
    for i, row in enumerate(cells):
        want.add_row(i, {k: c for k, c in zip(("train/reward", "loss", "kl"), row) if c != ""})
    if not any(
        c != "" and want_ok(c) for row in cells for c in row
    ):  # nothing numeric: an InputError, not a run
        return
    _same_run(load(p, "wandb_history"), want.build())


def want_ok(c: str) -> bool:
    try:
        float(c)
        return True
    except ValueError:
        return c.strip().lower() in ("nan", "none", "null")


def test_chart_torn_last_line_and_blank_lines(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text('"Step","r - loss"\n\n"1","0.5"\n\n"2","0.25"\n"3"')
    run = load(p)
    assert run.steps.tolist() == [1, 2] and any("torn last line" in w for w in run.warnings)
    assert math.isclose(run.series["loss"][1], 0.25)

"""W&B chart CSV exports and run-history exports (pandas' real ``to_csv`` / ``to_parquet``)."""

from __future__ import annotations

import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, runs_of, sniff


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

"""``rlvitals scan --engine ray``: one Ray task per run on a local Ray instance (2 CPUs) gives the
same table as the process pool — stores expanded, an unreadable run a row with its error.
Skipped when the ``ray`` extra is not installed (``pip install 'rlvitals[ray]'``)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
import rlvitals_tests_format_producers as F

from rlvitals.scan import render_scan, scan

ray = pytest.importorskip("ray")


@pytest.fixture
def ray_env(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    # Ray's session folder holds Unix sockets: their path must stay under ~107 bytes
    short = Path(tempfile.mkdtemp(prefix="rv-ray-", dir="/tmp"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("RAY_TMPDIR", str(short))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    yield
    if ray.is_initialized():
        ray.shutdown()
    shutil.rmtree(short, ignore_errors=True)


def test_ray_gives_the_same_table_as_the_process_pool(tmp_path, ray_env):
    from rlvitals_corpus import generate
    from rlvitals_corpus.writers import write

    runs = tmp_path / "runs"
    for i, fmt in enumerate(("jsonl", "csv", "trl_state")):
        write(generate("collapse_identical", seed=i, steps=80, onset=60), fmt, runs / fmt)
    F.write_log_history(runs / "history.json", [F.simulate(40), F.simulate(45, seed=1)])
    F.write_wandb_chart(runs / "chart.csv", F.simulate(50), runs=("a-1", "b-2"))
    (runs / "broken").mkdir()
    (runs / "broken" / "trainer_state.json").write_text('{"log_history": [')
    pool = scan([runs], jobs=2, cache=False)
    on_ray = scan([runs], jobs=2, engine="ray", cache=False)
    assert on_ray.engine == "ray" and not ray.is_initialized()  # started here, stopped here
    assert len(pool.rows) == 8
    assert on_ray.table() == pool.table()
    assert render_scan(on_ray, "csv") == render_scan(pool, "csv")
    assert [r.run for r in on_ray.rows if r.path.endswith("history.json")] == ["1", "2"]
    assert sum(1 for r in on_ray.rows if r.error) == 1

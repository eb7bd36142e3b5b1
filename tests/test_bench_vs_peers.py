"""benchmarks/bench_vs_peers.py without the peers: its log, its checks and its timer."""

from __future__ import annotations

import doctest
import importlib.util
import json
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_vs_peers.py"
_spec = importlib.util.spec_from_file_location("bench_vs_peers", _PATH)
bench = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = bench  # dataclasses look their module up there
_spec.loader.exec_module(bench)


def test_doctests():
    assert doctest.testmod(bench).failed == 0


def test_log_has_trl_keys_and_a_collapse_rlvitals_reads(tmp_path):
    from rlvitals.importers import load

    path = tmp_path / "log.jsonl"
    bench.write_log(path, 400)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(1, 401))
    keys = {"reward", "reward_std", "frac_reward_zero_std", "kl", "loss", "grad_norm", "entropy",
            "completions/mean_length", "clip_ratio/region_mean", "learning_rate"}  # fmt: skip
    assert keys <= set(rows[0])
    assert max(r["frac_reward_zero_std"] for r in rows[:299]) < 0.5
    assert min(r["frac_reward_zero_std"] for r in rows[300:]) > 0.85
    assert load(path).n_steps == 400


def test_summary_flags_missing_rows_and_raising_detectors():
    rv = {"run": {"steps": 10}, "errors": {}, "findings": [{"id": "SATURATION"}]}
    assert bench._summary("rlvitals", rv, 10) == ("", "10 rows; fired: SATURATION")
    assert bench._summary("rlvitals", rv, 20)[0] == "read 10 of 20 rows"
    rd = {"run": {"n_steps": 10}, "findings": [
        {"detector": "plateau", "severity": "SKIPPED",
         "summary": "detector raised MemoryError: Unable to allocate"}]}  # fmt: skip
    assert bench._summary("rl-doctor", rd, 10)[0] == "1 detector(s) raised: plateau (MemoryError)"
    rp = [{"signature_id": "REWARD_STD_DEATH", "severity": "warn"}]
    assert bench._summary("rlprobe", rp, 10) == ("", "10 rows (recording); fired: REWARD_STD_DEATH(warn)")  # fmt: skip


def test_timer_reports_exit_code_peak_and_kills_past_the_timeout(tmp_path):
    out, err = tmp_path / "out", tmp_path / "err"
    env = {"PATH": "/usr/bin:/bin"}
    s = bench.run_once([sys.executable, "-c", "print(1)"], env, out, err, 30, 1024)
    assert (s.rc, s.killed, out.read_text()) == (0, "", "1\n")
    assert 1 < s.peak_mib < 200  # the interpreter's own, not the test process's
    s = bench.run_once(["sleep", "5"], env, out, err, 0.3, 1024)
    assert s.killed.startswith("timed out") and s.wall < 4


def test_help_parses():
    with pytest.raises(SystemExit) as e:
        bench.main(["--help"])
    assert e.value.code == 0

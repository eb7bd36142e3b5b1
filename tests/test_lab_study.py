"""benchmarks/lab_study.py: the pre-registered analysis of a partly finished study (arms
complete on all seeds only; the Holm family bound), its tables, its SVG and its errors."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "lab_study.py"
_spec = importlib.util.spec_from_file_location("lab_study", _PATH)
study = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(study)

SEEDS = range(100, 116)


def _write(out: Path, arm: str, seed: int, acc: float, acr: float = 0.4) -> None:
    run = out / "runs" / f"{arm}-s{seed}"
    run.mkdir(parents=True)
    summary = {
        "method": arm,
        "final_accuracy": acc,
        "final_greedy_accuracy": acc,
        "acr_mean": acr,
        "acr_100": acr,
        "acr_solve_all_mean": acr / 2,
        "acr_solve_none_mean": acr / 2,
        "informative_per_1k": 1000 * (1 - acr) / 8,
        "acr_residual_mean": acr,
        "wasted_fraction": acr,
        "entropy_final": 0.3,
        "steps": 300,
        "generated": 19200,
        "wall_seconds": 20.0,
        "cpu_seconds": 18.0,
    }
    evals = [
        {"step": 0, "generated": 0, "accuracy": 0.5},
        {"step": 300, "generated": 19200, "accuracy": acc},
    ]
    result = {"args": {"seed": seed, "name": run.name}, "summary": summary, "evals": evals}
    (run / "result.json").write_text(json.dumps(result))


@pytest.fixture
def partial(tmp_path: Path) -> Path:
    """grpo and avspo on 16 seeds, pg_grpo 6 points higher on 16, dr_grpo on 5 only."""
    rng = np.random.default_rng(0)
    for s in SEEDS:
        base = 0.5 + 0.03 * rng.standard_normal()
        _write(tmp_path, "grpo", s, base)
        _write(tmp_path, "avspo", s, base + 0.002 * rng.standard_normal())
        _write(tmp_path, "pg_grpo", s, base + 0.06 + 0.005 * rng.standard_normal(), acr=0.35)
        if s < 105:
            _write(tmp_path, "dr_grpo", s, base)
    return tmp_path


def test_only_arms_with_every_seed_are_analysed(partial):
    doc = study.analyse(partial)
    assert doc["complete_arms"] == ["grpo", "avspo", "pg_grpo"]
    assert doc["finished_runs"]["dr_grpo"] == list(range(100, 105))
    assert set(doc["family_1"]["arms"]) == {"grpo", "avspo", "pg_grpo"}
    assert len(doc["family_1"]["pairs"]) == 3


def test_the_pre_registered_family_bound(partial):
    doc = study.analyse(partial)
    primary = doc["family_1"]["pairs"]["avspo - pg_grpo"]
    assert primary["diff"] == pytest.approx(-6.0, abs=0.5)  # points
    assert primary["decision"] == "lower"  # avspo - pg_grpo, Holm over 3
    assert primary["preregistered_decision"] == "lower"  # 45 p < 0.05 too
    assert primary["t_p_bonferroni_45"] == pytest.approx(min(1.0, 45 * primary["t_p"]))
    same = doc["family_1"]["pairs"]["grpo - avspo"]
    assert same["preregistered_decision"] == "equivalent"  # within ±2 even at 45 x TOST p
    assert doc["extension_32"] is False  # decided: no extension
    # a p between 0.05 / 45 and 0.05 cannot be decided without the other arms
    assert study._bound_decision({"diff": 1.0, "t_p": 0.01, "tost_p": 0.5}, 45) == (
        "undetermined until the other arms run"
    )
    assert study._bound_decision({"diff": 1.0, "t_p": 0.2, "tost_p": 0.3}, 45) == "inconclusive"


def test_tables_and_plot(partial):
    doc = study.analyse(partial)
    md = study.markdown(doc)
    assert "| pg_grpo − avspo | +6." in md  # the primary comparison, signed as registered
    assert "lower" not in md.split("| pg_grpo − avspo |")[1].split("\n")[0]
    assert "32-seed extension rule" in md and "not met" in md
    svg = study.svg(doc)
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and "<style>" in svg
    assert svg.count("<path") + svg.count("<polyline") >= 3  # three arms' curves at least
    assert len(svg) < 20_000  # small enough to commit


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert study.main(["analyse", "--out", str(tmp_path / "nothing")]) == 2
    assert "no runs/ folder" in capsys.readouterr().err
    assert study.main(["run", "--out", str(tmp_path), "--stages", "4"]) == 2
    assert "--stages takes numbers 1-3" in capsys.readouterr().err


def test_stages_follow_the_amendment():
    s = study.stages()
    assert s[1] == ("grpo", "avspo", "pg_grpo")
    assert len(s[1]) + len(s[2]) == 10 and set(s[1]).isdisjoint(s[2])
    assert set(s[3]) == {"pg_grpo_iw", "ctl_random_sign", "ctl_shuffled_keys", "ctl_random_select"}
    assert study._seeds(None) == tuple(SEEDS)
    assert study._seeds(32) == tuple(range(100, 132))  # the pre-registered extension


def test_an_extension_not_finished_analyses_nothing(partial):
    doc = study.analyse(partial, seeds=32)  # seeds 116-131 not run: no arm is complete
    assert doc["complete_arms"] == [] and doc["family_1"] is None


def test_the_controls_family_is_bounded_by_its_six_comparisons(partial):
    rng = np.random.default_rng(3)
    for s in SEEDS:
        pg = json.loads((partial / "runs" / f"pg_grpo-s{s}" / "result.json").read_text())
        acc = pg["summary"]["final_accuracy"]
        _write(partial, "ctl_random_sign", s, acc - 0.05 + 0.004 * rng.standard_normal())
    doc = study.analyse(partial)
    v = doc["family_2"]["vs_reference"]["ctl_random_sign"]["final_accuracy"]
    assert v["diff"] == pytest.approx(-5.0, abs=0.5) and v["decision"] == "lower"
    assert v["preregistered_decision"] == "lower"  # 6 p < 0.05 as well
    assert "| ctl_random_sign | -5." in study.markdown(doc)


def test_with_every_arm_finished_the_decision_is_the_holm_one(partial, monkeypatch):
    monkeypatch.setattr(study, "FAMILY_1_PAIRS", 3)  # pretend the three arms are the family
    doc = study.analyse(partial)
    for v in doc["family_1"]["pairs"].values():
        assert v["preregistered_decision"] == v["decision"]

"""The ``rlvitals acr`` command and CLI basics (version, help, bad input)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from rlvitals.cli import main
from rlvitals.examples import example_path
from rlvitals.importers import load
from rlvitals.vitals import group_series


def test_acr_example_json_matches_library(capsys):
    assert main(["acr", "--example", "collapse", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    run = load(example_path("collapse"))
    s = group_series(run.groups)
    assert [r["step"] for r in out["steps"]] == s.steps.tolist()
    np.testing.assert_allclose([r["acr"] for r in out["steps"]], s.acr, atol=1e-6)
    # the example's groups go homogeneous from step 60: a stall is reported from there
    assert out["summary"]["stalls"] and out["summary"]["stalls"][0]["onset_step"] == 60


def test_acr_and_doctor_agree_on_stall_onsets(capsys):
    """One answer per question: the stall `rlvitals acr` prints is the doctor's ACR_STALL,
    same onset (the centred smoothing once put the doctor's a step early: 59 vs 60)."""
    from rlvitals.doctor import diagnose

    assert main(["acr", "--example", "collapse", "--json"]) == 0
    stalls = json.loads(capsys.readouterr().out)["summary"]["stalls"]
    d = diagnose(load(example_path("collapse")))
    assert [(s["onset_step"], s["end_step"]) for s in stalls] == [
        (f.onset_step, f.end_step) for f in d.by_id("ACR_STALL")
    ]
    # the onset is the first step whose own ACR is above 0.35
    t = d.vitals
    onset = stalls[0]["onset_step"]
    acr = dict(zip(t.steps.tolist(), t.series["acr"].tolist()))
    assert acr[onset] > 0.35 and acr[onset - 1] <= 0.35


def test_acr_table(capsys):
    assert main(["acr", "--example", "collapse", "--every", "30"]) == 0
    text = capsys.readouterr().out
    assert "ACR" in text and "stall (warn): ACR 0.875 > 0.35" in text


def test_acr_usage_errors_exit_2_with_one_line(tmp_path, capsys):
    """Issue 11 item 14: bad --tau values and a run whose every reward is null are usage
    errors, never tracebacks."""
    for tau in ("-1", "nan", "inf"):
        assert main(["acr", "--example", "collapse", "--tau", tau]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--tau" in err
    p = tmp_path / "nulls.jsonl"
    p.write_text("".join(f'{{"step": {s}, "group": 0, "rewards": [null, null]}}\n' for s in (1, 2)))
    assert main(["acr", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nulls.jsonl" in err


def test_acr_bad_inputs(tmp_path, capsys):
    assert main(["acr", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"step": 1, "group": 0, "rewards": [1, 0]}\n{"step": "x", "group": 0, "rewards": [1]}\n'
    )
    assert main(["acr", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.jsonl" in err and "line 2" in err
    assert main(["acr", "--example", "nope"]) == 2


def test_module_entry_point_version_and_help():
    out = subprocess.run(
        [sys.executable, "-m", "rlvitals", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("rlvitals ")
    out = subprocess.run(
        [sys.executable, "-m", "rlvitals", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "acr" in out.stdout


def test_acr_and_doctor_split_rewards_in_0_5_alike(tmp_path, capsys):
    """Renovation bug 3: for per-group rewards in [0, 5], ``rlvitals acr`` called the collapsed
    groups "flat" (it assumed [0, 1]) while the doctor called them "solve_all" (its vitals infer
    the range from the rewards). Both now read one library call (rlvitals.vitals.acr_series)."""
    from rlvitals.doctor import diagnose

    p = tmp_path / "groups.jsonl"
    lines = []
    for step in range(1, 41):
        lines.append(json.dumps({"step": step, "group": 0, "rewards": [5.0] * 4}))
        lines.append(json.dumps({"step": step, "group": 1, "rewards": [0.0, 5.0, 2.5, 5.0]}))
    p.write_text("\n".join(lines) + "\n")
    assert main(["acr", str(p), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["reward_range"] == [0.0, 5.0]
    assert {(r["solve_all"], r["flat"]) for r in out["steps"]} == {(0.5, 0.0)}
    v = diagnose(load(p)).vitals
    assert (v.reward_min, v.reward_max) == (0.0, 5.0)
    np.testing.assert_allclose(v.series["acr_solve_all"], [r["solve_all"] for r in out["steps"]])
    np.testing.assert_allclose(v.series["acr_flat"], [r["flat"] for r in out["steps"]])

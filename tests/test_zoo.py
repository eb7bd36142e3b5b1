"""The failure zoo (issue 22): real TRL runs with a known fault injected, and their truth.

The smoke preset (three injected conditions and one healthy control) is trained once per
session on the tiny model; the tests check that every writer a user has is there and readable,
and that each injection shows in the ground truth at its step while the healthy control shows
none. benchmarks/zoo.py scores the doctor on the full zoo.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvitals.conditions import CONDITIONS
from rlvitals.lab import failure_zoo as Z
from rlvitals.lab.zoo_judge import WRITERS, judge_run, score


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    cache = tmp_path_factory.getbasetemp().parent / "rlvitals-lab-cache"
    out = tmp_path_factory.mktemp("zoo")
    truths = Z.zoo("smoke", out, workers=1, cache_dir=str(cache))
    return out, cache, {t["condition"]: t for t in truths}


def _series(truth, key):
    return [s[key] for s in truth["steps"]]


def _mean(xs):
    return sum(xs) / len(xs)


def test_every_zoo_condition_is_in_the_vocabulary_and_documented():
    assert set(Z.ZOO_CONDITIONS) <= set(CONDITIONS)
    assert set(CONDITIONS) - set(Z.ZOO_CONDITIONS) == {"NO_GROUP_BASELINE"}
    doc = Path(__file__).resolve().parents[1].joinpath("docs", "doctor.md").read_text()
    for cid in CONDITIONS:
        assert f"`{cid}`" in doc, cid
    full = Z.PRESETS["full"]
    assert {r.condition for r in full} == set(Z.ZOO_CONDITIONS)
    dev = {(r.condition, r.seed) for r in full if r.split == "dev"}
    held = {(r.condition, r.seed) for r in full if r.split == "heldout"}
    assert not dev & held and sum(r.condition == "HEALTHY" for r in full) >= 4


def test_each_run_leaves_every_writer_and_its_truth(smoke):
    out, _, truths = smoke
    assert sorted(truths) == [
        "HEALTHY",
        "IDENTICAL_COMPLETIONS",
        "POLICY_DEGRADATION",
        "RUNAWAY_LENGTH",
    ]
    for cid, truth in truths.items():
        run = out / f"{cid.lower()}-s{truth['seed']}"
        assert (run / "rlvitals").is_dir() and list((run / "tensorboard").glob("events.out.*"))
        state = json.loads((run / "trainer_state.json").read_text())
        assert state["global_step"] == Z.STEPS == len(truth["steps"])
        assert "{'loss'" in (run / "console.log").read_text()
        saved = json.loads((run / "truth.json").read_text())
        assert saved["condition"] == cid and saved["steps"] == truth["steps"]
        for writer in WRITERS:
            assert judge_run(run, writer)["primary"] != "UNREADABLE", (cid, writer)


def test_the_injection_shows_in_the_truth_at_its_step(smoke):
    _, _, truths = smoke
    k = Z.INJECT_AT
    greedy = truths["IDENTICAL_COMPLETIONS"]
    assert greedy["injected_step"] == k
    acr = _series(greedy, "acr")
    assert all(a == 1.0 for a in acr[k - 1 :]) and _mean(acr[: k - 1]) < 0.6
    passed = _series(greedy, "pass_rate")  # greedy answers still right on some prompts
    assert 0.0 < _mean(passed[k - 1 :]) < 1.0

    worse = _series(truths["POLICY_DEGRADATION"], "pass_rate")
    assert _mean(worse[-20:]) < 0.5 * _mean(worse[: k - 1])

    runaway = truths["RUNAWAY_LENGTH"]
    assert _mean(_series(runaway, "pass_rate")[k + 4 :]) < 0.5 * _mean(
        _series(runaway, "pass_rate")[: k - 1]
    )
    out = smoke[0]
    rows = json.loads(
        (out / f"runaway_length-s{runaway['seed']}" / "trainer_state.json").read_text()
    )
    clipped = [r["completions/clipped_ratio"] for r in rows["log_history"] if "loss" in r]
    assert max(clipped[: k - 1]) == 0.0 and _mean(clipped[k - 1 :]) > 0.3


def test_the_healthy_control_shows_none_of_it(smoke):
    healthy = smoke[2]["HEALTHY"]
    assert healthy["injected_step"] == 1 and healthy["injection"] is None
    acr, passed = _series(healthy, "acr"), _series(healthy, "pass_rate")
    assert not any(a == 1.0 for a in acr)
    assert _mean(passed[-20:]) > 0.6 * _mean(passed[:20])


def test_a_finished_zoo_is_read_back_and_the_cli_prints_it(smoke, capsys):
    from rlvitals.cli import main

    out, cache, truths = smoke
    stamp = {p: p.stat().st_mtime_ns for p in out.glob("*/truth.json")}
    assert main(["lab", "zoo", "--out", str(out), "--cache", str(cache), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/truth.json")} == stamp
    for cid in truths:
        assert cid in printed
    assert json.loads((out / "zoo.json").read_text())["runs"][0]["name"]


def test_bad_zoo_arguments_are_one_line_errors(tmp_path, capsys):
    from rlvitals.cli import main

    for argv in (["--preset", "nope"], ["--condition", "NO_GROUP_BASELINE"], ["--workers", "0"]):
        assert main(["lab", "zoo", "--out", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err


def test_scores_count_conditions_once_and_healthy_controls_apart():
    rows = [
        {
            "condition": "HEALTHY",
            "split": "dev",
            "writer": "w",
            "primary": "HEALTHY",
            "conditions": ["HEALTHY"],
        },
        {
            "condition": "HEALTHY",
            "split": "dev",
            "writer": "w",
            "primary": "TOO_HARD",
            "conditions": ["TOO_HARD"],
        },
        {
            "condition": "TOO_HARD",
            "split": "dev",
            "writer": "w",
            "primary": "TOO_HARD",
            "conditions": ["TOO_HARD"],
        },
        {
            "condition": "SATURATED",
            "split": "dev",
            "writer": "w",
            "primary": "HEALTHY",
            "conditions": ["HEALTHY", "SATURATED"],
        },
    ]
    s = score(rows)["dev/w"]
    assert (s["conditions_right"], s["conditions"]) == (1, 3)
    assert s["recall"] == 1.0 and s["false_on_healthy"] == 1 and s["healthy_runs"] == 2


def test_the_doctor_names_each_smoke_condition_first_on_every_writer(smoke):
    """The differential diagnosis on real runs with a known cause (issue 23's CI check)."""
    out, _, truths = smoke
    for cid, truth in truths.items():
        run = out / f"{cid.lower()}-s{truth['seed']}"
        for writer in WRITERS:
            verdict = judge_run(run, writer)
            assert verdict["primary"] == cid, (cid, writer, verdict["named"])


def test_the_condition_pictures_are_in_sync_with_their_extracts():
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[1] / "scripts" / "zoo_pictures.py"
    run = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


@pytest.fixture(scope="module")
def every_condition(tmp_path_factory):
    """Development seed 0 of every zoo condition (15 runs, about 45 s on one core)."""
    cache = tmp_path_factory.getbasetemp().parent / "rlvitals-lab-cache"
    out = tmp_path_factory.mktemp("zoo-all")
    runs = [r for r in Z.runs_of(Z.ZOO_CONDITIONS, heldout=False) if r.seed == 0]
    truths = Z.zoo(runs, out, workers=1, cache_dir=str(cache))
    return {t["condition"]: (t, out / f"{t['condition'].lower()}-s0") for t in truths}


def _logged(run_dir, key):
    rows = json.loads((run_dir / "trainer_state.json").read_text())["log_history"]
    return [r[key] for r in rows if "loss" in r and key in r]


def test_every_injection_shows_in_its_run_and_the_healthy_control_shows_none(every_condition):
    k = Z.INJECT_AT
    before, after = slice(0, k - 1), slice(k - 1, None)

    def truth(cid, key):
        return _series(every_condition[cid][0], key)

    def logged(cid, key):
        return _logged(every_condition[cid][1], key)

    acr = truth("VERIFIER_CONSTANT", "acr")
    rewards = truth("VERIFIER_CONSTANT", "reward_mean")
    assert all(r == 0.0 for r in rewards[after]) and all(a == 1.0 for a in acr[after])
    assert _mean(rewards[before]) > 0.2
    assert all(a == 1.0 for a in truth("IDENTICAL_COMPLETIONS", "acr")[after])
    assert _mean(truth("SATURATED", "pass_rate")) > 0.8
    assert _mean(truth("TOO_HARD", "pass_rate")) < 0.1
    small = truth("SMALL_GROUPS", "acr")  # four groups a step: whole steps tie by chance
    assert set(small) <= {0.0, 0.25, 0.5, 0.75, 1.0} and 0.1 < small.count(1.0) / len(small) < 0.9
    adv = logged("ADVANTAGE_PIPELINE", "rlvitals/adv_std")
    assert max(adv[after]) < 0.01 * _mean(adv[before])
    worse = truth("POLICY_DEGRADATION", "pass_rate")
    assert _mean(worse[-20:]) < 0.6 * _mean(worse[before])
    ent = logged("ENTROPY_COLLAPSE", "entropy")
    assert _mean(ent[-10:]) < 0.5 * _mean(ent[before])
    sure = truth("ENTROPY_COLLAPSE", "pass_rate")  # a surer policy, not a worse one
    assert _mean(sure[-20:]) > 0.6 * _mean(sure[before])
    ent = logged("ENTROPY_BLOWUP", "entropy")
    assert _mean(ent[-10:]) > 3 * _mean(ent[before])
    clipped = logged("RUNAWAY_LENGTH", "completions/clipped_ratio")
    assert max(clipped[before]) == 0.0 and _mean(clipped[after]) > 0.3
    assert _mean(logged("LENGTH_LIMIT", "completions/clipped_ratio")[: k - 1]) > 0.3
    kl = logged("KL_BLOWUP", "kl")
    assert max(kl[after]) > 100 * max(_mean(kl[before]), 1e-3)
    hack = every_condition["REWARD_HACKING"]
    accuracy = _logged(hack[1], "eval_accuracy")
    assert _mean(truth("REWARD_HACKING", "reward_mean")[-10:]) > _mean(
        truth("REWARD_HACKING", "reward_mean")[:3]
    )
    assert accuracy[-1] < accuracy[0]
    healthy = truth("HEALTHY", "pass_rate")
    assert not any(a == 1.0 for a in truth("HEALTHY", "acr"))
    assert _mean(healthy[-20:]) > 0.6 * _mean(healthy[:20])
    ent = logged("HEALTHY", "entropy")
    assert 0.5 < _mean(ent[-10:]) / _mean(ent[:10]) < 2.0
    assert max(logged("HEALTHY", "completions/clipped_ratio")) < 0.1

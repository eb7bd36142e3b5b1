"""prime-rl rollouts ``traces/step_<n>/train/traces.jsonl`` (byte-faithful:
``write_prime_rl_traces``): exact per-group ACR at the arrival step, metrics.jsonl joined."""

from __future__ import annotations

import json

import numpy as np
import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, sniff

RUN = F.simulate(steps=60, groups=8, g=4)


@pytest.fixture
def out(tmp_path):
    return F.write_prime_rl_traces(tmp_path / "outputs", RUN, failed=0)


@pytest.mark.parametrize("where", ["", "traces", "traces/step_3"])
def test_the_output_folder_its_traces_and_one_step_are_claimed(out, where):
    assert sniff(out / where if where else out).name == "prime_rl_traces"


def test_one_traces_file_is_claimed_and_the_metrics_file_stays_prime_rl(out):
    assert sniff(out / "traces" / "step_3" / "train" / "traces.jsonl").name == "prime_rl_traces"
    assert sniff(out / "metrics.jsonl").name == "prime_rl"


def test_groups_are_formed_by_group_id_whatever_the_arrival_order(out):
    run = load(out)
    g = run.groups
    assert run.manifest.trainer == "prime_rl" and run.manifest.group_size == 4
    assert set(g.sizes().tolist()) == {4}
    for st in RUN:  # exact ACR per arrival step (0-based orchestrator step)
        sel = g.step == st.step - 1
        assert int(sel.sum()) == len(st.rewards)
        rows = np.concatenate(
            [g.rewards[g.offsets[i] : g.offsets[i + 1]] for i in np.flatnonzero(sel)]
        )
        assert sorted(rows.tolist()) == sorted(st.flat)
    acr = run_acr(run)
    want = np.array([st.zero_std_frac for st in RUN])
    np.testing.assert_allclose(acr, want)


def run_acr(run):
    """Per step, the share of groups whose rewards all agree (DESIGN.md 3.1 with tau = 0)."""
    g = run.groups
    lo = np.minimum.reduceat(g.rewards, g.offsets[:-1])
    hi = np.maximum.reduceat(g.rewards, g.offsets[:-1])
    collapsed = lo == hi
    return np.array([collapsed[g.step == s].mean() for s in np.unique(g.step)])


def test_advantages_are_read_and_eval_episodes_are_not(out):
    run = load(out)
    g = run.groups
    assert g.advantages is not None
    for i in range(g.n_groups):  # prime-rl's reward - group mean
        r = g.rewards[g.offsets[i] : g.offsets[i + 1]]
        np.testing.assert_allclose(g.advantages[g.offsets[i] : g.offsets[i + 1]], r - r.mean())
    assert g.n_groups == sum(len(st.rewards) for st in RUN)  # no eval group joined


def test_metrics_jsonl_beside_the_traces_joins_on_the_same_steps(out):
    run = load(out)
    assert "solve_none_frac" in run.series
    steps = run.steps[np.isfinite(run.series["solve_none_frac"])]
    assert steps.min() == 0 and steps.max() == len(RUN) - 1
    assert run.manifest.config["metrics_file"].endswith("metrics.jsonl")


def test_failed_rollouts_are_unscorable_and_a_judge_seat_does_not_count(tmp_path):
    out = F.write_prime_rl_traces(tmp_path / "o", RUN[:5], metrics=False, failed=2)
    run = load(out)
    g = run.groups
    assert np.isnan(g.rewards).sum() == 2 * 5
    ok = ~np.isnan(g.rewards)
    assert set(np.unique(g.rewards[ok]).tolist()) <= {0.0, 1.0}  # the judge's empty rewards
    assert any("group sizes vary" in w for w in run.warnings)


def test_the_doctor_reads_the_collapse_from_the_groups(out, capsys):
    from rlvitals.cli import main

    assert main(["doctor", str(out), "--format", "json", "--fail-on", "never"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["run"]["format"] == "prime_rl_traces"
    assert rep["vitals"]["evidence"] == "groups"
    ids = {f["id"] for f in rep["findings"]}
    assert "SATURATION" in ids  # the simulated pass rate climbs to 1: groups solved


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"traces":[],"group":{"id":"a"}}\n[1, 2]\n', "expected a JSON object per line"),
        (b'{"traces":[],"group":{"id":"a"}}\n{"traces": oops}\n{"traces":[]}\n', "line 2"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, content, says):
    from rlvitals.cli import main

    p = tmp_path / "step_1" / "train" / "traces.jsonl"
    p.parent.mkdir(parents=True)
    p.write_bytes(content)
    assert main(["doctor", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(p) in err and says in err


def test_a_folder_without_train_traces_is_refused(tmp_path, capsys):
    from rlvitals.cli import main

    (tmp_path / "traces" / "step_0" / "eval").mkdir(parents=True)
    assert main(["doctor", str(tmp_path)]) == 2
    assert "rlvitals: error:" in capsys.readouterr().err

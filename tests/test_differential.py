"""The differential diagnosis names the cause, not the symptom (issue 23).

Each test writes a log of its own with the shape of a run the doctor misread before (TRL
``log_history`` keys, as JSONL), and checks the condition named first. The shapes come from the
issue's list; none is a copy of a real log.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlvitals.doctor import DoctorConfig, diagnose_path


def _log(tmp_path, n, **series):
    rows = []
    for i in range(n):
        row = {"step": i + 1}
        for key, values in series.items():
            v = values[i] if hasattr(values, "__len__") else values
            if v is not None and np.isfinite(v):
                row[key] = float(v)
        rows.append(row)
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _conditions(path, **config):
    dx = diagnose_path(path, config=DoctorConfig(allow_unjudged=True, **config))
    return [c.id for c in dx.conditions], dx


def _noise(n, scale, seed=0):
    return np.random.default_rng(seed).normal(0, scale, n)


def test_a_greedy_sampler_is_not_saturation(tmp_path):
    """ACR 0.3 -> 1.0 in one step at step 80 while the pass rate holds at 0.81."""
    n = 160
    acr = np.where(np.arange(n) < 79, 0.3 + _noise(n, 0.05), 1.0)
    reward = 0.81 + _noise(n, 0.03, 1)
    path = _log(
        tmp_path, n, reward=reward, frac_reward_zero_std=acr, entropy=0.4 + _noise(n, 0.02, 2)
    )
    ids, dx = _conditions(path)
    assert ids[0] == "IDENTICAL_COMPLETIONS" and "SATURATED" not in ids
    assert dx.conditions[0].onset_step == 80
    assert any("verifier" in a for a in dx.conditions[0].against)


def test_completions_that_stop_terminating_are_runaway_not_a_small_limit(tmp_path):
    """Clipped share 0.6 -> 1.0 at a 512 cap while terminated completions are 22-290 tokens."""
    n = 120
    clipped = np.clip(np.linspace(0.6, 1.05, n), 0, 1)
    term = np.linspace(290, 22, n)
    path = _log(
        tmp_path,
        n,
        reward=0.5 + _noise(n, 0.1),
        frac_reward_zero_std=0.1,
        **{
            "completions/clipped_ratio": clipped,
            "completions/mean_terminated_length": term,
            "completions/max_length": 512.0,
            "completions/mean_length": clipped * 512 + (1 - clipped) * term,
        },
    )
    ids, dx = _conditions(path)
    assert ids[0] == "RUNAWAY_LENGTH" and "LENGTH_LIMIT" not in ids
    first = dx.conditions[0].actions[0]
    assert "EOS" in first and "max_completion_length" not in first  # EOS before any limit


def test_a_cap_too_small_from_the_start_is_the_length_limit(tmp_path):
    n = 100
    path = _log(
        tmp_path,
        n,
        reward=0.3 + _noise(n, 0.05),
        frac_reward_zero_std=0.2,
        **{
            "completions/clipped_ratio": 0.7 + _noise(n, 0.03),
            "completions/mean_terminated_length": 240 + _noise(n, 5),
            "completions/max_length": 256.0,
        },
    )
    ids, _ = _conditions(path)
    assert ids[0] == "LENGTH_LIMIT" and "RUNAWAY_LENGTH" not in ids


def test_a_falling_training_reward_is_policy_degradation_not_no_findings(tmp_path):
    """0.7 -> 0.1 over 300 steps: the policy got worse."""
    n = 300
    path = _log(
        tmp_path, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2
    )
    ids, dx = _conditions(path)
    assert ids[0] == "POLICY_DEGRADATION"
    assert (
        "learning_rate" in dx.conditions[0].actions[0]
        or "learning rate" in dx.conditions[0].actions[0]
    )


def test_a_fall_after_a_slow_noisy_start_is_policy_degradation(tmp_path):
    """Pass rate 0.2 while the policy finds its feet, 0.5 by step 15, 0.13 from step 22 to the
    end: the quarter means (0.36 early) hide the fall; the level before the change does not."""
    n = 80
    rng = np.random.default_rng(3)
    level = np.where(np.arange(n) < 10, 0.2, np.where(np.arange(n) < 21, 0.5, 0.13))
    reward = np.clip(level + rng.normal(0, 0.08, n), 0, 1)
    path = _log(tmp_path, n, reward=reward, frac_reward_zero_std=0.4 + _noise(n, 0.05, 4))
    ids, dx = _conditions(path)
    assert ids[0] == "POLICY_DEGRADATION"
    assert 20 <= dx.conditions[0].onset_step <= 24
    assert "stays down" in dx.conditions[0].for_[0]


def test_a_short_dip_of_the_pass_rate_is_not_degradation(tmp_path):
    """0.5 throughout with 6 bad steps in the middle: not a fall."""
    n = 80
    reward = 0.5 + _noise(n, 0.05, 5)
    reward[40:46] = 0.1
    path = _log(tmp_path, n, reward=reward, frac_reward_zero_std=0.3 + _noise(n, 0.05, 6))
    ids, _ = _conditions(path)
    assert "POLICY_DEGRADATION" not in ids


def test_a_kl_jump_after_a_noisy_start_is_a_kl_blowup(tmp_path):
    """KL 0.2-0.9 over the first steps, 0.15-0.3 just before step 21, ~4 nats from step 21 with
    the pass rate at 0: the jump (15x the KL just before it) leads, not the reward's fall."""
    n = 80
    rng = np.random.default_rng(7)
    kl = np.where(np.arange(n) < 8, rng.uniform(0.2, 0.9, n), rng.uniform(0.12, 0.3, n))
    kl[20:] = rng.uniform(3.4, 6.3, n - 20)
    reward = np.where(np.arange(n) < 20, 0.45 + _noise(n, 0.08, 8), 0.0)
    acr = np.where(np.arange(n) < 20, 0.3 + _noise(n, 0.05, 9), 1.0)
    path = _log(tmp_path, n, reward=reward, frac_reward_zero_std=acr, kl=kl)
    ids, dx = _conditions(path)
    assert ids[0] == "KL_BLOWUP" and dx.conditions[0].onset_step == 21
    assert "POLICY_DEGRADATION" in ids  # the consequence, named after its cause


def test_a_kl_that_is_high_from_a_slow_climb_is_no_jump(tmp_path):
    """KL climbing smoothly 0.05 -> 1.5 over 300 steps: no local jump, no 20x rise."""
    n = 300
    kl = np.linspace(0.08, 1.5, n)
    path = _log(tmp_path, n, reward=0.5 + _noise(n, 0.05, 10), frac_reward_zero_std=0.3, kl=kl)
    ids, _ = _conditions(path)
    assert "KL_BLOWUP" not in ids


def test_a_saturated_run_that_flips_to_all_wrong_is_a_collapse_at_the_flip(tmp_path):
    """Pass rate 0.96 (zero spread on 85% of groups) then exactly 0 from step 51: the ACR barely
    moves (0.85 -> 1.0), the collapse is at the flip, and a one-step fall to one exact value is
    the verifier's doing."""
    n = 100
    before = np.arange(n) < 50
    path = _log(
        tmp_path,
        n,
        reward=np.where(before, 0.96 + _noise(n, 0.01, 11), 0.0),
        frac_reward_zero_std=np.clip(np.where(before, 0.85 + _noise(n, 0.03, 12), 1.0), 0, 1),
        reward_std=np.where(before, 0.05, 0.0),
    )
    ids, dx = _conditions(path)
    assert ids[0] == "VERIFIER_CONSTANT" and dx.conditions[0].onset_step == 51
    death = [f for f in dx.findings if f.id == "REWARD_STD_DEATH"]
    assert [f.onset_step for f in death] == [51]


def test_zeros_at_the_ceiling_do_not_date_the_collapse_at_the_floor(tmp_path):
    """Every answer right from step 26 (spread 0 at the ceiling), all wrong from step 51: the
    collapse at the floor starts at 51, the ceiling stretch is its own informational finding."""
    n = 100
    reward = np.concatenate([np.linspace(0.5, 1.0, 25), np.ones(25), np.zeros(50)])
    std = np.concatenate([0.3 + _noise(25, 0.02, 13), np.zeros(75)])
    _, dx = _conditions(_log(tmp_path, n, reward=reward, reward_std=std))
    death = {f.onset_step: f for f in dx.findings if f.id == "REWARD_STD_DEATH"}
    assert set(death) == {26, 51}
    assert death[51].severity.value != "info" and "floor" in death[51].message
    assert death[26].severity.value == "info" and "ceiling" in death[26].message


def test_printed_zero_grad_norms_do_not_turn_a_lasting_rise_into_spikes(tmp_path):
    """grad_norm 0.3 -> 3.0 from step 51 and stays, every third row printed as 0.0: a new
    level, not spikes; an isolated 40x value among the same zeros still is one."""
    n = 100
    gn = np.concatenate([0.3 + _noise(50, 0.03, 14), 3.0 + _noise(50, 0.3, 15)])
    gn[::3] = 0.0
    common = {"reward": 0.5 + _noise(n, 0.05, 16), "frac_reward_zero_std": 0.3}
    _, dx = _conditions(_log(tmp_path, n, grad_norm=gn, **common))
    assert "GRAD_SPIKE" not in {f.id for f in dx.findings}
    gn = 0.3 + _noise(n, 0.03, 17)
    gn[::3] = 0.0
    gn[61] = 12.0
    (tmp_path / "b").mkdir()
    _, dx = _conditions(_log(tmp_path / "b", n, grad_norm=gn, **common))
    spikes = [f for f in dx.findings if f.id == "GRAD_SPIKE"]
    assert len(spikes) == 1 and spikes[0].onset_step == 62


def test_completions_that_shrink_are_a_sign_never_a_length_explosion(tmp_path):
    """Mean length 53 -> 3 tokens, then 4.5: the baseline is before the fall, so 4.5 is no
    explosion; with the reward falling too, the shrink is a sign of the degradation."""
    n = 200
    rng = np.random.default_rng(18)
    length = np.concatenate(
        [
            53 + rng.normal(0, 3, 40),
            np.linspace(53, 3, 10),
            3 + rng.normal(0, 0.3, 80),
            4.5 + rng.normal(0, 0.3, 70),
        ]
    )
    reward = np.concatenate([0.5 + _noise(50, 0.05, 19), 0.1 + _noise(150, 0.03, 20)])
    keys = {"completions/mean_length": length, "completions/max_length": 256.0}
    ids, dx = _conditions(_log(tmp_path, n, reward=reward, frac_reward_zero_std=0.3, **keys))
    assert "LENGTH_EXPLOSION" not in {f.id for f in dx.findings}
    assert ids[0] == "POLICY_DEGRADATION"
    assert any("shrink 53 -> 4 tokens" in s for s in dx.conditions[0].for_)


def test_a_sampler_fault_on_three_steps_in_four_is_identical_completions(tmp_path):
    """From step 41 every group agrees on three steps in four (a generation cache that hits
    most steps) while the pass rate holds: the sampler, not the advantage pipeline (the
    advantages are flat only because the groups agree)."""
    n = 100
    i = np.arange(n)
    bad = (i >= 40) & (i % 4 != 0)
    path = _log(
        tmp_path,
        n,
        reward=0.5 + _noise(n, 0.03, 21),
        frac_reward_zero_std=np.where(bad, 1.0, 0.3 + _noise(n, 0.05, 22)),
        **{"rlvitals/adv_std": np.where(bad, 0.0, 0.9 + _noise(n, 0.05, 23))},
    )
    ids, dx = _conditions(path)
    assert ids[0] == "IDENTICAL_COMPLETIONS" and "ADVANTAGE_PIPELINE" not in ids
    assert 41 <= dx.conditions[0].onset_step <= 43 and dx.conditions[0].end_step is None


def test_a_verifier_fault_that_heals_has_an_end(tmp_path):
    """The reward is exactly 0 for steps 41-60, then the run goes on as before: a verifier
    fault with an end step (the live monitor closes it), not small groups or a pipeline."""
    n = 100
    i = np.arange(n)
    broken = (i >= 40) & (i < 60)
    path = _log(
        tmp_path,
        n,
        reward=np.where(broken, 0.0, 0.5 + _noise(n, 0.03, 24)),
        frac_reward_zero_std=np.where(broken, 1.0, 0.3 + _noise(n, 0.05, 25)),
        **{"rlvitals/adv_std": np.where(broken, 0.0, 0.9 + _noise(n, 0.05, 26))},
    )
    ids, dx = _conditions(path)
    assert ids == ["VERIFIER_CONSTANT"]
    assert (dx.conditions[0].onset_step, dx.conditions[0].end_step) == (41, 60)


def test_entropy_explodes_then_lengths_then_reward_is_entropy_blowup(tmp_path):
    """Entropy 0.16 -> 7.6 from step 25, lengths at the cap from ~32, reward 0 from 40."""
    n = 80
    s = np.arange(1, n + 1)
    entropy = np.where(s < 25, 0.16, 0.16 * np.exp(np.minimum(s - 25, 15) * 0.26))
    clipped = np.where(s < 32, 0.02, np.minimum(1.0, 0.02 + (s - 32) * 0.15))
    reward = np.where(s < 40, 0.55 + _noise(n, 0.03), 0.0)
    path = _log(
        tmp_path,
        n,
        reward=reward,
        frac_reward_zero_std=np.where(s < 40, 0.2, 1.0),
        entropy=entropy,
        **{
            "completions/clipped_ratio": clipped,
            "completions/mean_terminated_length": 120.0,
            "completions/max_length": 1024.0,
        },
    )
    ids, dx = _conditions(path)
    assert ids[0] == "ENTROPY_BLOWUP" and "TOO_HARD" not in ids[:1]
    assert dx.conditions[0].onset_step <= 30


def test_pathological_levels_at_the_first_logged_step_are_named(tmp_path):
    """A KL of 10,832 and a grad norm of 421,404 on step 1."""
    n = 60
    kl = np.full(n, 0.05)
    kl[0] = 10832.0
    grad = np.full(n, 0.5)
    grad[0] = 421404.0
    path = _log(
        tmp_path, n, reward=0.5 + _noise(n, 0.05), frac_reward_zero_std=0.2, kl=kl, grad_norm=grad
    )
    ids, dx = _conditions(path)
    assert ids[0] == "KL_BLOWUP" and dx.conditions[0].onset_step == 1


def test_chance_ties_of_small_groups_inform_and_never_read_as_variance_death(tmp_path):
    """G = 2, four prompts a step: whole steps agree by chance at a steady pass rate."""
    n = 200
    rng = np.random.default_rng(3)
    tied = rng.random(n) < 0.4
    path = _log(
        tmp_path,
        n,
        reward=0.35 + _noise(n, 0.05),
        reward_std=np.where(tied, 0.0, 0.3),
    )
    ids, _ = _conditions(path)
    assert "SMALL_GROUPS" in ids
    assert "IDENTICAL_COMPLETIONS" not in ids and "TOO_HARD" not in ids


def test_an_entropy_fall_to_a_fifth_is_a_collapse(tmp_path):
    n = 200
    entropy = 0.4 * np.exp(-np.arange(n) / 60) + 0.06
    path = _log(
        tmp_path, n, reward=0.6 + _noise(n, 0.03), frac_reward_zero_std=0.3, entropy=entropy
    )
    ids, _ = _conditions(path)
    assert "ENTROPY_COLLAPSE" in ids


def test_saturation_leads_its_entropy_collapse(tmp_path):
    """Train score 0.3 -> 0.97 quickly, entropy 0.39 -> 0.02: saturated, collapse secondary."""
    n = 400
    s = np.arange(n)
    reward = 0.97 - 0.67 * np.exp(-s / 15)
    entropy = 0.02 + 0.37 * np.exp(-s / 20)
    path = _log(tmp_path, n, reward=reward, entropy=entropy)
    ids, _ = _conditions(path)
    assert ids[0] == "SATURATED" and "ENTROPY_COLLAPSE" in ids


def test_a_healthy_run_is_healthy_and_a_short_one_is_not_judged(tmp_path):
    n = 150
    path = _log(
        tmp_path,
        n,
        reward=np.linspace(0.4, 0.6, n) + _noise(n, 0.03),
        frac_reward_zero_std=0.15 + _noise(n, 0.02, 1),
        entropy=0.5 + _noise(n, 0.02, 2),
        kl=0.02,
    )
    ids, _ = _conditions(path)
    assert ids == ["HEALTHY"]
    short = _log(tmp_path, 2, reward=[0.5, 0.4])
    ids, dx = _conditions(short)
    assert ids == [] and dx.not_judged()


def test_advice_for_runs_without_groups_never_filters_groups():
    from rlvitals.doctor.differential.actions import actions_for as _actions

    for cid in ("TOO_HARD", "SMALL_GROUPS", "SATURATED"):
        for line in _actions(cid, "verl", group_relative=False):
            assert "group" not in line.lower(), (cid, line)
    assert any("actor_rollout_ref.rollout.n" in a for a in _actions("TOO_HARD", "verl", True))
    assert any("num_generations" in a for a in _actions("TOO_HARD", "trl", True))


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_every_report_leads_with_the_primary_condition(tmp_path, fmt):
    from rlvitals.report import RenderOptions, render

    n = 300
    path = _log(
        tmp_path, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2
    )
    dx = diagnose_path(path)
    out = render(dx, fmt, RenderOptions(width=100))
    if fmt == "json":
        assert json.loads(out)["conditions"][0]["id"] == "POLICY_DEGRADATION"
        return
    plain = out.replace("\\_", "_")
    if fmt == "html":
        plain = plain[plain.index("<body") :]
    lead = "The policy got worse (learning rate too high) (POLICY_DEGRADATION) since step"
    assert lead in plain and plain.index(lead) < 900
    assert dx.fails("warn") and dx.worst().value == "warn"  # a named cause is not a green run


# -- watch: conditions with hysteresis (issue 23, item 7) ------------------------------------


def test_a_flapping_condition_never_opens_and_a_lasting_one_closes_and_reopens():
    from rlvitals.guard.conditions import ConditionTracker

    t = ConditionTracker()
    for step in range(10):  # named at every other check: the window's edge, not a condition
        assert t.update(["REWARD_HACKING"] if step % 2 else [], step) == []
    seen = []
    for step, named in enumerate(
        [["RUNAWAY_LENGTH"]] * 3 + [[]] * 3 + [["RUNAWAY_LENGTH", "HEALTHY"]] * 2, start=20
    ):
        seen += [(e.kind, e.condition, e.step) for e in t.update(named, step)]
    assert seen == [
        ("opened", "RUNAWAY_LENGTH", 21),
        ("closed", "RUNAWAY_LENGTH", 25),
        ("reopened", "RUNAWAY_LENGTH", 27),
    ]
    assert t.open == ["RUNAWAY_LENGTH"] and [e.kind for e in t.timeline] == [k for k, _, _ in seen]


def test_watch_once_leads_with_the_primary_condition(tmp_path, capsys):
    from rlvitals.cli import main

    n = 300
    path = _log(
        tmp_path, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2
    )
    assert main(["watch", str(path), "--once", "--plain"]) == 1
    out = capsys.readouterr().out
    assert "(POLICY_DEGRADATION) since step" in " ".join(out.split())


def test_scan_and_compare_show_each_runs_primary_condition(tmp_path, capsys):
    from rlvitals.cli import main
    from rlvitals.scan import scan

    n = 300
    bad = tmp_path / "bad"
    good = tmp_path / "good"
    bad.mkdir()
    good.mkdir()
    worse = _log(
        bad, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2
    )
    fine = _log(
        good,
        n,
        reward=np.linspace(0.4, 0.6, n) + _noise(n, 0.03),
        frac_reward_zero_std=0.15 + _noise(n, 0.02, 1),
        entropy=0.5 + _noise(n, 0.02, 2),
    )
    rows = {r.path.split("/")[-2]: r for r in scan([str(tmp_path)], jobs=1, cache=False).rows}
    assert rows["bad"].condition == "POLICY_DEGRADATION" and rows["good"].condition == "HEALTHY"
    assert rows["bad"].fails("warn") and not rows["good"].fails("warn")
    assert main(["scan", str(tmp_path), "--no-cache", "--no-progress", "--format", "csv"]) == 1
    out = capsys.readouterr().out
    assert "condition" in out.splitlines()[0] and "POLICY_DEGRADATION" in out
    assert main(["compare", str(fine), str(worse)]) == 0
    line = next(
        x for x in capsys.readouterr().out.splitlines() if x.startswith("primary condition")
    )
    assert "HEALTHY" in line and "POLICY_DEGRADATION" in line


def test_doctor_on_a_folder_reads_its_one_run_like_the_file(tmp_path, capsys):
    """Issue 25.1: a folder holding one log (beside a README and a label.json) is that run."""
    from rlvitals.cli import main

    n = 300
    run = tmp_path / "run"
    run.mkdir()
    log = _log(run, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2)
    (run / "README.md").write_text("# what this run was\n")
    (run / "label.json").write_text('{"primary": "POLICY_DEGRADATION"}\n')
    assert main(["doctor", str(log), "--format", "json", "--fail-on", "never"]) == 0
    by_file = json.loads(capsys.readouterr().out)
    assert main(["doctor", str(run), "--format", "json", "--fail-on", "never"]) == 0
    by_folder = json.loads(capsys.readouterr().out)
    assert by_folder["findings"] == by_file["findings"]
    assert by_folder["conditions"] == by_file["conditions"]
    (run / "log.jsonl").rename(run / "a.jsonl")
    _log(run, n, reward=0.5)  # a second run beside it: the doctor asks which
    assert main(["doctor", str(run)]) == 2
    err = capsys.readouterr().err
    assert "holds 2 runs" in err and "rlvitals scan" in err and len(err.strip().splitlines()) == 1


def _chart(path, run, metric, steps, values):
    """A W&B chart export ("Download -> CSV") of one metric of one run."""
    lines = [f'"Step","{run} - {metric}","{run} - {metric}__MIN","{run} - {metric}__MAX"']
    lines += [f'"{s}","{v:g}","{v:g}","{v:g}"' for s, v in zip(steps, values)]
    path.write_text("\n".join(lines) + "\n")


def test_doctor_on_a_folder_of_chart_exports_reads_one_run_merged_by_step(tmp_path, capsys):
    """Issue 25.1: one metric per CSV, the usual way charts are exported, is one run: the
    doctor merges the charts by step and judges it (before: "holds 3 runs")."""
    from rlvitals.cli import main

    n, steps = 80, range(80)
    _chart(
        tmp_path / "wandb_export_1.csv",
        "brisk-pond-1",
        "train/reward",
        steps,
        0.5 + _noise(n, 0.03, 30),
    )
    _chart(
        tmp_path / "wandb_export_2.csv",
        "brisk-pond-1",
        "train/frac_reward_zero_std",
        range(0, 80, 2),
        [0.3 if s < 40 else 1.0 for s in range(0, 80, 2)],
    )
    _chart(
        tmp_path / "wandb_export_3.csv",
        "brisk-pond-1",
        "train/completions/mean_length",
        steps,
        40 + _noise(n, 1.0, 31),
    )
    assert main(["doctor", str(tmp_path), "--format", "json", "--fail-on", "never"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["conditions"][0]["id"] == "IDENTICAL_COMPLETIONS"
    assert doc["conditions"][0]["onset_step"] == 40
    assert any(
        "3 W&B chart exports of run 'brisk-pond-1' merged" in w for w in doc["run"]["warnings"]
    )
    _chart(tmp_path / "wandb_export_4.csv", "calm-sea-2", "train/reward", steps, [0.5] * n)
    assert main(["doctor", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "different runs" in err and len(err.strip().splitlines()) == 1


def test_every_command_takes_the_common_flags_and_watch_waits_for_its_file(tmp_path, capsys):
    """Issue 25.8: --no-progress and -o everywhere; watch waits for a run about to start."""
    import threading

    from rlvitals.cli import COMMANDS, build_parser, main

    for name in COMMANDS:
        p = build_parser(name)._subparsers._group_actions[0].choices[name]
        flags = {o for a in p._actions for o in a.option_strings}
        assert "--no-progress" in flags and ("-o" in flags or "--out" in flags), name
    out = tmp_path / "page.md"
    assert main(["explain", "RUNAWAY_LENGTH", "--no-progress", "-o", str(out)]) == 0
    assert out.read_text().startswith("# RUNAWAY_LENGTH: Completions stop terminating")
    assert main(["detectors", "--format", "json", "-o", str(tmp_path / "d.json")]) == 0
    assert json.loads((tmp_path / "d.json").read_text())[0]["id"]
    log = tmp_path / "later.jsonl"
    n = 300
    rows = _log(
        tmp_path, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2
    )
    text = rows.read_text()
    threading.Timer(0.5, lambda: log.write_text(text)).start()
    capsys.readouterr()
    rc = main(
        ["watch", str(log), "--once", "--wait", "20", "--interval", "0.1", "--format", "json"]
    )
    assert (
        rc == 1
        and json.loads(capsys.readouterr().out)["conditions"][0]["id"] == "POLICY_DEGRADATION"
    )
    assert main(["watch", str(tmp_path / "never.jsonl"), "--wait", "0.3", "--interval", "0.1"]) == 2
    assert "did not appear within 0.3 s" in capsys.readouterr().err


def test_github_annotations_one_per_condition_and_nothing_a_log_can_inject(tmp_path, capsys):
    """Issue 25.6: --format github, one workflow command per condition; a run named with
    workflow-command syntax cannot start a command of its own."""
    from rlvitals.cli import main

    n = 300
    path = _log(
        tmp_path, n, reward=np.linspace(0.7, 0.1, n) + _noise(n, 0.03), frac_reward_zero_std=0.2
    )
    evil = tmp_path / "run,x::error::owned%.jsonl"
    path.rename(evil)
    assert main(["doctor", str(evil), "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(line.startswith(("::warning ", "::notice ")) for line in lines)
    first = lines[0]
    assert "title=rlvitals POLICY_DEGRADATION since step" in first
    assert "run%2Cx%3A%3Aerror%3A%3Aowned%25.jsonl" in first and first.count("::") == 2
    short = _log(tmp_path, 2, reward=[0.5, 0.4])
    assert main(["doctor", str(short), "--format", "github"]) == 2
    assert capsys.readouterr().out.startswith("::error ")

"""Judging real runs right (issue 10): each test is one way the doctor misjudged a real log,
rebuilt from rows of the same shape (the real logs stay outside the project)."""

from __future__ import annotations

import numpy as np
import pytest

from rlvitals.doctor import diagnose
from rlvitals.recording import RunBuilder
from rlvitals.recording.run import Manifest
from rlvitals_corpus.fixtures import PAIRS


def _run(manifest: Manifest, rows: dict[int, dict[str, float]]):
    b = RunBuilder(manifest)
    for s, row in rows.items():
        b.add_row(s, row)
    return b.build()


def _ids(d, at_least: str = "info") -> list[str]:
    rank = {"info": 0, "warn": 1, "critical": 2}[at_least]
    return [f.id for f in d.findings if {"info": 0, "warn": 1, "critical": 2}[f.severity] >= rank]


# -- 5. estimator-aware gates ------------------------------------------------------------------


def _avspo_all_fail(with_zero_std_frac: bool) -> dict[int, dict[str, float]]:
    """An AVSPO run whose every group fails: each completion gets the same non-zero advantage
    (the virtual samples put the group's mean above its real rewards), so adv_std is 0 while no
    advantage is zero, and the loss is far from 0."""
    rows = {}
    for s in range(1, 101):
        row = {"reward": 0.0, "reward_std": 0.0, "adv_std": 0.0, "adv_zero_frac": 0.0}
        row.update(loss=0.79, grad_norm=0.4, entropy=0.7)
        if with_zero_std_frac:
            row["frac_reward_zero_std"] = 1.0
        rows[s] = row
    return rows


@pytest.mark.parametrize("with_zero_std_frac", [False, True])
def test_avspo_uniform_nonzero_advantages_are_not_a_dead_signal(with_zero_std_frac):
    m = Manifest(trainer="trl", group_size=8, estimator="avspo", adv_scale="virtual")
    d = diagnose(_run(m, _avspo_all_fail(with_zero_std_frac)))
    assert "ADV_COLLAPSE" not in _ids(d)
    for f in d.findings:  # no finding tells an AVSPO run to turn on AVSPO
        assert not any("keep collapsed groups teaching with AVSPO" in a for a in f.actions), f
        assert "never had usable advantages" not in f.message
    if with_zero_std_frac:  # the groups did collapse: that is still reported, in AVSPO's terms
        dg = d.by_id("DEGENERATE_GROUPS")
        assert dg and any("AVSPO is already on" in a for a in dg[0].actions)


def test_same_rows_under_grpo_are_a_collapse():
    """The gate is the estimator's: the same flat advantages under GRPO are reported."""
    rows = _avspo_all_fail(True)
    for row in rows.values():
        row["adv_zero_frac"] = 1.0
        row["loss"] = 0.0
    for s in range(1, 31):  # a healthy start, so the collapse has an onset
        rows[s].update(adv_std=0.95, adv_zero_frac=0.1, frac_reward_zero_std=0.1, reward=0.3)
        rows[s]["reward_std"] = 0.4
    m = Manifest(trainer="trl", group_size=8, estimator="grpo", adv_scale="group_std")
    d = diagnose(_run(m, rows))
    assert "ADV_COLLAPSE" in _ids(d, "warn")


# -- 6. small batches and G = 1 ----------------------------------------------------------------


def test_group_size_one_is_a_setup_finding_and_no_reward_std_death():
    """veRL, 2 prompts a step, rollout.n=1: advantages equal the rewards (no baseline)."""
    d = diagnose(PAIRS["GROUP_SIZE_ONE"].bad_run())
    assert d.vitals.group_size == 1
    assert d.vitals.group_size_from == "advantages equal to rewards"
    f = d.by_id("GROUP_SIZE_ONE")
    assert f and f[0].severity == "warn"
    assert any("actor_rollout_ref.rollout.n" in a for a in f[0].actions)  # veRL's own key
    assert "REWARD_STD_DEATH" not in _ids(d)


def test_small_batch_reward_range_alone_does_not_kill_the_reward_signal():
    """G = 4 with 2 prompts a step: reward max - min is 0 on many steps by chance, while the
    advantages are +-1.5 and alive. The reward-range fallback must not fire alone."""
    d = diagnose(PAIRS["GROUP_SIZE_ONE"].good_run())
    assert d.vitals.group_size is None  # nothing says G here: no false G = 1 either
    assert _ids(d, "warn") == []
    assert "REWARD_STD_DEATH" not in _ids(d)


def test_group_size_one_from_config_under_ppo_is_fine():
    rows = {
        s: {"reward_mean": 0.5 + 0.001 * s, "adv_max": 2.0, "adv_min": -2.0} for s in range(1, 61)
    }
    d = diagnose(_run(Manifest(trainer="verl", group_size=1, estimator="gae"), rows))
    assert "GROUP_SIZE_ONE" not in _ids(d)
    d = diagnose(_run(Manifest(trainer="verl", group_size=1, estimator="grpo"), rows))
    assert "GROUP_SIZE_ONE" in _ids(d, "warn")


# -- 9. advice in the trainer's language ------------------------------------------------------


def _collapsing_rows(dead_reward: float = 0.98) -> dict[int, dict[str, float]]:
    rows = {}
    for s in range(1, 121):
        dead = s > 60
        rows[s] = {
            "reward": dead_reward if dead else 0.5,
            "frac_reward_zero_std": 0.95 if dead else 0.2,
            "reward_std": 0.01 if dead else 0.4,
        }
    return rows


@pytest.mark.parametrize(
    ("trainer", "want", "never"),
    [
        ("verl", "actor_rollout_ref.rollout.n", "num_generations"),
        ("trl", "num_generations", "actor_rollout_ref"),
        ("openrlhf", "--n_samples_per_prompt", "actor_rollout_ref"),
    ],
)
def test_collapse_advice_names_the_trainers_setting(trainer, want, never):
    d = diagnose(_run(Manifest(trainer=trainer, group_size=8), _collapsing_rows(0.02)))
    actions = [a for f in d.findings for a in f.actions]
    assert actions
    assert any(want in a for a in actions), actions
    assert not any(never in a for a in actions), actions
    assert not any("pip install 'rlvitals[trl]'" in a for a in actions)  # works from a checkout


def test_verl_run_is_told_the_verl_avspo_estimator():
    """A too-hard collapse (every group fails) is where AVSPO's virtual samples help."""
    d = diagnose(_run(Manifest(trainer="verl", group_size=8), _collapsing_rows(0.02)))
    actions = [a for f in d.findings for a in f.actions]
    assert any("algorithm.adv_estimator=rlvitals_avspo" in a for a in actions)
    assert not any("RlvitalsGRPOTrainer" in a for a in actions)


def test_advantages_equal_rewards_needs_varying_rewards():
    """A run whose rewards never vary gives no evidence of G = 1 (max == min == adv)."""
    rows = {
        s: {"reward_mean": 0.0, "reward_max": 0.0, "reward_min": 0.0, "adv_max": 0.0}
        for s in range(1, 61)
    }
    for row in rows.values():
        row["adv_min"] = 0.0
    d = diagnose(_run(Manifest(trainer="verl"), rows))
    assert d.vitals.group_size is None
    assert "GROUP_SIZE_ONE" not in _ids(d)


# -- 4. excess collapse from per-prompt pass rates -----------------------------------------------


def _mix_groups(with_prompts: bool, steps: int = 120, prompts: int = 16, g: int = 8):
    """From step 40 half the prompts are always solved and half always failed (an honest
    difficulty mix); before, every prompt is middling. Each prompt is drawn every step."""
    from rlvitals.recording.run import GroupTable

    rng = np.random.default_rng(5)
    st, rw, pr = [], [], []
    for s in range(1, steps + 1):
        for q in range(prompts):
            p = 0.5 if s < 40 else float(q % 2)
            st.append(s)
            rw.append((rng.random(g) < p).astype(float).tolist())
            pr.append(f"prompt-{q}")
    return GroupTable.from_lists(st, rw, pr if with_prompts else None)


def test_an_honest_difficulty_mix_is_not_an_excess_collapse():
    b = RunBuilder(Manifest(trainer="trl"))
    b.groups = _mix_groups(with_prompts=True)
    d = diagnose(b.build())
    assert d.vitals.expected_acr_from == "per-prompt"
    assert "EXCESS_COLLAPSE" not in _ids(d)
    late = d.vitals.series["expected_acr"][d.vitals.steps >= 45]
    assert np.nanmedian(late) > 0.95  # each prompt's own pass rate explains its collapse
    assert any("nearest other steps" in n for n in d.vitals.notes)


def test_without_prompt_ids_the_batch_mean_is_used_and_said():
    b = RunBuilder(Manifest(trainer="trl"))
    b.groups = _mix_groups(with_prompts=False)
    d = diagnose(b.build())
    assert d.vitals.expected_acr_from == "batch"
    f = d.by_id("EXCESS_COLLAPSE")
    assert f and "no prompt ids" in f[0].message
    assert f[0].metrics["expected_acr_from"] == "batch"


def test_groups_jsonl_group_labels_are_not_prompt_ids(tmp_path):
    from rlvitals.importers import load

    path = tmp_path / "g.jsonl"
    lines = [f'{{"step": {s}, "group": {j}, "rewards": [1, 0]}}' for s in (1, 2) for j in (0, 1)]
    path.write_text("\n".join(lines) + "\n")
    assert load(path).groups.prompt is None
    path.write_text(path.read_text().replace('"group"', '"prompt"'))
    assert load(path).groups.prompt.tolist() == ["0", "1", "0", "1"]


# -- 8. not judged is not green ---------------------------------------------------------------


def _jsonl(path, rows):
    import json

    path.write_text("".join(json.dumps({"step": s, **r}) + "\n" for s, r in rows.items()))
    return path


def test_a_run_with_no_grpo_metrics_is_not_judged_and_fails(tmp_path, capsys):
    """A TRL SFT-like log (loss, grad_norm, learning rate; nothing about rewards) was a green
    'no findings' with exit 0."""
    from rlvitals.cli import main

    rows = {s: {"loss": 1.0 / s, "grad_norm": 0.5, "learning_rate": 1e-5} for s in range(1, 80)}
    p = _jsonl(tmp_path / "sft.jsonl", rows)
    d = diagnose(__import__("rlvitals").load(p))
    assert d.not_judged() and "only rule out a total collapse" in d.not_judged()
    assert d.fails("warn") and not d.fails("never")
    assert main(["doctor", str(p), "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert "not judged" in err and err.count("\n") == 1
    assert main(["doctor", str(p), "--allow-unjudged"]) == 0
    assert main(["doctor", str(p), "--fail-on", "never"]) == 0
    cfg = tmp_path / "rlvitals.toml"
    cfg.write_text("allow-unjudged = true\n")
    assert main(["doctor", str(p), "--config", str(cfg)]) == 0


def test_select_that_judges_nothing_is_not_green(tmp_path):
    from rlvitals.cli import main

    rows = {s: {"reward": 0.5, "frac_reward_zero_std": 0.1} for s in range(1, 80)}
    p = _jsonl(tmp_path / "r.jsonl", rows)
    assert main(["doctor", str(p), "--select", "KL_BLOWUP"]) == 2
    assert main(["doctor", str(p), "--select", "DEGENERATE_GROUPS"]) == 0


def test_too_few_points_and_not_logged_are_told_apart():
    rows = {s: {"reward": 0.5, "entropy": 0.5 if s < 4 else float("nan")} for s in range(1, 80)}
    d = diagnose(_run(Manifest(trainer="trl"), rows))
    assert "too few points (3 logged" in d.skipped["ENTROPY_COLLAPSE"]
    assert d.skipped["KL_BLOWUP"].endswith(": not logged")
    short = diagnose(_run(Manifest(trainer="trl"), {1: {"reward": 0.5}, 2: {"reward": 0.6}}))
    assert "too short" in short.not_judged()


# -- 3. regimes from what the run has ---------------------------------------------------------


def _pinned(reward: float, steps: int = 300, keys=("critic/score/mean",)):
    rng = np.random.default_rng(1)
    return {
        s: {k: float(np.clip(reward + rng.normal(0, 0.01), 0, 1)) for k in keys}
        | {"critic/score/max": 1.0, "critic/score/min": 0.0, "actor/entropy": 0.3}
        for s in range(1, steps + 1)
    }


def test_saturation_from_pass_rate_and_g_when_no_zero_std_fraction():
    """A veRL GRPO run at pass rate 0.96 with G = 5: the expected ACR is >= 0.8 by P0, so it
    is saturated, said to be an estimate (veRL logs no zero-std fraction)."""
    d = diagnose(_run(Manifest(trainer="verl", group_size=5, estimator="grpo"), _pinned(0.96)))
    (f,) = d.by_id("SATURATION")
    assert f.severity == "warn" and f.metrics["mode"] == "estimate"
    assert "estimate" in f.message and f.metrics["acr"] >= 0.8
    assert d.vitals.expected_acr_from == "estimate"


def test_ppo_pinned_at_the_ceiling_is_saturation_without_g():
    d = diagnose(_run(Manifest(trainer="verl", estimator="gae"), _pinned(0.95)))
    (f,) = d.by_id("SATURATION")
    assert f.severity == "warn" and f.metrics["mode"] == "ceiling"
    assert "ceiling" in f.message


@pytest.mark.parametrize(
    ("g", "estimator"), [(1, "gae"), (1, "grpo"), (4, "gae"), (1, None)], ids=str
)
def test_no_p0_estimate_with_one_completion_or_a_critic(g, estimator):
    """veRL PPO prints ``rollout.n: 1`` (G = 1) and ``adv_estimator: gae``: P0 with G = 1 is 1
    at any pass rate, and a critic's advantages ignore the groups, so an "estimated ACR 1"
    would be a made-up number; the ceiling mode says what the log shows."""
    m = Manifest(trainer="verl", group_size=g, estimator=estimator)
    (f,) = diagnose(_run(m, _pinned(0.95))).by_id("SATURATION")
    assert f.metrics["mode"] == "ceiling" and "estimated ACR" not in f.message


def test_group_size_and_reward_range_flags(tmp_path, capsys):
    """--group-size and --reward-range (and the same keys in rlvitals.toml) fill what the log
    does not say; a reward slightly over 1 is no reason to halve every pass rate."""
    from rlvitals.cli import main

    rows = {s: {"critic/score/mean": r["critic/score/mean"]} for s, r in _pinned(0.96).items()}
    p = _jsonl(tmp_path / "verl.jsonl", rows)
    assert main(["doctor", str(p), "--format", "json", "--allow-unjudged"]) in (0, 1)
    import json

    out = json.loads(capsys.readouterr().out)
    sat = [f for f in out["findings"] if f["id"] == "SATURATION"]
    assert sat and sat[0]["metrics"]["mode"] == "ceiling"
    assert main(["doctor", str(p), "--format", "json", "--group-size", "5"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["vitals"]["group_size"] == 5
    assert out["vitals"]["group_size_from"] == "--group-size"
    sat = [f for f in out["findings"] if f["id"] == "SATURATION"]
    assert sat and sat[0]["metrics"]["mode"] == "estimate"
    cfg = tmp_path / "rlvitals.toml"
    cfg.write_text("group-size = 5\nreward-range = [0.0, 2.0]\n")
    assert main(["doctor", str(p), "--format", "json", "--config", str(cfg)]) in (0, 1, 2)
    out = json.loads(capsys.readouterr().out)
    assert out["vitals"]["group_size"] == 5 and out["vitals"]["reward_max"] == 2.0
    assert not [f for f in out["findings"] if f["id"] == "SATURATION"]  # 0.96 of 2 is not
    for bad in (["--group-size", "0"], ["--reward-range", "1,0"], ["--reward-range", "x"]):
        assert main(["doctor", str(p), *bad]) == 2
        assert capsys.readouterr().err.count("\n") == 1
    cfg.write_text("group-size = -1\n")
    assert main(["doctor", str(p), "--config", str(cfg)]) == 2


# -- 11. one answer per question --------------------------------------------------------------


def test_output_suffix_and_output_over_input_are_refused(tmp_path, capsys):
    from rlvitals.cli import main

    rows = {s: {"reward": 0.5, "frac_reward_zero_std": 0.1} for s in range(1, 80)}
    p = _jsonl(tmp_path / "r.jsonl", rows)
    before = p.read_bytes()
    assert main(["doctor", str(p), "-o", str(p)]) == 2
    assert "would replace it" in capsys.readouterr().err and p.read_bytes() == before
    assert main(["doctor", str(p), "-o", str(tmp_path / "report.pdf")]) == 2
    assert "no report format" in capsys.readouterr().err
    assert not (tmp_path / "report.pdf").exists()
    assert main(["doctor", str(p), "-o", str(tmp_path / "report.pdf"), "--format", "md"]) == 0
    assert main(["doctor", str(p), "-o", str(tmp_path / "r.md")]) == 0


def test_detector_knobs_are_validated(tmp_path, capsys):
    from rlvitals.cli import main
    from rlvitals.doctor import DoctorConfig

    for knobs in (
        {"sustain": -3},
        {"sustain": 0},
        {"collapse_below": float("nan")},
        {"collapse_below": -0.1},
        {"sustain": 2.5},
    ):
        with pytest.raises(ValueError, match="knob"):
            DoctorConfig(knobs={"ADV_COLLAPSE": knobs}).validate()
    rows = {s: {"reward": 0.5, "frac_reward_zero_std": 0.1} for s in range(1, 80)}
    p = _jsonl(tmp_path / "r.jsonl", rows)
    cfg = tmp_path / "rlvitals.toml"
    cfg.write_text("[detectors.ADV_COLLAPSE]\nsustain = -3\n")
    assert main(["doctor", str(p), "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sustain" in err and "rlvitals.toml" in err


def test_unknown_input_format_hint_names_input_format(tmp_path, capsys):
    from rlvitals.cli import main

    p = tmp_path / "x.bin"
    p.write_bytes(b"\x00\x01garbage" * 10)
    assert main(["doctor", str(p)]) == 2
    err = capsys.readouterr().err
    assert "--input-format" in err


def test_reward_std_death_reads_the_per_group_spread_before_a_batch_std():
    """Issue 9 item 3: a batch of all-0 and all-1 groups keeps a batch std near 0.5; the
    per-group spread (OpenRLHF group_reward_std) shows the collapse."""
    rows = {}
    for s in range(1, 121):
        dead = s > 60
        rows[s] = {
            "reward": 0.5,
            "reward_std": 0.5,  # the whole-batch std: alive throughout
            "group_reward_std": 0.02 if dead else 0.45,
        }
    d = diagnose(_run(Manifest(trainer="openrlhf", group_size=8), rows))
    (f,) = d.by_id("REWARD_STD_DEATH")
    assert f.metrics["series"] == "group_reward_std_mean" and f.onset_step == 61
    assert "mean group reward std" in f.message


def _g2_rows(steps: int = 200):
    """Shaped like a real TRL console log of a GRPO run with groups of 2 and 4 prompts a step:
    reward_std (the mean of the group stds) is exactly 0 on ~45% of the steps, KL starts at 0
    and settles near 0.05 within 15 steps, one KL spike."""
    rng = np.random.default_rng(2)
    rows = {}
    for s in range(1, steps + 1):
        p = rng.uniform(0.0, 0.3, 4)
        r = (rng.random((4, 2)) < p[:, None]).astype(float)
        kl = (
            0.0
            if s <= 2
            else min(0.05, 0.0005 * 2 ** (s / 1.5)) * float(np.exp(rng.normal(0, 0.2)))
        )
        rows[s] = {
            "reward": float(r.mean()),
            "reward_std": float(r.std(axis=1, ddof=1).mean()),
            "kl": 0.587 if s == 50 else kl,
            "grad_norm": float(0.2 * np.exp(rng.normal(0, 0.3))),
            "loss": 0.001,
        }
    return rows


def test_intermittently_dead_reward_variance_is_reported():
    rows = _g2_rows()
    zeros = sum(r["reward_std"] == 0 for r in rows.values())
    assert 0.3 < zeros / len(rows) < 0.6
    d = diagnose(_run(Manifest(trainer="trl"), rows))
    (inter,) = d.by_id("REWARD_STD_DEATH")  # one phenomenon: its short stretches folded in
    assert inter.metrics.get("kind") == "intermittent" and inter.severity == "warn"
    assert inter.metrics["dead_steps"] == zeros


def test_kl_growing_from_zero_at_the_start_is_not_a_blowup():
    d = diagnose(_run(Manifest(trainer="trl"), _g2_rows()))
    assert "KL_BLOWUP" not in _ids(d)
    # a real blow-up after the warm-up still fires
    rows = _g2_rows()
    for s in range(120, 201):
        rows[s]["kl"] = 0.8
    assert "KL_BLOWUP" in _ids(diagnose(_run(Manifest(trainer="trl"), rows)), "warn")


# -- issue 11 item 2: +/-inf anywhere ----------------------------------------------------------


def test_infinite_rewards_and_values_never_crash_or_warn(tmp_path):
    """+/-inf rewards were a traceback (math.ceil(inf); the array layer refusing inf per-group
    rewards); extreme values printed numpy RuntimeWarnings, errors under -W error."""
    import json
    import subprocess
    import sys

    g = tmp_path / "g.jsonl"
    with g.open("w") as f:
        for s in range(1, 60):
            bad = float("inf") if s == 30 else 1.0
            f.write(json.dumps({"step": s, "group": 0, "rewards": [1.0, 0.0, bad, 0.0]}) + "\n")
            f.write(json.dumps({"step": s, "group": 1, "rewards": [0.0, 0.0, 1.0, -bad]}) + "\n")
    rows = {}
    for s in range(1, 101):
        v = float("inf") if s == 30 else (float("-inf") if s == 31 else None)
        rows[s] = {
            k: (0.3 if v is None else v)
            for k in ("reward", "reward_std", "frac_reward_zero_std", "kl", "grad_norm")
        }
    j = _jsonl(tmp_path / "inf.jsonl", rows)
    for path in (g, j):
        for fmt in ("text", "json", "md", "html"):
            cmd = [sys.executable, "-W", "error", "-m", "rlvitals", "doctor", str(path)]
            p = subprocess.run([*cmd, "--format", fmt], capture_output=True, text=True)
            assert p.returncode in (0, 1), p.stderr[-2000:]
            assert p.stderr == "" or p.stderr.startswith("rlvitals:"), p.stderr[-2000:]
    p = subprocess.run(
        [sys.executable, "-W", "error", "-m", "rlvitals", "acr", str(g)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    d = diagnose(__import__("rlvitals").load(g))
    assert any("+/-inf" in n for n in d.vitals.notes)


# -- 2. one severity policy -------------------------------------------------------------------


def _ppo_rows(steps: int = 600):
    """Shaped like a real veRL PPO gsm8k log: entropy falls 94% while the reward creeps up
    from 0.90 to 0.957 (the tail of a saturated reward), three 60x gradient spikes."""
    rng = np.random.default_rng(4)
    rows = {}
    for s in range(1, steps + 1):
        frac = s / steps
        rows[s] = {
            "critic/score/mean": 0.90 + 0.057 * frac + rng.normal(0, 0.005),
            "critic/score/max": 1.0,
            "critic/score/min": 0.0,
            "actor/entropy": (0.36 if s < 150 else 0.022) * float(np.exp(rng.normal(0, 0.05))),
            "actor/grad_norm": (70.0 if s in (162, 239, 431) else 1.1)
            * float(np.exp(rng.normal(0, 0.1))),
            "actor/pg_loss": float(rng.normal(0, 0.01)),
            "timing_s/step": 0.017 if s < 300 else 0.028,  # a toy run's scheduler noise
        }
    return rows


def test_a_real_entropy_collapse_and_real_spikes_are_warnings():
    d = diagnose(_run(Manifest(trainer="verl", estimator="gae"), _ppo_rows()))
    (ent,) = d.by_id("ENTROPY_COLLAPSE")
    assert ent.severity == "warn"  # +0.057 of the range over the stretch is a plateau
    (spk,) = d.by_id("GRAD_SPIKE")
    assert spk.severity == "warn" and spk.marks == [162, 239, 431]  # drawn as points
    assert "THROUGHPUT_ROT" not in _ids(d)  # 0.017 s -> 0.028 s a step is noise
    sat = d.by_id("SATURATION")
    assert sat and sat[0].severity == "warn"  # the reward sits at 0.95 for hundreds of steps


def test_other_families_findings_do_not_make_a_run_judged():
    """A 20-step run with one gradient spike was "1 info", exit 0: the collapse family had not
    judged it."""
    rows = {s: {"reward": 0.5, "reward_std": 0.3, "grad_norm": 0.3} for s in range(1, 21)}
    rows[14]["grad_norm"] = 5.0
    d = diagnose(_run(Manifest(trainer="trl"), rows))
    assert d.findings and "too short" in d.not_judged()
    assert d.fails("critical")

"""The TRL integration, tested with real TRL 1.16 GRPO steps on a tiny Qwen2 (CPU, offline).

- ``grpo``/``dr_grpo`` reproduce TRL's own advantages on the same rewards in a real step
  (scale_rewards group/batch/none, loss_type dr_grpo), through RlvitalsGRPOTrainer and through a
  plain GRPOTrainer recorded with ``RlvitalsCallback.attach``;
- an ``avspo`` run trains, logs ``rlvitals/...`` metrics in ``log_history`` and TensorBoard,
  records the run, and the recording is read back and diagnosed;
- the estimator state is saved with checkpoints and restored on resume;
- failures (a raising estimator, an unwritable recording directory) never stop training;
- under ``torchrun --nproc_per_node 2`` (gloo) each rank trains on its slice of the advantages a
  single process computes from the same global rewards.
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import rlvitals
from rlvitals.estimators import ESTIMATORS, AvspoState, register_estimator
from rlvitals.recording import read_recording

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "trl_ddp_script.py"


def _load_harness():
    import importlib.util

    spec = importlib.util.spec_from_file_location("rlvitals_trl_harness", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


H = _load_harness()
H.set_offline_env()

from trl import GRPOTrainer  # noqa: E402

from rlvitals.integrations.trl import (  # noqa: E402  (after the offline environment is set)
    STATE_FILE,
    RlvitalsCallback,
    RlvitalsGRPOTrainer,
    with_estimator,
)

# -- rewards with variety: partial credit, collapsed groups, unscorable completions ------------


def reward_mixed(prompts, completions, **kwargs) -> list[float | None]:
    """0 for prompts starting with a multiple of 3 (collapsed groups); else a partial credit
    from the completion's characters, or None (unscorable) for some completions."""
    out: list[float | None] = []
    for p, text in zip(prompts, completions):
        code = sum(map(ord, text))
        if int(p[0]) % 3 == 0:
            out.append(0.0)
        elif code % 13 == 0:
            out.append(None)
        else:
            out.append((code % 3) / 2)
    return out


def reward_scorable(prompts, completions, **kwargs) -> list[float]:
    """Like :func:`reward_mixed` without unscorable completions."""
    return [0.0 if r is None else r for r in reward_mixed(prompts, completions)]


class Capturing(RlvitalsGRPOTrainer):
    """Keeps every batch's info dict and the advantages each loss computation saw."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.infos: list[dict[str, Any]] = []
        self.trained_on: list[torch.Tensor] = []
        self.rewards_seen: list[torch.Tensor] = []
        super().__init__(*args, **kwargs)

    def _calculate_rewards(self, *args: Any, **kwargs: Any):
        rewards_per_func = super()._calculate_rewards(*args, **kwargs)
        self.rewards_seen.append(rewards_per_func.clone())
        return rewards_per_func

    def _rlvitals_after_estimate(self, info: dict[str, Any]) -> None:
        self.infos.append(info)

    def _generate_and_score_completions(self, inputs):
        out = super()._generate_and_score_completions(inputs)
        self.trained_on.append(out["advantages"].clone())
        return out


tok = pytest.fixture(scope="module", name="tok")(H.one_thread_tokenizer)
"""The shared character tokenizer; torch on one thread while this module runs."""


def _trainer(
    cls,
    tok,
    out_dir,
    *,
    reward_funcs=None,
    callbacks=None,
    n_prompts=None,
    trainer_kwargs=None,
    **args,
):
    kw = dict(per_device_train_batch_size=16, max_steps=2)
    kw.update(args)
    return cls(
        model=H.tiny_model(tok),
        reward_funcs=reward_funcs or [reward_mixed],
        args=H.grpo_args(out_dir, **kw),
        train_dataset=H.train_dataset(n_prompts),
        processing_class=tok,
        callbacks=callbacks,
        **(trainer_kwargs or {}),
    )


def _rows(trainer) -> list[dict[str, Any]]:
    return [r for r in trainer.state.log_history if "loss" in r]


# -- (a) the reference estimators reproduce TRL ----------------------------------------------


@pytest.mark.parametrize(
    ("estimator", "scale_rewards", "loss_type"),
    [
        (None, "group", "dapo"),
        ("grpo", "batch", "dapo"),
        (None, "none", "dapo"),
        ("dr_grpo", "none", "dr_grpo"),
    ],
)
def test_reference_estimators_match_trl_in_a_real_step(
    tok, tmp_path, estimator, scale_rewards, loss_type
):
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path,
        scale_rewards=scale_rewards,
        loss_type=loss_type,
        trainer_kwargs={"estimator": estimator},
    )
    trainer.train()
    assert trainer.state.global_step == 2 and len(trainer.infos) == 2
    partial = nan_seen = False
    for info in trainer.infos:
        ours, theirs = info["local_advantages"], info["trl_local_advantages"]
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape == (16,)
        torch.testing.assert_close(ours, theirs, atol=1e-6, rtol=1e-5)
        acr = info["metrics"]["acr"]
        partial |= 0.0 < acr < 1.0
        nan_seen |= bool(torch.isnan(info["rewards"]).any())
    assert partial, "the rewards must hold collapsed and live groups"
    assert nan_seen, "the rewards must hold an unscorable completion"
    # What trained is what rlvitals computed, and the metrics reached TRL's log_history.
    for info, used in zip(trainer.infos, trainer.trained_on):
        assert torch.equal(used, info["local_advantages"])
    for row, info in zip(_rows(trainer), trainer.infos):
        assert row["rlvitals/acr"] == pytest.approx(info["metrics"]["acr"])
        assert row["rlvitals/adv_std"] == pytest.approx(info["metrics"]["adv_std"])
        assert row["rlvitals/estimator_fallback"] == 0.0
    # With no estimator named, the trainer runs (and records) the vocabulary's name for what TRL
    # computes: Dr. GRPO for scale_rewards="none" (renovation bug 1), GRPO otherwise.
    default = "dr_grpo" if scale_rewards == "none" else "grpo"
    assert trainer.rlvitals_estimator.name == (estimator or default)


@pytest.mark.parametrize(
    ("scale_rewards", "estimator", "scale"),
    [("none", "dr_grpo", "none"), ("batch", "grpo", "batch_std"), ("group", "grpo", "group_std")],
)
def test_default_estimator_is_recorded_as_what_trained(
    tok, tmp_path, scale_rewards, estimator, scale
):
    """Renovation bug 1: RlvitalsGRPOTrainer(estimator=None) with scale_rewards="none" recorded
    estimator "grpo" (the trainer and the callback each had their own idea of what TRL does),
    so the doctor judged a Dr. GRPO-scale run by GRPO gates and missed a collapse."""
    rec = tmp_path / "rec"
    cb = RlvitalsCallback(rec, doctor_every=0)
    trainer = _trainer(
        RlvitalsGRPOTrainer,
        tok,
        tmp_path / "out",
        callbacks=[cb],
        reward_funcs=[reward_scorable],
        scale_rewards=scale_rewards,
        max_steps=1,
    )
    trainer.train()
    assert trainer.rlvitals_estimator.name == estimator
    m = read_recording(rec).manifest
    assert (m.estimator, m.adv_scale, m.scale_rewards) == (estimator, scale, scale_rewards)
    if scale_rewards != "none":
        return
    # The manifest the callback wrote decides the gates: advantages of a Dr. GRPO run live at
    # the reward-std level (0.40 here), and a fall to 0.02 is a collapse.
    b = rlvitals.RunBuilder(m)
    for s in range(1, 121):
        b.add_row(s, {"adv_std": 0.40 if s < 60 else 0.02, "loss": 0.1, "grad_norm": 0.3})
    found = rlvitals.diagnose(b.build()).by_id("ADV_COLLAPSE")
    assert found and found[0].onset_step == 60


def test_plain_trainer_attach_records_trl_advantages(tok, tmp_path):
    """A plain GRPOTrainer: the callback records TRL's own rewards and advantages per group."""
    rec = tmp_path / "rec"
    trainer = _trainer(
        GRPOTrainer, tok, tmp_path / "out", reward_funcs=[reward_scorable], max_steps=3, beta=0.0
    )
    cb = RlvitalsCallback(rec, doctor_every=0).attach(trainer)
    trainer.train()
    run = read_recording(rec)
    m = run.manifest
    assert (m.trainer, m.group_size, m.scale_rewards, m.kl_coef, m.estimator) == (
        "trl",
        4,
        "group",
        0.0,
        "grpo",
    )
    assert m.config["loss_type"] == "dapo" and m.config["per_group_rewards"] is True
    g = run.groups
    assert g is not None and g.n_groups == 3 * 4 and set(g.sizes()) == {4}
    assert g.unique_steps().tolist() == [1, 2, 3]
    assert g.prompt is not None and len(set(g.prompt[:4])) == 4
    rows = _rows(trainer)
    for step in (1, 2, 3):
        sel = g.row_step() == step
        rewards = g.rewards[sel]
        ids = g.row_group()[sel]
        # TRL's advantages, recorded from the plain trainer, equal rlvitals' grpo on its rewards.
        ref, metrics, _ = rlvitals.estimate("grpo", rewards.astype(np.float32), ids)
        np.testing.assert_allclose(g.advantages[sel], ref, atol=1e-6, rtol=1e-5)
        row = rows[step - 1]
        assert row["frac_reward_zero_std"] == pytest.approx(metrics["acr"])
        assert row["reward"] == pytest.approx(float(np.mean(rewards)), rel=1e-6)
    assert run.series["reward_mean"].shape == (3,)
    np.testing.assert_allclose(run.series["reward_mean"], [r["reward"] for r in rows])
    assert cb.guard.total == 0


# -- (b) an AVSPO run: metrics in TRL's logs, a recording the doctor reads ------------------------


def test_avspo_run_logs_metrics_and_records(tok, tmp_path):
    rec = tmp_path / "rec"
    cb = RlvitalsCallback(rec, doctor_every=2)
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path / "out",
        reward_funcs=[H.reward_prompt_parity],
        max_steps=4,
        report_to=["tensorboard"],
        callbacks=[cb],
        trainer_kwargs={"estimator": "avspo", "estimator_config": {"tau_adapt0": 0.2}},
    )
    trainer.train()
    assert trainer.state.global_step == 4
    rows = _rows(trainer)
    assert len(rows) == 4
    for row, info in zip(rows, trainer.infos):
        # Every group is collapsed (the reward depends on the prompt only): TRL would train on
        # zeros; AVSPO's virtual samples give every group a signal.
        assert row["rlvitals/acr"] == 1.0 == row["frac_reward_zero_std"]
        assert row["rlvitals/avspo_triggered"] == 1.0
        assert row["rlvitals/acr_residual"] == 0.0
        assert row["rlvitals/tau_adapt"] == pytest.approx(info["metrics"]["tau_adapt"])
        assert "rlvitals/avspo_k" in row and "rlvitals/avspo_groups_augmented" in row
        assert torch.count_nonzero(info["trl_local_advantages"]) == 0
        assert torch.count_nonzero(info["local_advantages"]) == 16
    assert trainer.rlvitals_state.step == 4
    # TRL's TensorBoard reporter wrote the rlvitals metrics too; the TensorBoard importer reads
    # rlvitals/acr as the canonical acr.
    from rlvitals.importers import load

    events = sorted((tmp_path / "out").rglob("events.out.tfevents*"))
    assert len(events) == 1
    tb = load(events[0].parent)
    np.testing.assert_allclose(tb.series["acr"], [r["rlvitals/acr"] for r in rows])
    tau = tb.series["tau_adapt"]  # train/rlvitals/tau_adapt maps to the canonical name
    np.testing.assert_allclose(tau, [r["rlvitals/tau_adapt"] for r in rows], rtol=1e-6)
    # The recording: manifest, groups with the advantages trained on, scalars, doctor events.
    run = read_recording(rec)
    assert run.manifest.estimator == "avspo"
    assert run.manifest.config["estimator_config"]["tau_adapt0"] == 0.2
    assert run.groups.n_groups == 16
    trained = torch.cat([i["advantages"] for i in trainer.infos]).numpy()
    np.testing.assert_allclose(run.groups.advantages, trained, rtol=1e-6)
    np.testing.assert_array_equal(run.series["acr"], [1.0] * 4)
    assert "rlvitals/tau_adapt" in run.series or "tau_adapt" in run.series
    from rlvitals.doctor import diagnose

    diagnosis = diagnose(run)
    ids = {f.id for f in diagnosis.findings}
    assert "DEGENERATE_GROUPS" in ids, ids
    # `rlvitals doctor` on the recording directory: findings -> exit code 1 (fail-on warn).
    from rlvitals.cli import main as cli_main

    report = tmp_path / "report.json"
    assert (
        cli_main(["doctor", str(rec), "--format", "json", "-o", str(report), "--no-progress"]) == 1
    )
    doc = json.loads(report.read_text())
    assert doc["run"]["trainer"] == "trl" and doc["run"]["has_groups"] is True
    assert "DEGENERATE_GROUPS" in {f["id"] for f in doc["findings"]}
    alerts = [e for e in run.events if e.kind == "alert"]
    assert {e.data["id"] for e in alerts} >= {"DEGENERATE_GROUPS"}
    assert cb.guard.total == 0 and trainer.rlvitals_guard.total == 0


def test_halt_policy_stops_training(tok, tmp_path):
    """Every group collapsed from step 1: DEGENERATE_GROUPS (warn) fires at the first check
    and the run stops at that step: 2."""
    rec = tmp_path / "rec"
    cb = RlvitalsCallback(rec, doctor_every=2, halt_on="warn")
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path / "out",
        reward_funcs=[H.reward_prompt_parity],
        max_steps=8,
        callbacks=[cb],
    )
    trainer.train()
    assert cb.halted_at == 2 and trainer.state.global_step == 2
    run = read_recording(rec)
    halts = [e for e in run.events if e.kind == "halt"]
    assert len(halts) == 1 and halts[0].step == 2 and "DEGENERATE_GROUPS" in halts[0].data["ids"]
    # halt_on="critical" lets the same run go on: the collapse family warns, it is not critical.
    cb2 = RlvitalsCallback(tmp_path / "rec2", doctor_every=2, halt_on="critical")
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path / "out2",
        reward_funcs=[H.reward_prompt_parity],
        max_steps=4,
        callbacks=[cb2],
    )
    trainer.train()
    assert cb2.halted_at is None and trainer.state.global_step == 4
    assert {f.id for _, f in cb2.findings} >= {"DEGENERATE_GROUPS"}


def test_only_the_main_process_records_and_checks(tmp_path):
    """Every rank builds the callback; a rank other than the main one neither records nor
    checks, so its monitor is closed at train begin."""
    import types

    cb = RlvitalsCallback(tmp_path / "rec", sinks=[])
    args = types.SimpleNamespace(output_dir=str(tmp_path / "out"), run_name=None)
    state = types.SimpleNamespace(is_world_process_zero=False, global_step=0)
    cb.on_train_begin(args, state, types.SimpleNamespace())
    assert cb.monitor.closed and cb.recorder is None and not cb.guard.errors
    assert not (tmp_path / "rec").exists()


def test_reward_breaking_at_step_k_halts_within_sustain_plus_two(tok, tmp_path):
    """Issue 13: a real tiny TRL run whose reward breaks at step K (every completion scores 0
    from then on) is stopped by the live guard within sustain + 2 steps of K, and the halt names
    the last healthy step and the checkpoint at or before it to resume from."""
    K = 32  # the doctor judges a collapse in a run of 30 steps or more
    calls = {"n": 0}

    def reward_breaks(prompts, completions, **kwargs):
        calls["n"] += 1  # one call per generation batch = per optimizer step here
        if calls["n"] >= K:
            return [0.0] * len(completions)
        return [(sum(map(ord, text)) % 3) / 2 for text in completions]

    rec, out = tmp_path / "rec", tmp_path / "out"
    cb = RlvitalsCallback(rec, halt_on="collapse", sinks=[])
    trainer = _trainer(
        RlvitalsGRPOTrainer,
        tok,
        out,
        reward_funcs=[reward_breaks],
        callbacks=[cb],
        max_steps=K + 30,
        save_strategy="steps",
        save_steps=10,
    )
    trainer.train()
    sustain = 5  # DEGENERATE_GROUPS / ADV_COLLAPSE / REWARD_STD_DEATH default
    assert cb.halted_at is not None and K <= cb.halted_at <= K + sustain + 2, cb.halted_at
    assert trainer.state.global_step == cb.halted_at
    halt = cb.halt
    assert halt.incident["theme"] == "collapse" and halt.incident["onset_step"] == K
    assert halt.last_healthy_step == K - 1
    assert Path(halt.resume_from) == out / "checkpoint-30"
    # The recording tells the same story: the alert, the halt, and a doctor that agrees.
    run = read_recording(rec)
    halts = [e for e in run.events if e.kind == "halt"]
    assert len(halts) == 1 and halts[0].data["last_healthy_step"] == K - 1
    assert halts[0].data["resume_from"] == str(out / "checkpoint-30")
    opened = [
        e
        for e in run.events
        if e.kind == "alert" and e.data["alert"] == "opened" and e.data["theme"] == "collapse"
    ]
    assert len(opened) == 1 and opened[0].data["onset_step"] == K
    post = rlvitals.diagnose(run)
    collapse = [i for i in post.incidents if i.theme == "collapse"]
    assert collapse and collapse[0].onset_step == K
    assert set(opened[0].data["ids"]) <= set(collapse[0].ids), (opened[0].data, collapse[0].ids)


def test_an_intermittent_reward_fault_opens_its_condition_once(tok, tmp_path, caplog):
    """Issue 23.7 in a real tiny TRL run: from step K the reward ignores the completion on three
    steps in four (one score for the whole batch). The callback tells the condition it points
    to once, in one log line, and never closes and reopens it while the fault comes and goes;
    the recording holds the same single opening."""
    K = 32
    calls = {"n": 0}

    def reward_intermittent(prompts, completions, **kwargs):
        calls["n"] += 1  # one call per generation batch = per optimizer step here
        if calls["n"] >= K and calls["n"] % 4 != 0:
            return [1.0] * len(completions)
        return [(sum(map(ord, text)) % 3) / 2 for text in completions]

    rec = tmp_path / "rec"
    cb = RlvitalsCallback(rec, sinks=[])
    trainer = _trainer(
        RlvitalsGRPOTrainer,
        tok,
        tmp_path / "out",
        reward_funcs=[reward_intermittent],
        callbacks=[cb],
        max_steps=K + 40,
    )
    with caplog.at_level(logging.INFO, logger="rlvitals.guard"):
        trainer.train()
    timeline = cb.conditions.timeline
    kinds = [(e.kind, e.condition) for e in timeline]
    assert "reopened" not in {k for k, _ in kinds}, kinds
    assert len(set(kinds)) == len(kinds), kinds  # each opened (and closed) at most once
    fault = [e.condition for e in timeline if e.kind == "opened" and e.step >= K]
    assert fault and set(fault) <= set(cb.conditions.open), kinds  # open while it comes and goes
    told = [(a.kind, a.condition["id"]) for a in cb.alerts if a.kind.startswith("condition_")]
    assert ("condition_opened", fault[0]) in told
    lines = [r.getMessage() for r in caplog.records if "condition " in r.getMessage()]
    assert len(lines) == len(told), lines  # one line each, not one per step
    events = [e for e in read_recording(rec).events if e.kind == "alert"]
    recorded = [(e.data["alert"], e.data.get("condition")) for e in events]
    assert [t for t in recorded if t[0].startswith("condition_")] == told


def _async_stub():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "rlvitals_async_stub", HERE / "_trl_async_stub.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_async_grpo_is_recorded_judged_and_halted(tok, tmp_path, monkeypatch):
    """TRL 1.16's AsyncGRPOTrainer (its real training loop; rollouts from a stub worker scored by
    TRL's own code, see tests/_trl_async_stub.py): advantages with the population std and eps
    1e-8, no zero-std fraction logged. The callback records its groups as trained, the manifest
    says how its advantages are made, the doctor judges the collapse from the groups, and a
    reward that breaks stops the run within sustain + 2 steps."""
    stub = _async_stub()
    stub.patch_for_cpu(monkeypatch)
    break_group = 4 * 32  # 4 groups per step: the reward breaks from step 33 on
    calls = {"n": 0}

    def reward_partial(prompts, completions, **kwargs):
        calls["n"] += 1
        if calls["n"] > break_group:
            return [0.0] * len(completions)
        return [(sum(map(ord, text)) % 3) / 2 for text in completions]

    rec = tmp_path / "rec"
    cb = RlvitalsCallback(rec, halt_on="collapse", sinks=[])
    trainer, worker = stub.async_trainer(
        tmp_path, tok, H.tiny_model(tok), [reward_partial], max_steps=60
    )
    cb.attach(trainer)
    trainer.train()
    run = read_recording(rec)
    m = run.manifest
    assert (m.trainer, m.estimator, m.adv_scale, m.scale_rewards, m.kl_coef) == (
        "trl",
        "grpo",
        "group_std",
        "group",
        0.0,
    )
    assert m.config["trainer_class"] == "AsyncGRPOTrainer"
    assert m.config["advantage_std"] == "population" and m.config["advantage_eps"] == 1e-8
    assert m.reward_std_kind == "group_mean" and "zero_std_frac" not in run.series
    # Recorded right: every group trained, with TRL's own rewards and advantages.
    g = run.groups
    assert set(g.sizes()) == {4}
    scored = {tuple(r): a for _, r, a in worker.groups}
    offsets = np.concatenate([[0], np.cumsum(g.sizes())])
    for j in range(g.n_groups):
        r = g.rewards[offsets[j] : offsets[j + 1]]
        a = g.advantages[offsets[j] : offsets[j + 1]]
        np.testing.assert_allclose(a, scored[tuple(r.tolist())], rtol=1e-6, atol=1e-7)
        ref = (r - r.mean()) / (r.std() + 1e-8)  # TRL's formula: population std
        np.testing.assert_allclose(a, ref, rtol=1e-5, atol=1e-6)
    # Judged right: the ACR comes from the groups; the collapse starts where the reward broke.
    steps = g.unique_steps()
    per_step = {int(s): g.rewards[np.repeat(g.step == s, g.sizes())] for s in steps}
    broken = min(
        s
        for s, r in per_step.items()
        if not r.any() and all(not per_step[t].any() for t in per_step if t >= s)
    )
    assert 30 <= broken <= 36
    post = rlvitals.diagnose(run)
    assert post.vitals.evidence == "groups"
    collapse = [i for i in post.incidents if i.theme == "collapse"]
    assert collapse and abs(collapse[0].onset_step - broken) <= 1
    # Halted right: AsyncGRPOTrainer honours control.should_training_stop.
    assert cb.halted_at is not None and cb.halted_at - broken <= 5 + 2, (cb.halted_at, broken)
    assert trainer.state.global_step == cb.halted_at
    assert abs(cb.halt.last_healthy_step - (broken - 1)) <= 1


def test_avspo_metrics_reach_wandb(tok, tmp_path, monkeypatch):
    """TRL's own W&B reporter carries the rlvitals metrics; the W&B importer reads them back."""
    import wandb

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    # wandb keeps its settings (WANDB_DIR included) in a process-wide singleton made by the
    # first wandb.init: another test's run in this worker would send ours to its folder
    wandb.teardown()
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path / "out",
        reward_funcs=[H.reward_prompt_parity],
        max_steps=2,
        report_to=["wandb"],
        trainer_kwargs={"estimator": "avspo", "estimator_config": {"tau_adapt0": 0.2}},
    )
    trainer.train()
    wandb.finish()
    wandb.teardown()  # waits for wandb's service process to flush the run file (else a race)
    rows = _rows(trainer)
    from rlvitals.importers import load

    (run_dir,) = sorted((tmp_path / "wandb").glob("offline-run-*"))
    run = load(run_dir)
    assert run.manifest.format == "wandb"
    # wandb's step_sync stamps TRL's profiling rows with the last trainer step (0 before the
    # first log), so W&B, and this importer, show them one step early: keep the training steps.
    train = np.isin(run.steps, [r["step"] for r in rows])
    assert train.sum() == 2
    np.testing.assert_allclose(run.series["acr"][train], [r["rlvitals/acr"] for r in rows])
    np.testing.assert_allclose(
        run.series["tau_adapt"][train], [r["rlvitals/tau_adapt"] for r in rows]
    )
    np.testing.assert_allclose(run.series["avspo_triggered"][train], [1.0, 1.0])


# -- (c) the estimator state survives a checkpoint --------------------------------------------


def test_resume_restores_estimator_state(tok, tmp_path, caplog):
    out = tmp_path / "out"
    cfg = {"estimator": "avspo", "estimator_config": {"tau_adapt0": 0.2, "eta": 0.5}}
    first = _trainer(
        Capturing,
        tok,
        out,
        reward_funcs=[reward_mixed],
        max_steps=2,
        save_strategy="steps",
        save_steps=2,
        trainer_kwargs=cfg,
    )
    first.train()
    ckpt = out / "checkpoint-2"
    saved = json.loads((ckpt / STATE_FILE).read_text())
    assert saved["estimator"] == "avspo" and saved["state"] == first.infos[-1]["state"]
    assert saved["state"]["step"] == 2
    assert saved["state"] != AvspoState(tau_adapt=0.2).to_dict()

    second = _trainer(
        Capturing,
        tok,
        out,
        reward_funcs=[reward_mixed],
        max_steps=3,
        save_strategy="no",
        trainer_kwargs=cfg,
    )
    second.train(resume_from_checkpoint=str(ckpt))
    assert len(second.infos) == 1
    assert second.infos[0]["state_before"] == saved["state"]
    assert second.rlvitals_state.step == 3

    # A checkpoint without the file: reported once, the estimator starts afresh.
    (ckpt / STATE_FILE).unlink()
    third = _trainer(
        Capturing,
        tok,
        out,
        reward_funcs=[reward_mixed],
        max_steps=3,
        save_strategy="no",
        trainer_kwargs=cfg,
    )
    with caplog.at_level(logging.WARNING, logger="rlvitals"):
        third.train(resume_from_checkpoint=str(ckpt))
    reports = [
        r.getMessage() for r in caplog.records if "restoring the estimator state" in r.getMessage()
    ]
    assert len(reports) == 1, reports
    assert third.infos[0]["state_before"] is None


# -- (d) failures never stop training ----------------------------------------------------------


@pytest.fixture(scope="module")
def flaky_estimator():
    """An estimator that raises on its second call (grpo otherwise)."""
    from dataclasses import dataclass

    name = "test_flaky_grpo"
    calls = {"n": 0}
    if name not in ESTIMATORS:

        @dataclass(frozen=True)
        class FlakyConfig:
            pass

        @register_estimator(name, FlakyConfig)
        def flaky(rewards, group_ids, config, state):
            calls["n"] += 1
            if calls["n"] == 2:
                raise FloatingPointError("boom in the estimator")
            return rlvitals.estimate("grpo", rewards, group_ids)

    return name, calls


def test_failures_are_contained(tok, tmp_path, flaky_estimator, caplog):
    name, calls = flaky_estimator
    calls["n"] = 0
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    from rlvitals.doctor import DoctorConfig

    # Three failures at once: the estimator raises on its second batch, the recording directory
    # cannot be created, and the doctor is configured with a detector that does not exist.
    cb = RlvitalsCallback(
        blocker / "rec", doctor_every=1, doctor_config=DoctorConfig(select=["NO_SUCH_DETECTOR"])
    )
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path / "out",
        max_steps=3,
        callbacks=[cb],
        trainer_kwargs={"estimator": name},
    )
    # Issue 11 item 1: a hook reports through logging, never warnings (under -W error a warning
    # is an exception in the trainer): runtime warnings, and any warning rlvitals would issue,
    # are errors here (transformers 5 warns FutureWarnings of its own, left alone).
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="rlvitals"):
        warnings.simplefilter("error", RuntimeWarning)
        warnings.filterwarnings("error", module=r"rlvitals(\..*)?$")
        trainer.train()
    assert trainer.state.global_step == 3
    ours = [r.getMessage() for r in caplog.records if " failed (" in r.getMessage()]
    assert any("advantage estimation failed (FloatingPointError: boom" in m for m in ours), ours
    assert any("running the doctor failed" in m and "NO_SUCH_DETECTOR" in m for m in ours), ours
    assert len(ours) == 2, "each failing site is reported once"
    assert trainer.rlvitals_guard.errors["advantage estimation"] == 1
    assert cb.guard.errors["running the doctor"] == 3  # counted at every check
    # The recorder's own containment reports through logging (never warnings.warn).
    recorder_logs = [r.getMessage() for r in caplog.records if r.name == "rlvitals.recording"]
    assert recorder_logs and cb.recorder.stats["errors"] > 0
    rows = _rows(trainer)
    assert [r["rlvitals/estimator_fallback"] for r in rows] == [0.0, 1.0, 0.0]
    assert "rlvitals/acr" not in rows[1] and "rlvitals/acr" in rows[2]
    # The failed batch trained on TRL's own advantages (grpo, group scaling).
    assert len(trainer.infos) == 2 and len(trainer.trained_on) == 3
    rewards = trainer.rewards_seen[1][:, 0]  # one reward function, weight 1
    trl_own, _, _ = rlvitals.estimate("grpo", rewards, torch.arange(16) // 4)
    torch.testing.assert_close(trainer.trained_on[1], trl_own, atol=1e-6, rtol=1e-5)
    assert torch.count_nonzero(trl_own) > 0


def test_invalid_configuration_fails_at_construction(tok, tmp_path):
    with pytest.raises(KeyError, match="unknown estimator 'nope'"):
        _trainer(Capturing, tok, tmp_path, trainer_kwargs={"estimator": "nope"})
    with pytest.raises(ValueError, match="alpha"):
        _trainer(
            Capturing,
            tok,
            tmp_path,
            trainer_kwargs={"estimator": "avspo", "estimator_config": {"alpha": -1}},
        )
    with pytest.raises(ValueError, match="sum_then_normalize"):
        _trainer(Capturing, tok, tmp_path, multi_objective_aggregation="normalize_then_sum")
    assert with_estimator(GRPOTrainer).__mro__[1].__name__ == "RlvitalsGRPOMixin"
    with pytest.raises(TypeError):
        with_estimator(dict)


# -- item 4: a real TRL run under torchrun, 2 ranks on gloo --------------------------------------


@pytest.mark.slow
def test_torchrun_two_ranks_match_single_process(tmp_path):
    ranks = H.torchrun(tmp_path, "avspo")
    assert len(ranks[0]) == len(ranks[1]) == H.DDP_STEPS
    state = None
    triggered = 0
    for step, (r0, r1) in enumerate(zip(*ranks)):
        assert r0["backend"] == r1["backend"] == "gloo" and r0["world_size"] == 2
        assert r0["rewards"] == r1["rewards"], "TRL gathers the same global rewards everywhere"
        rewards = np.asarray(r0["rewards"], dtype=np.float32)  # TRL's float32 rewards
        ids = np.arange(rewards.shape[0]) // 8
        ref, metrics, state = rlvitals.estimate(
            "avspo", rewards, ids, state=state, **H.DDP_ESTIMATOR_CONFIG["avspo"]
        )
        # Each G=8 group straddles the ranks: rows 0-3 on rank 0, 4-7 on rank 1.
        assert r0["slice"] == [0, 4] and r1["slice"] == [4, 8]
        assert r0["local_advantages"] + r1["local_advantages"] == ref.tolist(), step
        for r in (r0, r1):
            assert r["metrics"] == metrics and r["state"] == state.to_dict(), step
        triggered += metrics["avspo_groups_augmented"] > 0
    assert triggered, "AVSPO must augment a group in this run for the test to mean something"
    assert not math.isnan(state.tau_adapt)
    # One recording, written by rank 0 only, holding every rank's completions.
    rec = tmp_path / "rec"
    assert sorted(p.name for p in rec.glob("*.rank*")) == [
        "events.rank0.jsonl",
        "groups.rank0.bin",
        "scalars.rank0.jsonl",
    ]
    run = read_recording(rec)
    assert run.manifest.config["world_size"] == 2 and run.manifest.group_size == 8
    assert run.groups.n_groups == H.DDP_STEPS and set(run.groups.sizes()) == {8}
    np.testing.assert_array_equal(
        run.groups.rewards, np.concatenate([r["rewards"] for r in ranks[0]])
    )
    np.testing.assert_array_equal(run.series["acr"], [r["metrics"]["acr"] for r in ranks[0]])


# -- issue 21: rewards outside the declared range never put NaN into the model ----------------


def _reward_01(completions, **kwargs) -> list[float]:
    return [float(sum(map(ord, t)) % 2) for t in completions]


def _reward_01_b(completions, **kwargs) -> list[float]:
    return [float(len(t) % 2) for t in completions]


def _reward_1000(completions, **kwargs) -> list[float]:
    return [1000.0 * (sum(map(ord, t)) % 2) for t in completions]


REWARD_SETUPS = {
    "two 0/1 functions (0..2)": [_reward_01, _reward_01_b],
    "0 or 1000": [_reward_1000],
}


@pytest.mark.parametrize("setup", list(REWARD_SETUPS))
@pytest.mark.parametrize(
    "estimator",
    ["grpo", "dr_grpo", "rloo", "avspo", "avspo_released", "zero_var_filter", "history_baseline"],
)
def test_out_of_range_rewards_train_finite_or_stop_before_the_first_update(
    tok, tmp_path, estimator, setup
):
    """Each estimator either trains on finite advantages (its range does not matter) or stops
    with one error naming the setting before any optimizer step (its range does): never NaN
    weights, as history_baseline gave on two summed 0/1 rewards (grad_norm nan at step 1)."""
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path,
        reward_funcs=REWARD_SETUPS[setup],
        trainer_kwargs={"estimator": estimator},
    )
    if rlvitals.estimators.get_estimator(estimator).ranged:
        with pytest.raises(rlvitals.estimators.RewardRangeError, match="r_max"):
            trainer.train()
        assert trainer.state.global_step == 0 and trainer.trained_on == []
    else:
        trainer.train()
        assert trainer.state.global_step == 2 and len(trainer.infos) == 2
        assert all(bool(torch.isfinite(a).all()) for a in trainer.trained_on)
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())


def test_history_baseline_with_the_range_declared_trains_finite(tok, tmp_path):
    trainer = _trainer(
        Capturing,
        tok,
        tmp_path,
        reward_funcs=REWARD_SETUPS["two 0/1 functions (0..2)"],
        max_steps=3,
        trainer_kwargs={"estimator": "history_baseline", "estimator_config": {"r_max": 2.0}},
    )
    trainer.train()
    assert trainer.state.global_step == 3 and trainer.rlvitals_guard.total == 0
    assert any(float(r.max()) > 1.0 for r in (i["rewards"] for i in trainer.infos))
    assert all(
        bool(torch.isfinite(a).all()) and bool(a.abs().sum() > 0) for a in trainer.trained_on
    )
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())


def test_history_estimators_keep_their_history_per_prompt_not_per_group_position(tok, tmp_path):
    """Each step's groups are keyed by their prompts' ids (the recording's), so a prompt drawn
    again finds its own history; before, the keys were the groups' positions 0..k-1 and group 0
    of every step shared one history whatever its prompt."""
    from rlvitals.integrations.trl._batch import _prompt_id

    trainer = _trainer(
        Capturing,
        tok,
        tmp_path,
        max_steps=4,
        n_prompts=4,
        trainer_kwargs={"estimator": "history_baseline"},
    )
    trainer.train()
    assert trainer.state.global_step == 4 and trainer.rlvitals_guard.total == 0
    prompts = {_prompt_id(p) for p in H.train_dataset(4)["prompt"]}
    keys = set(trainer.rlvitals_state.counts)
    assert keys and keys <= prompts, (keys, prompts)
    assert len(trainer.rlvitals_config.keys) == 16 // trainer.num_generations


def test_a_range_error_after_the_first_batch_falls_back_and_is_counted(tok, tmp_path, caplog):
    """Mid-run the run is not stopped: the batch keeps TRL's advantages, said once."""
    calls = {"n": 0}

    def late_two(completions, **kwargs):
        calls["n"] += 1
        return [2.0 if calls["n"] > 1 else 1.0 for _ in completions]

    trainer = _trainer(
        Capturing,
        tok,
        tmp_path,
        reward_funcs=[late_two],
        max_steps=3,
        trainer_kwargs={"estimator": "avspo"},
    )
    with caplog.at_level(logging.WARNING, logger="rlvitals.integrations"):
        trainer.train()
    assert trainer.state.global_step == 3
    assert trainer.rlvitals_guard.errors["advantage estimation"] == 2
    assert sum("RewardRangeError" in r.getMessage() for r in caplog.records) == 1
    fallback = [r["rlvitals/estimator_fallback"] for r in trainer.state.log_history if "loss" in r]
    assert fallback[0] == 0.0 and fallback[1:] == [1.0, 1.0]
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())

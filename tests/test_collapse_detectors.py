"""The collapse family: each detector's bad and good run, any-window onsets, evidence tiers."""

from __future__ import annotations

import dataclasses
import inspect
import re

import numpy as np
import pytest

from rlvitals.detectors import DETECTORS, Severity, load_all
from rlvitals.doctor import DoctorConfig, diagnose
from rlvitals.recording import Manifest, RunBuilder
from rlvitals_corpus import generate, to_run
from rlvitals_corpus.fixtures import PAIRS

COLLAPSE = [
    "ADV_COLLAPSE",
    "DEGENERATE_GROUPS",
    "REWARD_STD_DEATH",
    "ACR_STALL",
    "ACR_VOLATILE",
    "EXCESS_COLLAPSE",
    "SATURATION",
]
SECTIONS = (
    "What is happening",
    "What it looks like in the recording",
    "How the detector decides",
    "What to try",
)


def _found(diag, det_id, severity=None):
    sev = DETECTORS.get(det_id).severity if severity is None else severity
    return [f for f in diag.by_id(det_id) if Severity(f.severity).rank >= sev.rank]


@pytest.mark.parametrize("det_id", COLLAPSE)
def test_bad_run_fires_and_good_run_stays_silent(det_id):
    bad, good = PAIRS[det_id].bad(), PAIRS[det_id].good()
    d = diagnose(to_run(bad))
    hits = _found(d, det_id)
    assert hits, [(f.id, f.severity, f.onset_step) for f in d.findings]
    for lab in bad.expect:
        if lab.id == det_id and lab.onset is not None:
            best = min(abs(f.onset_step - lab.onset) for f in hits)
            assert best <= 3 * bad.log_every, (lab, [(f.onset_step, f.end_step) for f in hits])
            if lab.end is not None:
                assert any(f.end_step is not None and abs(f.end_step - lab.end) <= 5 for f in hits)
    g = diagnose(to_run(good))
    assert not _found(g, det_id), [(f.id, f.severity, f.message) for f in g.by_id(det_id)]


@pytest.mark.parametrize("det_id", COLLAPSE)
def test_detector_is_its_own_docs_page(det_id):
    load_all()
    cls = DETECTORS.get(det_id)
    doc = inspect.getmodule(cls).__doc__
    for s in SECTIONS:
        assert f"## {s}" in doc, (det_id, s)
    assert cls.family == "collapse"
    # Knobs: frozen, every field documented once, every default a named constant.
    k = cls.Knobs()
    with pytest.raises(dataclasses.FrozenInstanceError):
        k.__setattr__(cls.knob_names()[0], 0)
    src = inspect.getsource(cls.Knobs)
    for name in cls.knob_names():
        assert re.search(rf"#: .+\n\s+{name}: ", src), f"{det_id}.{name} undocumented"
        assert re.search(rf"{name}: \w+ = [A-Z_]+\n", src), f"{det_id}.{name}: magic default"
        assert f":knob:`{name}`" in doc, f"{det_id} page does not mention knob {name}"


@pytest.mark.parametrize(
    ("scenario", "view", "det_id"),
    [
        ("collapse_identical", "groups", "DEGENERATE_GROUPS"),
        ("collapse_identical", "zero_std_frac", "DEGENERATE_GROUPS"),
        ("collapse_floor", "adv_std", "ADV_COLLAPSE"),
        ("collapse_floor", "adv_zero_frac", "ADV_COLLAPSE"),
        ("collapse_floor", "loss_grad", "ADV_COLLAPSE"),
        ("collapse_floor", "verl", "ADV_COLLAPSE"),
        ("collapse_floor", "reward_std_only", "REWARD_STD_DEATH"),
    ],
)
def test_transient_collapse_from_60_to_139_alone_in_each_tier(scenario, view, det_id):
    lr = generate(scenario, seed=5, view=view, steps=220, onset=60, end=139)
    d = diagnose(to_run(lr))
    hits = _found(d, det_id)
    assert any(
        abs(f.onset_step - 60) <= 3 and f.end_step is not None and abs(f.end_step - 139) <= 5
        for f in hits
    ), [(f.id, f.onset_step, f.end_step, f.message) for f in d.findings]


def test_late_onset_near_the_end_and_gradual_onset():
    lr = generate("collapse_floor", seed=8, view="trl", steps=300, onset=284)
    hits = _found(diagnose(to_run(lr)), "DEGENERATE_GROUPS")
    assert hits and abs(hits[0].onset_step - 284) <= 3 and hits[0].end_step is None
    lr = generate("collapse_identical", seed=9, view="groups", steps=300, onset=100, gradual=True)
    hits = _found(diagnose(to_run(lr)), "DEGENERATE_GROUPS")
    lab = lr.expect[0].onset
    assert hits and abs(hits[0].onset_step - lab) <= lr.expect[0].tolerance


def test_logging_every_10_steps_reports_training_steps():
    lr = generate(
        "collapse_floor", seed=3, view="zero_std_frac", log_every=10, steps=1500, onset=723
    )
    assert lr.steps[1] - lr.steps[0] == 10
    hits = _found(diagnose(to_run(lr)), "DEGENERATE_GROUPS")
    assert hits and hits[0].onset_step % 10 == 0
    assert abs(hits[0].onset_step - 723) / 10 <= 3


def test_saturating_run_is_saturation_not_a_collapse():
    """A run that solves its prompt set is SATURATION, never a collapse; saturated for a
    sustained stretch it is a warning (compute spent on a dead signal), shorter it informs."""
    for seed in (1, 2, 3):
        lr = generate("healthy", seed=seed, shape="saturating", view="trl", steps=400)
        d = diagnose(to_run(lr))
        warn = [f for f in d.findings if f.id in COLLAPSE and f.severity != Severity.INFO]
        assert [f.id for f in warn] == ["SATURATION"], [(f.id, f.message) for f in warn]
        assert warn[0].metrics["saturated_steps"] >= 50
    sat = _found(d, "SATURATION", Severity.INFO)
    assert sat and any("harder prompts" in a for a in sat[0].actions)
    short = diagnose(to_run(lr), DoctorConfig(knobs={"SATURATION": {"warn_steps": 10_000}}))
    assert [f.severity for f in short.by_id("SATURATION")] == [Severity.INFO]


def test_short_runs_are_not_judged_unless_totally_collapsed():
    healthy = generate("healthy", seed=4, shape="short", view="trl")
    assert healthy.steps.size < 30
    d = diagnose(to_run(healthy))
    assert not [f for f in d.findings if f.id in COLLAPSE and f.severity != Severity.INFO]
    for view, det_id in [
        ("trl", "DEGENERATE_GROUPS"),
        ("adv_std", "ADV_COLLAPSE"),
        ("reward_std", "REWARD_STD_DEATH"),
        ("loss_grad", "ADV_COLLAPSE"),
    ]:
        lr = generate("total_short", seed=6, view=view)
        hits = _found(diagnose(to_run(lr)), det_id)
        assert hits and hits[0].onset_step == int(lr.steps[0]), view
        assert "every logged step" in hits[0].message


def test_dr_grpo_advantages_are_judged_against_their_own_level():
    lr = generate("collapse_floor", seed=12, view="adv_std", steps=240, onset=120)
    run = to_run(lr)
    # Rescale to Dr. GRPO-like magnitudes (~0.4 healthy): absolute GRPO gates would never see
    # a healthy stretch above 0.5; the run's own level does.
    run.series["adv_std"] = run.series["adv_std"] * 0.4
    run.manifest.estimator = "dr_grpo"
    hits = _found(diagnose(run), "ADV_COLLAPSE")
    assert hits and abs(hits[0].onset_step - 120) <= 3
    assert "scaled by the run's level" in hits[0].message


def test_plumbing_bug_is_excess_not_reward_death():
    lr = generate("plumbing", seed=2, view="full", steps=240, onset=100)
    d = diagnose(to_run(lr))
    assert _found(d, "ADV_COLLAPSE") and _found(d, "EXCESS_COLLAPSE")
    assert not _found(d, "DEGENERATE_GROUPS") and not _found(d, "REWARD_STD_DEATH")
    f = _found(d, "EXCESS_COLLAPSE")[0]
    assert f.metrics["kind"] == "plumbing" and "reward variance is alive" in f.message


def test_finding_carries_numbers_next_to_thresholds():
    lr = generate("collapse_floor", seed=3, view="adv_std", steps=200, onset=112)
    f = _found(diagnose(to_run(lr)), "ADV_COLLAPSE")[0]
    # numbers in the one message vocabulary (rlvitals._text): 3 significant digits
    assert re.match(
        r"adv_std 0(\.\d+)? < 0\.1 for \d+ steps since step 11[0-4] \(early mean "
        r"0\.\d+; GRPO-normalised\)",
        f.message,
    ), f.message
    assert f.evidence == "advantages" and 0 < f.confidence <= 1 and f.actions
    assert f.metrics["threshold"] == pytest.approx(0.1)


@pytest.mark.parametrize("loss_key", ["loss", "policy_loss"])  # OpenRLHF logs only the latter
def test_loss_and_grad_exactly_zero_is_adv_collapse(loss_key):
    b = RunBuilder(Manifest(kl_coef=0.0))
    rng = np.random.default_rng(0)
    for s in range(1, 101):
        z = s >= 70
        b.add_row(
            s,
            {
                loss_key: 0.0 if z else rng.normal(0, 0.01),
                "grad_norm": 0.0 if z else rng.uniform(0.1, 0.5),
            },
        )
    hits = _found(diagnose(b.build()), "ADV_COLLAPSE")
    assert hits and hits[0].onset_step == 70 and hits[0].evidence == "loss_grad_zero"
    assert "no KL term" in hits[0].message


def test_knob_overrides_change_the_verdict():
    lr = generate("collapse_floor", seed=3, view="zero_std_frac", steps=200, onset=100)
    run = to_run(lr)
    assert _found(diagnose(run), "DEGENERATE_GROUPS")
    cfg = DoctorConfig(knobs={"DEGENERATE_GROUPS": {"acr_above": 1.01}})
    assert not _found(diagnose(run, cfg), "DEGENERATE_GROUPS")
    with pytest.raises(ValueError, match="valid: acr_above"):
        DETECTORS.get("DEGENERATE_GROUPS")(bogus=1)


def test_missing_data_says_what_it_would_need():
    b = RunBuilder()
    for s in range(1, 60):
        b.add_row(s, {"learning_rate": 1e-6})
    d = diagnose(b.build())
    assert not [f for f in d.findings if f.id in COLLAPSE]
    assert "adv_std" in d.skipped["ADV_COLLAPSE"]
    assert "frac_reward_zero_std" in d.skipped["DEGENERATE_GROUPS"]
    assert "reward_std" in d.skipped["REWARD_STD_DEATH"]

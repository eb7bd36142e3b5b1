"""The doctor: selection, sorting, the JSON contract, fail-on, errors, diagnose_path."""

from __future__ import annotations

import json

import pytest

from rlvitals.detectors import Detector, Finding, Severity
from rlvitals.doctor import JSON_SCHEMA, Diagnosis, DoctorConfig, diagnose, diagnose_path
from rlvitals.errors import InputError
from rlvitals.recording import RunBuilder
from rlvitals_corpus import generate, to_run
from rlvitals_corpus.writers import write


@pytest.fixture(scope="module")
def collapsed_run():
    return to_run(generate("collapse_identical", seed=21, view="trl", steps=200, onset=80))


@pytest.fixture(scope="module")
def collapsed(collapsed_run):
    return diagnose(collapsed_run)


def test_findings_sorted_by_severity_then_onset(collapsed):
    keys = [
        (-Severity(f.severity).rank, f.onset_step if f.onset_step is not None else 1 << 62)
        for f in collapsed.findings
    ]
    assert keys == sorted(keys)
    assert collapsed.worst() is Severity.WARN or collapsed.worst() is Severity.CRITICAL


def test_json_contract(collapsed):
    d = collapsed.to_dict()
    text = json.dumps(d, allow_nan=False)
    d = json.loads(text)
    assert d["schema"] == JSON_SCHEMA == 2
    assert {"schema", "run", "vitals", "findings"} <= set(d)
    v = d["vitals"]
    assert v["evidence"] in (
        "groups",
        "zero_std_frac",
        "advantages",
        "reward_std",
        "none",
        "loss_grad_zero",
    )
    assert isinstance(v["acr_mean"], float) and isinstance(v["acr_100"], float)
    assert d["findings"]
    for f in d["findings"]:
        assert set(f) == {
            "id",
            "severity",
            "onset_step",
            "end_step",
            "confidence",
            "evidence",
            "message",
            "metrics",
            "actions",
            "series",
            "thresholds",
            "marks",
        }
    # every finding is in exactly one incident, which names its root among its detectors
    assert d["incidents"] and d["not_judged"] is None
    seen = sorted(i for inc in d["incidents"] for i in inc["findings"])
    assert seen == list(range(len(d["findings"])))
    for inc in d["incidents"]:
        assert inc["root"] == inc["detectors"][0] == d["findings"][inc["findings"][0]]["id"]
        assert inc["severity"] in ("info", "warn", "critical") and inc["title"] and inc["cause"]
        assert f["severity"] in ("info", "warn", "critical")
        assert f["onset_step"] is None or isinstance(f["onset_step"], int)
        assert 0.0 <= f["confidence"] <= 1.0 and isinstance(f["actions"], list)
    ids = [f["id"] for f in d["findings"]]
    assert "DEGENERATE_GROUPS" in ids


def test_fail_on_levels(collapsed):
    assert collapsed.fails("warn") and collapsed.fails("info")
    assert not collapsed.fails("never")
    worst = collapsed.worst()
    assert collapsed.fails("critical") == (worst is Severity.CRITICAL)
    with pytest.raises(ValueError, match="valid"):
        collapsed.fails("bogus")


def test_healthy_run_passes():
    lr = generate("healthy", seed=3, shape="learning", view="trl", steps=200)
    d = diagnose(to_run(lr))
    assert not d.fails("warn"), [(f.id, f.message) for f in d.findings]
    assert not d.errors


def test_select_ignore_family_and_disabled(collapsed_run):
    d = diagnose(collapsed_run, DoctorConfig(select=["DEGENERATE_GROUPS"]))
    assert d.detectors == ["DEGENERATE_GROUPS"] and {f.id for f in d.findings} == {
        "DEGENERATE_GROUPS"
    }
    d = diagnose(collapsed_run, DoctorConfig(select=["collapse"], ignore=["ACR_STALL"]))
    assert "ACR_STALL" not in d.detectors and "ADV_COLLAPSE" in d.detectors
    assert all(f.id != "ACR_STALL" for f in d.findings)
    d = diagnose(collapsed_run, DoctorConfig(disabled=["DEGENERATE_GROUPS"]))
    assert "DEGENERATE_GROUPS" not in d.detectors
    d = diagnose(collapsed_run, DoctorConfig(select=["ALL"]))
    assert "DEGENERATE_GROUPS" in d.detectors
    with pytest.raises(ValueError, match=r"unknown detector 'NOPE'.*valid: ALL, "):
        diagnose(collapsed_run, DoctorConfig(select=["NOPE"]))


def test_config_validate():
    DoctorConfig(knobs={"ADV_COLLAPSE": {"sustain": 3}}).validate()
    with pytest.raises(ValueError, match="unknown knob"):
        DoctorConfig(knobs={"ADV_COLLAPSE": {"nope": 3}}).validate()
    with pytest.raises(ValueError, match="fail_on"):
        DoctorConfig(fail_on="sometimes").validate()


class _Boom(Detector):
    id = "BOOM_TEST"
    severity = Severity.WARN

    def check(self, vitals):
        raise RuntimeError("kaput")


class _Fixed(Detector):
    id = "FIXED_TEST"
    severity = Severity.CRITICAL

    def check(self, vitals):
        return [
            self.finding("late and bad", onset_step=5),
            self.finding("early info", severity=Severity.INFO, onset_step=1),
            Finding("FIXED_TEST", Severity.CRITICAL, "early and bad", onset_step=2),
        ]


def test_a_crashing_detector_does_not_hide_the_others(monkeypatch, collapsed_run):
    import rlvitals.doctor as doctor

    monkeypatch.setattr(doctor, "select_detectors", lambda cfg: [_Boom, _Fixed])
    monkeypatch.delenv("RLVITALS_STRICT", raising=False)
    d = diagnose(collapsed_run)
    assert "kaput" in d.errors["BOOM_TEST"]
    assert [f.message for f in d.findings] == ["early and bad", "late and bad", "early info"]
    assert d.worst() is Severity.CRITICAL and d.fails("critical")
    assert json.loads(json.dumps(d.to_dict()))["errors"]["BOOM_TEST"].startswith("RuntimeError")
    monkeypatch.setenv("RLVITALS_STRICT", "1")
    with pytest.raises(RuntimeError):
        diagnose(collapsed_run)


@pytest.mark.parametrize("fmt", ["trl_state", "jsonl", "csv"])
def test_diagnose_path_through_the_importers(tmp_path, fmt):
    lr = generate(
        "collapse_floor", seed=4, view="trl" if fmt == "trl_state" else "full", steps=200, onset=100
    )
    d = diagnose_path(write(lr, fmt, tmp_path))
    assert isinstance(d, Diagnosis)
    assert d.run.manifest.format == fmt
    hits = d.by_id("DEGENERATE_GROUPS")
    assert hits and abs(hits[0].onset_step - 100) <= 3
    if fmt == "trl_state":
        assert d.vitals.group_size == lr.manifest["group_size"]  # from training_args.json


def test_diagnose_path_bad_input_is_an_input_error(tmp_path):
    with pytest.raises(InputError):
        diagnose_path(tmp_path / "missing.json")


def test_empty_run_is_diagnosed_without_errors():
    d = diagnose(RunBuilder().build())
    assert d.findings == [] and not d.errors
    json.dumps(d.to_dict(), allow_nan=False)

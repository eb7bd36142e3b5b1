"""The events layer (rlvitals.vitals.events): one reading of a run's series, shared by every
detector and the differential diagnosis (issue 23.2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlvitals.detectors import kit
from rlvitals.doctor import DoctorConfig, diagnose_path
from rlvitals.recording import RunBuilder
from rlvitals.vitals import UnknownSeriesError, compute_vitals
from rlvitals.vitals import events as events_mod
from rlvitals.vitals.events import Events


def _vitals(n=40):
    b = RunBuilder()
    for s in range(1, n + 1):
        row = {"entropy": 1.0 if s < 20 else 0.1, "reward": 0.5}
        if s % 3:
            row["kl"] = 0.01 * s
        b.add_row(s, row)
    for s in (10, 20, 30):
        b.add_row(s, {"eval/reward": s / 100})
    return compute_vitals(b.build())


def test_every_reader_of_one_vitals_gets_the_same_events_and_points():
    v = _vitals()
    ev = Events.of(v)
    assert Events.of(v) is ev
    p = kit.points(v, "entropy")
    assert p is ev.points("entropy")
    steps, values = ev.series("entropy")
    assert steps is p.steps and values is p.values
    # kl logged on two steps in three: the points are its finite values on their own steps
    kl = kit.points(v, "kl")
    assert kl.n == 27 and 3 not in kl.steps.tolist() and kl.steps[0] == 1
    # a window of the vitals is other vitals: its own events
    assert Events.of(v.window(1, 10)) is not ev


def test_shared_points_are_read_only():
    v = _vitals()
    p = kit.points(v, "entropy")
    with pytest.raises(ValueError, match="read-only"):
        p.values[0] = 5.0
    with pytest.raises(ValueError, match="read-only"):
        p.steps[0] = 5


def test_a_replaced_series_is_read_again_and_unknown_names_still_raise():
    v = _vitals()
    first = kit.points(v, "entropy")
    v.series["entropy"] = np.full(v.n_steps, 2.0)
    again = kit.points(v, "entropy")
    assert again is not first and set(again.values.tolist()) == {2.0}
    with pytest.raises(UnknownSeriesError):
        kit.points(v, "entropyy")
    assert Events.of(v).points("entropyy") is None  # the diagnosis asks without raising


def test_eval_points_are_on_the_eval_steps():
    v = _vitals()
    e = kit.eval_points(v, "eval/reward_mean")
    assert e.steps.tolist() == [10, 20, 30] and e.values.tolist() == [0.1, 0.2, 0.3]
    assert kit.needs(v, ["eval/reward_mean"], 3) is None


def test_the_doctor_reads_each_series_once_for_detectors_and_diagnosis(tmp_path, monkeypatch):
    """Every series the detectors and the differential read together is read once per run."""
    n = 80
    s = np.arange(1, n + 1)
    rows = [
        {
            "step": int(i),
            "reward": 0.6 if i < 40 else 0.6 * 0.97 ** (i - 40),
            "entropy": 0.5 if i < 40 else 0.05,
            "kl": 0.01,
            "completion_length": 100.0,
            "frac_reward_zero_std": 0.2,
        }
        for i in s
    ]
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reads: dict[str, int] = {}
    real = events_mod._finite_points

    def counting(name, steps, x):
        reads[name] = reads.get(name, 0) + 1
        return real(name, steps, x)

    monkeypatch.setattr(events_mod, "_finite_points", counting)
    dx = diagnose_path(path, config=DoctorConfig(allow_unjudged=True))
    assert dx.conditions  # the diagnosis ran over the same events
    for name in ("entropy", "kl", "reward_mean"):
        assert reads.get(name) == 1, (name, reads)
    assert max(reads.values()) == 1

"""The live Monitor names causes (conditions) as ``rlvitals watch`` does, with its hysteresis.

- a stream whose sign is intermittent (every fourth step healthy) opens its condition once and
  never closes or reopens it, although checks come and go without naming it;
- a check that ran none of a condition's detectors (the fast checks between full ones, the
  partial checks of an open collapse) is no evidence against it: the tracker leaves it open;
- incident alerts carry the condition they point to; the JSON, the log line and the recording
  say it; a condition below ``alert_on`` is followed, not told;
- a condition is closed after three checks without it, once the run healed, and told once.
"""

from __future__ import annotations

import json
import logging

import numpy as np

from rlvitals.conditions import CONDITIONS
from rlvitals.guard.conditions import ConditionTracker, condition_of, judged_by
from rlvitals.guard.monitor import Monitor
from rlvitals.recording import Manifest, read_recording

G, K = 8, 16


def _stream(monitor: Monitor, steps: int, broken, seed: int = 0) -> list[tuple[int, list[str]]]:
    """Feed ``steps`` steps of binary rewards (per-prompt pass rates drawn once); where
    ``broken(step)``, every group's completions agree (one reward per group: the pass rate
    holds, the spread dies). Returns the conditions each check named, by step."""
    rng = np.random.default_rng(seed)
    p = rng.beta(0.7, 0.7, K)
    ids = np.repeat(np.arange(K), G)
    named = []
    for s in range(1, steps + 1):
        r = (rng.random((K, G)) < p[:, None]).astype(float)
        if broken(s):
            r[:] = r[:, :1]
        out = monitor.observe(s, r.reshape(-1), ids, loss=0.1, grad_norm=0.5, entropy=1.0)
        if out.checked:
            named.append((s, [c.id for c in out.conditions if c.id != "HEALTHY"]))
    return named


def _intermittent(s: int) -> bool:
    return s >= 60 and s % 4 != 0


def test_an_intermittent_sign_opens_its_condition_once_and_never_flaps(caplog, tmp_path):
    mon = Monitor(Manifest(trainer="test", group_size=G), sinks=[], recording_dir=tmp_path / "r")
    with caplog.at_level(logging.INFO, logger="rlvitals.guard"):
        named = _stream(mon, 180, _intermittent)
        mon.close()
    timeline = [(e.kind, e.condition) for e in mon.conditions.timeline]
    assert timeline, named
    assert all(kind == "opened" for kind, _ in timeline), timeline  # never closed, reopened
    assert len({c for _, c in timeline}) == len(timeline)  # each opened once
    first = timeline[0][1]
    assert first in CONDITIONS and first != "HEALTHY"
    # Without hysteresis it would flap: after it opened, checks came that did not name it.
    opened_at = mon.conditions.timeline[0].step
    gaps = [s for s, ids in named if s > opened_at and first not in ids]
    assert gaps, named
    assert mon.conditions.open == [c for _, c in timeline]
    # Told once: one alert, one log line, one recorded event per opening.
    told = [a for a in mon.alerts if a.kind.startswith("condition_")]
    assert [(a.kind, a.condition["id"]) for a in told] == [
        ("condition_opened", c) for _, c in timeline
    ]
    lines = [r.getMessage() for r in caplog.records if "condition opened" in r.getMessage()]
    assert len(lines) == len(timeline) and f"({first})" in lines[0]
    events = [e for e in read_recording(tmp_path / "r").events if e.data.get("condition")]
    assert [e.data["alert"] for e in events if e.data["alert"].startswith("condition_")] == [
        "condition_opened"
    ] * len(timeline)


def test_incident_alerts_carry_the_condition_they_point_to():
    got = []
    mon = Monitor(Manifest(trainer="test", group_size=G), sinks=[got.append])
    rng = np.random.default_rng(0)
    p, ids = rng.beta(0.7, 0.7, K), np.repeat(np.arange(K), G)
    checks = {}
    for s in range(1, 121):
        r = (rng.random((K, G)) < p[:, None]).astype(float)
        if s >= 60:
            r[:] = r[:, :1]
        checks[s] = mon.observe(s, r.reshape(-1), ids, loss=0.1, grad_norm=0.5, entropy=1.0)
    mon.flush(5.0)
    opened = next(a for a in got if a.kind == "opened")
    assert opened.condition is not None and opened.condition["id"] in CONDITIONS
    assert f"likely cause: {opened.condition['title']}" in opened.message
    # the condition the doctor named at that check whose signs include the incident's
    named = checks[opened.step].conditions
    pointed = [c.id for c in named if set(c.findings) & set(opened.incident["detectors"])]
    assert opened.condition["id"] == pointed[0], (pointed, opened.incident["detectors"])
    doc = json.loads(json.dumps(opened.to_dict()))
    assert doc["schema"] == 2 and doc["condition"]["id"] == opened.condition["id"]
    assert doc["condition"]["actions"], doc  # advice for the cause, in the trainer's keys
    assert "try: " in opened.text()


def test_a_healed_run_closes_its_condition_once():
    mon = Monitor(Manifest(trainer="test", group_size=G), window=40, sinks=[])
    _stream(mon, 200, lambda s: 60 <= s < 100)
    kinds = [(e.kind, e.condition) for e in mon.conditions.timeline]
    opened = [c for k, c in kinds if k == "opened"]
    closed = [c for k, c in kinds if k == "closed"]
    assert opened and sorted(closed) == sorted(opened), kinds  # every one closed, once
    assert not [k for k, _ in kinds if k == "reopened"], kinds
    last_close = max(e.step for e in mon.conditions.timeline if e.kind == "closed")
    assert 100 < last_close <= 100 + 40 + 3 * mon.check_every * 3, kinds
    closing = [a for a in mon.alerts if a.kind == "condition_closed"]
    assert len(closing) == len(closed) and all(a.severity == "info" for a in closing)


def test_a_healed_fault_closes_while_it_is_still_in_the_window():
    """The conditions a check names carry their end (``end_step``): a fault that healed at step
    100 is closed before its episode has left the 40-step window (it used to stay named until
    step 140 and close at 144)."""
    mon = Monitor(Manifest(trainer="test", group_size=G), window=40, sinks=[])
    _stream(mon, 160, lambda s: 60 <= s < 100)
    closed = [e.step for e in mon.conditions.timeline if e.kind == "closed"]
    assert closed and max(closed) < 100 + 40, mon.conditions.timeline


def test_checks_that_cannot_name_a_condition_leave_it_open():
    t = ConditionTracker()
    fast = judged_by(["DEGENERATE_GROUPS", "ADV_COLLAPSE", "REWARD_STD_DEATH"])
    full = judged_by(["DEGENERATE_GROUPS", "LENGTH_EXPLOSION", "TRUNCATION"])
    assert t.update(["RUNAWAY_LENGTH"], 15, full) == []
    assert [e.kind for e in t.update(["RUNAWAY_LENGTH"], 30, full)] == ["opened"]
    for step in range(33, 45, 3):  # fast checks: no length detector ran
        assert t.update([], step, fast) == []
    assert t.open == ["RUNAWAY_LENGTH"]
    events = [e for step in (45, 60, 75) for e in t.update([], step, full)]
    assert [(e.kind, e.step, e.since) for e in events] == [("closed", 75, 30)]


def test_condition_of_prefers_an_open_condition():
    from rlvitals.doctor.differential import ConditionCall

    calls = [
        ConditionCall("VERIFIER_CONSTANT", 40, 0.8, findings=["DEGENERATE_GROUPS"]),
        ConditionCall("TOO_HARD", 40, 0.5, findings=["DEGENERATE_GROUPS", "REWARD_STD_DEATH"]),
        ConditionCall("HEALTHY", None, 0.6),
    ]
    assert condition_of(["DEGENERATE_GROUPS"], calls).id == "VERIFIER_CONSTANT"
    assert condition_of(["DEGENERATE_GROUPS"], calls, ["TOO_HARD"]).id == "TOO_HARD"
    assert condition_of(["KL_BLOWUP"], calls) is None


def test_alert_on_critical_follows_conditions_without_telling_them():
    mon = Monitor(Manifest(trainer="test", group_size=G), sinks=[], alert_on="critical")
    _stream(mon, 120, _intermittent)
    assert mon.conditions.timeline  # followed
    assert not [a for a in mon.alerts if a.kind.startswith("condition_")]  # not told


def test_the_monitor_s_timeline_is_bounded():
    t = ConditionTracker(keep=2)
    for step in range(0, 60, 3):  # a condition that comes and goes slowly: many events
        t.update(["KL_BLOWUP"] if (step // 15) % 2 == 0 else [], step)
    # opened 3, closed 21, reopened 33, closed 51: the last two kept
    assert [(e.kind, e.step) for e in t.timeline] == [("reopened", 33), ("closed", 51)]
    assert Monitor(sinks=[]).conditions.timeline.maxlen == 1000

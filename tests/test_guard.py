"""The guard's actions: incidents told once, the halt policy, and the sinks, for real.

- the webhook and Slack sinks POST to a real HTTP server on loopback;
- ``wandb.alert`` lands in a real offline W&B run file, ``trackio.alert`` in a real trackio
  database (HOME points at a temporary directory);
- a sink that raises, one that hangs past its timeout, a webhook answering 500 and a file sink
  on a full disk (``/dev/full``) each leave training running and are reported exactly once.
"""

from __future__ import annotations

import glob
import json
import logging
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from rlvitals.detectors import Finding, Severity
from rlvitals.doctor.incidents import group_findings
from rlvitals.guard import (
    Alert,
    FileSink,
    HaltPolicy,
    HaltRule,
    IncidentTracker,
    SinkRunner,
    SlackSink,
    TrackioSink,
    WandbSink,
    WebhookSink,
)
from rlvitals.guard.monitor import Monitor
from rlvitals.recording import Manifest

G, K = 8, 6


def _alert(kind="opened", step=65, severity="warn") -> Alert:
    return Alert(
        kind,
        step,
        severity,
        "Learning signal lost: the prompts are too hard",
        "[warn] Learning signal lost (DEGENERATE_GROUPS) since step 61; seen at step 65 <&>",
        {
            "key": 1,
            "theme": "collapse",
            "root": "DEGENERATE_GROUPS",
            "actions": ["add easier prompts"],
        },
        run="exp1",
    )


class _Server:
    """A real HTTP server on 127.0.0.1 that records POSTs; ``mode``: ok, error, hang."""

    def __init__(self):
        self.bodies: list[dict] = []
        self.headers: list[dict] = []
        self.mode = "ok"
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(n)
                if outer.mode == "hang":
                    outer.release.wait(30)
                outer.bodies.append(json.loads(body))
                outer.headers.append(dict(self.headers))
                try:
                    self.send_response(500 if outer.mode == "error" else 200)
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the sink gave up waiting ("hang" mode): what the test wants

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def _collapsing_run(mon: Monitor, steps=range(1, 121), broken=range(40, 200)) -> float:
    """A hand loop whose reward breaks at step 40; returns the slowest observe (seconds)."""
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(K), G)
    slowest = 0.0
    for s in steps:
        r = (rng.random((K, G)) < 0.5).astype(float)
        r[:, 0], r[:, 1] = 1.0, 0.0
        if s in broken:
            r[:] = 0.0
        t = time.perf_counter()
        mon.observe(s, r.reshape(-1), ids, loss=0.1, grad_norm=0.2)
        slowest = max(slowest, time.perf_counter() - t)
    return slowest


# -- tracker and policy ------------------------------------------------------------------------


def test_tracker_opens_updates_and_recovers_without_flooding():
    t = IncidentTracker(alert_on="warn")
    f1 = Finding("DEGENERATE_GROUPS", Severity.WARN, "acr", onset_step=60)
    kinds = [e.kind for e in t.update(group_findings([f1]), 65)]
    assert kinds == ["opened"]
    for step in range(66, 100):  # the same incident, its onset moving as the window slides
        f1.onset_step = 60 + (step % 3)
        assert t.update(group_findings([f1]), step) == []
    f2 = Finding("ADV_COLLAPSE", Severity.CRITICAL, "adv", onset_step=61)
    events = t.update(group_findings([f1, f2]), 100)
    assert [e.kind for e in events] == ["worse"]
    assert (
        "severity warn -> critical" in events[0].changes and "+ ADV_COLLAPSE" in events[0].changes
    )
    f1.end_step = f2.end_step = 120
    assert [e.kind for e in t.update(group_findings([f1, f2]), 125)] == ["recovered"]
    assert t.update(group_findings([f1, f2]), 128) == []
    # an info finding is followed silently until it reaches the alert severity
    f3 = Finding("LENGTH_EXPLOSION", Severity.INFO, "len", onset_step=130)
    assert t.update(group_findings([f3]), 135) == []
    f3.severity = Severity.WARN
    assert [e.kind for e in t.update(group_findings([f3]), 140)] == ["opened"]
    # a flapping incident: updates are capped
    flips = 0
    for step in range(141, 300):
        f3.end_step = step if step % 2 else None
        flips += len(t.update(group_findings([f3]), step))
    assert flips <= 8


def test_halt_policy_rules():
    p = HaltPolicy.parse("collapse:20, critical")
    assert p.rules == [
        HaltRule(severity="warn", theme="collapse", lasting=20),
        HaltRule(severity="critical"),
    ]
    assert HaltPolicy.parse({"detectors": "GRAD_NONFINITE"}).rules[0].detectors == (
        "GRAD_NONFINITE",
    )
    with pytest.raises(ValueError, match="unknown detector 'NOPE'"):
        HaltPolicy.parse("NOPE")
    with pytest.raises(ValueError, match="unknown incident theme 'colapse'"):
        HaltPolicy.parse("colapse")
    with pytest.raises(ValueError, match="unknown halt rule field"):
        HaltPolicy.parse({"sev": "warn"})
    with pytest.raises(ValueError, match="unknown severity"):
        HaltPolicy.parse([HaltRule(severity="fatal")])
    t = IncidentTracker()
    f = Finding("DEGENERATE_GROUPS", Severity.WARN, "acr", onset_step=60)
    t.update(group_findings([f]), 65)
    ckpts = [(50, "ckpt-50"), (60, "ckpt-60"), (10, "ckpt-10")]
    assert p.decide(t.open, 78, lambda: ckpts) is None  # 19 steps
    halt = p.decide(t.open, 79, lambda: ckpts)
    assert halt.last_healthy_step == 59 and halt.resume_from == "ckpt-50"
    assert "collapse incident >= warn lasting >= 20 steps" in halt.message


# -- sinks, for real ------------------------------------------------------------------------------


def test_webhook_and_slack_post_to_a_real_server(server):
    runner = SinkRunner([WebhookSink(server.url, headers={"X-Token": "t"}), SlackSink(server.url)])
    alert = _alert()
    runner.send(alert)
    assert runner.flush(10)
    runner.close()
    assert len(server.bodies) == 2
    by_kind = {("blocks" in b): b for b in server.bodies}
    doc = by_kind[False]
    assert doc == json.loads(json.dumps(alert.to_dict()))
    assert doc["kind"] == "opened" and doc["incident"]["root"] == "DEGENERATE_GROUPS"
    slack = by_kind[True]
    assert slack["text"].startswith("rlvitals [warn] exp1: opened: Learning signal lost")
    assert "&lt;&amp;&gt;" in slack["blocks"][1]["text"]["text"]  # mrkdwn escaping
    assert all(h["Content-Type"] == "application/json" for h in server.headers)
    assert any(h.get("X-Token") == "t" for h in server.headers)
    assert not runner.problems


def test_monitor_alerts_reach_the_webhook(server):
    mon = Monitor(Manifest(trainer="test", group_size=G), sinks=[server.url], name="exp1")
    _collapsing_run(mon)
    mon.close()
    kinds = [b["kind"] for b in server.bodies]
    assert kinds and kinds[0] == "opened" and kinds == [a.kind for a in mon.alerts]
    assert server.bodies[0]["run"] == "exp1" and server.bodies[0]["incident"]["onset_step"] == 40


@pytest.mark.parametrize("failure", ["raise", "hang", "http500", "webhook_hang", "disk_full"])
def test_a_failing_sink_leaves_training_running_and_is_reported_once(
    failure, server, caplog, tmp_path
):
    release = threading.Event()
    calls = []

    def raising(alert):
        calls.append(alert)
        raise ConnectionError("the alerting service is down")

    def hanging(alert):
        calls.append(alert)
        release.wait(30)

    if failure == "disk_full":
        import os

        if not os.path.exists("/dev/full"):
            pytest.fail("this test needs /dev/full (Linux)")
        sink = FileSink("/dev/full")  # every write fails with ENOSPC
    elif failure.startswith("webhook") or failure == "http500":
        server.mode = "hang" if failure == "webhook_hang" else "error"
        sink = WebhookSink(server.url, timeout=0.3)
    else:
        sink = {"raise": raising, "hang": hanging}[failure]
    good = []
    mon = Monitor(
        Manifest(trainer="test", group_size=G),
        sinks=[sink, good.append],
        sink_timeout=0.3,
        recording_dir=tmp_path / "rec",
    )
    with caplog.at_level(logging.WARNING, logger="rlvitals"):
        slowest = _collapsing_run(mon)
        if failure in ("hang", "webhook_hang"):
            time.sleep(0.5)  # the stuck sink is noticed at the next alert or flush
        mon.flush(1.0)
        mon.close(timeout=1.0)
    release.set()
    server.release.set()
    assert mon.last_step == 120 and len(mon.alerts) >= 2  # training went on, alerts were raised
    assert [a.kind for a in good] == [a.kind for a in mon.alerts]  # the healthy sink got all
    assert slowest < 5.0, slowest  # nobody waited for the failing sink (it hangs for 30 s)
    said = [r.getMessage() for r in caplog.records if "alert sink" in r.getMessage()]
    # the first problem once; at close, the alerts a hung sink never got (issue 21.8)
    problems = [m for m in said if " lost " not in m]
    assert len(problems) == 1, said
    if failure == "hang":  # (the webhook's own timeout makes its alerts failures, not losses)
        assert any(" lost " in m and "not delivered at close" in m for m in said), said
    expected = {
        "raise": "raised ConnectionError",
        "hang": "did not return within 0.3 s",
        "http500": "HTTPError",
        "webhook_hang": "",
        "disk_full": "No space left",
    }[failure]
    assert expected in problems[0]
    from rlvitals.recording import read_recording

    notes = [e for e in read_recording(tmp_path / "rec").events if e.kind == "note"]
    assert any("alert sink" in e.message for e in notes)  # and the recording says so


def test_wandb_alert_reaches_a_real_offline_run(tmp_path, monkeypatch):
    import wandb

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    wandb.teardown()
    runner = SinkRunner([WandbSink()])
    runner.send(_alert(step=1))  # no run yet: nothing happens, nothing fails
    assert runner.flush(5)
    wandb.init(project="rlvitals-test", dir=str(tmp_path), mode="offline")
    runner.send(_alert(step=2, kind="halt", severity="critical"))
    assert runner.flush(20)
    wandb.finish()
    wandb.teardown()
    runner.close()
    assert not runner.problems, runner.problems
    (path,) = glob.glob(str(tmp_path / "wandb" / "offline-run-*" / "*.wandb"))
    data = Path(path).read_bytes()
    assert data.count(b"rlvitals [critical] exp1: halt: Learning signal lost") == 1
    assert b"rlvitals [warn]" not in data  # the alert sent before wandb.init went nowhere


def test_trackio_alert_reaches_a_real_database(tmp_path, monkeypatch):
    import trackio

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr("trackio.sqlite_storage.TRACKIO_DIR", tmp_path / "trackio", raising=False)
    monkeypatch.setattr("trackio.TRACKIO_DIR", tmp_path / "trackio", raising=False)
    runner = SinkRunner([TrackioSink()])
    trackio.init(project="rlvitals-test", name="r1")
    try:
        runner.send(_alert(step=3))  # delivered from a worker thread, in the caller's context
        assert runner.flush(20)
    finally:
        trackio.finish()
    runner.close()
    assert not runner.problems, runner.problems
    (db,) = glob.glob(str(tmp_path / "**" / "rlvitals-test.db"), recursive=True)
    rows = list(sqlite3.connect(db).execute("select title, level from alerts"))
    assert rows == [
        ("rlvitals [warn] exp1: opened: Learning signal lost: the prompts are too hard", "warn")
    ]

"""Webhook and Slack sinks from the environment (RLVITALS_WEBHOOK_URL, RLVITALS_SLACK_WEBHOOK_URL).

A real HTTP server on 127.0.0.1 receives the alerts of a ``Monitor`` built with its default
sinks (what the TRL callback and the veRL guard build) and of ``rlvitals watch`` run in a
subprocess on a log that grows. A value that is not an http(s) URL is one warning, with the
webhook's secret path left out, and the run goes on.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from rlvitals.guard.condition_alerts import ConditionAlerts
from rlvitals.guard.conditions import ConditionEvent
from rlvitals.guard.monitor import Monitor
from rlvitals.guard.sinks import ENV_SLACK, ENV_WEBHOOK, default_sinks, env_sinks
from rlvitals.recording import Manifest

G, K = 8, 6
SECRET = "T000/B000/XXXXsecretXXXX"


class _Server:
    """A real HTTP server on 127.0.0.1 that records each POST as ``(path, body)``."""

    def __init__(self):
        self.posts: list[tuple[str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.posts.append((self.path, json.loads(body)))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def bodies(self, path: str) -> list[dict]:
        return [b for p, b in self.posts if p == path]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv(ENV_WEBHOOK, raising=False)
    monkeypatch.delenv(ENV_SLACK, raising=False)
    import rlvitals.guard.sinks as sinks

    monkeypatch.setattr(sinks, "_ENV_TOLD", set())  # "said once per process", per test


def _collapsing_run(mon: Monitor) -> None:
    """A hand loop whose reward breaks at step 40: every group all-zero from then on."""
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(K), G)
    for s in range(1, 121):
        r = (rng.random((K, G)) < 0.5).astype(float)
        r[:, 0], r[:, 1] = 1.0, 0.0
        if s >= 40:
            r[:] = 0.0
        mon.observe(s, r.reshape(-1), ids, loss=0.1, grad_norm=0.2)


def test_env_sinks_read_both_variables_and_several_urls():
    env = {
        ENV_WEBHOOK: "http://127.0.0.1:9/a, https://hooks.example/b",
        ENV_SLACK: " https://hooks.slack.com/services/x ",
    }
    sinks = env_sinks(env)
    assert [(s.url, s.payload, s.name) for s in sinks] == [
        ("http://127.0.0.1:9/a", "json", "webhook (RLVITALS_WEBHOOK_URL)"),
        ("https://hooks.example/b", "json", "webhook (RLVITALS_WEBHOOK_URL)"),
        ("https://hooks.slack.com/services/x", "slack", "slack (RLVITALS_SLACK_WEBHOOK_URL)"),
    ]
    assert env_sinks({}) == [] and env_sinks({ENV_WEBHOOK: " "}) == []


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (f"hooks.slack.com/services/{SECRET}", "does not start with http:// or https://"),
        (f"ftp://hooks.slack.com/services/{SECRET}", "does not start with http:// or https://"),
        ("https:///no-host", "names no host"),
        (f"https://hooks.slack.com:99999/services/{SECRET}", "is not a valid URL"),
    ],
)
def test_a_bad_url_is_one_warning_without_the_secret(caplog, value, problem):
    caplog.set_level(logging.WARNING, logger="rlvitals.guard")
    env = {ENV_SLACK: f"{value} https://hooks.slack.com/services/good"}
    assert [s.url for s in env_sinks(env)] == ["https://hooks.slack.com/services/good"]
    assert [s.url for s in env_sinks(env)] == ["https://hooks.slack.com/services/good"]
    said = [r.getMessage() for r in caplog.records if r.name == "rlvitals.guard"]
    assert len(said) == 1, said  # once per process, not at every monitor
    assert said[0].startswith(f"rlvitals guard: {ENV_SLACK}: ") and problem in said[0]
    assert SECRET not in said[0] and "training continues" in said[0]


def test_default_sinks_take_the_environment(monkeypatch):
    monkeypatch.setenv(ENV_WEBHOOK, "http://127.0.0.1:9/hook")
    names = [getattr(s, "name", "") for s in default_sinks()]
    assert names == ["wandb", "trackio", "webhook (RLVITALS_WEBHOOK_URL)"]


def test_a_monitor_posts_to_the_environment_s_webhooks(server, monkeypatch):
    monkeypatch.setenv(ENV_WEBHOOK, f"{server.base}/hook")
    monkeypatch.setenv(ENV_SLACK, f"{server.base}/slack")
    mon = Monitor(Manifest(trainer="test", group_size=G), name="exp1")  # default sinks
    _collapsing_run(mon)
    mon.close()
    kinds = [a.kind for a in mon.alerts]
    assert kinds and kinds[0] == "opened"
    hook = server.bodies("/hook")
    assert [b["kind"] for b in hook] == kinds
    assert hook[0]["run"] == "exp1" and hook[0]["incident"]["onset_step"] == 40
    slack = server.bodies("/slack")
    assert len(slack) == len(kinds)
    assert slack[0]["text"].startswith("rlvitals [") and "exp1: opened" in slack[0]["text"]
    assert slack[0]["blocks"][0]["type"] == "section"
    assert not mon.sinks.problems


def test_explicit_sinks_replace_the_environment_s(server, monkeypatch):
    monkeypatch.setenv(ENV_WEBHOOK, f"{server.base}/hook")
    got = []
    mon = Monitor(Manifest(trainer="test", group_size=G), sinks=[got.append])
    _collapsing_run(mon)
    mon.close()
    assert got and server.posts == []


def test_a_bad_environment_never_stops_training(server, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="rlvitals.guard")
    port = server.httpd.server_address[1]
    server.close()  # a valid URL nobody answers at, and a value that is no URL
    monkeypatch.setenv(ENV_WEBHOOK, f"http://127.0.0.1:{port}/hook")
    monkeypatch.setenv(ENV_SLACK, f"hooks.slack.com/services/{SECRET}")
    mon = Monitor(Manifest(trainer="test", group_size=G), name="exp1")
    _collapsing_run(mon)
    mon.close()
    assert mon.alerts and mon.alerts[0].kind == "opened"  # the run went on and was judged
    said = [r.getMessage() for r in caplog.records if r.name == "rlvitals.guard"]
    bad = [m for m in said if ENV_SLACK in m]
    assert len(bad) == 1 and SECRET not in bad[0]
    unreachable = [m for m in said if "webhook (RLVITALS_WEBHOOK_URL)" in m and "raised" in m]
    assert len(unreachable) == 1, said  # the delivery failure, told once


def test_the_trl_callback_gets_them(monkeypatch):
    from rlvitals.integrations.trl import RlvitalsCallback

    monkeypatch.setenv(ENV_SLACK, "https://hooks.slack.com/services/x")
    cb = RlvitalsCallback()
    assert "slack (RLVITALS_SLACK_WEBHOOK_URL)" in cb.monitor.sinks.names
    cb.monitor.close()


def test_condition_alerts_tell_warn_and_above_and_close_what_they_opened():
    got = []
    alerts = ConditionAlerts([got.append], run="train.log")
    alerts.event(ConditionEvent("opened", "SMALL_GROUPS", 10))  # info: below alert_on
    alerts.event(ConditionEvent("closed", "SMALL_GROUPS", 14, since=11))  # never told
    alerts.event(ConditionEvent("opened", "ENTROPY_COLLAPSE", 12))
    alerts.event(ConditionEvent("closed", "ENTROPY_COLLAPSE", 30, since=24))
    assert alerts.close(5.0) == 0
    assert [(a.kind, a.step, a.severity, a.run) for a in got] == [
        ("condition_opened", 12, "warn", "train.log"),
        ("condition_closed", 30, "info", "train.log"),
    ]
    assert got[0].condition["id"] == "ENTROPY_COLLAPSE"
    assert got[1].message.endswith("not named since step 24")
    with pytest.raises(ValueError, match="alert_on must be one of info, warn, critical"):
        ConditionAlerts([], alert_on="loud")


def _rows(steps: range) -> str:
    """A JSONL training log whose entropy collapses at step 60 (ENTROPY_COLLAPSE)."""
    out = []
    for s in steps:
        wave = 0.02 * math.sin(s / 3)
        late = s >= 60
        row = {
            "step": s,
            "reward": 0.55 + wave,
            "reward_std": 0.05 if late else 0.35 + wave,
            "frac_reward_zero_std": 0.9 if late else 0.15 + wave,
            "entropy": 0.15 if late else 0.6 + wave,
            "grad_norm": 0.8 + wave,
            "completions/mean_length": 180 + s / 10,
        }
        out.append(json.dumps(row) + "\n")
    return "".join(out)


def test_watch_posts_the_conditions_it_opens(server, tmp_path):
    log = tmp_path / "train.jsonl"
    log.write_text(_rows(range(1, 101)))
    env = dict(os.environ)
    env[ENV_WEBHOOK] = f"{server.base}/hook"
    env[ENV_SLACK] = f"{server.base}/slack  hooks.slack.com/services/{SECRET}"  # one bad
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlvitals", "watch", str(log), "--plain", "--interval", "0.3",
         "--idle-exit", "4", "--fail-on", "never"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )  # fmt: skip
    try:
        first = proc.stdout.readline()  # the first view is printed: the first refresh is done
        assert first, proc.stderr.read()
        time.sleep(0.5)
        with open(log, "a") as f:  # the run goes on: a second refresh names it again
            f.write(_rows(range(101, 111)))
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    hook = server.bodies("/hook")
    opened = [b for b in hook if b["kind"] == "condition_opened"]
    assert opened and opened[0]["condition"]["id"] == "ENTROPY_COLLAPSE", hook
    assert opened[0]["condition"]["onset_step"] == 60 and opened[0]["condition"]["actions"]
    assert opened[0]["run"] == str(log) and opened[0]["step"] == 110
    slack = server.bodies("/slack")
    assert [b["text"].splitlines()[0] for b in slack] == [
        f"rlvitals [{b['severity']}] {log}: condition_opened: {b['title']}" for b in opened
    ]
    warned = [line for line in err.splitlines() if ENV_SLACK in line]
    assert len(warned) == 1 and SECRET not in err, err
    assert "Traceback" not in err


def test_the_docs_name_the_variables():
    page = (Path(__file__).resolve().parents[1] / "docs" / "guard.md").read_text()
    assert ENV_WEBHOOK in page and ENV_SLACK in page

"""An MLflow tracking server, read through the mlflow client (importers/_mlflow_server.py).

One real ``mlflow server`` per module, on 127.0.0.1 and a free port, its HOME and SQLite backend
store in a temporary directory. The real mlflow client logs GRPO-shaped runs to it the way
transformers' MLflowCallback does (``log_params`` once, ``log_metrics(..., step=,
synchronous=False)`` per step):
a run whose groups collapse at step 60 (NaN and inf in grad_norm, one value logged twice at one
step), a healthy one, and one deleted. The doctor's report read from the server must equal the
report read from the same run in the server's own store (``mlflow.db``) by the local reader.

Under ``pytest -n 2`` each worker that runs one of these tests starts its own server (~5 s on an
idle machine). pytest-xdist's ``--dist loadgroup`` would keep them on one worker, but with
pytest 9.2 it does not group (xdist 3.8 renames ``item._nodeid``, which pytest 9 no longer
reads), so the cost is taken rather than a shared server across processes.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from rlvitals.cli import main
from rlvitals.errors import InputError
from rlvitals.importers import _mlflow_server as srv
from rlvitals.importers import load

STARTUP_S = 120
"""How long the server may take to answer /health: 5 s on an idle 2-core machine, 19-27 s
measured on one shared by several test runs (then logging the runs took 12-19 s)."""

_LOGGER = textwrap.dedent("""
    import json, math, mlflow, sys, time
    mlflow.set_tracking_uri(sys.argv[1])
    mlflow.set_experiment("grpo sweep")
    CONFIG = {"num_generations": 8, "beta": 0.0, "scale_rewards": "group",
              "learning_rate": 1e-6, "max_completion_length": 256, "loss_type": "dapo"}

    def row(s, collapse):
        wave = 0.02 * math.sin(s / 3.0)
        if collapse:  # groups turn identical at step 60 while the pass rate holds
            late = s >= 60
            r = {"reward": 0.55 + wave, "reward_std": 0.05 if late else 0.35 + wave,
                 "frac_reward_zero_std": 0.9 if late else 0.15 + wave,
                 "entropy": 0.15 if late else 0.6 + wave,
                 "grad_norm": math.nan if s == 30 else (math.inf if s == 31 else 0.8 + wave)}
        else:
            r = {"reward": 0.3 + 0.002 * s + wave, "reward_std": 0.4 + wave,
                 "frac_reward_zero_std": 0.12 + wave, "entropy": 0.6 + wave,
                 "grad_norm": 0.8 + wave}
        r.update({"loss": 0.01 + wave, "learning_rate": 1e-6,
                  "completions/mean_length": 180.0 + s / 10})
        if s % 25 == 0:
            r["eval_reward"] = 0.4 + s / 1000
        return r

    ids = {}
    for name, collapse, steps in (("collapse", True, 130), ("healthy", False, 130),
                                  ("trash", False, 3)):
        with mlflow.start_run(run_name=name) as run:
            mlflow.log_params(CONFIG)
            for s in range(1, steps + 1):
                # as transformers' MLflowCallback logs: asynchronously, flushed at end_run
                mlflow.log_metrics(row(s, collapse), step=s, synchronous=False)
                if collapse and s == 90:  # logged again later at the same step: this one wins
                    time.sleep(0.01)
                    mlflow.log_metric("reward", -1.0, step=s, synchronous=False)
            ids[name] = run.info.run_id
        time.sleep(0.02)  # distinct start times: "the most recent run" is well defined
    mlflow.MlflowClient().delete_run(ids["trash"])
    ids["experiment"] = mlflow.get_experiment_by_name("grpo sweep").experiment_id
    print(json.dumps(ids))
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(home: Path) -> dict[str, str]:
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(HOME=str(home), MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="true")
    # MLflow 3's server also starts a job runner with five huey consumers (GenAI jobs): five
    # more Python processes the test does not use
    env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    log = open(home / "server.log", "wb")  # noqa: SIM115  (closed at teardown)
    args = ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    args += ["--backend-store-uri", f"sqlite:///{home / 'mlflow.db'}"]
    args += ["--default-artifact-root", str(home / "artifacts")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", *args],
        cwd=home,
        env=_env(home),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its uvicorn child goes with it at teardown
    )
    base = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while True:
            if proc.poll() is not None:
                pytest.fail(f"mlflow server exited: {(home / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - t0 > STARTUP_S:
                pytest.fail(f"mlflow server not up after {STARTUP_S} s")
            time.sleep(0.2)
        logged = subprocess.run(
            [sys.executable, "-c", _LOGGER, base],
            env=_env(home),
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert logged.returncode == 0, logged.stderr[-3000:]
        ids = json.loads(logged.stdout.strip().splitlines()[-1])
        yield {
            "url": f"mlflow://127.0.0.1:{port}",
            "http": base,
            "db": home / "mlflow.db",
            "ids": ids,
        }
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:  # the mlflow CLI can take 20 s to pass SIGTERM on
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)
        log.close()


@pytest.fixture(autouse=True)
def _quiet_client(monkeypatch):
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for k in srv._LIMITS:
        monkeypatch.delenv(k, raising=False)


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def _report(capsys, *argv: str) -> dict:
    rc, out, err = _cli(capsys, "doctor", *argv, "--format", "json", "--allow-unjudged")
    assert rc in (0, 1), err
    report = json.loads(out)
    report["run"].pop("source")
    return report


@pytest.mark.parametrize("name", ["collapse", "healthy"])
def test_doctor_from_the_server_equals_doctor_from_its_store(server, capsys, name):
    run_id = server["ids"][name]
    remote = _report(capsys, f"{server['url']}/{run_id}")
    local = _report(capsys, str(server["db"]), "--run", run_id)
    assert remote == local
    if name == "collapse":  # the comparison is not between two empty reports
        assert remote["findings"] and remote["conditions"][0]["id"] != "HEALTHY"
        ids = {f["id"] for f in remote["findings"]}
        assert "GRAD_NONFINITE" in ids, ids


def test_the_rows_are_what_the_client_logged(server):
    url = f"{server['url']}/{server['ids']['collapse']}"
    run = load(url)
    local = load(server["db"], run=server["ids"]["collapse"])
    ids = server["ids"]
    page = f"{server['http']}/#/experiments/{ids['experiment']}/runs/{ids['collapse']}"
    assert run.manifest.format == "mlflow" and run.manifest.source == page  # the UI's page
    assert run.steps.tolist() == list(range(1, 131))
    assert run.manifest.group_size == 8 and run.manifest.trainer == "trl"
    assert run.manifest.config["num_generations"] == "8"  # params are strings in MLflow
    grad = run.get("grad_norm")
    assert np.isnan(grad[29]) and grad[30] == np.inf  # steps 30 and 31
    assert run.get("reward_mean")[89] == -1.0  # logged twice at step 90: the later one
    assert run.eval_steps.tolist() == [25, 50, 75, 100, 125]
    assert set(run.series) == set(local.series) and set(run.eval_series) == set(local.eval_series)
    for name in run.series:
        np.testing.assert_array_equal(run.series[name], local.series[name])
    assert run.manifest.config == local.manifest.config


def test_an_experiment_reads_its_latest_run_and_run_picks_another(server, capsys):
    exp = f"{server['url']}/experiments/grpo%20sweep"
    run = load(exp)
    assert any(e.data.get("run_id") == server["ids"]["healthy"] for e in run.events)
    assert any("read the most recent" in w and "(collapse)" in w for w in run.warnings)
    picked = load(exp, run="collapse")  # by name within the experiment
    assert any(e.data.get("run_id") == server["ids"]["collapse"] for e in picked.events)
    by_id = load(f"{server['url']}/experiments/{server['ids']['experiment']}", run="collapse")
    assert by_id.steps.tolist() == picked.steps.tolist()
    ui = f"{server['http']}/#/experiments/{server['ids']['experiment']}/runs/{server['ids']['collapse']}"
    assert _report(capsys, ui) == _report(capsys, str(server["db"]), "--run", "collapse")


def test_scan_reads_every_live_run_of_an_experiment(server, capsys):
    exp = f"{server['url']}/experiments/grpo%20sweep"
    rc, out, err = _cli(
        capsys,
        "scan",
        exp,
        "--format",
        "json",
        "--no-cache",
        "--engine",
        "serial",
        "--fail-on",
        "never",
    )
    assert rc == 0, err
    rows = {r["run"]: r for r in json.loads(out)["runs"]}
    assert set(rows) == {"collapse", "healthy"}  # the deleted run is left out
    for name, row in rows.items():
        assert row["error"] is None and row["run_id"] == server["ids"][name]
        doctor = _report(capsys, f"{server['url']}/{server['ids'][name]}")
        assert row["condition"] == doctor["conditions"][0]["id"]
        assert row["steps"] == 130
    assert rows["collapse"]["condition"] != rows["healthy"]["condition"]


def test_listing_the_server(server):
    runs = srv.list_server_runs(server["url"])
    by_name = {r["name"]: r for r in runs}
    assert by_name["trash"]["active"] is False and by_name["collapse"]["active"] is True
    assert srv.list_server_runs(f"{server['url']}/{server['ids']['healthy']}") == [
        {"name": "healthy", "id": server["ids"]["healthy"], "active": True}
    ]


def _error(capsys, *argv: str) -> tuple[str, float]:
    t0 = time.monotonic()
    rc, out, err = _cli(capsys, *argv)
    took = time.monotonic() - t0
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rlvitals: error: "), err
    assert "Traceback" not in err
    return lines[0], took


def test_unknown_run_and_experiment_are_one_line(server, capsys):
    url = f"{server['url']}/0123456789abcdef0123456789abcdef"
    line, _ = _error(capsys, "doctor", url)
    assert f"{url}: the MLflow server has no run '0123456789abcdef0123456789abcdef'" in line
    url = f"{server['url']}/experiments/nope"
    line, _ = _error(capsys, "doctor", url)
    assert url in line and "no experiment 'nope'" in line and "grpo sweep" in line
    line, _ = _error(capsys, "doctor", f"{server['url']}/experiments/grpo%20sweep", "--run", "x")
    assert "no run 'x' among its MLflow runs" in line
    line, _ = _error(capsys, "doctor", server["url"])
    assert "name a run or an experiment" in line


def test_an_unreachable_server_is_one_line_and_quick(capsys):
    port = _free_port()  # nothing listens there
    url = f"mlflow://127.0.0.1:{port}/0123"
    line, took = _error(capsys, "doctor", url)
    assert line == (
        f"rlvitals: error: {url}: cannot reach the MLflow server at http://127.0.0.1:{port} "
        "(connection refused)"
    )
    assert took < 15, took
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ  # the bounds are put back


def test_a_server_that_never_answers_times_out(capsys, monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")  # the user's setting is kept
    with socket.socket() as listener:  # accepts connections (the kernel does), never replies
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        port = listener.getsockname()[1]
        line, took = _error(capsys, "doctor", f"mlflow://127.0.0.1:{port}/0123")
    assert f"the MLflow server at http://127.0.0.1:{port} did not answer within 1 s" in line
    assert took < 15, took  # 1 s, retried once (DEFAULT_RETRIES), plus the client's backoff


class _NotMlflow(BaseHTTPRequestHandler):
    """Another service on the port: a 404 HTML page, or a 401 as an auth proxy answers."""

    status = 404

    def do_GET(self):
        if self.status == 401:
            body = b'{"error_code": "UNAUTHENTICATED", "message": "not authenticated"}'
        else:
            body = b"<!DOCTYPE HTML>\n<html><body>Not Found</body></html>\n"
        self.send_response(self.status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    ("status", "problem"),
    [
        (404, "does not answer as an MLflow tracking server (HTTP 404 on its REST API)"),
        (401, "refused the request (UNAUTHENTICATED): set MLFLOW_TRACKING_USERNAME"),
    ],
)
def test_a_server_that_is_not_mlflow_or_refuses(capsys, status, problem):
    handler = type("Handler", (_NotMlflow,), {"status": status})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        port = httpd.server_address[1]
        for url in (
            f"mlflow://u:pw@127.0.0.1:{port}/0123",
            f"mlflow://127.0.0.1:{port}/experiments/x",
        ):
            line, _ = _error(capsys, "doctor", url)
            assert f"the MLflow server at http://127.0.0.1:{port} {problem}" in line
            assert "pw" not in line  # a password in the URL is never printed
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mlflow://:5000/ab", "no server host"),
        ("mlflow://h:99999/ab", "the port is not a number"),
        ("mlflow://h:5000/experiments/1/runs", "names no MLflow run or experiment"),
        ("s3://bucket/run", "not an MLflow server URL"),
    ],
)
def test_bad_urls(capsys, url, problem):
    line, _ = _error(capsys, "doctor", url)
    assert line.startswith(f"rlvitals: error: {url}: {problem}")


@pytest.mark.parametrize(
    ("url", "want"),
    [
        ("mlflow://h:5000/abc", ("http://h:5000", None, "abc")),
        ("mlflow+https://h/experiments/grpo", ("https://h", "grpo", None)),
        ("mlflow://h:5000/#/experiments/3/runs/abc/model-metrics", ("http://h:5000", "3", "abc")),
        ("https://h/mlflow/#/experiments/3?searchFilter=x", ("https://h/mlflow", "3", None)),
        ("mlflow://h:5000", ("http://h:5000", None, None)),
    ],
)
def test_url_forms(url, want):
    got = srv.parse_url(url)
    assert (got.tracking_uri, got.experiment, got.run_id) == want


def test_without_the_client_the_error_names_the_extra(tmp_path):
    code = (
        "import sys\n"
        "for m in ('mlflow', 'mlflow.exceptions', 'mlflow.tracking'): sys.modules[m] = None\n"
        "from rlvitals.cli import main\n"
        "sys.exit(main(['doctor', 'mlflow://127.0.0.1:1/ab']))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert proc.returncode == 2, proc.stderr
    assert "the rlvitals[mlflow] extra" in proc.stderr and "Traceback" not in proc.stderr


def test_load_server_refuses_a_second_run_for_a_run_url():
    with pytest.raises(InputError, match="the URL names run abc; --run names 'xyz'"):
        srv._the_run(None, srv.parse_url("mlflow://h:1/abc"), "xyz", None)


def test_reads_in_threads_agree_and_put_the_limits_back(server):
    url = f"{server['url']}/{server['ids']['healthy']}"
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(load(url))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(got) == 3 and all(r.steps.tolist() == got[0].steps.tolist() for r in got)
    assert not any(k in os.environ for k in srv._LIMITS)

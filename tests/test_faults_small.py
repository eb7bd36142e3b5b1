"""Smaller faults of issue 21 (item 8): narrow integer group ids, escape bytes in scan's CSV, and
the alerts a hung webhook never got."""

from __future__ import annotations

import csv
import io
import json
import threading

import numpy as np
import pytest

from rlvitals import signal
from rlvitals.cli import main
from rlvitals.guard.alerts import Alert
from rlvitals.guard.sinks import SinkRunner


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16])
def test_narrow_integer_group_ids_give_the_int64_answer(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(0)
    cases = [
        np.array([-100, 100] * 4 if info.min < 0 else [0, 200] * 4),
        np.array([info.min, info.max] * 4),  # the span overflows the dtype itself
        rng.integers(info.min, info.max, 40_000, endpoint=True),  # binned without a sort
    ]
    for ids in cases:
        g = ids.astype(dtype)
        r = rng.random(g.shape[0])
        got, want = signal.group_stats(r, g), signal.group_stats(r, g.astype(np.int64))
        np.testing.assert_array_equal(got.count, want.count)
        np.testing.assert_allclose(got.mean, want.mean)
        np.testing.assert_allclose(got.std, want.std)


def test_scan_csv_never_writes_raw_escape_bytes(tmp_path, capsys):
    run = tmp_path / "runs" / "ev\x1b]0;pwned\x07il\x1b[2J.jsonl"
    run.parent.mkdir()
    with open(run, "w") as f:
        for s in range(20):
            f.write(json.dumps({"step": s, "reward": 0.5, "loss": 0.1}) + "\n")
    code = main(["scan", str(run.parent), "--no-cache", "-j", "1", "--format", "csv"])
    out = capsys.readouterr().out
    assert code in (0, 1, 2)
    assert "\x1b" not in out and "\x07" not in out
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 1 and "\\x1b]0;pwned\\x07il" in rows[0]["path"]


def test_a_hung_webhooks_lost_alerts_are_counted_and_said_at_close(caplog):
    release = threading.Event()

    class Hung:
        name = "webhook"

        def send(self, alert):
            release.wait(10)

    runner = SinkRunner([Hung()], timeout=0.05, queue_size=3)
    for step in range(10):
        runner.send(Alert("opened", step, "warn", "demo", f"alert {step}"))
    with caplog.at_level("WARNING", logger="rlvitals.guard"):
        lost = runner.close(timeout=0.2)
    release.set()
    # 1 in delivery + 3 queued when close gave up, 6 dropped on the full queue
    assert lost == 10
    assert runner.counts[("webhook", "lost")] == 4
    assert runner.counts[("webhook", "dropped")] == 6
    said = [m for m in caplog.messages if "lost 10 alert(s)" in m]
    assert said and "4 not delivered at close" in said[0] and "6 dropped" in said[0]
    assert any("lost 10" in what for _, what in runner.take_problems())

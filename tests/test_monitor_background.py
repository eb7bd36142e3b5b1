"""``Monitor(background=True)``: the window and the checks in a helper process.

- when the helper keeps up, it tells exactly what the in-process monitor tells (same alerts,
  same steps, same window, bit for bit);
- a helper that cannot start, dies, hangs or cannot be sent what it needs is reported once,
  the monitor carries on in the training process, and no call ever waits for it;
- ``check()`` waits for its answer; ``close()`` does not wait for the helper to exit, and the
  helper exits.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rlvitals.guard import checker as _checker
from rlvitals.guard.monitor import Monitor
from rlvitals.recording import Manifest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "dev"))
from test_monitor import replay  # noqa: E402

from rlvitals_corpus.fixtures import PAIRS  # noqa: E402

G, K = 8, 6
IDS = np.repeat(np.arange(K), G)


def _alerts(mon: Monitor) -> list[tuple]:
    return [
        (a.kind, a.step, tuple(a.incident["detectors"]) if a.incident else None, a.message)
        for a in mon.alerts
    ]


class _Waiting(Monitor):
    """Waits for every answer: a helper that always keeps up."""

    def observe(self, *args, **kwargs):
        out = super().observe(*args, **kwargs)
        self.flush(30.0)
        return out


def _rewards(step: int, collapse_from: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(step)
    r = (rng.random(K * G) < 0.5).astype(np.float32)
    r[::G], r[1::G] = 1.0, 0.0  # every group holds both outcomes
    if collapse_from is not None and step >= collapse_from:
        r[:] = 0.0
    return r


def _feed(mon: Monitor, steps: range, collapse_from: int | None = None) -> None:
    for s in steps:
        mon.observe(s, _rewards(s, collapse_from), IDS, loss=0.1, grad_norm=0.5)


@pytest.mark.parametrize("det_id", ["ADV_COLLAPSE", "EXCESS_COLLAPSE", "SATURATION"])
def test_background_tells_what_the_training_process_tells(det_id):
    bad = PAIRS[det_id].bad_run(None)
    here = Monitor(bad.manifest, sinks=[])
    replay(bad, here)
    there = _Waiting(bad.manifest, sinks=[], background=True)
    assert there._checker.wait_ready(60.0), there.background_failure
    replay(bad, there)
    window_here, window_there = here.run(), there.run()
    there.close()
    assert there.background_failure is None and there._checker is not None
    assert there._checker.answered >= there.checks > 0 and there.checks == here.checks
    assert _alerts(there) == _alerts(here) and _alerts(here)
    assert window_there.steps.tolist() == window_here.steps.tolist()
    assert list(window_there.series) == list(window_here.series)
    for name, values in window_here.series.items():
        assert window_there.series[name].tobytes() == values.tobytes(), name


def test_answers_arrive_at_later_calls_and_check_waits_for_its_own():
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker.wait_ready(60.0)
    _feed(mon, range(1, 61), collapse_from=31)
    deadline = time.monotonic() + 30
    while mon.poll() is None or not mon.alerts:  # the last check's answer, and its alert
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert mon.alerts[0].kind == "opened" and mon.alerts[0].incident["onset_step"] == 31
    got = mon.check()  # waited for: the whole catalogue over the window, judged now
    assert got.checked and got.step == 60 and {f.id for f in got.findings} >= {"ADV_COLLAPSE"}
    assert mon.n_steps == 60
    mon.close()
    assert mon.background_failure is None


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "helper process" in r.getMessage()]


def test_a_helper_killed_mid_run_is_told_once_and_the_monitor_carries_on(caplog):
    caplog.set_level(logging.WARNING, logger="rlvitals.guard")
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker.wait_ready(60.0)
    _feed(mon, range(1, 41))
    mon.flush(30.0)
    os.kill(mon._checker.proc.pid, signal.SIGKILL)
    mon._checker.proc.wait(30)
    _feed(mon, range(41, 121), collapse_from=80)  # the window fills again in this process
    assert mon._checker is None and "went away" in mon.background_failure
    assert len(_warnings(caplog)) == 1
    opened = [a for a in mon.alerts if a.kind == "opened"]
    assert opened and opened[0].incident["onset_step"] == 80
    mon.close()


def test_a_stuck_helper_never_blocks_and_is_given_up(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="rlvitals.guard")
    monkeypatch.setattr(_checker, "HANG_SECONDS", 1.0)
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker.wait_ready(60.0)
    pid = mon._checker.proc.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        slowest, step = 0.0, 0
        deadline = time.monotonic() + 30
        while mon._checker is not None:  # a check is owed an answer that never comes
            step += 1
            t = time.perf_counter()
            mon.observe(step, _rewards(step), IDS, loss=0.1)
            slowest = max(slowest, time.perf_counter() - t)
            assert time.monotonic() < deadline, "a stuck helper was never given up"
            time.sleep(0.01)
        assert slowest < 0.5, slowest  # every call returned at once (a check takes ~ms)
        assert "did not answer" in mon.background_failure and len(_warnings(caplog)) == 1
        _feed(mon, range(step + 1, step + 61), collapse_from=step + 20)
        assert [a for a in mon.alerts if a.kind == "opened"]  # checks go on in this process
    finally:
        with contextlib.suppress(ProcessLookupError):  # given up: it was killed
            os.kill(pid, signal.SIGCONT)
        mon.close()


def test_a_helper_that_cannot_start_leaves_the_monitor_in_process(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="rlvitals.guard")
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker is None and "cannot start" in mon.background_failure
    assert len(_warnings(caplog)) == 1
    _feed(mon, range(1, 61), collapse_from=31)
    assert [a.incident["onset_step"] for a in mon.alerts if a.kind == "opened"] == [31]
    mon.close()


def test_what_the_helper_cannot_be_sent_leaves_the_monitor_in_process(caplog):
    caplog.set_level(logging.WARNING, logger="rlvitals.guard")
    unpicklable = Manifest(trainer="t", group_size=G, config={"reward_fn": lambda x: x})
    mon = Monitor(unpicklable, sinks=[], background=True)
    assert mon._checker is None and "cannot send" in mon.background_failure
    _feed(mon, range(1, 61), collapse_from=31)
    assert [a.incident["onset_step"] for a in mon.alerts if a.kind == "opened"] == [31]
    assert len(_warnings(caplog)) == 1
    mon.close()


def test_data_the_helper_cannot_read_is_reported_once(caplog):
    caplog.set_level(logging.WARNING, logger="rlvitals.integrations")
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker.wait_ready(60.0)
    _feed(mon, range(1, 31))
    for step in (31, 32):  # what observe never sends: the helper's window refuses it
        mon._checker.send(("groups", step, None, None, None, None))
    _feed(mon, range(33, 40))
    mon.flush(30.0)
    assert mon.guard.errors["reading the groups"] == 2 and mon._checker is not None
    assert sum("reading the groups failed" in r.getMessage() for r in caplog.records) == 1
    mon.close()


def test_close_does_not_wait_for_the_helper_and_the_helper_exits():
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker.wait_ready(60.0)
    proc = mon._checker.proc
    _feed(mon, range(1, 31))
    t = time.perf_counter()
    mon.close()
    assert time.perf_counter() - t < 1.0
    assert proc.wait(10) == 0  # it read to the end of its pipe and exited on its own


def test_run_and_diagnose_read_the_helpers_window():
    """``run()`` / ``diagnose()`` ask the helper, which holds the window: the same run as an
    in-process monitor fed the same steps, even with a check owed when asked."""
    here = Monitor(Manifest(trainer="t", group_size=G), sinks=[])
    there = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert there._checker.wait_ready(60.0)
    for mon in (here, there):
        _feed(mon, range(1, 50), collapse_from=30)
    assert there.n_steps == here.n_steps == 49
    a, b = here.run(), there.run()
    assert b.steps.tolist() == a.steps.tolist() and list(b.series) == list(a.series)
    assert all(b.series[k].tobytes() == v.tobytes() for k, v in a.series.items())
    assert {f.id for f in there.diagnose().findings} == {f.id for f in here.diagnose().findings}
    here.close()
    there.close()


def test_the_helper_imports_nothing_from_the_trainers_folder(tmp_path, monkeypatch):
    """A training script's folder may hold modules named like the ones the helper imports (a
    ``numpy.py``): the helper does not look there, and imports the trainer's own rlvitals."""
    (tmp_path / "numpy.py").write_text("raise ImportError('the trainer folder was searched')\n")
    (tmp_path / "rlvitals").mkdir()
    (tmp_path / "rlvitals" / "__init__.py").write_text("raise ImportError('another rlvitals')\n")
    monkeypatch.chdir(tmp_path)
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    assert mon._checker is not None and mon._checker.wait_ready(60.0), mon.background_failure
    _feed(mon, range(1, 61), collapse_from=31)
    mon.flush(30.0)
    assert [a.incident["onset_step"] for a in mon.alerts if a.kind == "opened"] == [31]
    mon.close()


def test_closed_while_the_helper_starts_it_exits_cleanly():
    mon = Monitor(Manifest(trainer="t", group_size=G), sinks=[], background=True)
    proc = mon._checker.proc
    mon.close()  # most likely before it said it is up: its imports take a few tenths of a s
    assert proc.wait(10) == 0

"""The live Monitor: a bounded sliding window of a run, diagnosed by the real doctor.

- the window's per-step series equal what the doctor derives from a recording of the same steps;
- memory is bounded: the window holds ``window`` steps whatever the run's length;
- every collapse detector of the labelled corpus is told within ``sustain + 2`` steps of the
  onset the post-hoc doctor reports for the same run, and the healthy twin raises nothing the
  post-hoc doctor does not also find;
- each incident is told once, then only when it gets worse or recovers (never a flood);
- the recording it writes is what ``rlvitals doctor`` reads, alerts included;
- nothing but bad arguments raises out of ``observe``, under ``-W error`` too.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import sys
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest

import rlvitals
from rlvitals.detectors import DETECTORS, load_all
from rlvitals.doctor import DoctorConfig, diagnose
from rlvitals.guard.alerts import INCIDENT_KINDS
from rlvitals.guard.monitor import Monitor
from rlvitals.recording import Manifest, read_recording

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dev"))
from rlvitals_corpus.fixtures import PAIRS

G, K = 8, 6


def _healthy(rng: np.random.Generator) -> np.ndarray:
    """Every group holds both outcomes: nothing collapsed."""
    r = (rng.random((K, G)) < 0.5).astype(float)
    r[:, 0], r[:, 1] = 1.0, 0.0
    return r.reshape(-1)


def _feed(mon: Monitor, steps: range, rewards_fn) -> None:
    ids = np.repeat(np.arange(K), G)
    for s in steps:
        r = rewards_fn()
        mon.feed_groups(s, r, ids, prompts=[f"p{j}" for j in range(K)], advantages=r - 0.5)
        mon.feed_scalars(s, {"reward": float(r.mean()), "loss": 0.1, "note": "text is ignored"})


def replay(run, mon: Monitor) -> dict[str, int]:
    """Feed a :class:`Run` to ``mon`` step by step, as a trainer would; returns the first step
    at which each detector ID was part of an alert."""
    g = run.groups
    rows: dict[int, list[int]] = {}
    offsets = None
    if g is not None:
        offsets = np.concatenate([[0], np.cumsum(g.sizes())])
        for j, s in enumerate(g.step.tolist()):
            rows.setdefault(s, []).append(j)
    pos = {s: i for i, s in enumerate(run.steps.tolist())}
    first: dict[str, int] = {}
    for s in sorted(set(pos) | set(rows)):
        scalars = {}
        if s in pos:
            i = pos[s]
            scalars = {k: float(v[i]) for k, v in run.series.items() if np.isfinite(v[i])}
        kw = {}
        if s in rows:
            js = rows[s]
            kw["rewards"] = np.concatenate([g.rewards[offsets[j] : offsets[j + 1]] for j in js])
            kw["group_ids"] = np.concatenate(
                [np.full(offsets[j + 1] - offsets[j], k) for k, j in enumerate(js)]
            )
            kw["prompts"] = None if g.prompt is None else [g.prompt[j] for j in js]
        result = mon.observe(s, values=scalars, **kw)
        for alert in result.alerts:
            for det in (alert.incident or {}).get("detectors", ()):
                first.setdefault(det, s)
    return first


def sustain(det_id: str) -> int:
    """Consecutive steps a collapse detector needs before it may warn: its ``sustain`` knob,
    ACR_STALL's ``stall_steps`` (the stall rule), SATURATION's ``warn_steps``."""
    knobs = DETECTORS.get(det_id).Knobs()
    for name in ("sustain", "stall_steps", "warn_steps"):
        if hasattr(knobs, name):
            return int(getattr(knobs, name))
    raise AssertionError(f"{det_id} has no sustain-like knob")


def _collapse_family() -> list[str]:
    load_all()
    return sorted(n for n in DETECTORS.names() if DETECTORS.get(n).family == "collapse")


def _window_of(run, first: int, last: int):
    """``run`` restricted to steps ``first..last`` (groups included)."""
    keep = (run.steps >= first) & (run.steps <= last)
    g = run.groups
    if g is not None:
        sel = (g.step >= first) & (g.step <= last)
        offsets = np.concatenate([[0], np.cumsum(g.sizes())])
        idx = np.flatnonzero(sel)
        g = rlvitals.GroupTable.from_lists(
            g.step[idx].tolist(),
            [g.rewards[offsets[j] : offsets[j + 1]] for j in idx],
            prompts=None if g.prompt is None else [g.prompt[j] for j in idx],
        )
    return dataclasses.replace(
        run,
        steps=run.steps[keep],
        series={k: v[keep] for k, v in run.series.items()},
        groups=g,
    )


def _oracle_first(run, det_id: str, onset: int, window: int) -> int | None:
    """The first step at which the doctor on the last ``window`` steps so far finds ``det_id``:
    the best any live monitor can do."""
    steps = sorted(set(run.steps.tolist()) | set(run.groups.step.tolist() if run.groups else []))
    for s in (s for s in steps if s >= onset):
        if diagnose(_window_of(run, s - window + 1, s)).by_id(det_id):
            return s
    return None


@pytest.mark.parametrize("det_id", _collapse_family())
def test_collapse_detectors_fire_within_sustain_plus_two(det_id):
    """The issue's bar, on the labelled corpus: live alert step - post-hoc onset <= sustain + 2
    on each detector's own bad run. On a second seed too, unless the doctor itself, given the
    same steps so far, could not know it sooner (ACR_VOLATILE dates an onset back to where the
    volatility began to rise, with later data): then the monitor is at most ``check_every - 1``
    steps behind that oracle. On the healthy twins the monitor tells nothing the post-hoc doctor
    does not find too."""
    pair = PAIRS[det_id]
    for seed in (None, 3):
        bad = pair.bad_run(seed)
        post = [f for f in diagnose(bad).findings if f.id == det_id]
        assert post, f"{det_id}: the post-hoc doctor must fire on its bad run"
        onset = min(f.onset_step for f in post)
        mon = Monitor(bad.manifest, sinks=[])
        first = replay(bad, mon)
        assert det_id in first, f"{det_id} (seed {seed}) never told live; told: {first}"
        lag = first[det_id] - onset
        if seed is None or lag > sustain(det_id) + 2:
            assert lag >= 0
        if lag > sustain(det_id) + 2:
            assert seed is not None, (det_id, onset, first[det_id])
            oracle = _oracle_first(bad, det_id, onset, mon.window)
            assert oracle is not None and oracle - onset > sustain(det_id) + 2, (det_id, oracle)
            assert first[det_id] - oracle <= mon.check_every - 1, (det_id, oracle, first[det_id])
        good = pair.good_run(seed)
        live = replay(good, Monitor(good.manifest, sinks=[]))
        post_good = {f.id for f in diagnose(good).findings}
        assert set(live) <= post_good, (det_id, seed, live, post_good)


def test_window_series_equal_the_recordings(tmp_path):
    """The per-step series the monitor derives from groups are the doctor's own numbers."""
    rng = np.random.default_rng(1)
    rec = tmp_path / "rec"
    mon = Monitor(Manifest(trainer="test"), recording_dir=rec, sinks=[], check_every=0)
    ids = np.repeat(np.arange(K), G)
    for s in range(1, 41):
        r = (rng.random(K * G) < rng.random()).astype(np.float32) * (2.0 if s > 30 else 1.0)
        r[rng.random(K * G) < 0.05] = np.nan
        mon.observe(s, r, ids, prompts=[f"p{(j + s) % 9}" for j in range(K)], loss=0.1)
    mon.close()
    live = mon.run()
    post = rlvitals.compute_vitals(read_recording(rec))
    assert live.steps.tolist() == post.steps.tolist()
    # the same body (vitals.groups.collapse_by_step) derives both: the same numbers, bit for bit
    for name in ("acr", "acr_solve_all", "acr_solve_none", "acr_flat", "n_groups"):
        np.testing.assert_array_equal(live.series[name], post.series[name], err_msg=name)
    np.testing.assert_allclose(live.series["pass_rate"], post.series["pass_rate"])
    for name in ("adv_std", "adv_zero_frac", "reward_mean", "reward_std", "group_size"):
        np.testing.assert_allclose(live.series[name], post.series[name], rtol=1e-6, err_msg=name)
    # The reward range widened to 2 at step 31: the split of earlier steps was redone with it.
    assert live.manifest.reward_max == 2.0 and post.reward_max == 2.0
    # Live expected collapse sees each prompt's earlier steps only; where a prompt's earlier
    # and later pass rates agree it is the recording's number.
    assert np.isfinite(live.series["expected_acr"]).all()


def test_window_bounds_memory():
    """Memory does not grow with the run: from step 1,500 to 2,700 the monitor holds what it
    held (the window's steps, the remembered prompts, the followed incidents). The first 1,500
    steps are the warm-up: buffers that reach their size once (a one-time ~1.8 MB, seen when
    other test modules are loaded first) are not growth."""
    ids = np.repeat(np.arange(16), 8)
    rng = np.random.default_rng(0)
    mon = Monitor(window=50, sinks=[], check_every=10, full_every=50)

    def feed(first, last):
        for s in range(first, last + 1):
            r = (rng.random(ids.shape[0]) < 0.5).astype(np.float32)
            if s % 100 < 40:
                r[:64] = 0.0  # collapse episodes come and go: incidents open and close
            prompts = [f"q{(s * 16 + j) % 3000}" for j in range(16)]
            mon.observe(s, r, ids, prompts=prompts, loss=0.1, **{f"k{s % 7}": 1.0})

    feed(1, 1500)
    tracemalloc.start()
    gc.collect()  # live memory only: garbage the collector has not reached yet is not held
    before = tracemalloc.take_snapshot()
    feed(1501, 2700)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    # the monitor's own memory: what the test harness keeps (pytest's captured log records of
    # the conditions the monitor opens and closes) is not the monitor's
    harness = [tracemalloc.Filter(False, "*/logging/*"), tracemalloc.Filter(False, "*/_pytest/*")]
    diff = after.filter_traces(harness).compare_to(before.filter_traces(harness), "filename")
    grown = sum(d.size_diff for d in diff)
    w = mon._window
    assert mon.n_steps == 50 and len(w.groups) == 50
    assert mon.run().steps.tolist() == list(range(2651, 2701))
    assert len(w._prompts) == 3000 and len(mon.tracker.incidents) <= 4
    assert grown < 512 * 1024, [str(d) for d in diff[:5]]


def test_incidents_are_told_once_then_updated(caplog):
    rng = np.random.default_rng(0)
    got = []
    mon = Monitor(Manifest(trainer="test", group_size=G), sinks=[got.append])
    with caplog.at_level(logging.INFO, logger="rlvitals.guard"):
        for s in range(1, 241):
            r = np.zeros(K * G) if 80 <= s < 110 else _healthy(rng)  # the reward breaks, then heals
            mon.observe(s, r, np.repeat(np.arange(K), G), loss=0.1)
        mon.flush(5.0)
    every = [a.kind for a in mon.alerts]
    kinds = [k for k in every if k in INCIDENT_KINDS]
    assert kinds.count("opened") == 1, kinds
    assert kinds.count("recovered") == 1, kinds
    assert len(kinds) <= 6, kinds  # opened, a few worse (detectors joining), recovered
    # the conditions (causes) the incident pointed to are told once each, never flapping
    causes = [a.condition["id"] for a in mon.alerts if a.kind == "condition_opened"]
    assert causes and len(set(causes)) == len(causes), every
    assert "condition_reopened" not in every, every
    opened = next(a for a in mon.alerts if a.kind == "opened")
    assert opened.incident["theme"] == "collapse" and 80 <= opened.incident["onset_step"] <= 82
    assert opened.step - 80 <= 7
    recovered = next(a for a in mon.alerts if a.kind == "recovered")
    assert recovered.incident["end_step"] in range(107, 111)
    # told once its last finding cleared: ACR_VOLATILE's 25-step windows see the level shifts at
    # 80 and 110 until they slide past them
    assert 110 < recovered.step <= 160
    assert [a.kind for a in got] == every  # the sink got exactly what was told
    lines = [r for r in caplog.records if r.name == "rlvitals.guard"]
    assert len(lines) == len(every)  # one log line per alert


def test_legacy_feeding_api():
    rng = np.random.default_rng(0)
    mon = Monitor(Manifest(trainer="test", group_size=G), window=40, sinks=[])
    _feed(mon, range(1, 41), lambda: np.zeros(K * G))  # every group fails
    first = mon.check()
    assert first.step == 40
    assert "DEGENERATE_GROUPS" in {f.id for f in first.new}
    again = mon.check()
    assert "DEGENERATE_GROUPS" in {f.id for f in again.findings}
    assert "DEGENERATE_GROUPS" not in {f.id for f in again.new}
    _feed(mon, range(41, 81), lambda: _healthy(rng))  # the window now holds healthy steps only
    healed = mon.check()
    assert "DEGENERATE_GROUPS" not in {f.id for f in healed.findings}
    run = mon.run()
    assert run.steps.tolist() == list(range(41, 81))
    assert "note" not in run.series and run.series["loss"].tolist() == [0.1] * 40


def test_halt_names_the_last_healthy_step_and_checkpoint(tmp_path):
    rng = np.random.default_rng(0)
    rec = tmp_path / "rec"
    mon = Monitor(
        Manifest(trainer="test", group_size=G),
        recording_dir=rec,
        halt_on="collapse:10",
        sinks=[],
        checkpoints=lambda: [(25, "ckpt-25"), (50, "ckpt-50"), (75, "ckpt-75")],
    )
    stopped = None
    for s in range(1, 200):
        r = np.zeros(K * G) if s >= 60 else _healthy(rng)  # the reward breaks at step 60
        mon.observe(s, r, np.repeat(np.arange(K), G))
        if mon.should_stop:
            stopped = s
            break
    mon.close()
    assert stopped is not None and 69 <= stopped <= 60 + 10 + 3
    halt = mon.halted
    assert halt.last_healthy_step == 59 and halt.resume_from == "ckpt-50"
    assert "resume from ckpt-50" in halt.message
    assert halt.incident["theme"] == "collapse" and halt.incident["onset_step"] == 60
    run = read_recording(rec)
    halts = [e for e in run.events if e.kind == "halt"]
    assert len(halts) == 1 and halts[0].data["last_healthy_step"] == 59
    assert halts[0].data["resume_from"] == "ckpt-50"
    assert run.groups.unique_steps()[-1] == stopped


def test_observe_contains_everything_but_bad_arguments(tmp_path, caplog):
    mon = Monitor(
        config=DoctorConfig(select=["NO_SUCH_DETECTOR"]), sinks=[], recording_dir=tmp_path / "r"
    )
    with pytest.raises(TypeError, match="step must be an integer"):
        mon.observe(1.5)
    with pytest.raises(ValueError, match="differ"):
        mon.observe(1, np.zeros(4), np.zeros(3, dtype=int))
    with pytest.raises(ValueError, match="need group_ids"):
        mon.observe(1, np.zeros(4))
    with pytest.raises(ValueError, match="window"):
        Monitor(window=0)
    with warnings.catch_warnings(), caplog.at_level(logging.WARNING, logger="rlvitals"):
        warnings.simplefilter("error")
        for s in range(1, 10):
            # inf and NaN rewards, 2-D rewards, a torch-less odd scalar: nothing escapes
            r = np.full((3, 4), np.inf if s == 4 else 1.0)
            r[0, 0] = np.nan
            res = mon.observe(s, r, loss=float("nan"), text="x", big=10**400)
    assert res.step == 9 and mon.checks == 0  # the doctor failed (bad config): contained
    reports = [
        r.getMessage() for r in caplog.records if "running the doctor failed" in r.getMessage()
    ]
    assert len(reports) == 1 and mon.guard.errors["running the doctor"] == 3


def test_monitor_records_what_the_recorder_records(tmp_path):
    """The monitor writes through the recorder's private paths (its arguments are checked
    once, by the monitor): the groups stream is byte for byte the public ``log_groups`` one,
    the scalars rows read back the same, for every input kind the monitor takes."""
    import torch

    from rlvitals.recording import Recorder

    rng = np.random.default_rng(5)
    steps = []
    for s in range(1, 9):
        r = rng.random(12)
        r[rng.random(12) < 0.2] = np.nan
        g = rng.permutation(np.repeat(np.arange(4), 3))  # not in sorted-id order
        kinds = [
            r.astype(np.float32),
            r.astype(">f8"),  # big-endian
            r.astype(np.float16),
            torch.from_numpy(r.astype(np.float32)),
            (r > 0.5).astype(np.int64),  # integer rewards become float64
        ]
        adv = [rng.standard_normal(12), rng.integers(-3, 3, 12).astype(np.int16), None][s % 3]
        prompts = [[f"p{j}" for j in range(4)], np.arange(4) + s, None][s % 3]
        values = {"loss": float(rng.random()), "grad_norm": np.float32(0.5), "n": 3}
        if s == 4:
            values["note"] = "text"  # not a number: the recorder skips and counts it
        if s == 5:
            values[7] = 1.0  # a key that is not a str
        steps.append((s, kinds[s % len(kinds)], g, adv, prompts, values))
    mon = Monitor(Manifest(trainer="test"), recording_dir=tmp_path / "mon", sinks=[], check_every=0)
    with Recorder(tmp_path / "pub", Manifest(trainer="test")) as pub:
        for s, r, g, adv, prompts, values in steps:
            mon.observe(s, r, g, prompts=prompts, advantages=adv, values=values, check=False)
            pub.log_groups(s, r, g, prompts=prompts, advantages=adv)
            pub.log_scalars(s, values)
        mon_stats, pub_stats = mon.recorder.stats, pub.stats
    mon.close()
    a, b = (sorted((tmp_path / d).rglob("groups*")) for d in ("mon", "pub"))
    assert [p.name for p in a] == [p.name for p in b] and a
    assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    live, public = read_recording(tmp_path / "mon"), read_recording(tmp_path / "pub")
    assert live.series.keys() == public.series.keys() and "7" in live.series
    for name in live.series:
        np.testing.assert_array_equal(live.series[name], public.series[name], err_msg=name)
    assert mon_stats["skipped_values"] == pub_stats["skipped_values"] == 1

"""The flight recorder: round trips, torn and corrupt streams, bad directories, multi-rank,
I/O errors, async mode. Kill tests (a real writer process SIGKILLed) are in
``test_recorder_kill.py``.

Expected values are built here independently of the writer (``np.unique`` + stable sort
instead of the writer's boundary scan) and compared exactly.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.errors import InputError
from rlvitals.importers import load, sniff
from rlvitals.recording import Manifest, Recorder, read_recording
from rlvitals.recording import _files as files_mod

STREAMS = ("scalars.rank0.jsonl", "groups.rank0.bin", "events.rank0.jsonl")


@pytest.fixture(autouse=True)
def _recorder_never_warns():
    # The recorder reports repairs and losses through logging, never warnings.warn: a warning
    # filter of "error" inside a training hook would turn them into exceptions.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def expected_groups(steps_inputs):
    """Reference GroupTable columns from a list of ``(step, rewards, ids, prompts, lengths,
    advantages)``, in the documented order: by step (stable), then sorted group id."""
    out = {"step": [], "sizes": [], "rewards": [], "prompt": [], "lengths": [], "adv": []}
    for step, r, ids, prompts, lengths, adv in sorted(steps_inputs, key=lambda t: t[0]):
        ids = np.asarray(ids)
        order = np.argsort(ids, kind="stable")
        uniq, counts = np.unique(ids, return_counts=True)
        out["step"] += [step] * len(uniq)
        out["sizes"] += counts.tolist()
        out["rewards"] += np.asarray(r, dtype=np.float64)[order].tolist()
        out["prompt"] += list(prompts) if prompts is not None else [None] * len(uniq)
        n = len(ids)
        out["lengths"] += (
            np.asarray(lengths, np.float64)[order] if lengths is not None else np.full(n, np.nan)
        ).tolist()
        out["adv"] += (
            np.asarray(adv, np.float64)[order] if adv is not None else np.full(n, np.nan)
        ).tolist()
    return out


def assert_same_floats(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=True), (a, b)


# ------------------------------------------------------------------------------------------
# Round trips


def test_round_trip_everything(tmp_path):
    m = Manifest(
        trainer="trl",
        group_size=4,
        scale_rewards="group",
        reward_min=-1.0,
        reward_max=2.5,
        estimator="grpo",
        kl_coef=0.0,
        logging_steps=1,
        config={"lr": 1e-6, "nested": {"a": [1, 2, None]}, "name": "ünï"},
    )
    rng = np.random.default_rng(3)
    inputs = []
    scalars = {}
    events = []
    with Recorder(tmp_path, m) as rec:
        for step in (5, 1, 9):  # out of order on purpose
            vals = {
                "train/loss": float(rng.normal()),
                "frac_reward_zero_std": 0.1 + 0.2,
                "custom/odd": math.nan if step == 1 else math.inf,
                "neg": -math.inf,
                "eval_reward": 0.25 * step,
                "np32": np.float32(0.3),
            }
            rec.log_scalars(step, vals)
            scalars[step] = vals
            n = 13
            ids = rng.integers(0, 5, n)  # ragged, shuffled, possibly missing ids
            r = rng.random(n)
            r[2] = math.nan
            lengths = rng.integers(1, 100, n)
            adv = rng.normal(size=n)
            prompts = [f"prompt-{step}-{g}" for g in np.unique(ids)]
            rec.log_groups(step, r, ids, prompts=prompts, lengths=lengths, advantages=adv)
            inputs.append((step, r, ids, prompts, lengths, adv))
            rec.log_event(
                step,
                "alert",
                f"at {step}",
                value=step * 0.5,
                tags=["x", "y"],
                arr=np.arange(3),
                f=np.float64(1.5),
            )
            events.append(
                (
                    step,
                    "alert",
                    f"at {step}",
                    {"value": step * 0.5, "tags": ["x", "y"], "arr": [0, 1, 2], "f": 1.5},
                )
            )
        # float32 rewards, int64 prompt hashes, no lengths/advantages
        r32 = np.array([1, 1, 0, 1, 0.5, 0.5], dtype=np.float32)
        ids = np.array([7, 7, 3, 3, 9, 9])
        hashes = np.array([2**62 + 1, -5, 2**40], dtype=np.int64)
        rec.log_groups(12, r32, ids, prompts=hashes)
        inputs.append((12, r32, ids, [int(h) for h in hashes], None, None))
        # bytes prompt ids and huge unsigned hashes
        rec.log_groups(13, [0.0, 1.0], [0, 1], prompts=[b"\x00\xff", b"ok"])
        inputs.append((13, [0.0, 1.0], [0, 1], [b"\x00\xff", b"ok"], None, None))
        rec.log_groups(14, [1.0], [0], prompts=[2**64 - 1])
        inputs.append((14, [1.0], [0], [2**64 - 1], None, None))
        rec.log_event(None, "note", "no step", path=Path("/x"))
        events.append((None, "note", "no step", {"path": "/x"}))
        rec.update_manifest(group_size=None, seed=7, config={"lr": 2e-6})
        assert rec.stats["dropped"] == 0 and rec.stats["errors"] == 0

    run = read_recording(tmp_path)
    assert run.warnings == []
    # manifest
    assert run.manifest.format == "recording" and run.manifest.source == str(tmp_path)
    assert (run.manifest.trainer, run.manifest.scale_rewards, run.manifest.estimator) == (
        "trl",
        "group",
        "grpo",
    )
    assert (run.manifest.reward_min, run.manifest.reward_max) == (-1.0, 2.5)
    assert (run.manifest.kl_coef, run.manifest.logging_steps) == (0.0, 1)
    assert run.manifest.group_size is None  # unset by update_manifest; groups are ragged
    assert run.manifest.config == {
        "lr": 2e-6,
        "nested": {"a": [1, 2, None]},
        "name": "ünï",
        "seed": 7,
    }
    # scalars: exact floats, NaN/inf kept, keys canonicalised, eval split off
    assert run.steps.tolist() == [1, 5, 9]
    for i, step in enumerate([1, 5, 9]):
        v = scalars[step]
        assert run.series["loss"][i] == v["train/loss"]
        assert run.series["zero_std_frac"][i] == 0.1 + 0.2
        assert_same_floats([run.series["custom/odd"][i]], [v["custom/odd"]])
        assert run.series["neg"][i] == -math.inf
        assert run.series["np32"][i] == float(np.float32(0.3))
        assert run.eval_series["eval/reward_mean"][i] == 0.25 * step
    # groups
    exp = expected_groups(inputs)
    g = run.groups
    assert g.step.tolist() == exp["step"]
    assert g.sizes().tolist() == exp["sizes"]
    assert_same_floats(g.rewards, exp["rewards"])
    assert_same_floats(g.lengths, exp["lengths"])
    assert_same_floats(g.advantages, exp["adv"])
    assert g.prompt.tolist() == exp["prompt"]
    # events, in order, data back as JSON
    got = [(e.step, e.kind, e.message, e.data) for e in run.events]
    assert got == events


@pytest.mark.parametrize("parser", ["orjson", "stdlib"])
def test_scalars_read_back_the_same_whichever_encoder_wrote_them(tmp_path, monkeypatch, parser):
    """Rows of finite values are written by orjson, rows holding NaN or inf (and keys orjson
    cannot encode) by json: what reads back is the same values, bit for bit, either way."""
    from rlvitals.recording import layout as _format

    monkeypatch.setattr(_format, "_DUMPS", [])  # resolved again under this test's setting
    if parser == "stdlib":
        monkeypatch.setenv("RLVITALS_JSON", "stdlib")
    rows = [
        {"loss": 0.1, "big": 1e16, "tiny": 5e-324, "neg0": -0.0, "int": 3, "np": np.float32(0.7)},
        {"np64": np.float64(0.3), "loss": 0.2},
        {"loss": math.nan, "grad_norm": math.inf, "kl": -math.inf},
        {"caf\u00e9/r\u00e9ward": 1.5, "\u6ce2": 2.0, 'quo"te\\': 0.25},
        {"lone\ud800surrogate": 1.0, "loss": 0.5},
        {"huge": 1e308, "huger": 1e308},  # finite values whose sum overflows: json's way
    ]
    with Recorder(tmp_path / "rec", Manifest(trainer="t")) as rec:
        for step, row in enumerate(rows, start=1):
            rec.log_scalars(step, row)
    lines = (tmp_path / "rec" / STREAMS[0]).read_bytes().splitlines()
    assert len(lines) == len(rows)
    assert b"NaN" in lines[2] and b"-Infinity" in lines[2]
    for line, row in zip(lines, rows):
        got = json.loads(line.decode("utf-8", "surrogatepass"))["values"]
        assert list(got) == list(row)
        for key, value in row.items():
            assert np.float64(got[key]).tobytes() == np.float64(float(value)).tobytes(), key


def test_group_layouts_are_remembered_per_id_layout(tmp_path):
    """The writer remembers the order and run sizes of group ids it has seen (a trainer sends
    the same ids every step): alternating sorted, shuffled and other-dtype ids of the same
    values, each step still records its own groups."""
    rng = np.random.default_rng(3)
    inputs = []
    shuffled = rng.permutation(np.repeat(np.arange(5), 4))
    layouts = [
        np.repeat(np.arange(5), 4),
        shuffled,
        shuffled.astype(np.int32),
        np.repeat(np.arange(5), 4)[::-1].copy(),
        np.array([2, 2, 0, 1, 1, 1, 0, 3, 3, 4, 4, 4, 4, 0, 1, 2, 3, 3, 2, 0]),
    ]
    with Recorder(tmp_path / "rec", Manifest(trainer="t")) as rec:
        for step in range(1, 16):
            ids = layouts[step % len(layouts)]
            r = rng.random(ids.shape[0])
            adv = rng.normal(size=ids.shape[0])
            rec.log_groups(step, r, ids, advantages=adv)
            inputs.append((step, r, ids, None, None, adv))
    g = read_recording(tmp_path / "rec").groups
    want = expected_groups(inputs)
    assert g.step.tolist() == want["step"] and g.sizes().tolist() == want["sizes"]
    assert_same_floats(g.rewards, want["rewards"])
    assert_same_floats(g.advantages, want["adv"])


def test_torch_tensors_float32_bf16_and_grad():
    import tempfile

    import torch

    with tempfile.TemporaryDirectory() as d:
        r = torch.tensor([1.0, 0.0, 0.5, 0.5], requires_grad=True)
        ids = torch.tensor([1, 1, 0, 0])
        rb = torch.tensor([0.5, 0.25, 1.0], dtype=torch.bfloat16)
        with Recorder(d) as rec:
            rec.log_groups(
                torch.tensor(3),
                r * 2,
                ids,
                prompts=torch.tensor([10, 11]),
                lengths=torch.tensor([4, 5, 6, 7], dtype=torch.int32),
                advantages=torch.tensor([0.1, -0.1, 0.0, 0.0], dtype=torch.float64),
            )
            rec.log_groups(4, rb, torch.zeros(3, dtype=torch.int64))
            rec.log_scalars(4, {"loss": torch.tensor(0.75), "grad_norm": np.float64(2.0)})
        run = read_recording(d)
    g = run.groups
    assert g.step.tolist() == [3, 3, 4]
    assert g.rewards.tolist() == [1.0, 1.0, 2.0, 0.0, 0.5, 0.25, 1.0]
    assert g.prompt.tolist() == [10, 11, None]
    assert g.lengths[:4].tolist() == [6, 7, 4, 5]
    assert g.advantages[:4].tolist() == [0.0, 0.0, 0.1, -0.1]
    assert run.series["loss"].tolist() == [0.75] and run.series["grad_norm"].tolist() == [2.0]


def test_two_ranks_merge_by_step(tmp_path):
    m = Manifest(trainer="verl", group_size=2)
    r0 = Recorder(tmp_path, m, rank=0, world_size=2)
    r1 = Recorder(tmp_path, Manifest(trainer="ignored"), rank=1, world_size=2)
    for step in range(3):
        r0.log_scalars(step, {"loss": step, "shared": 0.0})
        r1.log_scalars(step, {"grad_norm": 10 + step, "shared": 1.0})
        # both ranks use group ids 0 and 1: they must stay four distinct groups
        r0.log_groups(step, [0.0, 0.0, 1.0, 0.0], [0, 0, 1, 1], prompts=["a0", "b0"])
        r1.log_groups(step, [1.0, 1.0, 0.0, 1.0], [0, 0, 1, 1], prompts=["a1", "b1"])
        r1.log_event(step, "r1", "from rank 1")
        r0.log_event(step, "r0", "from rank 0")
    r1.log_scalars(7, {"only_rank1": 1.0})
    r0.close()
    r1.close()
    run = read_recording(tmp_path)
    assert run.manifest.trainer == "verl"  # rank 0 owns the manifest
    assert run.steps.tolist() == [0, 1, 2, 7]
    assert run.series["loss"][:3].tolist() == [0, 1, 2]
    assert run.series["grad_norm"].tolist()[:3] == [10, 11, 12]
    assert run.series["shared"][:3].tolist() == [1.0, 1.0, 1.0]  # higher rank wins a conflict
    g = run.groups
    assert g.n_groups == 12
    assert g.step.tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]
    assert g.prompt.tolist()[:4] == ["a0", "b0", "a1", "b1"]  # rank 0 first within a step
    assert g.rewards[:8].tolist() == [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    assert sorted(e.kind for e in run.events) == ["r0"] * 3 + ["r1"] * 3
    assert run.warnings == []


def test_rank_above_zero_creates_manifest_only_when_missing(tmp_path):
    with Recorder(tmp_path, Manifest(trainer="one"), rank=1, world_size=2) as r1:
        r1.log_scalars(1, {"x": 1.0})
    assert read_recording(tmp_path).manifest.trainer == "one"
    with Recorder(tmp_path, Manifest(trainer="zero"), rank=0, world_size=2):
        pass
    assert read_recording(tmp_path).manifest.trainer == "zero"
    with Recorder(tmp_path, Manifest(trainer="late"), rank=1, world_size=2) as r1:
        r1.update_manifest(group_size=8)
    run = read_recording(tmp_path)
    assert run.manifest.trainer == "zero" and run.manifest.group_size is None
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_reopen_appends_and_keeps_manifest(tmp_path):
    with Recorder(tmp_path, Manifest(trainer="a", group_size=4)) as rec:
        rec.log_scalars(1, {"loss": 1.0})
    with Recorder(tmp_path) as rec:  # no manifest given: keep the one on disk
        assert rec.manifest.trainer == "a"
        rec.log_scalars(2, {"loss": 2.0})
    run = read_recording(tmp_path)
    assert run.series["loss"].tolist() == [1.0, 2.0] and run.manifest.group_size == 4


def test_second_writer_on_same_rank_is_refused(tmp_path):
    with Recorder(tmp_path) as rec:
        with pytest.raises(RuntimeError, match="rank="):
            Recorder(tmp_path)
        rec.log_scalars(1, {"x": 1.0})
    assert read_recording(tmp_path).series["x"].tolist() == [1.0]


def test_bad_arguments_raise_at_the_call(tmp_path):
    with Recorder(tmp_path) as rec:
        with pytest.raises(ValueError, match="one id per distinct group"):
            rec.log_groups(1, [1.0, 0.0], [0, 1], prompts=["only one"])
        with pytest.raises(ValueError, match="one-dimensional"):
            rec.log_groups(1, np.zeros((2, 2)), [0, 1])
        with pytest.raises(ValueError, match="group_ids"):
            rec.log_groups(1, [1.0, 0.0], [0])
        with pytest.raises(ValueError, match="lengths"):
            rec.log_groups(1, [1.0, 0.0], [0, 0], lengths=[1])
        with pytest.raises(TypeError, match="step"):
            rec.log_scalars(1.5, {"x": 1.0})
        with pytest.raises(TypeError, match="step"):
            rec.log_event(True, "k", "m")
        rec.log_groups(2, [], [])  # nothing to record
        rec.log_scalars(2, {"ok": 1.0, "text": "abc", "obj": object(), "none": None})
        assert rec.stats["skipped_values"] == 2
    run = read_recording(tmp_path)
    assert run.groups is None
    assert run.series["ok"].tolist() == [1.0] and math.isnan(run.series["none"][0])
    assert "text" not in run.series


def test_manifest_fields_are_type_checked_at_the_call(tmp_path):
    with pytest.raises(TypeError, match="group_size"):
        Recorder(tmp_path, Manifest(group_size="8"))
    with Recorder(tmp_path, Manifest(group_size=np.int64(8), reward_max=np.float32(1))) as rec:
        with pytest.raises(TypeError, match="reward_min"):
            rec.update_manifest(reward_min="zero")
        with pytest.raises(TypeError, match="trainer"):
            rec.update_manifest(trainer=3)
        rec.update_manifest(logging_steps=np.int32(5), kl_coef=0)
    m = read_recording(tmp_path).manifest  # a bad type never reaches the file
    assert (m.group_size, m.reward_max, m.logging_steps, m.kl_coef) == (8, 1.0, 5, 0)


def test_constructor_validates():
    with pytest.raises(ValueError, match="rank"):
        Recorder("/nonexistent-never-created", rank=2, world_size=2)
    with pytest.raises(ValueError, match="flush_every"):
        Recorder("/nonexistent-never-created", flush_every=-1)
    with pytest.raises(TypeError, match="max_pending"):
        Recorder("/nonexistent-never-created", max_pending=1.5)


def test_fsync_mode_round_trips(tmp_path):
    with Recorder(tmp_path, flush_every=0) as rec:
        for s in range(3):
            rec.log_scalars(s, {"x": s})
            rec.log_groups(s, [0.0, 1.0], [0, 0])
        rec.flush()
    run = read_recording(tmp_path)
    assert run.series["x"].tolist() == [0, 1, 2] and run.groups.n_groups == 3


# ------------------------------------------------------------------------------------------
# Torn, garbage and corrupt streams


def _write_small(path: Path) -> dict[str, list[int]]:
    """A 4-step recording; returns each stream's record end offsets (from file sizes)."""
    ends: dict[str, list[int]] = {s: [] for s in STREAMS}
    with Recorder(path, Manifest(group_size=3)) as rec:
        for step in range(4):
            rec.log_scalars(step, {"loss": step / 3})
            ends[STREAMS[0]].append((path / STREAMS[0]).stat().st_size)
            rec.log_groups(step, [step, 0.0, 1.0, 0.5], [0, 0, 1, 2], prompts=[1, 2, 3])
            ends[STREAMS[1]].append((path / STREAMS[1]).stat().st_size)
            rec.log_event(step, "tick", f"step {step}", n=step)
            ends[STREAMS[2]].append((path / STREAMS[2]).stat().st_size)
    return ends


def _count(run, stream: str) -> int:
    if stream.startswith("scalars"):
        return int(np.isfinite(run.series.get("loss", np.zeros(0))).sum())
    if stream.startswith("groups"):
        return 0 if run.groups is None else len(np.unique(run.groups.step))
    return len(run.events)


def test_every_prefix_of_every_stream_reads(tmp_path):
    """Cut each stream anywhere: the reader never raises and returns exactly the records whose
    bytes are all there; a cut inside a record is a warning. Every byte around each record
    boundary (frame headers included) is a cut, and every third byte elsewhere."""
    src = tmp_path / "src"
    ends = _write_small(src)
    for stream in STREAMS:
        full = (src / stream).read_bytes()
        dst = tmp_path / f"cut-{stream}"
        dst.mkdir()
        for name in os.listdir(src):
            (dst / name).write_bytes((src / name).read_bytes())
        cuts = set(range(0, len(full) + 1, 3))
        for e in [0, *ends[stream]]:
            cuts |= set(range(max(0, e - 3), min(len(full), e + 24) + 1))
        for cut in sorted(cuts):
            (dst / stream).write_bytes(full[:cut])
            run = read_recording(dst)
            want = sum(e <= cut for e in ends[stream])
            assert _count(run, stream) == want, (stream, cut)
            torn = cut not in ends[stream] and cut != 0
            assert bool(run.warnings) == torn, (stream, cut, run.warnings)
            if torn:
                assert stream in run.warnings[0] and "ignored" in run.warnings[0]


def test_resume_after_torn_tail_repairs_the_stream(tmp_path, caplog):
    ends = _write_small(tmp_path)
    for stream in STREAMS:  # tear the last record of every stream
        p = tmp_path / stream
        p.write_bytes(p.read_bytes()[: ends[stream][-2] + 5])
    with caplog.at_level("INFO", logger="rlvitals.recording"):
        rec = Recorder(tmp_path)
    assert sum("torn" in r.getMessage() for r in caplog.records) == 3
    with rec:
        rec.log_scalars(10, {"loss": 1.0})
        rec.log_groups(10, [1.0], [0])
        rec.log_event(10, "tick", "after resume")
    run = read_recording(tmp_path)
    assert run.warnings == []
    assert run.steps.tolist() == [0, 1, 2, 10]
    assert np.unique(run.groups.step).tolist() == [0, 1, 2, 10]
    assert [e.step for e in run.events] == [0, 1, 2, 10]


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize(
    "tail", [b"\x00" * 4096, b"garbage\xff\xfe", b"{not json}\n", b"RLVg\x05\x00"]
)
def test_garbage_tail_is_a_warning(tmp_path, stream, tail):
    ends = _write_small(tmp_path)
    with open(tmp_path / stream, "ab") as f:
        f.write(tail)
    run = read_recording(tmp_path)
    assert _count(run, stream) == len(ends[stream])
    assert len(run.warnings) == 1 and stream in run.warnings[0]


@pytest.mark.parametrize("stream", STREAMS)
def test_corrupt_record_in_the_middle(tmp_path, stream):
    ends = _write_small(tmp_path)
    p = tmp_path / stream
    data = bytearray(p.read_bytes())
    at = ends[stream][0] + 3  # inside the second record
    data[at] = 0  # breaks the JSON (a raw control character) and the frame's CRC
    p.write_bytes(bytes(data))
    with pytest.raises(InputError) as e:
        read_recording(tmp_path)
    msg = str(e.value)
    assert stream in msg and "corrupt record" in msg
    if stream.endswith(".bin"):
        assert f"byte {ends[stream][0]}" in msg
    else:
        assert "line 2" in msg
    run = read_recording(tmp_path, strict=False)
    assert _count(run, stream) == len(ends[stream]) - 1
    assert any("skipped" in w for w in run.warnings)


def test_valid_frame_with_malformed_payload_is_corrupt(tmp_path):
    from rlvitals.recording import layout as fmt

    ends = _write_small(tmp_path)
    p = tmp_path / STREAMS[1]
    bogus = fmt.encode_frame(b"\x01\x02\x03")  # right CRC, not a groups record
    p.write_bytes(
        p.read_bytes()[: ends[STREAMS[1]][0]] + bogus + p.read_bytes()[ends[STREAMS[1]][0] :]
    )
    with pytest.raises(InputError, match="too short"):
        read_recording(tmp_path)
    with open(p, "ab") as f:
        f.write(bogus)  # malformed as the last record: a warning in non-strict reading too
    run = read_recording(tmp_path, strict=False)
    assert _count(run, STREAMS[1]) == 4 and len(run.warnings) == 2


# ------------------------------------------------------------------------------------------
# Directories that are not (complete) recordings


def test_empty_missing_and_foreign(tmp_path):
    with pytest.raises(InputError, match="empty directory"):
        read_recording(tmp_path)
    with pytest.raises(InputError, match="no such file"):
        read_recording(tmp_path / "nope")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match="not an rlvitals recording"):
        read_recording(tmp_path)
    with pytest.raises(InputError, match="not a recording directory"):
        read_recording(tmp_path / "notes.txt")


def test_missing_manifest_next_to_streams(tmp_path):
    _write_small(tmp_path)
    (tmp_path / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"no manifest\.json next to the streams") as e:
        read_recording(tmp_path)
    assert str(tmp_path) in str(e.value)
    with pytest.raises(InputError, match=r"manifest\.json"):  # the importer says it too
        load(tmp_path)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('{"format": "rlvitals.recording", "version": 1, ', "invalid JSON"),
        ('{"format": "other", "version": 1}', "not an rlvitals recording manifest"),
        ("[1, 2]", "not an rlvitals recording manifest"),
        ('{"format": "rlvitals.recording", "version": 99}', "newer than this rlvitals"),
        ('{"format": "rlvitals.recording", "version": "1"}', "'version' must be an integer"),
        ('{"format": "rlvitals.recording", "version": 1, "world_size": 0}', "world_size"),
        (
            '{"format": "rlvitals.recording", "version": 1, "manifest": {"group_size": "8"}}',
            "group_size",
        ),
        ('{"format": "rlvitals.recording", "version": 1, "manifest": {"config": []}}', "config"),
        ('{"format": "rlvitals.recording", "version": 1, "manifest": 3}', "'manifest'"),
        ("\xff\xfe", "invalid JSON"),
    ],
)
def test_bad_manifest(tmp_path, text, match):
    _write_small(tmp_path)
    (tmp_path / "manifest.json").write_bytes(text.encode("latin-1"))
    with pytest.raises(InputError, match=match) as e:
        read_recording(tmp_path)
    assert "manifest.json" in str(e.value)


def test_odd_files(tmp_path):
    _write_small(tmp_path)
    (tmp_path / "README.txt").write_text("ignored")
    (tmp_path / ".manifest.json.rank0.123.tmp").write_text("{half")  # left by a kill
    (tmp_path / "scalars.rank01.jsonl").write_text("junk\n")  # not a stream name
    run = read_recording(tmp_path)
    assert run.n_steps == 4
    assert len(run.warnings) == 1 and "scalars.rank01.jsonl" in run.warnings[0]
    os.mkdir(tmp_path / "scalars.rank3.jsonl")
    with pytest.raises(InputError, match="not a regular file"):
        read_recording(tmp_path)
    os.rmdir(tmp_path / "scalars.rank3.jsonl")
    os.mkfifo(tmp_path / "events.rank2.jsonl")  # must not hang on a FIFO
    with pytest.raises(InputError, match="not a regular file"):
        read_recording(tmp_path)
    os.unlink(tmp_path / "events.rank2.jsonl")
    (tmp_path / "groups.rank1.bin").write_bytes(b"")  # an empty stream is no records
    assert read_recording(tmp_path).groups.n_groups == 12


def test_rank_beyond_world_size_is_a_warning(tmp_path):
    _write_small(tmp_path)
    (tmp_path / "scalars.rank4.jsonl").write_text('{"step": 9, "values": {"z": 1}}\n')
    run = read_recording(tmp_path)
    assert run.series["z"][-1] == 1 and any("world_size 1" in w for w in run.warnings)


def test_importer_sniffs_directory_and_manifest(tmp_path):
    _write_small(tmp_path)
    assert sniff(tmp_path).name == "recording"
    assert sniff(tmp_path / "manifest.json").name == "recording"
    run = load(tmp_path)
    assert run.manifest.format == "recording" and run.groups.n_groups == 12
    assert load(tmp_path / "manifest.json").n_steps == 4
    assert load(tmp_path, fmt="recording").n_steps == 4
    stream = tmp_path / "groups.rank0.bin"  # one stream: the whole recording is read
    assert sniff(stream).name == "recording" and load(stream).groups.n_groups == 12


def test_foreign_manifest_json_is_not_sniffed(tmp_path):
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "something else"}))
    with pytest.raises(InputError):
        sniff(tmp_path)


# ------------------------------------------------------------------------------------------
# I/O errors are contained, counted and reported


def test_unwritable_directory_never_raises(tmp_path, caplog):
    (tmp_path / "file").write_text("x")
    rec = Recorder(tmp_path / "file" / "rec")
    assert any("recording continues" in r.getMessage() for r in caplog.records)
    with rec:
        rec.log_scalars(1, {"x": 1.0})
        rec.log_groups(1, [1.0], [0])
        rec.log_event(1, "k", "m")
        rec.update_manifest(group_size=3)
    s = rec.stats
    assert (s["dropped"], s["dropped_scalars"], s["dropped_groups"], s["dropped_events"]) == (
        3,
        1,
        1,
        1,
    )
    assert s["errors"] >= 4 and s["records"] == 0


def test_disk_full_on_a_stream_is_counted_and_reported(tmp_path, monkeypatch):
    real = files_mod.write_all

    def full_for_groups(fd, data):
        if data.startswith(b"RLVg"):
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(files_mod, "write_all", full_for_groups)
    with Recorder(tmp_path) as rec:
        for step in range(3):
            rec.log_scalars(step, {"x": step})
            rec.log_groups(step, [1.0, 0.0], [0, 0])
        assert rec.stats["dropped_groups"] == 3 and rec.stats["errors"] >= 1
    run = read_recording(tmp_path)
    assert run.series["x"].tolist() == [0, 1, 2]
    dropped = [e for e in run.events if e.kind == "dropped"]
    assert sum(e.data["groups"] for e in dropped) == 3
    assert len(dropped) == 2  # at the first chance, then rate-limited until close
    assert any("dropped" in w for w in run.warnings)


def test_partial_write_then_error_leaves_a_clean_stream(tmp_path, monkeypatch):
    real = files_mod.write_all
    calls = {"n": 0}

    def flaky(fd, data):
        calls["n"] += data.startswith(b"RLVg")
        if calls["n"] == 3 and data.startswith(b"RLVg"):  # half the record, then disk full
            os.write(fd, data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(files_mod, "write_all", flaky)
    with Recorder(tmp_path) as rec:
        for step in range(4):
            rec.log_groups(step, [float(step), 0.0], [0, 1])
    run = read_recording(tmp_path)  # strict: no corrupt record in the middle
    assert np.unique(run.groups.step).tolist() == [0, 1, 3]
    assert rec.stats["dropped_groups"] == 1
    assert [e.kind for e in run.events] == ["dropped"]
    assert run.events[0].data["groups"] == 1 and "No space" in run.events[0].message


def test_log_after_close_is_counted(tmp_path):
    rec = Recorder(tmp_path)
    rec.close()
    rec.close()
    rec.log_scalars(1, {"x": 1.0})
    rec.log_groups(1, [1.0], [0])
    assert rec.stats["dropped"] == 2
    assert read_recording(tmp_path).n_steps == 0


# ------------------------------------------------------------------------------------------
# Async mode


def test_async_mode_round_trips(tmp_path):
    with Recorder(tmp_path, max_pending=128) as rec:
        for step in range(50):
            rec.log_scalars(step, {"x": step})
            rec.log_groups(step, np.full(8, step, dtype=np.float32), np.repeat(np.arange(4), 2))
        rec.flush()
        assert rec.stats["pending"] == 0 and rec.stats["records"] == 100
        assert rec.stats["dropped"] == 0
    run = read_recording(tmp_path)
    assert run.series["x"].tolist() == list(range(50))
    assert run.groups.n_groups == 200 and run.warnings == []


def test_async_queue_full_drops_are_counted_and_reported(tmp_path, monkeypatch):
    import threading

    gate, stuck = threading.Event(), threading.Event()
    real = files_mod.write_all

    def slow(fd, data):
        if data.startswith(b'{"step":'):  # the scalars, not the manifest
            stuck.set()
            gate.wait(5)
        real(fd, data)

    monkeypatch.setattr(files_mod, "write_all", slow)
    with Recorder(tmp_path, max_pending=2) as rec:
        rec.log_scalars(0, {"x": 0})
        assert stuck.wait(5)  # the writer thread is stuck on the first row
        start = time.monotonic()
        for step in range(1, 10):  # ... so the queue of 2 fills up and rows are dropped
            rec.log_scalars(step, {"x": step})
        # without waiting for the stuck write (the writer holds the stream lock: a drop that
        # took it waited the whole 5 s gate, once per dropped row)
        assert time.monotonic() - start < 2.5
        gate.set()  # the drops are counted by now (in log_scalars); reading stats may wait
        dropped = rec.stats["dropped_scalars"]
        assert dropped == 7  # one row in the thread's hands, two queued
    run = read_recording(tmp_path)
    assert int(np.isfinite(run.series["x"]).sum()) == 10 - dropped
    reports = [e for e in run.events if e.kind == "dropped"]
    assert sum(e.data["scalars"] for e in reports) == dropped
    assert "queue full" in reports[0].message
    assert any("dropped" in w for w in run.warnings)


# ------------------------------------------------------------------------------------------
# Fuzzing: damaged recordings read or fail with one InputError, never anything else

_MUTATION = st.tuples(
    st.sampled_from(["flip", "insert", "delete", "truncate", "overwrite"]),
    st.floats(0, 1),
    st.binary(min_size=1, max_size=24),
)


@pytest.fixture(scope="module")
def small_recording(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-src")
    _write_small(d)
    with Recorder(d, max_pending=0) as rec:  # a second writer session, with NaN and odd keys
        rec.log_scalars(4, {"loss": math.nan, "eval_x": math.inf})
        rec.log_groups(4, np.array([math.nan, 1.0]), np.array(["b", "a"]), advantages=[0.5, 0])
        rec.log_event(None, "note", "ünï", nested={"a": [1, {"b": None}]})
    return {name: (d / name).read_bytes() for name in os.listdir(d)}


def _mutate(data: bytes, mutations) -> bytes:
    buf = bytearray(data)
    for op, where, blob in mutations:
        at = int(where * len(buf))
        if op == "flip" and buf:
            at = min(at, len(buf) - 1)
            buf[at] ^= blob[0] or 1
        elif op == "insert":
            buf[at:at] = blob
        elif op == "delete":
            del buf[at : at + len(blob)]
        elif op == "truncate":
            del buf[at:]
        else:
            buf[at : at + len(blob)] = blob
    return bytes(buf)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    target=st.sampled_from([*STREAMS, "manifest.json"]),
    mutations=st.lists(_MUTATION, min_size=1, max_size=4),
)
def test_fuzzed_recordings_read_or_raise_input_error(small_recording, target, mutations):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for name, data in small_recording.items():
            out = _mutate(data, mutations) if name == target else data
            Path(d, name).write_bytes(out)
        for strict in (True, False):
            try:
                run = read_recording(d, strict=strict)
            except InputError as e:
                assert str(e).startswith(d), e  # one line naming the file
                assert "\n" not in str(e)
                continue
            assert run.manifest.format == "recording"
            if run.groups is not None:
                assert run.groups.offsets[-1] == run.groups.rewards.shape[0]


def test_short_writes_are_completed(tmp_path, monkeypatch):
    """``os.write`` may take part of a record (a signal, a full pipe): the rest follows."""
    from rlvitals.recording import _files

    real = os.write
    calls = []

    def short(fd, data):
        calls.append(len(data))
        return real(fd, bytes(data[: max(1, len(data) // 3)]))

    path = tmp_path / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    monkeypatch.setattr(_files.os, "write", short)
    _files.write_all(fd, b"0123456789" * 10)
    _files.write_all(fd, b"")
    os.close(fd)
    assert path.read_bytes() == b"0123456789" * 10
    assert len(calls) > 3

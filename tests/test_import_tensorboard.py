"""TensorBoard importer: event files written by the real tensorboardX and torch.utils.tensorboard.

The producers (tests/_binary_producers.py) log known values — NaN and inf, several tags,
non-contiguous steps, simple_value and tensor scalars (float_val, double_val, tensor_content,
int64, int32, half, bfloat16), two runs in one directory, add_scalars sub-directories, a Keras
train/validation layout — and these tests compare what the importer reads with those values at
float32 precision. Damaged copies check the documented decisions (torn tail → warning, bad data
checksum → record skipped with a warning, bad length checksum → InputError with the offset).
"""

from __future__ import annotations

import json
import math
import shutil
import struct
import sys
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py

from rlvitals.errors import InputError
from rlvitals.importers import load, sniff
from rlvitals.importers import tensorboard as tb
from rlvitals.importers._crc32c import crc32c, crc32c_many, mask


@pytest.fixture(scope="module")
def logdir() -> Path:
    return P.produced("tensorboard")


def _f32(x: float) -> float:
    return float(np.float32(x))


def _value(run, name: str, step: int) -> float:
    steps = run.eval_steps if name.startswith("eval/") else run.steps
    idx = np.flatnonzero(steps == step)
    assert idx.size == 1, f"step {step} missing for {name}"
    return float(run.get(name)[idx[0]])


def _same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want


def _event_file(d: Path) -> Path:
    (f,) = [p for p in d.iterdir() if "tfevents" in p.name]
    return f


def _records(path: Path) -> list[tuple[int, int]]:
    """(offset, total size) of each TFRecord, parsed independently of the importer."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, 16 + length))
        pos += 16 + length
    return out


# --- CRC-32C ---------------------------------------------------------------------------------
def test_crc32c_known_vectors():
    # RFC 3720 (iSCSI) appendix B.4 test vectors
    assert crc32c(bytes(32)) == 0x8A9136AA
    assert crc32c(b"\xff" * 32) == 0x62A8AB43
    assert crc32c(bytes(range(32))) == 0x46DD794E
    assert crc32c(bytes(range(31, -1, -1))) == 0x113FDB5C
    assert crc32c(b"123456789") == 0xE3069283


def _bitwise_crc32c(data: bytes) -> int:
    """Reference CRC-32C, one bit at a time (no table), for the table-driven code to match."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_crc32c_many_matches_a_bitwise_reference():
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, 30_000, dtype=np.uint8)
    raw = buf.tobytes()
    lengths = [0, 1, 7, 8, 9, 63, 64, 65, 1000, 4095, 4096, 4097, 5000, 9_000]
    starts = [int(rng.integers(0, len(raw) - n + 1)) for n in lengths]
    want = [_bitwise_crc32c(raw[s : s + n]) for s, n in zip(starts, lengths)]
    assert crc32c_many(buf, np.array(starts), np.array(lengths)).tolist() == want
    assert [crc32c(raw[s : s + n]) for s, n in zip(starts, lengths)] == want
    assert mask(crc32c(b"")) == mask(0)


# --- real files ------------------------------------------------------------------------------
@pytest.mark.parametrize("writer", ["tbx", "torch"])
def test_scalars_match_what_was_logged(logdir, writer):
    path = logdir / writer
    assert sniff(path).name == "tensorboard"
    assert sniff(_event_file(path)).name == "tensorboard"
    run = load(path)
    assert run.manifest.format == "tensorboard"
    assert run.steps.tolist() == sorted(
        set(P.STEPS) | ({P.TC_STEP} if writer == "torch" else set())
    )
    for step in P.STEPS:
        for tag, value in P.train_row(step).items():
            name = P.TRAIN_NAMES[tag]
            want = value if tag == "train/policy_loss" and writer == "torch" else _f32(value)
            got = _value(run, name, step)
            assert _same(got, want), (writer, tag, step, got, want)
    assert run.eval_steps.tolist() == sorted(P.EVAL)
    for step, value in P.EVAL.items():
        assert _value(run, "eval/reward_mean", step) == _f32(value)
    assert not run.warnings


def test_tensorboardx_add_scalars_subdirectories(logdir):
    run = load(logdir / "tbx")
    for step in P.STEPS:
        assert _value(run, "loss_parts/a", step) == _f32(step / 3)
        assert _value(run, "loss_parts/b", step) == _f32(-step / 3)


def test_tensor_scalars_of_every_dtype(logdir):
    run = load(logdir / "torch")
    tc = P.TC_VALUES
    assert _value(run, "tc/float_content", P.TC_STEP) == _f32(tc["tc/float_content"])
    assert _value(run, "tc/double_content", P.TC_STEP) == tc["tc/double_content"]
    assert _value(run, "tc/int64", P.TC_STEP) == tc["tc/int64"]
    assert _value(run, "tc/int32", P.TC_STEP) == tc["tc/int32"]
    assert _value(run, "tc/half", P.TC_STEP) == float(np.float16(tc["tc/half"]))
    assert _value(run, "tc/bfloat16", P.TC_STEP) == tc["tc/bfloat16"]
    assert "tc/vector" not in run.series  # a 3-element tensor is not a scalar
    assert not any(k.startswith("hist/") for k in run.series)  # histograms are skipped


def test_args_text_summary_becomes_config(logdir):
    run = load(logdir / "torch")
    assert run.manifest.config == P.TRL_CONFIG
    assert run.manifest.trainer == "trl"
    assert run.manifest.group_size == P.TRL_CONFIG["num_generations"]
    assert run.manifest.kl_coef == P.TRL_CONFIG["beta"]
    assert run.manifest.scale_rewards == "batch"


def test_two_runs_in_one_directory_merge_by_step(logdir):
    run = load(logdir / "multi")
    steps = [s for r in P.MULTI.values() for s in r]
    assert run.steps.tolist() == steps
    assert run.get("reward_mean").tolist() == [s * 0.5 for s in steps]
    entropy = run.get("entropy")
    assert np.isnan(entropy[: len(P.MULTI["run_a"])]).all()
    want = [_f32(2.0 - s / 10) for s in P.MULTI["run_b"]]
    assert entropy[len(P.MULTI["run_a"]) :].tolist() == want
    assert not run.warnings


def test_keras_validation_directory_is_eval(logdir):
    run = load(logdir / "keras")
    assert run.get("epoch_loss").tolist() == [0.0, 1.0, 2.0]
    assert run.get("eval/epoch_loss").tolist() == [10.0, 11.0, 12.0]


def test_overlapping_runs_are_warned_about(logdir):
    run = load(logdir / "overlap")
    assert run.get("reward_mean").tolist() == [0.0, 1.0, 2.0]
    assert any("overlapping steps" in w and "'a'" in w and "'b'" in w for w in run.warnings)


def test_whole_tree_reads_every_file(logdir):
    run = load(logdir, fmt="tensorboard")
    assert {"loss_parts/a", "tc/int64", "epoch_loss", "entropy"} <= set(run.series)


# --- damaged copies --------------------------------------------------------------------------
def _lost_cells(full, run) -> int:
    """How many logged values of ``full`` are missing or different in ``run``."""
    lost = 0
    for name in full.series:
        a = full.get(name)
        b = run.get(name)
        b = np.full(0, np.nan) if b is None else b
        pos = {int(s): i for i, s in enumerate(run.steps)}
        for i, step in enumerate(full.steps.tolist()):
            j = pos.get(step)
            got = np.nan if j is None else b[j]
            if not (a[i] == got or (np.isnan(a[i]) and np.isnan(got))):
                lost += 1
    return lost


def test_torn_last_record_is_a_warning(logdir, tmp_path):
    src = _event_file(logdir / "tbx")
    data = src.read_bytes()
    last_off, last_size = _records(src)[-1]
    full = load(src)
    for cut in (last_off + 3, last_off + 12, last_off + last_size - 1):
        p = tmp_path / f"events.out.tfevents.{cut}"
        p.write_bytes(data[:cut])
        run = load(p)
        (w,) = run.warnings
        assert f"byte {last_off}" in w and "torn" in w
        assert _lost_cells(full, run) == 1  # only the torn record's value


def test_bad_data_checksum_skips_that_record(logdir, tmp_path):
    src = _event_file(logdir / "tbx")
    data = bytearray(src.read_bytes())
    recs = _records(src)
    off, size = recs[2]  # first scalar after the file_version event and step 0's first tag
    data[off + size - 5] ^= 0xFF  # last data byte
    p = tmp_path / src.name
    p.write_bytes(bytes(data))
    run = load(p)
    (w,) = run.warnings
    assert f"byte {off}" in w and "1 record(s)" in w
    assert _lost_cells(load(src), run) == 1  # exactly that record's value


def test_bad_length_checksum_is_an_error_with_offset(logdir, tmp_path):
    src = _event_file(logdir / "tbx")
    data = bytearray(src.read_bytes())
    off, _ = _records(src)[4]
    data[off] ^= 0x01
    p = tmp_path / src.name
    p.write_bytes(bytes(data))
    with pytest.raises(InputError) as e:
        load(p)
    assert str(e.value).startswith(f"{p}:byte {off}:")
    assert "checksum" in str(e.value)


def test_zero_filled_tail_is_a_warning(logdir, tmp_path):
    src = _event_file(logdir / "tbx")
    p = tmp_path / src.name
    p.write_bytes(src.read_bytes() + bytes(5000))
    run = load(p)
    assert any("zero-filled tail" in w for w in run.warnings)
    assert run.n_steps == len(P.STEPS)


def test_data_checksum_can_be_skipped(logdir, tmp_path):
    src = _event_file(logdir / "tbx")
    a = tb.load_tensorboard(src, verify_data_crc=False)
    b = tb.load_tensorboard(src)
    assert a.series.keys() == b.series.keys()
    for k in a.series:
        assert np.array_equal(a.series[k], b.series[k], equal_nan=True)


def test_oversized_records_are_skipped_unread(logdir, tmp_path, monkeypatch):
    src = _event_file(logdir / "tbx")
    monkeypatch.setattr(tb, "MAX_RECORD_BYTES", 10)
    with pytest.raises(InputError, match="no scalar summaries"):
        tb.load_tensorboard(src)
    monkeypatch.setattr(tb, "MAX_RECORD_BYTES", 40)  # keeps short scalar events only
    run = tb.load_tensorboard(src)
    assert any("over 40 bytes skipped" in w for w in run.warnings)


def test_not_event_files(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="no TensorBoard event files"):
        load(tmp_path, fmt="tensorboard")
    p = tmp_path / "events.out.tfevents.1.x"
    p.write_bytes(b"\x00" * 3)
    with pytest.raises(InputError, match="no scalar summaries"):
        load(p, fmt="tensorboard")
    p.write_bytes(json.dumps({"a": 1}).encode() * 3)
    with pytest.raises(InputError, match="byte 0: bad length checksum"):
        load(p, fmt="tensorboard")


@pytest.mark.parametrize("chunk", [1, 37, 1000])
def test_records_straddling_read_chunks(logdir, monkeypatch, chunk):
    src = logdir / "torch"
    full = load(src)
    monkeypatch.setattr(tb, "_READ_CHUNK", chunk)
    run = tb.load_tensorboard(src)
    assert run.steps.tolist() == full.steps.tolist()
    assert _lost_cells(full, run) == 0 and not run.warnings


def test_does_not_import_tensorboard():
    import subprocess

    code = (
        "import sys; from rlvitals.importers import tensorboard, wandb, mlflow; "
        "bad = {'tensorboard', 'tensorboardX', 'wandb', 'mlflow', 'google.protobuf', 'torch'}"
        " & set(sys.modules); print(sorted(bad)); sys.exit(1 if bad else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_copy_is_not_modified(logdir, tmp_path):
    src = logdir / "tbx"
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    before = {p: p.read_bytes() for p in dst.rglob("*") if p.is_file()}
    load(dst)
    assert {p: p.read_bytes() for p in dst.rglob("*") if p.is_file()} == before

"""W&B importer: offline runs written by the real ``wandb`` library (tests/_binary_producers.py).

The producer writes an older run, then the main run (TRL-shaped config; NaN, inf, nested
dicts, strings and histograms, non-contiguous steps, a 100 KB config update that spans three
32 KiB blocks, 320 more steps so the file has many blocks), and a run logged the way
transformers' WandbCallback does (no ``step=``, ``train/global_step`` in each row). The tests
compare the importer's output with those values, and check damaged copies.
"""

from __future__ import annotations

import math
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py

from rlvitals.errors import InputError
from rlvitals.importers import load, sniff
from rlvitals.importers import wandb as wb

BLOCK = 32768


@pytest.fixture(scope="module")
def out() -> Path:
    return P.produced("wandb")


def _runs(d: Path) -> list[Path]:
    return sorted(p for p in (d / "wandb").iterdir() if p.name.startswith("offline-run-"))


@pytest.fixture(scope="module")
def main_file(out) -> Path:
    (f,) = _runs(out)[-1].glob("*.wandb")
    return f


def _value(run, name: str, step: int) -> float:
    steps = run.eval_steps if name.startswith("eval/") else run.steps
    idx = np.flatnonzero(steps == step)
    assert idx.size == 1, f"step {step} missing for {name}"
    return float(run.get(name)[idx[0]])


def _same(got: float, want: float) -> bool:
    return (math.isnan(got) and math.isnan(want)) or got == want


def _check_main(run) -> None:
    for step in P.STEPS:
        for tag, value in P.train_row(step).items():
            got = _value(run, P.TRAIN_NAMES[tag], step)
            assert _same(got, value), (tag, step, got, value)
        assert _value(run, "nested.a", step) == step
        assert _value(run, "nested.b.c", step) == step / 2
    for step in P.LONG_STEPS:
        assert _value(run, "reward_mean", step) == step / 1000
    for step, value in P.EVAL.items():
        assert _value(run, "eval/reward_mean", step) == value


def test_main_run_matches_what_was_logged(out):
    for path in (out, out / "wandb"):
        assert sniff(path).name == "wandb"
        run = load(path)
        assert run.manifest.format == "wandb"
        assert run.steps.tolist() == sorted(set(P.STEPS) | set(P.LONG_STEPS))
        _check_main(run)
        assert run.eval_steps.tolist() == sorted(P.EVAL)
        # strings, histograms and wandb's own _runtime/_timestamp are not series
        assert not {"text", "hist", "filler", "_runtime", "_timestamp", "runtime"} & set(
            run.series_names()
        )


def test_most_recent_run_is_read_and_the_others_named(out):
    old, main = _runs(out)
    run = load(out / "wandb")
    (w,) = run.warnings
    assert "2 W&B runs" in w and main.name in w and old.name in w
    assert run.manifest.source.startswith(str(main))
    # pointing at a run directory, or at its .wandb file, reads that run only
    for path in (old, next(old.glob("*.wandb"))):
        r = load(path)
        assert r.steps.tolist() == [0]
        assert r.get("reward_mean").tolist() == [99.0]
        assert not r.warnings
        assert r.manifest.config == {"lr": 1.0}


def test_config_and_trainer(out):
    run = load(out)
    cfg = dict(run.manifest.config)
    assert cfg.pop("big_note") == "x" * 100_000  # reassembled FIRST/MIDDLE/LAST record
    assert cfg == P.TRL_CONFIG
    assert run.manifest.trainer == "trl"
    assert run.manifest.group_size == P.TRL_CONFIG["num_generations"]
    assert run.manifest.kl_coef == P.TRL_CONFIG["beta"]
    assert run.manifest.scale_rewards == P.TRL_CONFIG["scale_rewards"]
    assert any(e.kind == "note" and "W&B run" in e.message for e in run.events)


def test_file_spans_many_blocks(main_file):
    assert main_file.stat().st_size > 4 * BLOCK


def test_global_step_wins_over_wandb_step(out):
    run = load(out / "trlstyle")
    assert run.steps.tolist() == [10, 20, 30]
    assert run.get("reward_mean").tolist() == [0.1, 0.2, 0.3]
    assert "global_step" not in run.series and "train/global_step" not in run.unknown_keys


def _record_offsets(data: bytes) -> list[tuple[int, int, int]]:
    """(offset, length, type) of each record header, parsed independently of the importer."""
    out, pos = [], 7
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, rtype = struct.unpack_from("<IHB", data, pos)
        assert zlib.crc32(data[pos + 6 : pos + 7 + length]) == crc
        out.append((pos, length, rtype))
        pos += 7 + length
    return out


def test_framing_is_what_the_docstring_says(main_file):
    data = main_file.read_bytes()
    assert data[:7] == b":W&B\xe1\xbe\x00"
    recs = _record_offsets(data)
    assert {t for _, _, t in recs} == {1, 2, 3, 4}  # FULL, FIRST, MIDDLE, LAST all occur
    assert sum(7 + n for _, n, _ in recs) + 7 <= len(data)


def test_torn_tail_is_a_warning(main_file, tmp_path):
    data = main_file.read_bytes()
    last_off, last_len, _ = _record_offsets(data)[-1]
    full = load(main_file)
    for cut in (last_off + 2, last_off + 7 + last_len // 2):
        p = tmp_path / f"run-{cut}.wandb"
        p.write_bytes(data[:cut])
        run = load(p)
        assert any(f"byte {last_off}" in w and "torn" in w for w in run.warnings)
        assert run.steps.tolist() == full.steps.tolist()  # the last record is not a history row


def test_torn_history_row(main_file, tmp_path):
    data = main_file.read_bytes()
    # cut inside the first record that holds the last step's reward (its summary or history):
    # the key and its value_json field exactly as wandb encodes them (field 16: 0x82 0x01, then
    # the length). A looser match (the digits within 64 bytes of the key) also hit an earlier
    # record whose timestamp happened to hold them, which made this test flaky.
    value = str(P.LONG_STEPS[-1] / 1000).encode()
    cut = data.index(b"train/reward\x82\x01" + bytes([len(value)]) + value)
    p = tmp_path / "run-torn.wandb"
    p.write_bytes(data[:cut])
    run = load(p)
    assert any("torn" in w for w in run.warnings)
    assert run.steps[-1] == P.LONG_STEPS[-2]


def test_corrupted_block_is_skipped_with_a_warning(main_file, tmp_path):
    data = bytearray(main_file.read_bytes())
    recs = _record_offsets(bytes(data))
    # corrupt a FULL record in block 5; reading resumes at block 6
    off, length, _ = next(r for r in recs if r[0] // BLOCK == 5 and r[2] == 1)
    data[off + 7 + length // 2] ^= 0x55
    p = tmp_path / "run-x.wandb"
    p.write_bytes(bytes(data))
    run = load(p)
    assert any(f"byte {off}" in w and "corrupted" in w for w in run.warnings)
    full = load(main_file)
    lost = set(full.steps.tolist()) - set(run.steps.tolist())
    assert lost and max(lost) < P.LONG_STEPS[-1]
    assert run.steps[-1] == P.LONG_STEPS[-1]  # later blocks were read
    common = np.isin(full.steps, run.steps)
    assert full.get("reward_mean")[common].tolist() == run.get("reward_mean").tolist()


def test_bad_header_and_version(main_file, tmp_path):
    data = main_file.read_bytes()
    p = tmp_path / "run-bad.wandb"
    p.write_bytes(b"XW&B" + data[4:])
    assert sniff(main_file).name == "wandb"
    with pytest.raises(InputError, match=r"byte 0: not a W&B run file"):
        load(p, fmt="wandb")
    p.write_bytes(data[:6] + b"\x07" + data[7:])
    with pytest.raises(InputError, match="unsupported W&B file version 7"):
        load(p)
    p.write_bytes(data[:7])
    with pytest.raises(InputError, match="no numeric history rows"):
        load(p)
    p.write_bytes(data[:3])
    with pytest.raises(InputError, match="too short"):
        load(p, fmt="wandb")


def test_directory_without_runs(tmp_path):
    (tmp_path / "wandb").mkdir()
    with pytest.raises(InputError, match="no W&B run"):
        load(tmp_path, fmt="wandb")
    assert wb._sniff(tmp_path, b"") == 0.0


def test_input_is_not_modified(out, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(out / "wandb", dst, symlinks=True)
    before = {p: p.read_bytes() for p in dst.rglob("*.wandb")}
    load(dst)
    assert {p: p.read_bytes() for p in dst.rglob("*.wandb")} == before

"""Issue 11: the recorder trusts nothing on disk, never mixes two writers, never raises into
training, and reads a crafted stream in linear time.

Items: 7 (quadratic resync), 9 (concurrent writers), 10 (planted symbolic links), and the extras
(``log_scalars(10**400)``, a full disk leaving a ``.tmp``, ``warnings.warn`` under ``-W error``).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
import types
import warnings
import zlib

import numpy as np
import pytest

from rlvitals.errors import InputError
from rlvitals.recording import Manifest, Recorder, read_recording
from rlvitals.recording import _claim as claim_mod
from rlvitals.recording import _files as files_mod
from rlvitals.recording import _resync as resync_mod
from rlvitals.recording import _streams as streams_mod
from rlvitals.recording import layout as fmt


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _messages(caplog) -> str:
    return "\n".join(r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------
# Item 7: resynchronisation is linear in the stream, however it is crafted


def _bogus_headers(n_bytes: int, end: int) -> bytes:
    """Valid-looking headers every 16 bytes, each claiming a payload up to ``end`` (relative to
    the start of this block) with a wrong payload CRC: checked one by one, quadratic."""
    out = bytearray()
    for i in range(n_bytes // 16):
        length = max(0, end - (i + 1) * 16 - 1)
        head = fmt.FRAME_MAGIC + struct.pack("<II", length, 1)
        out += head + struct.pack("<I", zlib.crc32(head))
    return bytes(out)


class _CountingZlib(types.SimpleNamespace):
    def __init__(self):
        super().__init__(bytes=0)

    def crc32(self, data, value=0):
        self.bytes += len(data)
        return zlib.crc32(data, value)


@pytest.fixture
def crc_bytes(monkeypatch):
    counter = _CountingZlib()
    monkeypatch.setattr(fmt, "zlib", counter)
    monkeypatch.setattr(resync_mod, "zlib", counter)
    return counter


def test_crafted_groups_stream_reads_in_linear_time(tmp_path, crc_bytes):
    with Recorder(tmp_path) as rec:
        rec.log_groups(1, [1.0, 0.0], [0, 0])
    p = tmp_path / "groups.rank0.bin"
    good = p.read_bytes()
    n = 1 << 20
    p.write_bytes(good + _bogus_headers(n, n) + good)
    size = p.stat().st_size
    crc_bytes.bytes = 0
    run = read_recording(tmp_path, strict=False)
    assert np.unique(run.groups.step).tolist() == [1] and run.groups.n_groups == 2
    assert any("corrupt record skipped" in w for w in run.warnings)
    # Checked one by one, the bogus candidates cost ~n**2 / 32 bytes of CRC (32 GB here).
    assert crc_bytes.bytes <= 8 * size, crc_bytes.bytes
    with pytest.raises(InputError, match="corrupt record"):
        read_recording(tmp_path)


def test_reopening_a_crafted_stream_is_linear(tmp_path, crc_bytes):
    with Recorder(tmp_path) as rec:
        rec.log_groups(1, [1.0, 0.0], [0, 0])
    p = tmp_path / "groups.rank0.bin"
    n = 1 << 20
    # A junk byte stops the header walk; then every bogus header is a resync candidate.
    p.write_bytes(p.read_bytes() + b"x" + _bogus_headers(n, n))
    size = p.stat().st_size
    crc_bytes.bytes = 0
    Recorder(tmp_path).close()
    assert crc_bytes.bytes <= 8 * size, crc_bytes.bytes


def test_resync_finds_the_same_frames_both_ways():
    rng = np.random.default_rng(7)
    frames = b"".join(fmt.encode_frame(rng.bytes(int(rng.integers(0, 400)))) for _ in range(40))
    buf = rng.bytes(33) + frames + b"RLVg" + rng.bytes(70) + frames
    direct = resync_mod._valid_frames(buf, 1)
    old = resync_mod.DIRECT_CRC_FACTOR
    try:
        resync_mod.DIRECT_CRC_FACTOR = -(1 << 40)  # force the CRC algebra
        algebra = resync_mod._valid_frames(buf, 1)
    finally:
        resync_mod.DIRECT_CRC_FACTOR = old
    assert direct == algebra and len(direct) == 80


# ------------------------------------------------------------------------------------------
# Item 9: a second writer is refused before it touches anything, even without flock


def _manifest_bytes(d) -> bytes:
    return (d / "manifest.json").read_bytes()


@pytest.mark.parametrize("flock", ["works", "missing", "fails"])
def test_second_writer_is_refused_before_touching_the_manifest(tmp_path, monkeypatch, flock):
    if flock == "missing":
        monkeypatch.setattr(streams_mod, "fcntl", None)
    elif flock == "fails":  # NFS mounted nolock: flock raises ENOLCK, the writer goes on
        import fcntl

        def nolock(fd, op):
            raise OSError(37, "No locks available")

        monkeypatch.setattr(
            streams_mod,
            "fcntl",
            types.SimpleNamespace(flock=nolock, LOCK_EX=fcntl.LOCK_EX, LOCK_NB=fcntl.LOCK_NB),
        )
    with Recorder(tmp_path, Manifest(trainer="first", group_size=4)) as rec:
        rec.log_scalars(1, {"x": 1.0})
        before = _manifest_bytes(tmp_path)
        sizes = {p.name: p.stat().st_size for p in tmp_path.iterdir()}
        with pytest.raises(RuntimeError, match=r"rank=.*Nothing was written"):
            Recorder(tmp_path, Manifest(trainer="second", group_size=8))
        assert _manifest_bytes(tmp_path) == before
        assert {p.name: p.stat().st_size for p in tmp_path.iterdir()} == sizes
        rec.log_scalars(2, {"x": 2.0})
    run = read_recording(tmp_path)
    assert run.manifest.trainer == "first" and run.series["x"].tolist() == [1.0, 2.0]
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant_claim(d, rank=0, **doc):
    d.mkdir(exist_ok=True)
    p = d / claim_mod.claim_name(rank)
    p.write_text(json.dumps({"id": "feedfacefeedface", "started": time.time(), **doc}))
    return p


def test_claim_of_a_dead_writer_is_taken_over(tmp_path, caplog):
    with Recorder(tmp_path) as rec:
        rec.log_scalars(1, {"x": 1.0})
    _plant_claim(tmp_path, pid=_dead_pid(), host=socket.gethostname())  # a SIGKILLed writer
    with caplog.at_level("INFO", logger="rlvitals.recording"), Recorder(tmp_path) as rec:
        rec.log_scalars(2, {"x": 2.0})
    assert "took over rank 0" in _messages(caplog)
    assert read_recording(tmp_path).series["x"].tolist() == [1.0, 2.0]
    assert not (tmp_path / ".writer.rank0").exists()


def test_claims_of_zombies_reused_pids_and_earlier_boots_are_stale(tmp_path):
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # exits, never reaped: a zombie
    deadline = time.monotonic() + 60
    while (claim_mod._proc_start(zombie.pid) or ("?",))[0] != "Z":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    host = socket.gethostname()
    stale = [
        {"pid": zombie.pid, "host": host},
        {"pid": 1, "host": host, "proc_start": "12345678901"},  # pid 1 runs, but not since then
        {"pid": os.getppid(), "host": host, "boot": "an-earlier-boot"},
    ]
    try:
        for doc in stale:
            _plant_claim(tmp_path, **doc)
            with Recorder(tmp_path) as rec:
                rec.log_scalars(1, {"x": 1.0})
    finally:
        zombie.wait()
    live = {"pid": os.getppid(), "host": host, "boot": claim_mod._boot_id()}
    _plant_claim(tmp_path, **live, proc_start=claim_mod._proc_start(os.getppid())[1])
    with pytest.raises(RuntimeError, match=f"pid {os.getppid()}"):
        Recorder(tmp_path)


def test_claim_from_another_host(tmp_path):
    claim = _plant_claim(tmp_path, pid=1, host="some-other-node")
    with pytest.raises(RuntimeError, match="some-other-node"):
        Recorder(tmp_path)
    assert not (tmp_path / "manifest.json").exists()
    old = time.time() - claim_mod.CLAIM_STALE_S - 60  # its heartbeat stopped long ago
    os.utime(claim, (old, old))
    with Recorder(tmp_path) as rec:
        rec.log_scalars(1, {"x": 1.0})
    assert read_recording(tmp_path).n_steps == 1


def test_junk_or_a_symlink_where_the_claim_is_is_taken_over(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    os.symlink(victim, rec_dir / ".writer.rank0")
    with Recorder(rec_dir) as rec:
        rec.log_scalars(1, {"x": 1.0})
    assert victim.read_text() == "keep me"
    assert read_recording(rec_dir).n_steps == 1


def test_a_writer_whose_claim_was_taken_over_stops(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(streams_mod, "CLAIM_CHECK_S", 0.0)
    rec = Recorder(tmp_path, Manifest(trainer="first"))
    rec.log_scalars(1, {"x": 1.0})
    # Another writer judged this one dead (a long pause, another host) and took the rank over.
    _plant_claim(tmp_path, pid=os.getpid(), host="new-owner")
    rec.log_scalars(2, {"x": 2.0})
    rec.update_manifest(trainer="not any more")
    rec.close()
    assert rec.stats["dropped_scalars"] == 1
    assert "taken over by another writer" in _messages(caplog)
    assert "new-owner" in (tmp_path / ".writer.rank0").read_text()  # not ours to remove
    run = read_recording(tmp_path)
    assert run.series["x"].tolist() == [1.0] and run.manifest.trainer == "first"


def test_foreign_appends_are_reported(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(streams_mod, "CLAIM_CHECK_S", 0.0)
    with Recorder(tmp_path) as rec:
        rec.log_scalars(1, {"x": 1.0})
        # A writer that ignores claims (an old rlvitals) appends to the same stream.
        with open(tmp_path / "scalars.rank0.jsonl", "ab") as f:
            f.write(fmt.encode_scalars(7, {"x": 7.0}))
        rec.log_scalars(2, {"x": 2.0})
    assert "another process wrote into rank 0" in _messages(caplog)
    run = read_recording(tmp_path)
    assert any(e.kind == "writer_conflict" for e in run.events)
    assert any("records of two writers may be mixed" in w for w in run.warnings)


# ------------------------------------------------------------------------------------------
# Item 10: planted symbolic links, FIFOs and hard links are refused, never followed


@pytest.mark.parametrize(
    "stream", ["scalars.rank0.jsonl", "groups.rank0.bin", "events.rank0.jsonl"]
)
def test_planted_symlink_is_never_followed(tmp_path, stream, caplog):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    os.symlink(victim, rec_dir / stream)
    with Recorder(rec_dir) as rec:
        rec.log_scalars(1, {"x": 1.0})
        rec.log_groups(1, [1.0, 0.0], [0, 0])
        rec.log_event(1, "k", "m")
    assert victim.read_bytes() == b"precious\n"
    assert rec.stats["dropped"] >= 1 and rec.stats["errors"] >= 1
    assert "symbolic link" in _messages(caplog)
    with pytest.raises(InputError, match="symbolic link"):
        read_recording(rec_dir)


def test_planted_symlinks_at_the_manifest_are_not_followed(tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text('{"format": "rlvitals.recording"}')
    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    os.symlink(victim, rec_dir / "manifest.json")
    # Old writers wrote a predictable temp name: a link planted there was truncated through.
    for pid in range(os.getpid() - 2, os.getpid() + 3):
        os.symlink(victim, rec_dir / f".manifest.json.rank0.{pid}.tmp")
    with Recorder(rec_dir) as rec:  # manifest=None: adopts manifest.json, never through a link
        rec.log_scalars(1, {"x": 1.0})
    assert victim.read_text() == '{"format": "rlvitals.recording"}'
    assert not (rec_dir / "manifest.json").is_symlink()  # replaced by a file of its own
    assert read_recording(rec_dir).n_steps == 1


def test_fifo_and_hard_link_streams_are_refused(tmp_path, caplog):
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes(b"")
    rec_dir = tmp_path / "rec"
    rec_dir.mkdir()
    os.mkfifo(rec_dir / "groups.rank0.bin")
    os.link(outside, rec_dir / "scalars.rank0.jsonl")
    t0 = time.monotonic()
    with Recorder(rec_dir) as rec:  # a FIFO would block the writer forever once full
        for step in range(3):
            rec.log_scalars(step, {"x": 1.0})
            rec.log_groups(step, np.ones(70_000), np.zeros(70_000))
    assert time.monotonic() - t0 < 30
    assert outside.read_bytes() == b""
    text = _messages(caplog)
    assert "not a regular file" in text and "hard link" in text
    assert rec.stats["dropped_scalars"] == 3 and rec.stats["dropped_groups"] == 3


# ------------------------------------------------------------------------------------------
# Extras


def test_huge_integer_scalar_is_infinite_not_an_error(tmp_path):
    with Recorder(tmp_path) as rec:
        rec.log_scalars(1, {"big": 10**400, "small": -(10**400), "ok": 1})
    run = read_recording(tmp_path)
    assert run.series["big"].tolist() == [np.inf] and run.series["small"].tolist() == [-np.inf]


def test_full_disk_leaves_no_temp_file(tmp_path, monkeypatch, caplog):
    real = files_mod.write_all

    def full(fd, data):
        if data.startswith(b"{\n"):  # the manifest
            os.write(fd, data[:10])
            raise OSError(28, "No space left on device")
        real(fd, data)

    monkeypatch.setattr(files_mod, "write_all", full)
    with Recorder(tmp_path, Manifest(trainer="t")) as rec:
        rec.log_scalars(1, {"x": 1.0})
        rec.update_manifest(group_size=4)
    assert "No space left" in _messages(caplog)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "events.rank0.jsonl",
        "groups.rank0.bin",
        "scalars.rank0.jsonl",
    ]


_UNDER_W_ERROR = """
import os, sys
import numpy as np
from rlvitals.recording import Recorder, _files
real = _files.write_all
def full(fd, data):
    if data.startswith(b"RLVg") or b'"step":3' in data:
        raise OSError(28, "No space left on device")
    real(fd, data)
_files.write_all = full
d = sys.argv[1]
open(os.path.join(d, "events.rank0.jsonl"), "w").write('{"torn": ')  # repaired on open
with Recorder(d) as rec:
    for step in range(6):
        rec.log_scalars(step, {"x": step, "text": "skipped"})
        rec.log_groups(step, np.array([1.0, 0.0]), np.array([0, 0]))
assert rec.stats["dropped"] >= 6, rec.stats
print("finished", rec.stats["dropped"])
"""


def test_recorder_never_raises_under_w_error(tmp_path):
    """``python -W error``: losses, repairs and skipped values must not become exceptions."""
    proc = subprocess.run(
        [sys.executable, "-W", "error", "-c", _UNDER_W_ERROR, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "finished" in proc.stdout
    assert "rlvitals recorder" in proc.stderr  # reported through logging's last resort

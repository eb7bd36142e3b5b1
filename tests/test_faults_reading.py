"""Bounded reading of hostile or live inputs (issue 21, items 4, 7 and 8): CSV exports capped per
line like the JSONL path, newline bombs, gzip files with trailing garbage or still being written,
live WAL-mode SQLite stores, files truncated while read."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py

from rlvitals.errors import InputError
from rlvitals.importers import _csv, _lines, load


def _jsonl(n: int) -> bytes:
    return b"".join(
        json.dumps({"step": i, "reward": (i % 3) / 2, "kl": 0.01}).encode() + b"\n"
        for i in range(n)
    )


def _history_csv(n: int) -> bytes:
    rows = [b"_step,_runtime,train/reward"]
    rows += [f"{i},{i * 1.5},{(i % 3) / 2}".encode() for i in range(n)]
    return b"\n".join(rows) + b"\n"


# --- item 7: bounded memory --------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["wandb_history", "wandb_chart"])
def test_csv_exports_cap_a_line_like_the_jsonl_path(tmp_path, monkeypatch, fmt):
    # /dev/zero forced as a CSV export grew to 11.7 GB in a minute: one line, never ending.
    monkeypatch.setattr(_csv, "MAX_LINE_BYTES", 4096)
    p = tmp_path / "h.csv.gz"
    p.write_bytes(gzip.compress(_history_csv(5) + b"5," + b"9" * 50_000 + b"\n"))
    with pytest.raises(InputError, match=r"line 7: line longer than 4096 characters"):
        load(p, fmt)


def test_csv_cap_reads_lines_under_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_csv, "MAX_LINE_BYTES", 4096)
    p = tmp_path / "h.csv"
    p.write_bytes(_history_csv(40))
    assert len(load(p, "wandb_history").steps) == 40


@pytest.mark.parametrize(
    ("name", "body", "fmt"),
    [("bomb.jsonl.gz", _jsonl(3), None), ("bomb.csv.gz", _history_csv(3), "wandb_history")],
)
def test_a_newline_bomb_ends_at_the_blank_run_budget(tmp_path, monkeypatch, name, body, fmt):
    # 300 MB of newlines (a 0.3 MB gzip) took 66 s as a CSV and 104 s as JSONL.
    monkeypatch.setattr(_lines, "MAX_BLANK_RUN", 1000)
    monkeypatch.setattr(_csv, "MAX_BLANK_RUN", 1000)
    p = tmp_path / name
    p.write_bytes(gzip.compress(body + b"\n" * 5000 + body))
    with pytest.raises(InputError, match="more than 1,000 blank lines in a row"):
        load(p, fmt)


def test_blank_lines_under_the_budget_are_still_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(_lines, "MAX_BLANK_RUN", 1000)
    p = tmp_path / "a.jsonl"
    p.write_bytes(_jsonl(5) + b"\n" * 900 + b"\r\n" * 90)
    assert len(load(p).steps) == 5


def test_gzip_with_trailing_garbage_reads_like_gunzip(tmp_path):
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(gzip.compress(_jsonl(200)) + b"this is not gzip\n")
    before = p.read_bytes()
    r = load(p)
    assert len(r.steps) == 200
    assert any("trailing garbage after the gzip data ignored" in w for w in r.warnings)
    assert p.read_bytes() == before


def test_gzip_still_being_written_keeps_its_complete_lines(tmp_path):
    data = gzip.compress(_jsonl(200))
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(data[: len(data) * 2 // 3])
    r = load(p)
    assert 100 < len(r.steps) < 200
    assert r.steps.tolist() == list(range(len(r.steps)))  # the complete lines, in order
    assert any("gzip data ends early" in w for w in r.warnings)


def test_gzip_corrupt_data_stays_an_error(tmp_path):
    data = bytearray(gzip.compress(_jsonl(200)))
    data[-6] ^= 0xFF  # the CRC: the bytes read are wrong, not merely cut
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"cannot decompress|CRC"):
        load(p)


# --- item 4: live SQLite stores ----------------------------------------------------------------
_WRITER = r"""
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], timeout=10)
con.execute("PRAGMA journal_mode=WAL")
(run_uuid,) = con.execute("SELECT run_uuid FROM runs WHERE name = 'main'").fetchone()
print("ready", flush=True)
step, end = 1000, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    con.executemany(
        "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) VALUES (?, ?, 1, ?, ?, 0)",
        [(f"train/k{j}", 0.5, run_uuid, step) for j in range(40)],
    )
    con.commit()
    step += 1
con.close()
"""


@pytest.fixture(scope="module")
def mlflow_db() -> Path:
    return P.produced("mlflow") / "mlflow.db"


def _wal_store(src: Path, d: Path) -> Path:
    d.mkdir()
    db = d / "mlflow.db"
    shutil.copy(src, db)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    return db


def test_live_wal_store_reads_consistently_while_written(mlflow_db, tmp_path):
    # A writer commits and checkpoints all along: a copy of the two files one after the other
    # raced it ("database disk image is malformed" in 23 of 269 reads).
    db = _wal_store(mlflow_db, tmp_path / "store")
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(db), "8"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        copies = []
        real = shutil.copyfile
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(shutil, "copyfile", lambda a, b, **k: copies.append(a) or real(a, b, **k))
            last = 0
            for _ in range(25):
                run = load(db, run="main")  # never "malformed"
                assert run.has("reward_mean")
                steps = run.steps.tolist()
                assert steps == sorted(steps) and steps[-1] >= last  # snapshots move forward
                last = steps[-1]
        assert copies == []  # read in place through the writer's index, never copied
        assert last > 1000  # rows only the -wal held were read
    finally:
        writer.kill()
        writer.wait()


def test_a_log_that_is_not_a_regular_file_is_never_copied(mlflow_db, tmp_path):
    # A -journal symbolic link to /dev/zero filled $TMPDIR.
    db = tmp_path / "mlflow.db"
    shutil.copy(mlflow_db, db)
    os.symlink("/dev/zero", f"{db}-journal")
    os.symlink("/dev/zero", f"{db}-wal")
    real = shutil.copyfile

    def copyfile(a, b, **k):
        assert stat.S_ISREG(os.stat(a).st_mode), f"copied {a}"
        return real(a, b, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shutil, "copyfile", copyfile)
        assert load(db, run="main").has("reward_mean")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mlflow.db",
        "mlflow.db-journal",
        "mlflow.db-wal",
    ]


def test_a_store_larger_than_tmpdir_is_still_read(mlflow_db, tmp_path, monkeypatch):
    db = _wal_store(mlflow_db, tmp_path / "store")
    writer = sqlite3.connect(db)  # a killed writer: a -wal with committed rows and no -shm
    writer.execute("PRAGMA wal_autocheckpoint=0")
    (run_uuid,) = writer.execute("SELECT run_uuid FROM runs WHERE name = 'main'").fetchone()
    writer.execute(
        "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
        "VALUES ('train/reward', 0.75, 1, ?, 999, 0)",
        (run_uuid,),
    )
    writer.commit()
    wal = Path(f"{db}-wal").read_bytes()
    writer.close()  # the last connection checkpoints and removes the log: put it back
    Path(f"{db}-wal").write_bytes(wal)
    Path(f"{db}-shm").unlink(missing_ok=True)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=1 << 20))
    run = load(db, run="main")
    assert run.has("reward_mean")
    assert any("was not read: no room in" in w for w in run.warnings)
    monkeypatch.undo()
    assert 999 in load(db, run="main").steps.tolist()  # with room, the log is read


# --- item 8: a file truncated while read ---------------------------------------------------------
def test_a_file_truncated_while_read_says_so(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(_jsonl(300))
    cut = []

    def progress(done, total):  # the truncation lands while the importer holds the file
        if not cut:
            cut.append(done)
            os.truncate(p, 1000)

    with pytest.raises(InputError, match=r"shrank from [\d,]+ to 1,000 bytes while it was read"):
        load(p, progress=progress)
    assert cut


def test_a_file_that_grows_while_read_is_fine(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_bytes(_jsonl(300))

    def progress(done, total):
        with open(p, "ab") as f:
            f.write(b"")  # a live writer appending is not a truncation
            f.write(json.dumps({"step": 10_000, "reward": 1.0}).encode() + b"\n")

    assert len(load(p, progress=progress).steps) >= 300


@pytest.mark.parametrize("fmt", [None, "jsonl", "wandb_history", "verl_console"])
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_a_log_linked_to_a_device_is_refused_not_read_forever(tmp_path, device, fmt):
    # /dev/urandom forced as a console log never ended (it has newlines); /dev/zero grew.
    p = tmp_path / "train.jsonl"
    os.symlink(device, p)
    with pytest.raises(InputError, match=r"is a character device \(/dev/\w+\), not a log"):
        load(p, fmt)

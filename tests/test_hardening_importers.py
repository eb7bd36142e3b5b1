"""Issue 11: importers never crash, never write next to their input, never blow up memory.

Items: 5 (an unreadable subdirectory in an MLflow store), 8 (terminal escapes from a log reach
the terminal), 11 (a WAL-mode ``mlflow.db`` gets side files), 13 (invalid UTF-8 in
``sqlite_master``), 15 (memory amplification), and the extras (``--lenient``, a clear message
when memory runs out). Stores come from the real ``mlflow`` (tests/_binary_producers.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py

from rlvitals import InputError
from rlvitals.cli import main
from rlvitals.importers import _sqlite, load, sniff
from rlvitals.recording import Recorder, RunBuilder, read_recording
from rlvitals.recording import memory as _memory
from rlvitals.recording.run import _CHECK_EVERY_KEYS as _CHECK_KEYS


@pytest.fixture(scope="module")
def produced() -> Path:
    return P.produced("mlflow")


def _listing(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------------------------------
# Item 5: an unreadable subdirectory (lost+found) is skipped, never a PermissionError


def test_unreadable_subdirectory_of_a_file_store(produced, tmp_path, monkeypatch, capsys):
    store = tmp_path / "mlruns"
    shutil.copytree(produced / "mlruns", store)
    (store / "lost+found").mkdir()
    exp = next(p for p in store.iterdir() if (p / "meta.yaml").is_file())
    (exp / "lost+found").mkdir()
    for run_dir in (p for p in exp.iterdir() if (p / "meta.yaml").is_file()):
        (run_dir / "metrics" / "lost+found").mkdir()
    # The tests run as root, for whom mode 000 changes nothing: deny like the kernel would.
    real_stat, real_lstat, real_scandir = os.stat, os.lstat, os.scandir

    def denied(path) -> bool:
        parts = Path(os.fsdecode(path)).parts
        return "lost+found" in parts and parts[-1] != "lost+found"

    def stat(path, *a, **k):
        if denied(path):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_stat(path, *a, **k)

    def lstat(path, *a, **k):
        if denied(path):
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_lstat(path, *a, **k)

    def scandir(path="."):
        if Path(os.fsdecode(path)).name == "lost+found":
            raise PermissionError(13, "Permission denied", os.fsdecode(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "scandir", scandir)
    assert sniff(store).name == "mlflow"
    assert sniff(tmp_path).name == "mlflow"
    run = load(store, run="main")
    assert run.has("reward_mean")
    assert any("lost+found" in w and "unreadable" in w for w in run.warnings)
    code, _, err = _cli(["inspect", str(tmp_path), "--run", "main"], capsys)
    assert code == 0 and "Traceback" not in err


# ------------------------------------------------------------------------------------------
# Item 11: a WAL-mode mlflow.db is read without creating anything next to it


def _wal_copy(produced: Path, d: Path) -> Path:
    d.mkdir()
    db = d / "mlflow.db"
    shutil.copy(produced / "mlflow.db", db)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    assert sorted(p.name for p in d.iterdir()) == ["mlflow.db"]
    return db


def test_wal_mode_database_gets_no_side_files(produced, tmp_path, capsys):
    db = _wal_copy(produced, tmp_path / "store")
    before = _listing(db.parent)
    assert sniff(db).name == "mlflow"
    assert load(db, run="main").has("reward_mean")
    assert load(db.parent, run="main").has("reward_mean")
    code, _, err = _cli(["inspect", str(db), "--run", "main"], capsys)
    assert code == 0, err
    assert _listing(db.parent) == before  # no -shm, no -wal, the database untouched


def test_live_wal_is_read_and_left_alone(produced, tmp_path):
    db = _wal_copy(produced, tmp_path / "store")
    writer = sqlite3.connect(db)  # a live MLflow server: committed rows still in the -wal
    writer.execute("PRAGMA wal_autocheckpoint=0")
    (run_uuid,) = writer.execute("SELECT run_uuid FROM runs WHERE name = 'main'").fetchone()
    writer.execute(
        "INSERT INTO metrics (key, value, timestamp, run_uuid, step, is_nan) "
        "VALUES ('train/reward', 0.75, 1, ?, 999, 0)",
        (run_uuid,),
    )
    writer.commit()
    try:
        before = _listing(db.parent)
        run = load(db, run="main")
        assert 999 in run.steps.tolist()  # the row only the -wal holds
        after = _listing(db.parent)
        # The writer's own files stay as they were (a reader may update read marks in -shm).
        assert after.keys() == before.keys()
        assert after["mlflow.db"] == before["mlflow.db"]
        assert after["mlflow.db-wal"] == before["mlflow.db-wal"]
    finally:
        writer.close()


# ------------------------------------------------------------------------------------------
# Item 13: invalid UTF-8 in sqlite_master (and in names and keys)


def _bad_schema_db(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_uuid TEXT, name TEXT, start_time INT)")
    con.execute("CREATE TABLE metrics (key TEXT, value REAL, run_uuid TEXT, step INT)")
    con.execute("CREATE TABLE zzzzqq (a)")
    con.execute("INSERT INTO runs VALUES ('r1', 'n', 1)")
    con.execute("INSERT INTO metrics VALUES ('loss', 0.5, 'r1', 1)")
    con.commit()
    con.close()
    path.write_bytes(path.read_bytes().replace(b"zzzzqq", b"\xff\xfe\xff\xfe\xc3\x28"))
    return path


def test_invalid_utf8_in_sqlite_master(tmp_path, capsys):
    db = _bad_schema_db(tmp_path / "mlflow.db")
    with pytest.raises(InputError, match="SQLite error"):
        load(db, fmt="mlflow")
    code, _, err = _cli(["inspect", str(db)], capsys)
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1
    code, _, err = _cli(["doctor", str(db), "--input-format", "mlflow"], capsys)
    assert code == 2 and "SQLite error" in err


def test_invalid_utf8_in_run_names_and_keys(produced, tmp_path):
    db = tmp_path / "mlflow.db"
    shutil.copy(produced / "mlflow.db", db)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET name = CAST(x'6d61696eff' AS TEXT) WHERE name = 'main'")
    con.execute(
        "UPDATE metrics SET key = CAST(x'6b6579fe' AS TEXT) WHERE key = 'train/policy_loss'"
    )
    con.commit()
    con.close()
    run = load(db, run="main\ufffd")
    assert "key\ufffd" in run.unknown_keys


# ------------------------------------------------------------------------------------------
# Item 8: escape sequences from a log never reach the terminal

ESC = "\x1b]0;pwned\x07\x1b[2J"


def test_mlflow_run_names_are_sanitised(produced, tmp_path, capsys):
    db = tmp_path / "mlflow.db"
    shutil.copy(produced / "mlflow.db", db)
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET name = ? WHERE name = 'warmup'", (f"warm{ESC}\nFAKE",))
    con.commit()
    con.close()
    code, out, err = _cli(["inspect", str(db)], capsys)  # lists the runs, warns about others
    assert code == 0
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "warm\\x1b]0;pwned\\x07" in out
    code, out, err = _cli(["inspect", str(db), "--run", f"no{ESC}"], capsys)
    assert code == 2 and "\x1b" not in err and err.count("\n") == 1
    code, out, err = _cli(["doctor", str(db)], capsys)
    assert "\x1b" not in out + err


def test_inspect_key_names_and_the_error_line_are_sanitised(tmp_path, capsys):
    log = tmp_path / "a.jsonl"
    rows = [{"step": s, "reward": 0.5, f"k{ESC}\nFAKE WARNING": 1.0} for s in range(3)]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = _cli(["inspect", str(log)], capsys)
    assert code == 0 and "\x1b" not in out and "\nFAKE WARNING" not in out
    assert "k\\x1b]0;pwned\\x07" in out
    bad = tmp_path / f"x{ESC}.jsonl"
    bad.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    code, out, err = _cli(["inspect", str(bad)], capsys)
    assert code == 2 and "\x1b" not in err and "\x07" not in err and err.count("\n") == 1


# ------------------------------------------------------------------------------------------
# Item 15: memory stays within a small multiple of the input, and a limit says so


def _dense_line(path: Path, n_bytes: int) -> Path:
    with open(path, "w") as f:
        f.write('{"step": 1, "reward": 0.5}\n')
        f.write('{"step": 2, "x": [' + ",".join(["{}"] * (n_bytes // 3)) + "]}\n")
        f.write('{"step": 3, "reward": 0.5}\n')
    return path


def test_dense_jsonl_line_is_refused_before_parsing(tmp_path, capsys):
    p = _dense_line(tmp_path / "a.jsonl", 8 << 20)
    with pytest.raises(InputError, match=r"line 2: memory limit: .* once parsed"):
        load(p)
    code, _, err = _cli(["doctor", str(p)], capsys)
    assert code == 2 and "memory limit" in err


def test_dense_trainer_state_is_refused(tmp_path):
    p = tmp_path / "trainer_state.json"
    rows = ",".join(["{}"] * (3 << 20))
    p.write_text('{"global_step": 1, "log_history": [{"step": 1, "loss": 0.5},' + rows + "]}")
    with pytest.raises(InputError, match="memory limit"):
        load(p)


def test_unique_keys_are_bounded_by_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(_memory, "MEMORY_BASE", 8 << 20)
    p = tmp_path / "a.jsonl"
    with open(p, "w") as f:
        for i in range(60_000):
            f.write(f'{{"step": {i}, "unique_key_{i}": 1}}\n')
    with pytest.raises(InputError, match=r"memory limit: reading it would hold .* distinct keys"):
        load(p)


def test_dense_columns_are_checked_before_they_are_made(tmp_path, monkeypatch):
    monkeypatch.setattr(_memory, "MEMORY_BASE", 8 << 20)
    p = tmp_path / "a.jsonl"
    with open(p, "w") as f:  # 500 keys, each logged once: 500 x 20,000 dense cells (80 MB)
        for i in range(20_000):
            f.write(f'{{"step": {i}, "k{i % 500}": 1}}\n')
    with pytest.raises(InputError, match=r"500 series x 20000 steps"):
        load(p)


def test_builder_outside_load_is_not_limited(monkeypatch):
    monkeypatch.setattr(_memory, "MEMORY_BASE", 0)  # no budget outside importers.load
    b = RunBuilder()
    for i in range(_CHECK_KEYS + 10):  # past the key count at which the budget is checked
        b.add_row(i % 10, {f"k{i}": 1.0})
    assert len(b.build().series) == _CHECK_KEYS + 10


def test_dense_verl_line_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(_memory, "JSON_BASE", 0)  # a 2 MB line, not a 100 MB one
    p = tmp_path / "train.log"
    fields = " - ".join(f"k{i}:0" for i in range(300_000))
    p.write_text(f"(TaskRunner pid=1) step:1 - critic/score/mean:0.5 - {fields}\n")
    with pytest.raises(InputError, match=r"line 1: memory limit: \d+ fields"):
        load(p, fmt="verl_console")


def _wandb_file(path: Path, payload: bytes) -> Path:
    """A .wandb file holding one (multi-block) record with a valid checksum."""
    out = bytearray(b":W&B\xe1\xbe\x00")
    block, pos, first = 32768, 0, True
    while True:
        room = block - len(out) % block - 7
        if room <= 0:
            out += b"\x00" * (block - len(out) % block)
            continue
        chunk = payload[pos : pos + room]
        pos += len(chunk)
        last = pos >= len(payload)
        rtype = 1 if first and last else 2 if first else 4 if last else 3
        out += struct.pack("<IHB", zlib.crc32(bytes([rtype]) + chunk), len(chunk), rtype) + chunk
        first = False
        if last:
            break
    path.write_bytes(bytes(out))
    return path


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def test_wandb_record_of_empty_items_is_bounded(tmp_path):
    history = b"\x0a\x00" * (4 << 20)  # 4M empty HistoryItems: 8 MB -> 1 GB of dicts
    p = _wandb_file(tmp_path / "run-x.wandb", _field(2, history))
    with pytest.raises(InputError, match="memory limit"):
        load(p, fmt="wandb")


_PEAK = """
import sys
from rlvitals.cli import main
code = main(["inspect", sys.argv[1]])
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forking (pytest) process.
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1]
print(code, hwm)
"""


def test_peak_memory_of_a_dense_line_is_bounded(tmp_path):
    p = _dense_line(tmp_path / "a.jsonl", 40 << 20)  # 1.1 GB of dicts if it were parsed
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, str(p)], capture_output=True, text=True, timeout=300
    )
    code, peak_kib = map(int, proc.stdout.split())
    assert code == 2 and "memory limit" in proc.stderr
    size_mib = p.stat().st_size / (1 << 20)
    assert peak_kib / 1024 < 10 * size_mib + 200, (peak_kib, size_mib)


def _dense_history_csv(path: Path, cells: int, rows: int = 1) -> Path:
    """A W&B run-history CSV export whose middle row(s) hold ``cells`` one-character cells."""
    with open(path, "w") as f:
        f.write("_step,_runtime,_timestamp,train/reward\n0,1.0,1.7e9,0.5\n")
        for _ in range(rows):
            f.write(",".join(["1"] * cells) + "\n")
        f.write("2,3.0,1.7e9,0.5\n")
    return path


def test_a_csv_row_of_many_tiny_cells_is_refused_before_it_is_split(tmp_path, capsys):
    """The fuzzer's worst case: 16 MiB of W&B history CSV with a dense row peaked at 387 MiB
    (every one-character cell a Python string) before the row was refused for its width."""
    p = _dense_history_csv(tmp_path / "history.csv", 4 << 20)
    with pytest.raises(InputError, match=r"line 3: memory limit: a row of 4,194,304 cells"):
        load(p)
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, str(p)], capture_output=True, text=True, timeout=300
    )
    code, peak_kib = map(int, proc.stdout.split())
    assert code == 2 and "memory limit" in proc.stderr
    size_mib = p.stat().st_size / (1 << 20)
    assert peak_kib / 1024 < 10 * size_mib + 200, (peak_kib, size_mib)


def test_rows_just_wider_than_the_header_still_say_their_width(tmp_path):
    """Under the cap a row of the wrong width is the usual one-line error, not a memory one."""
    p = _dense_history_csv(tmp_path / "history.csv", 9)
    with pytest.raises(InputError, match="9 cells, but the header has 4"):
        load(p)


def test_out_of_memory_says_so(tmp_path, monkeypatch):
    from rlvitals.importers import IMPORTERS, Importer, _import

    def boom(path, progress=None):
        raise MemoryError  # str(MemoryError()) is empty: the message said "cannot read: "

    p = tmp_path / "a.jsonl"
    p.write_text('{"step": 1, "reward": 0.5}\n')
    imp = _import("jsonl")
    monkeypatch.setitem(
        IMPORTERS._items, "jsonl", Importer(imp.name, imp.description, imp.sniff, boom)
    )
    with pytest.raises(InputError, match="out of memory reading it"):
        load(p, fmt="jsonl")


# ------------------------------------------------------------------------------------------
# Extras: --lenient reads what strict reading refuses, and says what it skipped


def _recording_with_corrupt_middle(d: Path) -> Path:
    with Recorder(d) as rec:
        for step in range(1, 40):
            rec.log_scalars(step, {"reward": 0.5, "loss": 0.1})
            rec.log_groups(step, np.array([1.0, 0.0] * 4), np.repeat(np.arange(4), 2))
    p = d / "groups.rank0.bin"
    data = bytearray(p.read_bytes())
    data[200] ^= 0xFF  # one corrupt record in the middle
    p.write_bytes(bytes(data))
    s = d / "scalars.rank0.jsonl"
    lines = s.read_bytes().split(b"\n")
    lines[5] = b"{not json"
    s.write_bytes(b"\n".join(lines))
    return d


@pytest.mark.parametrize("command", ["doctor", "inspect", "acr"])
def test_lenient_flag_reads_a_damaged_recording(tmp_path, capsys, command):
    d = _recording_with_corrupt_middle(tmp_path / "rec")
    before = _listing(d)
    code, _, err = _cli([command, str(d)], capsys)
    assert code == 2 and "--lenient" in err and err.count("\n") == 1
    code, out, err = _cli([command, str(d), "--lenient"], capsys)
    assert code in (0, 1), err
    if command == "inspect":
        assert "corrupt record skipped" in out
    assert _listing(d) == before
    run = load(d, lenient=True)
    skipped = [w for w in run.warnings if "corrupt record skipped" in w]
    assert len(skipped) == 2 and run.groups.n_groups == 38 * 4
    with pytest.raises(InputError):
        read_recording(d)


def test_lenient_flag_skips_invalid_jsonl_lines(tmp_path, capsys):
    p = tmp_path / "a.jsonl"
    rows = [json.dumps({"step": s, "reward": s / 40}) for s in range(40)]
    rows[7] = '{"step": 7, "reward": '
    rows[9] = "garbage"
    p.write_text("\n".join(rows) + "\n")
    with pytest.raises(InputError, match="line 8"):
        load(p)
    run = load(p, lenient=True)
    assert run.n_steps == 38
    assert any("2 invalid JSON line(s) skipped" in w and "line 8" in w for w in run.warnings)
    code, out, _ = _cli(["inspect", str(p), "--lenient"], capsys)
    assert code == 0 and "invalid JSON line(s) skipped" in out


def test_mlflow_sqlite_is_still_opened_read_only(produced, tmp_path):
    ml_db = tmp_path / "mlflow.db"
    shutil.copy(produced / "mlflow.db", ml_db)
    with _sqlite.connect(ml_db) as con, pytest.raises(sqlite3.OperationalError):
        con.execute("DELETE FROM metrics")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlflow.db"]


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_unencodable_strings_are_printed_escaped(tmp_path, fmt):
    """A JSON ``"\\ud800"`` key (a lone surrogate) cannot be encoded to UTF-8: found by
    benchmarks/fuzz.py as a UnicodeEncodeError out of ``sys.stdout.write(report)``."""
    p = tmp_path / "a.jsonl"
    p.write_text("".join(f'{{"step": {s}, "reward": 0.5, "k\\ud800": 1}}\n' for s in range(40)))
    proc = subprocess.run(
        [sys.executable, "-m", "rlvitals", "doctor", str(p), "--format", fmt],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode in (0, 1), proc.stderr.decode()
    assert b"Traceback" not in proc.stderr
    proc.stdout.decode("utf-8")  # valid UTF-8 throughout (the key, where shown, escaped)

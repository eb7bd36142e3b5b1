"""Fuzzing the binary importers (TensorBoard, W&B, MLflow) and the protobuf decoder.

Inputs: random bytes; real files (written by tensorboardX, wandb and mlflow in
tests/_binary_producers.py) truncated at random offsets or with random bytes changed; records
built to be hostile (valid checksums around huge declared lengths, deeply nested or malformed
protobuf, W&B headers claiming 64 KiB in a 32 KiB block); SQLite databases with MLflow's table
names but wrong columns and values of every type. The result must be a ``Run`` or an
``InputError`` naming the file — never another exception — within the deadline, and huge
declared lengths must not be allocated (tracemalloc).
"""

from __future__ import annotations

import math
import sqlite3
import struct
import tracemalloc
import zlib
from datetime import timedelta
from pathlib import Path

import pytest
import rlvitals_tests_binary_producers as P  # loaded by conftest.py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.errors import InputError
from rlvitals.importers import formats, load
from rlvitals.importers._crc32c import crc32c, mask
from rlvitals.importers._protobuf import MAX_DEPTH, Field, Message, ProtobufError, decode
from rlvitals.recording.run import Run

SETTINGS = settings(
    max_examples=60,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)
FORMATS = ("tensorboard", "wandb", "mlflow")
MEMORY_LIMIT = 64 << 20
"""Peak Python allocation allowed while reading a file that claims gigabytes."""


class _Seeds(dict):
    def __repr__(self) -> str:  # keeps hypothesis' failure reports readable
        return f"<seeds {sorted(self)}>"


@pytest.fixture(scope="module")
def seeds() -> dict[str, bytes]:
    """Small real files, one or more per format."""
    tb = P.produced("tensorboard", "wandb", "mlflow")  # the three producers run side by side
    wb = P.produced("wandb")
    ml = P.produced("mlflow")
    (tbx,) = (tb / "tbx").glob("events.out.tfevents.*")
    (torch,) = (tb / "torch").glob("events.out.tfevents.*")
    old, main = sorted((wb / "wandb").glob("offline-run-*"))
    (trl,) = (wb / "trlstyle" / "wandb").glob("offline-run-*/*.wandb")
    return _Seeds(
        {
            "tensorboard": tbx.read_bytes(),
            "tensorboard_torch": torch.read_bytes(),
            "wandb": next(old.glob("*.wandb")).read_bytes(),
            "wandb_trl": trl.read_bytes(),
            "wandb_blocks": next(main.glob("*.wandb")).read_bytes()[: 3 * 32768 + 100],
            "mlflow": (ml / "mlflow.db").read_bytes(),
        }
    )


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _check(path: Path, fmt: str) -> Run | None:
    """Load ``path`` as ``fmt``: a Run, or an InputError that names the file."""
    try:
        run = load(path, fmt=fmt)
    except InputError as e:
        assert str(e).startswith(str(path)), str(e)
        assert "\n" not in str(e)
        return None
    assert isinstance(run, Run)
    return run


def _importer(name: str):
    return next(imp for imp in formats() if imp.name == name)


def _sniff_ok(path: Path, data: bytes) -> None:
    for name in FORMATS:
        score = _importer(name).sniff(path, data[:65536])
        assert 0.0 <= score <= 1.0


def _write(workdir: Path, name: str, data: bytes) -> Path:
    p = workdir / name
    for suffix in ("-journal", "-wal", "-shm"):
        Path(str(p) + suffix).unlink(missing_ok=True)
    p.write_bytes(data)
    return p


def _tfrecord(payload: bytes, declared: int | None = None) -> bytes:
    """One TFRecord with valid checksums (``declared`` overrides the length field)."""
    n = len(payload) if declared is None else declared
    head = struct.pack("<Q", n)
    return (
        head
        + struct.pack("<I", mask(crc32c(head)))
        + payload
        + struct.pack("<I", mask(crc32c(payload)))
    )


def _wandb_record(payload: bytes, rtype: int = 1, declared: int | None = None) -> bytes:
    n = len(payload) if declared is None else declared
    crc = zlib.crc32(bytes([rtype]) + payload)
    return struct.pack("<IHB", crc, n, rtype) + payload


WANDB_HEAD = b":W&B\xe1\xbe\x00"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


# --- random bytes, truncations, flipped bytes ------------------------------------------------
@SETTINGS
@given(data=st.binary(max_size=3000), fmt=st.sampled_from(FORMATS))
def test_random_bytes(workdir, data, fmt):
    p = _write(workdir, "random.bin", data)
    _sniff_ok(p, data)
    _check(p, fmt)


@SETTINGS
@given(
    seed=st.sampled_from(
        ["tensorboard", "tensorboard_torch", "wandb", "wandb_trl", "wandb_blocks"]
    ),
    cut=st.floats(0, 1),
)
def test_truncated_real_files(workdir, seeds, seed, cut):
    data = seeds[seed]
    data = data[: int(len(data) * cut)]
    fmt = seed.split("_")[0]
    p = _write(workdir, f"trunc-{fmt}", data)
    _sniff_ok(p, data)
    run = _check(p, fmt)
    if run is not None and run.warnings:
        assert all(str(p) in w for w in run.warnings)


@SETTINGS
@given(
    seed=st.sampled_from(
        ["tensorboard", "tensorboard_torch", "wandb", "wandb_trl", "wandb_blocks"]
    ),
    flips=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=8
    ),
)
def test_flipped_bytes_in_real_files(workdir, seeds, seed, flips):
    data = bytearray(seeds[seed])
    for where, xor in flips:
        data[int(where * len(data))] ^= xor
    fmt = seed.split("_")[0]
    p = _write(workdir, f"flip-{fmt}", bytes(data))
    _sniff_ok(p, bytes(data))
    _check(p, fmt)


@settings(SETTINGS, max_examples=40)
@given(
    flips=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=20
    ),
    cut=st.one_of(st.none(), st.floats(0, 1)),
)
def test_damaged_sqlite_store(workdir, seeds, flips, cut):
    data = bytearray(seeds["mlflow"])
    for where, xor in flips:
        data[int(where * len(data))] ^= xor
    if cut is not None:
        data = data[: max(16, int(len(data) * cut))]
    p = _write(workdir, "mlflow.db", bytes(data))
    _sniff_ok(p, bytes(data))
    _check(p, "mlflow")


# --- hostile records -------------------------------------------------------------------------
@pytest.mark.parametrize("declared", [2**64 - 1, 2**40, 17 << 20, 8 << 20])
def test_tensorboard_huge_declared_length_is_not_allocated(workdir, seeds, declared):
    data = seeds["tensorboard"] + _tfrecord(b"\x10\x01", declared=declared)[:12] + b"x" * 100
    p = _write(workdir, "events.out.tfevents.huge", data)
    tracemalloc.start()
    try:
        run = _check(p, "tensorboard")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_LIMIT
    assert run is not None and any("torn" in w for w in run.warnings)


def test_tensorboard_huge_protobuf_length_inside_a_valid_record(workdir, seeds):
    # Event.summary declared as 2**60 bytes inside a record whose checksums are right
    payload = b"\x10\x05" + _varint(5 << 3 | 2) + _varint(2**60) + b"\x00" * 10
    p = _write(workdir, "events.out.tfevents.hostile", seeds["tensorboard"] + _tfrecord(payload))
    with pytest.raises(InputError, match=r"byte \d+: bad event record: field 5 declares"):
        load(p, fmt="tensorboard")


def test_tensorboard_deeply_nested_payload(workdir, seeds):
    # 2000 levels of field 5 inside field 5: decoded by schema, so no deep recursion
    inner = b""
    for _ in range(2000):
        inner = _field(5, inner)
    p = _write(workdir, "events.out.tfevents.deep", seeds["tensorboard"] + _tfrecord(inner))
    _check(p, "tensorboard")


def test_protobuf_recursion_is_bounded():
    node = Message("Node")
    node.fields[1] = Field("child", node)
    data = b""
    for _ in range(MAX_DEPTH + 5):
        data = _field(1, data)
    with pytest.raises(ProtobufError, match="nested deeper"):
        decode(data, node)
    ok = b""
    for _ in range(MAX_DEPTH - 1):
        ok = _field(1, ok)
    assert decode(ok, node)


@settings(SETTINGS, max_examples=200)
@given(data=st.binary(max_size=300))
def test_protobuf_decoder_raises_only_protobuf_error(data):
    node = Message("Node")
    node.fields.update(
        {
            1: Field("child", node, repeated=True),
            2: Field("i", "int64"),
            3: Field("s", "string"),
            4: Field("f", "float", repeated=True),
            5: Field("d", "double"),
            6: Field("z", "sint64", repeated=True),
            7: Field("b", "bytes"),
        }
    )
    try:
        decode(data, node)
    except ProtobufError as e:
        assert 0 <= e.offset <= len(data)


def test_wandb_header_claiming_more_than_a_block(workdir, seeds):
    record = _wandb_record(b"\x12\x00", declared=65535)
    p = _write(workdir, "run-hostile.wandb", WANDB_HEAD + record + b"\x00" * 70000)
    with pytest.raises(InputError, match="no numeric history rows"):
        load(p, fmt="wandb")
    # a hostile block followed by the real file's records at the next block boundary
    real = seeds["wandb"][7:]
    data = WANDB_HEAD + record + b"\x00" * (32768 - 7 - len(record))  # real records: block 1
    p = _write(workdir, "run-resync.wandb", data + real)
    run = _check(p, "wandb")
    assert run is not None and any("byte 7: 1 corrupted block" in w for w in run.warnings)


def test_wandb_malformed_protobuf_with_valid_crc(workdir):
    payload = _field(2, _field(1, b"\x0a\xff\xff\xff\xff\x0f"))  # item.key declares 4 GiB
    p = _write(workdir, "run-proto.wandb", WANDB_HEAD + _wandb_record(payload))
    with pytest.raises(InputError, match=r"record 1 \(byte 7\): malformed record"):
        load(p, fmt="wandb")


def test_wandb_endless_first_fragments_are_bounded(workdir, monkeypatch):
    from rlvitals.importers import wandb as wb

    monkeypatch.setattr(wb, "MAX_RECORD_BYTES", 1000)
    frag = _wandb_record(b"\x00" * 500, rtype=2)
    middle = _wandb_record(b"\x00" * 500, rtype=3)
    p = _write(workdir, "run-frag.wandb", WANDB_HEAD + frag + middle * 5 + _wandb_record(b"", 4))
    with pytest.raises(InputError, match="no numeric history rows"):
        load(p, fmt="wandb")


SQL_VALUES = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=20),
    st.binary(max_size=20),
)


@settings(SETTINGS, max_examples=40)
@given(
    metric_cols=st.sampled_from(
        [
            "key, value, timestamp, run_uuid, step, is_nan",
            "key, value, run_uuid, step",
            "a, b",
        ]
    ),
    runs=st.lists(st.tuples(SQL_VALUES, SQL_VALUES, SQL_VALUES, SQL_VALUES), max_size=3),
    rows=st.lists(st.tuples(*[SQL_VALUES] * 6), max_size=20),
    params=st.lists(st.tuples(SQL_VALUES, SQL_VALUES, SQL_VALUES), max_size=5),
)
def test_sqlite_with_mlflow_names_and_garbage(workdir, metric_cols, runs, rows, params):
    p = workdir / "garbage.db"
    p.unlink(missing_ok=True)
    con = sqlite3.connect(p)
    con.execute("PRAGMA synchronous = OFF")  # test data: no fsync per example
    cols = [c.strip() for c in metric_cols.split(",")]
    con.execute(f"CREATE TABLE metrics ({metric_cols})")
    con.execute("CREATE TABLE runs (run_uuid, name, start_time, lifecycle_stage)")
    con.execute("CREATE TABLE params (key, value, run_uuid)")
    con.executemany("INSERT INTO runs VALUES (?, ?, ?, ?)", runs)
    run_ids = [r[0] for r in runs] or [None]
    metric_rows = []
    for i, r in enumerate(rows):
        row = list(r[: len(cols)])
        if "run_uuid" in cols:  # most rows belong to a run, so they are read
            row[cols.index("run_uuid")] = run_ids[i % len(run_ids)]
        metric_rows.append(row)
    con.executemany(f"INSERT INTO metrics VALUES ({', '.join('?' * len(cols))})", metric_rows)
    con.executemany("INSERT INTO params VALUES (?, ?, ?)", params)
    con.commit()
    con.close()
    _sniff_ok(p, p.read_bytes())
    _check(p, "mlflow")


def test_sqlite_not_mlflow_is_not_sniffed(workdir):
    p = workdir / "app.db"
    p.unlink(missing_ok=True)
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE users (id, name)")
    con.commit()
    con.close()
    assert _importer("mlflow").sniff(p, p.read_bytes()) == 0.0
    with pytest.raises(InputError, match="not an MLflow store"):
        load(p, fmt="mlflow")


def _tfrecord_payloads(data: bytes) -> list[bytes]:
    out, pos = [], 0
    while pos + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        out.append(data[pos + 12 : pos + 12 + n])
        pos += 16 + n
    return out


def _generic_scalars(payload: bytes):
    from rlvitals.importers import tensorboard as tb

    ev = decode(payload, tb._EVENT)
    values = ev.get("summary", {}).get("value", [])
    return ev.get("step", 0), [(v.get("tag"), v.get("simple_value")) for v in values]


@settings(SETTINGS, max_examples=300)
@given(
    seed=st.sampled_from(["tensorboard", "tensorboard_torch"]),
    record=st.integers(0, 10_000),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3),
)
def test_tensorboard_fast_path_agrees_with_the_decoder(seeds, seed, record, flips):
    from rlvitals.importers import tensorboard as tb

    payloads = _tfrecord_payloads(seeds[seed])
    payload = bytearray(payloads[record % len(payloads)])
    for where, value in flips:
        if payload:
            payload[where % len(payload)] = value
    payload = bytes(payload)
    try:
        fast = tb._fast_scalar(payload)
    except ProtobufError:
        fast = "error"
    if fast is None:
        return  # not the common shape: the generic decoder handles it
    try:
        generic = _generic_scalars(payload)
    except ProtobufError:
        assert fast == "error"
        return
    assert fast != "error"
    step, tag, value = fast
    assert generic == (step, [(tag, value)]) or (
        math.isnan(value) and generic[0] == step and generic[1][0][0] == tag
    )

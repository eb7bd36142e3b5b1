"""TensorBoard event files (``events.out.tfevents.*``), read without the ``tensorboard`` package.

A path is one event file, or a directory searched recursively; every event file found is read
and all are merged by step (files in the order of the timestamp in their names, so the later
file of a resumed run wins a step both logged).

**Framing** (TFRecord): ``uint64 length · uint32 masked CRC-32C(length) · data · uint32 masked
CRC-32C(data)``, little-endian. Both checksums are verified (:mod:`._crc32c`, vectorised over
many records at once):

- a bad length checksum means the framing is lost: :class:`InputError` naming the byte offset,
  unless everything from there to the end of the file is zero bytes (a crash on a file system
  that preallocates), which is a warning;
- a bad data checksum leaves the framing intact: that record is skipped and counted in one
  warning (first offset and count) — the rest of the file is still trusted;
- a last record cut short (a live run still writing) is ignored with a warning;
- records over :data:`MAX_RECORD_BYTES` (images, graphs) are skipped unread.

**Events**: ``Event.step`` (2), ``Event.summary`` (5) → ``Summary.value`` (1): ``tag`` (1),
``simple_value`` (2, float32: torch.utils.tensorboard and tensorboardX) or ``tensor`` (8: a
one-element numeric ``TensorProto`` from ``float_val``, ``double_val``, ``int_val``,
``int64_val``, ``half_val``, ``bool_val``, ``uint32_val``, ``uint64_val`` or ``tensor_content``:
TF2 and ``new_style=True`` writers). Other summaries (images, histograms, text) are skipped,
except the text summary ``args`` that ``transformers``' TensorBoard callback writes: its JSON
becomes ``manifest.config`` and reveals the trainer (TRL: ``num_generations``).

**Names**: tags map through :func:`rlvitals.recording.metrics.canonical_key`. Two directory
conventions are honoured: ``add_scalars(main, {k: v})`` writes the tag ``main`` into a
sub-directory ``<main>_<k>`` (torch) or ``<main>/<k>`` (tensorboardX), read back as the series
``main/k``; a run directory named ``eval``, ``val``,
``validation`` or ``test`` (Keras) holds evaluation series (``eval/<tag>``). When two run
directories log the same series over overlapping steps, a warning says so (the later file
wins each shared step).

One module, a little over 500 lines: the framing, the Event/Summary schema it decodes and the
recovery rules for damaged files belong together (each explains the next); the generic
protobuf decoder and the CRC-32C live in ``_protobuf`` and ``_crc32c``.
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._crc32c import crc32c, crc32c_many, mask, mask_many
from rlvitals.importers._protobuf import Field, Message, ProtobufError, decode, read_varint
from rlvitals.importers._source import is_regular, walk_tree
from rlvitals.recording.memory import protobuf_bytes
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts, facts_from_config

__all__ = ["MAX_RECORD_BYTES", "find_event_files", "iter_records", "load_tensorboard"]

MAX_RECORD_BYTES = 16 << 20
"""Records larger than this (images, graphs, embeddings) are skipped without being read."""
MAX_FILES = 10_000
"""A directory with more event files than this is an error rather than an endless scan."""
_SNIFF_WALK_ENTRIES = 2_000
_LOAD_WALK_ENTRIES = 1_000_000
_READ_CHUNK = 4 << 20
_HEAD = 12  # uint64 length + uint32 masked crc
_FOOT = 4  # uint32 masked crc of the data
_ZERO_SCAN = 1 << 20
_MAX_ARGS_JSON = 1 << 20
_LEN_CRC_CACHE_MAX = 4096
_len_crc_cache: dict[bytes, int] = {}
_EVAL_DIRS = frozenset({"eval", "evaluation", "val", "valid", "validation", "test"})
_ARGS_TAGS = frozenset({"args", "args/text_summary"})
_NAME_TS = re.compile(r"tfevents\.(\d+)")
_F32 = struct.Struct("<f")

# --- the protobuf messages read (field numbers from tensorflow/core/util/event.proto,
# summary.proto, tensor.proto, tensor_shape.proto) ---------------------------------------
_DIM = Message("TensorShapeProto.Dim", {1: Field("size", "int64")})
_SHAPE = Message("TensorShapeProto", {2: Field("dim", _DIM, repeated=True)})
_TENSOR = Message(
    "TensorProto",
    {
        1: Field("dtype", "enum"),
        2: Field("tensor_shape", _SHAPE),
        4: Field("tensor_content", "bytes"),
        5: Field("float_val", "float", repeated=True),
        6: Field("double_val", "double", repeated=True),
        7: Field("int_val", "int32", repeated=True),
        8: Field("string_val", "bytes", repeated=True),
        10: Field("int64_val", "int64", repeated=True),
        11: Field("bool_val", "bool", repeated=True),
        13: Field("half_val", "int32", repeated=True),
        16: Field("uint32_val", "uint32", repeated=True),
        17: Field("uint64_val", "uint64", repeated=True),
    },
)
_VALUE = Message(
    "Summary.Value",
    {
        1: Field("tag", "string"),
        7: Field("node_name", "string"),
        2: Field("simple_value", "float"),
        8: Field("tensor", _TENSOR),
    },
)
_SUMMARY = Message("Summary", {1: Field("value", _VALUE, repeated=True)})
_EVENT = Message(
    "Event",
    {2: Field("step", "int64"), 3: Field("file_version", "string"), 5: Field("summary", _SUMMARY)},
)

# TensorFlow DataType → (numpy dtype of tensor_content, name of the repeated *_val field)
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_UINT8, _DT_INT16, _DT_INT8 = 1, 2, 3, 4, 5, 6
_DT_STRING, _DT_INT64, _DT_BOOL, _DT_BFLOAT16, _DT_UINT16, _DT_HALF = 7, 9, 10, 14, 17, 19
_DT_UINT32, _DT_UINT64 = 22, 23
_DTYPES: dict[int, tuple[str, str]] = {
    _DT_FLOAT: ("<f4", "float_val"),
    _DT_DOUBLE: ("<f8", "double_val"),
    _DT_INT32: ("<i4", "int_val"),
    _DT_UINT8: ("u1", "int_val"),
    _DT_INT16: ("<i2", "int_val"),
    _DT_INT8: ("i1", "int_val"),
    _DT_INT64: ("<i8", "int64_val"),
    _DT_BOOL: ("?", "bool_val"),
    _DT_UINT16: ("<u2", "int_val"),
    _DT_HALF: ("<u2", "half_val"),
    _DT_BFLOAT16: ("<u2", "half_val"),
    _DT_UINT32: ("<u4", "uint32_val"),
    _DT_UINT64: ("<u8", "uint64_val"),
}


# --- framing ---------------------------------------------------------------------------------
def _length_ok(head8: bytes, stored: int) -> bool:
    expected = _len_crc_cache.get(head8)
    if expected is None:
        expected = mask(crc32c(head8))
        if len(_len_crc_cache) < _LEN_CRC_CACHE_MAX:
            _len_crc_cache[head8] = expected
    return expected == stored


def _zeros_to_end(f, offset: int) -> bool:
    f.seek(offset)
    while True:
        block = f.read(_ZERO_SCAN)
        if not block:
            return True
        if block.count(0) != len(block):
            return False


class _Stats:
    """What :func:`iter_records` noticed; turned into warnings by the caller."""

    def __init__(self) -> None:
        self.bad_data_crc = 0
        self.first_bad_data_crc: int | None = None
        self.too_large = 0
        self.torn: int | None = None
        self.zero_tail: int | None = None


def iter_records(
    path: Path,
    stats: _Stats | None = None,
    verify_data_crc: bool = True,
    progress: Progress | None = None,
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(byte_offset, payload)`` for each TFRecord of ``path`` with valid checksums.

    Memory stays within one read chunk (4 MiB) plus the largest record kept
    (:data:`MAX_RECORD_BYTES`). Raises :class:`InputError` when the framing is lost.
    """
    stats = stats or _Stats()
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        buf = b""
        base = 0  # file offset of buf[0]
        pos = 0
        eof = False
        while True:
            batch: list[tuple[int, int, int]] = []  # (data start in buf, length, stored crc)
            need = _HEAD
            n = len(buf)
            while n - pos >= _HEAD:
                length, stored_len_crc = struct.unpack_from("<QI", buf, pos)
                if not _length_ok(buf[pos : pos + 8], stored_len_crc):
                    yield from _flush(buf, base, batch, stats, verify_data_crc, path)
                    batch = []
                    if _zeros_to_end(f, base + pos):
                        stats.zero_tail = base + pos
                        return
                    raise InputError(
                        path,
                        "bad length checksum: not a TFRecord file, or corrupted",
                        f"byte {base + pos}",
                    )
                size = _HEAD + length + _FOOT
                if length > MAX_RECORD_BYTES:
                    if base + pos + size > total:
                        break  # torn; reported at end of file
                    yield from _flush(buf, base, batch, stats, verify_data_crc, path)
                    batch = []
                    stats.too_large += 1
                    base, pos, buf, n = base + pos + size, 0, b"", 0
                    f.seek(base)
                    continue
                if n - pos < size:
                    need = size
                    break
                end = pos + _HEAD + length
                batch.append((pos + _HEAD, length, struct.unpack_from("<I", buf, end)[0]))
                pos += size
            yield from _flush(buf, base, batch, stats, verify_data_crc, path)
            if eof:
                break
            rest = buf[pos:]
            chunk = f.read(min(max(_READ_CHUNK, need - len(rest)), max(total - f.tell(), 1)))
            if not chunk:
                eof = True
            base += pos
            buf, pos = rest + chunk, 0
            if progress is not None:
                progress(base + len(buf), total)
        if pos < len(buf):
            stats.torn = base + pos


def _flush(
    buf: bytes,
    base: int,
    batch: list[tuple[int, int, int]],
    stats: _Stats,
    verify: bool,
    path: Path,
) -> Iterator[tuple[int, bytes]]:
    if not batch:
        return
    if verify:
        arr = np.frombuffer(buf, dtype=np.uint8)
        meta = np.array(batch, dtype=np.int64)
        computed = mask_many(crc32c_many(arr, meta[:, 0], meta[:, 1]))
        ok = (computed == meta[:, 2].astype(np.uint32)).tolist()
    else:
        ok = [True] * len(batch)
    for (start, length, _), good in zip(batch, ok):
        if not good:
            stats.bad_data_crc += 1
            if stats.first_bad_data_crc is None:
                stats.first_bad_data_crc = base + start - _HEAD
            continue
        yield base + start - _HEAD, buf[start : start + length]


# --- events ----------------------------------------------------------------------------------
def _tensor_value(t: dict[str, Any]) -> float | None:
    """The number held by a one-element numeric tensor, else None."""
    dims = t.get("tensor_shape", {}).get("dim", [])
    if any(d.get("size", 0) != 1 for d in dims):
        return None
    dtype = t.get("dtype", 0)
    info = _DTYPES.get(dtype)
    if info is None:
        return None
    np_dtype, field = info
    content = t.get("tensor_content")
    if content:
        dt = np.dtype(np_dtype)
        if len(content) != dt.itemsize:
            return None
        raw = np.frombuffer(content, dtype=dt)[0]
    else:
        vals = t.get(field)
        if not vals or len(vals) != 1:
            return None
        raw = vals[0]
    if field == "half_val":  # 16 bits of an IEEE half or a bfloat16
        bits = int(raw) & 0xFFFF
        if dtype == _DT_BFLOAT16:
            return float(np.array([bits << 16], dtype=np.uint32).view(np.float32)[0])
        return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])
    return float(raw)


def _text_value(t: dict[str, Any]) -> str | None:
    if t.get("dtype") != _DT_STRING:
        return None
    vals = t.get("string_val") or []
    if len(vals) != 1 or len(vals[0]) > _MAX_ARGS_JSON:
        return None
    return vals[0].decode("utf-8", "replace")


def _parse_args(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if text.startswith("```"):  # markdown code fence
        text = text.strip("`").removeprefix("json").strip()
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _fast_scalar(p: bytes) -> tuple[int, str, float] | None:
    """``(step, tag, value)`` of the common event shape, else None (then :func:`decode` runs).

    The shape torch.utils.tensorboard and tensorboardX write for ``add_scalar``: optional
    ``wall_time``, optional ``step``, and a summary of exactly one value holding only a ``tag``
    and a ``simple_value``, in field order. Anything else, however valid, returns None.
    """
    n = len(p)
    pos = 9 if n > 9 and p[0] == 0x09 else 0  # wall_time: tag + 8 bytes
    step = 0
    if pos < n and p[pos] == 0x10:
        step, pos = read_varint(p, pos + 1, n)
        if step >= 1 << 63:
            step -= 1 << 64
    if pos + 2 > n or p[pos] != 0x2A:  # summary (5, length-delimited)
        return None
    size, pos = read_varint(p, pos + 1, n)
    if pos + size != n or pos + 2 > n or p[pos] != 0x0A:  # Summary.value (1)
        return None
    size, pos = read_varint(p, pos + 1, n)
    if pos + size != n or pos + 2 > n or p[pos] != 0x0A:  # Value.tag (1)
        return None
    size, pos = read_varint(p, pos + 1, n)
    end = pos + size
    if end + 5 != n or p[end] != 0x15:  # Value.simple_value (2, fixed32), then the end
        return None
    return step, p[pos:end].decode("utf-8", "replace"), _F32.unpack_from(p, end + 1)[0]


def event_scalars(payload: bytes) -> tuple[int, list[tuple[str, float]], dict | None]:
    """Decode one Event: ``(step, [(tag, value), ...], args_config_or_None)``."""
    fast = _fast_scalar(payload)
    if fast is not None and fast[1]:
        return fast[0], [(fast[1], fast[2])], None
    ev = decode(payload, _EVENT, max_bytes=protobuf_bytes(len(payload)))
    step = ev.get("step", 0)
    summary = ev.get("summary")
    if not summary:
        return step, [], None
    out = []
    config = None
    for v in summary.get("value", ()):
        tag = v.get("tag") or v.get("node_name")
        if not tag:
            continue
        if "simple_value" in v:
            out.append((tag, v["simple_value"]))
        elif "tensor" in v:
            x = _tensor_value(v["tensor"])
            if x is not None:
                out.append((tag, x))
            elif tag in _ARGS_TAGS:
                text = _text_value(v["tensor"])
                config = _parse_args(text) if text is not None else None
    return step, out, config


# --- files and directories -------------------------------------------------------------------
def _is_event_file(name: str) -> bool:
    return "tfevents" in name


def find_event_files(root: Path, max_entries: int = _LOAD_WALK_ENTRIES) -> list[Path]:
    """Event files under ``root`` (or ``[root]`` for a file), oldest first by name timestamp."""
    if root.is_file():
        return [root]
    found: list[Path] = []
    seen = 0
    for dirpath, dirnames, filenames in walk_tree(root, max_entries + 1):
        seen += len(dirnames) + len(filenames)
        found.extend(
            Path(dirpath) / n
            for n in sorted(filenames)
            if _is_event_file(n) and is_regular(os.path.join(dirpath, n))  # never a FIFO
        )
        if seen > max_entries or len(found) > MAX_FILES:
            if max_entries < _LOAD_WALK_ENTRIES:
                break
            raise InputError(root, f"more than {MAX_FILES} event files or {max_entries} entries")

    def key(p: Path) -> tuple[int, str]:
        m = _NAME_TS.search(p.name)
        return (int(m.group(1)) if m else 0, str(p))

    return sorted(found, key=key)


def _series_name(tag: str, run_dir: str) -> str:
    parent, _, leaf = run_dir.rpartition("/")
    prefix = tag.replace("/", "_") + "_"
    if leaf.startswith(prefix) and len(leaf) > len(prefix):  # torch: add_scalars(main, {k: v})
        return f"{tag}/{leaf[len(prefix) :]}"
    if leaf and (parent == tag or parent.endswith("/" + tag)):  # tensorboardX: <main>/<k>/
        return f"{tag}/{leaf}"
    if leaf.lower() in _EVAL_DIRS and not is_eval_key(tag):
        return f"eval/{tag}"
    return tag


def load_tensorboard(
    path: Path, progress: Progress | None = None, *, verify_data_crc: bool = True
) -> Run:
    """Read a TensorBoard event file, or every event file under a directory, into a ``Run``.

    Args:
        path: an event file or a directory (searched recursively).
        progress: ``progress(done_bytes, total_bytes)`` over all files.
        verify_data_crc: check each record's data checksum (length checksums are always
            checked). Turning it off reads about 25% faster (200,000 scalar events).

    Raises:
        InputError: no event files, no scalars, or a file whose framing is broken.
    """
    path = Path(path)
    files = find_event_files(path)
    if not files:
        raise InputError(path, "no TensorBoard event files (events.out.tfevents.*) found")
    builder = RunBuilder(Manifest(source=str(path)))
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    done = 0
    spans: dict[str, list[int]] = {}  # run directory → [first step, last step]
    series_of: dict[str, set[str]] = {}  # run directory → series names
    n_values = 0
    for file, size in zip(files, sizes):
        run_dir = "" if file == path else file.parent.relative_to(path).as_posix()
        names = series_of.setdefault(run_dir, set())
        rename: dict[str, str] = {}
        lo = hi = None
        stats = _Stats()
        file_progress = None
        if progress is not None:
            file_progress = lambda d, t, off=done: progress(off + d, total)  # noqa: E731
        for offset, payload in iter_records(file, stats, verify_data_crc, file_progress):
            try:
                step, values, config = event_scalars(payload)
            except ProtobufError as e:
                raise InputError(
                    file, f"bad event record: {e.problem}", f"byte {offset + _HEAD + e.offset}"
                ) from None
            if config is not None:
                builder.manifest.config = config
                apply_facts(builder.manifest, facts_from_config(config))
            if not values:
                continue
            row = {}
            for tag, value in values:
                name = rename.get(tag)
                if name is None:
                    name = rename[tag] = _series_name(tag, run_dir)
                    names.add(name)
                row[name] = value
            builder.add_row(step, row)
            n_values += len(row)
            if lo is None:
                lo = hi = step
            elif step < lo:
                lo = step
            elif step > hi:
                hi = step
        if lo is not None:
            span = spans.setdefault(run_dir, [lo, hi])
            span[0], span[1] = min(span[0], lo), max(span[1], hi)
        _report(builder, file, stats)
        done += size
    if progress is not None:
        progress(total, total)
    if n_values == 0:
        raise InputError(path, f"no scalar summaries in {len(files)} event file(s)")
    _warn_overlaps(builder, spans, series_of)
    return builder.build()


def _report(builder: RunBuilder, file: Path, stats: _Stats) -> None:
    if stats.bad_data_crc:
        builder.warn(
            f"{file}: byte {stats.first_bad_data_crc}: {stats.bad_data_crc} record(s) with a bad "
            "data checksum skipped"
        )
    if stats.too_large:
        builder.warn(f"{file}: {stats.too_large} record(s) over {MAX_RECORD_BYTES} bytes skipped")
    if stats.zero_tail is not None:
        builder.warn(f"{file}: byte {stats.zero_tail}: zero-filled tail ignored (crashed writer?)")
    if stats.torn is not None:
        builder.warn(
            f"{file}: byte {stats.torn}: torn last record ignored (file still being written?)"
        )


def _warn_overlaps(
    builder: RunBuilder, spans: dict[str, list[int]], series_of: dict[str, set[str]]
) -> None:
    """Warn when two run directories with overlapping step ranges log the same series."""
    dirs = sorted(spans, key=lambda d: (spans[d][0], d))
    for i, a in enumerate(dirs):
        for b in dirs[i + 1 :]:
            if spans[b][0] > spans[a][1]:
                break
            shared = sorted(series_of[a] & series_of[b])
            if shared:
                builder.warn(
                    f"run directories {a or '.'!r} and {b or '.'!r} both log {shared[0]!r}"
                    f"{f' (and {len(shared) - 1} more)' if len(shared) > 1 else ''} over "
                    f"overlapping steps (from {spans[b][0]}); merged by step, later file wins"
                )


def _sniff(path: Path, head: bytes) -> float:
    if not head:
        if path.is_dir():
            files = find_event_files(path, _SNIFF_WALK_ENTRIES)
            if not files:
                return 0.0
            return 0.7 if any(f.parent == path for f in files) else 0.6
        return 0.0
    if len(head) < _HEAD + _FOOT:
        return 0.0
    length, len_crc = struct.unpack_from("<QI", head, 0)
    if not _length_ok(head[:8], len_crc):
        return 0.0
    end = _HEAD + length
    if end + _FOOT > len(head):
        return 0.8
    payload = head[_HEAD:end]
    if mask(crc32c(payload)) != struct.unpack_from("<I", head, end)[0]:
        return 0.5
    try:
        ev = decode(payload, _EVENT, max_bytes=protobuf_bytes(len(payload)))
    except ProtobufError:
        return 0.3
    return 0.99 if str(ev.get("file_version", "")).startswith("brain.Event") else 0.9


def _has_event_files(d: Path) -> bool:
    """A folder's claim is its own when event files sit in it, not only deeper."""
    try:
        return any("tfevents" in e.name and e.is_file() for e in os.scandir(d))
    except OSError:
        return False


register(
    Importer(
        name="tensorboard",
        description="TensorBoard event files (events.out.tfevents.*; a file or a directory)",
        sniff=_sniff,
        load=load_tensorboard,
        precheck=Precheck(marks=(b"brain.Event",), within=256, names=("tfevents",), dirs=True),
        files=("tfevents",),
        folder_claim=_has_event_files,
    )
)

"""The recording directory's on-disk layout, shared by the writer, the reader and the importer.

``docs/recording.md`` is the specification; this module holds its constants and the framing of
the binary groups stream. Nothing here writes files.

Frame (all integers little-endian)::

    magic  b"RLVg"   4 bytes
    length u32       payload bytes
    crc    u32       CRC-32 of the payload
    hcrc   u32       CRC-32 of the 12 bytes above (a corrupt length is never taken for a tear)
    payload          ``length`` bytes
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvitals._orjson import orjson_function

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "FRAME_HEADER",
    "MANIFEST_NAME",
    "STREAM_RE",
    "Frame",
    "GroupBlock",
    "ScanEnd",
    "decode_groups",
    "encode_event",
    "encode_frame",
    "encode_groups",
    "encode_prompts",
    "encode_scalars",
    "header_at",
    "is_torn",
    "jsonable",
    "scan_frames",
    "stream_name",
]

FORMAT_NAME = "rlvitals.recording"
"""Value of the manifest's ``format`` key; sniffing looks for it."""
FORMAT_VERSION = 1
"""Version of this layout; a reader refuses a newer one."""
MANIFEST_NAME = "manifest.json"

STREAM_EXT = {"scalars": "jsonl", "events": "jsonl", "groups": "bin"}
"""Stream kind → file extension. One file per kind and rank: ``<kind>.rank<r>.<ext>``."""
STREAM_RE = re.compile(r"^(scalars|events|groups)\.rank(0|[1-9][0-9]{0,8})\.(jsonl|bin)$")

FRAME_MAGIC = b"RLVg"
FRAME_HEADER = struct.Struct("<4sIII")
MAX_PAYLOAD = 1 << 31
"""A frame claiming a longer payload is corrupt (a step of groups is far smaller)."""

GROUP_HEADER = struct.Struct("<qIIBBBB")
"""Groups payload header: step i64, n_groups u32, n_rows u32, rewards dtype code, lengths dtype
code (0 = absent), advantages dtype code (0 = absent), prompt kind (0 = absent)."""

DTYPE_CODES: dict[int, np.dtype] = {
    1: np.dtype("<f4"),
    2: np.dtype("<f8"),
    3: np.dtype("<i4"),
    4: np.dtype("<i8"),
}
CODE_OF = {dt: code for code, dt in DTYPE_CODES.items()}

PROMPT_NONE, PROMPT_I64, PROMPT_U64, PROMPT_STR, PROMPT_BYTES = 0, 1, 2, 3, 4
"""Prompt id encodings: absent; 64-bit integers (hashes); utf-8 strings; raw bytes. Strings and
bytes are stored as ``n_groups`` u32 lengths followed by the concatenated bytes."""


def stream_name(kind: str, rank: int) -> str:
    """File name of one rank's stream.

    >>> stream_name("groups", 3)
    'groups.rank3.bin'
    """
    return f"{kind}.rank{rank}.{STREAM_EXT[kind]}"


def encode_frame(payload: bytes) -> bytes:
    """Frame ``payload``: header (magic, length, CRCs) + payload, as one bytes object."""
    head = FRAME_MAGIC + struct.pack("<II", len(payload), zlib.crc32(payload))
    return head + struct.pack("<I", zlib.crc32(head)) + payload


@dataclass(frozen=True)
class Frame:
    """A valid frame: its payload lies at ``buf[start:end]``; ``offset`` is where its header is."""

    offset: int
    start: int
    end: int


@dataclass(frozen=True)
class ScanEnd:
    """Where a scan stopped.

    Attributes:
        offset: first byte not covered by a valid frame; equals the size when the file is clean.
        torn: True when the bytes from ``offset`` to the end are the start of a frame that was
            being written (a torn tail); False for anything else (garbage, zeros, a bad CRC).
    """

    offset: int
    torn: bool


def header_at(buf: bytes, pos: int) -> tuple[int, int, int] | None:
    """``(payload_start, payload_end, payload_crc)`` of a well-formed header at ``pos``, or None.

    Checks the magic and the header CRC, not whether the payload is all there.
    """
    if len(buf) - pos < FRAME_HEADER.size:
        return None
    magic, length, crc, hcrc = FRAME_HEADER.unpack_from(buf, pos)
    if magic != FRAME_MAGIC or length > MAX_PAYLOAD or zlib.crc32(buf[pos : pos + 12]) != hcrc:
        return None
    start = pos + FRAME_HEADER.size
    return start, start + length, crc


def _valid_at(buf: bytes, pos: int) -> Frame | None:
    """The valid frame at ``pos``, or None."""
    head = header_at(buf, pos)
    if head is None:
        return None
    start, end, crc = head
    if end > len(buf) or zlib.crc32(memoryview(buf)[start:end]) != crc:
        return None
    return Frame(pos, start, end)


def is_torn(buf: bytes, pos: int) -> bool:
    """True when ``buf[pos:]`` is a proper prefix of some frame (a write cut short)."""
    rest = len(buf) - pos
    if rest < FRAME_HEADER.size:
        n = min(rest, len(FRAME_MAGIC))
        return bytes(buf[pos : pos + n]) == FRAME_MAGIC[:n]
    head = header_at(buf, pos)
    return head is not None and head[1] > len(buf)


def scan_frames(buf: bytes, pos: int = 0) -> Iterator[Frame | ScanEnd]:
    """Yield the valid frames of ``buf`` from ``pos`` on, in order, then one :class:`ScanEnd`.

    The scan stops at the first byte that does not start a valid frame; the caller decides
    whether what follows is a tail (:func:`rlvitals.recording._resync.next_valid` finds nothing) or a corrupt record in
    the middle (it finds a later frame).
    """
    size = len(buf)
    while pos < size:
        frame = _valid_at(buf, pos)
        if frame is None:
            yield ScanEnd(pos, is_torn(buf, pos))
            return
        yield frame
        pos = frame.end
    yield ScanEnd(size, False)


# --------------------------------------------------------------------------------------------
# Groups payload: one step of one rank.


@dataclass
class GroupBlock:
    """One decoded groups record.

    Attributes:
        step: training step.
        sizes: ``(k,)`` int64 rows per group, in sorted-group-id order.
        rewards: ``(m,)`` float32 or float64, ``m = sizes.sum()``.
        lengths, advantages: ``(m,)`` or None.
        prompts: ``k`` prompt ids: an int64/uint64 array, or a list of str or bytes; or None.
    """

    step: int
    sizes: np.ndarray
    rewards: np.ndarray
    lengths: np.ndarray | None
    advantages: np.ndarray | None
    prompts: np.ndarray | list | None


def encode_prompts(prompts: list | np.ndarray) -> tuple[int, bytes]:
    """``(kind, bytes)`` for per-group prompt ids (a list, or a 1-D numpy array).

    All Python/numpy integers that fit become 64-bit integers; all ``bytes`` stay bytes; anything
    else is stored as its ``str()`` in utf-8.

    >>> encode_prompts([1, 2])[0] == PROMPT_I64, encode_prompts(["a", 3])[0] == PROMPT_STR
    (True, True)
    """
    if isinstance(prompts, np.ndarray):
        if prompts.dtype.kind == "i" or (prompts.dtype.kind == "u" and prompts.dtype.itemsize < 8):
            return PROMPT_I64, prompts.astype("<i8", copy=False).tobytes()
        if prompts.dtype.kind == "u":
            return PROMPT_U64, prompts.astype("<u8", copy=False).tobytes()
        prompts = prompts.tolist()
    if all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in prompts):
        ints = [int(p) for p in prompts]
        if all(-(1 << 63) <= v < (1 << 63) for v in ints):
            return PROMPT_I64, np.asarray(ints, dtype="<i8").tobytes()
        if all(0 <= v < (1 << 64) for v in ints):
            return PROMPT_U64, np.asarray(ints, dtype="<u8").tobytes()
    if all(isinstance(p, (bytes, bytearray)) for p in prompts):
        kind, parts = PROMPT_BYTES, [bytes(p) for p in prompts]
    else:
        kind, parts = PROMPT_STR, [str(p).encode("utf-8", "surrogatepass") for p in prompts]
    return kind, struct.pack(f"<{len(parts)}I", *map(len, parts)) + b"".join(parts)


def encode_groups(
    step: int,
    sizes: np.ndarray,
    rewards: np.ndarray,
    lengths: np.ndarray | None,
    advantages: np.ndarray | None,
    prompts: tuple[int, bytes] | None,
) -> bytes:
    """Payload of one groups record. Arrays must already have a dtype of :data:`DTYPE_CODES`
    (rewards a float one) and be in row order; ``prompts`` comes from :func:`encode_prompts`."""
    parts = [
        GROUP_HEADER.pack(
            step,
            sizes.shape[0],
            rewards.shape[0],
            CODE_OF[rewards.dtype],
            0 if lengths is None else CODE_OF[lengths.dtype],
            0 if advantages is None else CODE_OF[advantages.dtype],
            PROMPT_NONE if prompts is None else prompts[0],
        ),
        sizes.astype("<u4", copy=False).tobytes(),
        rewards.tobytes(),
    ]
    if lengths is not None:
        parts.append(lengths.tobytes())
    if advantages is not None:
        parts.append(advantages.tobytes())
    if prompts is not None:
        parts.append(prompts[1])
    return b"".join(parts)


class _Cursor:
    def __init__(self, buf: memoryview):
        self.buf, self.pos = buf, 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError(f"groups record too short for its {what}")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def array(self, dtype: np.dtype, count: int, what: str) -> np.ndarray:
        # A read-only view: it keeps the file's bytes alive until the caller concatenates.
        return np.frombuffer(self.take(dtype.itemsize * count, what), dtype=dtype)


def _dtype(code: int, what: str) -> np.dtype:
    if code not in DTYPE_CODES:
        raise ValueError(f"unknown {what} dtype code {code}")
    return DTYPE_CODES[code]


def decode_groups(payload: memoryview) -> GroupBlock:
    """Parse a groups payload; ValueError (with a short reason) when it is malformed."""
    cur = _Cursor(payload)
    step, k, m, rcode, lcode, acode, pkind = GROUP_HEADER.unpack(
        cur.take(GROUP_HEADER.size, "header")
    )
    rdt = _dtype(rcode, "rewards")
    if rdt.kind != "f":
        raise ValueError("rewards must be floating point")
    sizes = cur.array(np.dtype("<u4"), k, "sizes").astype(np.int64)
    if int(sizes.sum()) != m:
        raise ValueError(f"group sizes add up to {int(sizes.sum())}, not {m} rows")
    rewards = cur.array(rdt, m, "rewards")
    lengths = cur.array(_dtype(lcode, "lengths"), m, "lengths") if lcode else None
    advantages = cur.array(_dtype(acode, "advantages"), m, "advantages") if acode else None
    prompts: np.ndarray | list | None = None
    if pkind in (PROMPT_I64, PROMPT_U64):
        dt = np.dtype("<i8" if pkind == PROMPT_I64 else "<u8")
        prompts = cur.array(dt, k, "prompt ids")
    elif pkind in (PROMPT_STR, PROMPT_BYTES):
        lens = cur.array(np.dtype("<u4"), k, "prompt lengths")
        prompts = []
        for n in lens.tolist():
            raw = bytes(cur.take(n, "prompt ids"))
            if pkind == PROMPT_BYTES:
                prompts.append(raw)
            else:
                try:
                    prompts.append(raw.decode("utf-8", "surrogatepass"))
                except UnicodeDecodeError:
                    raise ValueError("prompt id is not valid utf-8") from None
    elif pkind != PROMPT_NONE:
        raise ValueError(f"unknown prompt kind {pkind}")
    if cur.pos != len(payload):
        raise ValueError(f"{len(payload) - cur.pos} unexpected bytes after the record")
    return GroupBlock(step, sizes, rewards, lengths, advantages, prompts)


# --------------------------------------------------------------------------------------------
# Text streams.


def encode_scalars(step: int, values: dict[str, float]) -> bytes:
    """One scalars line: ``{"step", "time", "values"}`` + newline, utf-8 (NaN/Infinity bare).

    >>> encode_scalars(3, {"loss": float("nan")})[:17]
    b'{"step":3,"time":'
    """
    rec = {"step": step, "time": round(time.time(), 3), "values": values}
    dumps = _fast_dumps()
    if dumps is not None and math.isfinite(sum(values.values())):
        try:  # the same line up to number spelling (1e+16 / 1e16): it reads back the same
            return dumps(rec) + b"\n"
        except TypeError:  # a lone surrogate in a key, a float subclass: json's way
            pass
    return (json.dumps(rec, separators=(",", ":")) + "\n").encode("utf-8", "surrogatepass")


_DUMPS: list[Any] = []


def _fast_dumps() -> Any:
    """``orjson.dumps`` (~10x ``json.dumps`` on a row of metrics, a dependency) unless
    ``RLVITALS_JSON=stdlib`` or it is missing; looked up on the first scalars row. It writes
    NaN and inf as ``null``, so rows holding one take ``json.dumps`` (bare ``NaN``)."""
    if not _DUMPS:
        _DUMPS.append(orjson_function("dumps"))
    return _DUMPS[0]


def jsonable(o: Any) -> Any:
    """``json.dumps(default=...)``: numpy/torch values as numbers or lists, paths as str,
    anything else its ``repr``."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if type(o).__module__.startswith("torch") and hasattr(o, "tolist"):
        return o.detach().cpu().tolist()
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    return repr(o)


def encode_event(step: int | None, kind: str, message: str, data: dict[str, Any]) -> bytes:
    """One events line: ``{"step", "time", "kind", "message", "data"}`` + newline, utf-8."""
    rec = {"step": step, "time": round(time.time(), 3), "kind": kind, "message": message}
    try:
        line = json.dumps({**rec, "data": data}, separators=(",", ":"), default=jsonable)
    except (TypeError, ValueError):  # non-string keys deep inside, cycles: keep what we can
        safe = {
            str(k): jsonable(v) if not isinstance(v, (int, float, str)) else v
            for k, v in data.items()
        }
        try:
            line = json.dumps({**rec, "data": safe}, separators=(",", ":"), default=jsonable)
        except (TypeError, ValueError):
            line = json.dumps({**rec, "data": {k: repr(v) for k, v in safe.items()}})
    return (line + "\n").encode("utf-8", "surrogatepass")

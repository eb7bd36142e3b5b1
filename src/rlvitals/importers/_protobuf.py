"""A minimal, defensive decoder of the protobuf wire format (no ``protobuf`` package needed).

Only what the binary importers need: varints (int32/int64/uint/sint/bool/enum), fixed32 and
fixed64 (float, double), and length-delimited fields (strings, bytes, nested messages, packed
repeated numbers). Decoding is driven by a :class:`Message` schema that names the fields to keep;
every other field is skipped without being decoded.

Safety: the decoder never allocates more than the input it is given (a declared length must fit
inside the enclosing message, so a huge length is an error, not an allocation), every loop
advances, and nesting is bounded by :data:`MAX_DEPTH`. Malformed input raises
:class:`ProtobufError` with the byte offset of the problem inside the buffer.

>>> ev = Message("Event", {2: Field("step", "int64"), 3: Field("file_version", "string")})
>>> decode(bytes([0x10, 0x07, 0x1A, 0x02]) + b"v2", ev)
{'step': 7, 'file_version': 'v2'}
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "Field",
    "Message",
    "ProtobufError",
    "decode",
    "read_varint",
]

MAX_DEPTH = 32
"""Deepest nesting of messages decoded; deeper input is an error rather than a stack overflow."""

WIRE_VARINT, WIRE_FIXED64, WIRE_LEN, WIRE_START_GROUP, WIRE_END_GROUP, WIRE_FIXED32 = range(6)
_MAX_VARINT_BYTES = 10
_U64 = (1 << 64) - 1

_VARINT_KINDS = frozenset(
    {"int64", "int32", "uint64", "uint32", "bool", "enum", "sint64", "sint32"}
)
_FIXED64_KINDS = {"double": "<d", "fixed64": "<Q", "sfixed64": "<q"}
_FIXED32_KINDS = {"float": "<f", "fixed32": "<I", "sfixed32": "<i"}
_LEN_KINDS = frozenset({"string", "bytes"})


class ProtobufError(ValueError):
    """Malformed protobuf input; ``offset`` is the byte position of the problem in the buffer."""

    def __init__(self, problem: str, offset: int):
        super().__init__(f"{problem} (byte {offset})")
        self.problem = problem
        self.offset = offset


@dataclass(frozen=True)
class Field:
    """One field of a :class:`Message` schema.

    Attributes:
        name: key in the decoded dict.
        kind: a scalar kind (``int64``, ``int32``, ``uint64``, ``uint32``, ``sint64``,
            ``sint32``, ``bool``, ``enum``, ``double``, ``float``, ``fixed64``, ``fixed32``,
            ``sfixed64``, ``sfixed32``, ``string``, ``bytes``) or a nested :class:`Message`.
        repeated: collect every occurrence in a list (packed or not); otherwise the last wins.
    """

    name: str
    kind: str | Message
    repeated: bool = False

    def __post_init__(self) -> None:
        k = self.kind
        if isinstance(k, str) and not (
            k in _VARINT_KINDS or k in _FIXED64_KINDS or k in _FIXED32_KINDS or k in _LEN_KINDS
        ):
            raise ValueError(f"unknown field kind {k!r}")


class Message:
    """A schema: field number → :class:`Field`. Fields not listed are skipped when decoding."""

    def __init__(self, name: str, fields: dict[int, Field] | None = None):
        self.name = name
        self.fields: dict[int, Field] = dict(fields or {})

    def __repr__(self) -> str:
        return f"Message({self.name!r}, {sorted(self.fields)})"


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Decode one base-128 varint at ``buf[pos:end]``; returns ``(value, new_pos)``.

    The value is the raw unsigned 64-bit number (at most 10 bytes are read).

    >>> read_varint(bytes([0xAC, 0x02]), 0, 2)
    (300, 2)
    """
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise ProtobufError("truncated varint", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _U64, pos
        shift += 7
        if pos - start >= _MAX_VARINT_BYTES:
            raise ProtobufError("varint longer than 10 bytes", start)


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _varint_value(kind: str, v: int) -> Any:
    if kind in ("int64", "enum"):
        return _signed(v, 64) if kind == "int64" else _signed(v, 32)
    if kind == "int32":
        return _signed(v, 32)
    if kind == "uint32":
        return v & 0xFFFFFFFF
    if kind == "bool":
        return v != 0
    if kind in ("sint64", "sint32"):
        return (v >> 1) ^ -(v & 1)
    return v  # uint64


def _packed(buf: bytes, lo: int, hi: int, kind: str, number: int) -> list[Any]:
    if kind in _FIXED32_KINDS or kind in _FIXED64_KINDS:
        fmt = _FIXED32_KINDS.get(kind) or _FIXED64_KINDS[kind]
        size = struct.calcsize(fmt)
        if (hi - lo) % size:
            raise ProtobufError(f"packed field {number} is not a multiple of {size} bytes", lo)
        count = (hi - lo) // size
        return list(struct.unpack_from(f"<{count}{fmt[1]}", buf, lo))
    out = []
    pos = lo
    while pos < hi:
        v, pos = read_varint(buf, pos, hi)
        out.append(_varint_value(kind, v))
    return out


def decode(
    buf: bytes,
    schema: Message,
    start: int = 0,
    end: int | None = None,
    depth: int = 0,
    *,
    max_bytes: int | None = None,
) -> dict[str, Any]:
    """Decode the fields of ``schema`` from ``buf[start:end]`` into a dict.

    Absent fields are absent from the dict (no proto3 defaults are filled in). Repeated fields
    are lists; for a non-repeated field the last occurrence wins (nested messages are not
    merged). Strings are decoded as UTF-8 with replacement characters for invalid bytes.
    Raises :class:`ProtobufError` on malformed input, nesting deeper than :data:`MAX_DEPTH`, or
    decoded objects that would take more than ``max_bytes`` (estimated as they are made: a
    2-byte empty message becomes a 200-byte dict, so a crafted record of them would take 100x
    its size).
    """
    budget = None if max_bytes is None else [max_bytes]
    return _decode(buf, schema, start, end, depth, budget)


# Estimated bytes of the Python objects decoding makes (CPython 3.11): a small dict, a str or
# bytes object (plus its characters), a list slot, a packed number.
_COST_MESSAGE, _COST_STRING, _COST_SLOT, _COST_NUMBER = 200, 56, 8, 32


def _spend(budget: list[int], n: int, at: int) -> None:
    budget[0] -= n
    if budget[0] < 0:
        raise ProtobufError("memory limit: decoded, it would take far more than its size", at)


def _decode(
    buf: bytes, schema: Message, start: int, end: int | None, depth: int, budget: list[int] | None
) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise ProtobufError(f"messages nested deeper than {MAX_DEPTH}", start)
    if end is None:
        end = len(buf)
    fields = schema.fields
    out: dict[str, Any] = {}
    pos = start
    # One pass over the fields, inlined: this is the hot path of every binary importer.
    while pos < end:
        at = pos
        b = buf[pos]
        if b < 0x80:
            tag = b
            pos += 1
        else:
            tag, pos = read_varint(buf, pos, end)
        number, wire = tag >> 3, tag & 7
        if number == 0:
            raise ProtobufError("field number 0", at)
        if wire == WIRE_LEN:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = read_varint(buf, pos, end)
            if n > end - pos:
                raise ProtobufError(f"field {number} declares {n} bytes, {end - pos} left", at)
            lo = pos
            pos += n
            f = fields.get(number)
            if f is None:
                continue
            kind = f.kind
            if kind.__class__ is Message:
                if budget is not None:
                    _spend(budget, _COST_MESSAGE + f.repeated * _COST_SLOT, at)
                v: Any = _decode(buf, kind, lo, pos, depth + 1, budget)
            elif kind in _LEN_KINDS:
                if budget is not None:
                    _spend(budget, _COST_STRING + f.repeated * _COST_SLOT + n, at)
                v = bytes(buf[lo:pos])
                if kind == "string":
                    v = v.decode("utf-8", "replace")
            elif f.repeated:
                if budget is not None:
                    size = struct.calcsize(
                        _FIXED32_KINDS.get(kind) or _FIXED64_KINDS.get(kind) or "B"
                    )
                    _spend(budget, (_COST_NUMBER + _COST_SLOT) * (n // size), at)
                out.setdefault(f.name, []).extend(_packed(buf, lo, pos, kind, number))
                continue
            else:
                raise ProtobufError(f"field {number} ({f.name}) has wire type 2, not {kind}", at)
        elif wire == WIRE_VARINT:
            if pos < end and buf[pos] < 0x80:
                value = buf[pos]
                pos += 1
            else:
                value, pos = read_varint(buf, pos, end)
            f = fields.get(number)
            if f is None:
                continue
            if f.kind not in _VARINT_KINDS:
                raise ProtobufError(f"field {number} ({f.name}) has wire type 0, not {f.kind}", at)
            v = _varint_value(f.kind, value)
            if budget is not None and f.repeated:
                _spend(budget, _COST_NUMBER + _COST_SLOT, at)
        elif wire in (WIRE_FIXED64, WIRE_FIXED32):
            size = 8 if wire == WIRE_FIXED64 else 4
            if pos + size > end:
                raise ProtobufError(f"truncated fixed{size * 8} field {number}", at)
            lo = pos
            pos += size
            f = fields.get(number)
            if f is None:
                continue
            table = _FIXED64_KINDS if wire == WIRE_FIXED64 else _FIXED32_KINDS
            fmt = table.get(f.kind) if f.kind.__class__ is str else None
            if fmt is None:
                raise ProtobufError(
                    f"field {number} ({f.name}) has wire type {wire}, not {f.kind}", at
                )
            v = struct.unpack_from(fmt, buf, lo)[0]
            if budget is not None and f.repeated:
                _spend(budget, _COST_NUMBER + _COST_SLOT, at)
        else:
            raise ProtobufError(f"unsupported wire type {wire} (field {number})", at)
        if f.repeated:
            out.setdefault(f.name, []).append(v)
        else:
            out[f.name] = v
    return out

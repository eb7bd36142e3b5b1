"""How much memory reading one input may take: a small multiple of its size, plus a constant.

A bounded line or record can still expand without bound once parsed: a 60 MB JSON line of
``{}`` is 1.7 GB of dicts, a line of a million unique keys is a million cached columns. So
everything an importer keeps while reading is measured against :func:`limit`:

- :func:`check_json` refuses a JSON text whose parsed form would exceed :data:`JSON_FACTOR` times
  its size (estimated from its brackets, commas and colons before it is parsed);
- :class:`rlvitals.recording.RunBuilder` refuses to hold more than :func:`limit` bytes of
  columns, keys and the final dense series;
- the protobuf decoder refuses a record that would expand into more objects than its size
  allows (:func:`protobuf_bytes`).

:func:`reading` (entered by :func:`rlvitals.importers.load`) sets the budget for one input:
:data:`MEMORY_FACTOR` times its size (a file's size, a directory's files, or the bytes of a
stream or a decompressed file as they are read: :func:`note_read`) plus :data:`MEMORY_BASE`.
Outside :func:`reading` nothing is limited. Every refusal is an :class:`InputError` saying
which limit was hit.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

from rlvitals.errors import InputError

__all__ = [
    "JSON_FACTOR",
    "MEMORY_BASE",
    "MEMORY_FACTOR",
    "check_fields",
    "check_json",
    "input_bytes",
    "limit",
    "limit_text",
    "note_read",
    "protobuf_bytes",
    "reading",
]

MEMORY_FACTOR = 4
"""Bytes an importer may hold per byte of input (columns, keys, the dense series)."""
MEMORY_BASE = 256 << 20
"""Bytes an importer may hold whatever the input's size."""
JSON_FACTOR = 6
"""A JSON text (a line, a whole file) may parse into at most this many bytes per byte of text..."""
JSON_BASE = 64 << 20
"""... plus this many."""
JSON_CHECK_BYTES = 1 << 20
"""Shorter JSON texts are not estimated: they cannot expand past :data:`JSON_BASE`."""
PROTOBUF_FACTOR = 16
"""A protobuf record may decode into at most this many bytes of objects per byte (a real W&B
history item of 25 bytes is a 300-byte dict with two strings; a crafted empty one of 2 bytes
is a 200-byte dict)..."""
PROTOBUF_BASE = 16 << 20
"""... plus this many."""

# Bytes of Python objects json.loads makes per character (CPython 3.11, measured): an object
# or array 64-72, a dict entry (key string and slot) about 100, a list element or number 8-60.
_COST_CONTAINER = 72
_COST_ENTRY = 100
_COST_ITEM = 60
_COST_FIELD = 200  # a parsed "key:value" field: its split-off text, key string, float, dict slot


class _Budget:
    def __init__(self, static: int):
        self.static = static
        self.streamed = 0


_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "rlvitals_memory_budget", default=None
)


@contextlib.contextmanager
def reading(static_bytes: int) -> Iterator[None]:
    """Set the memory budget for reading one input of ``static_bytes`` (0 when unknown: a
    stream, whose bytes count as they are read)."""
    token = _BUDGET.set(_Budget(max(0, int(static_bytes))))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def note_read(total: int) -> None:
    """Readers of streams and compressed files report the bytes read so far."""
    b = _BUDGET.get()
    if b is not None and total > b.streamed:
        b.streamed = total


def input_bytes() -> int | None:
    """The size of the input being read (what the budget scales with), or None."""
    b = _BUDGET.get()
    return None if b is None else max(b.static, b.streamed)


def limit() -> int | None:
    """Bytes an importer may hold now, or None outside :func:`reading`."""
    n = input_bytes()
    return None if n is None else MEMORY_BASE + MEMORY_FACTOR * n


def limit_text() -> str:
    """How the limit is computed, for messages."""
    n = input_bytes() or 0
    return f"{MEMORY_FACTOR}x the input ({_mib(n)}) + {_mib(MEMORY_BASE)}"


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 10 << 20 else f"{n / (1 << 20):.1f} MiB"


def json_cost(text: bytes | str) -> int:
    """Estimated bytes of the objects ``json.loads(text)`` makes (an upper bound, roughly)."""
    marks = ("{", "[", ":", ",") if isinstance(text, str) else (b"{", b"[", b":", b",")
    brace, bracket, colon, comma = marks
    return (
        _COST_CONTAINER * (text.count(brace) + text.count(bracket))
        + _COST_ENTRY * text.count(colon)
        + _COST_ITEM * text.count(comma)
    )


def check_json(path: str | os.PathLike | None, text: bytes | str, where: str | None) -> None:
    """InputError when parsing ``text`` would make more than :data:`JSON_FACTOR` times its size
    (+ :data:`JSON_BASE`) of objects: a line of ``[{},{},...]`` is refused before it is parsed."""
    n = len(text)
    if n < JSON_CHECK_BYTES:
        return
    cost = json_cost(text)
    allowed = JSON_FACTOR * n + JSON_BASE
    if cost > allowed:
        raise InputError(
            path,
            f"memory limit: this {_mib(n)} of JSON is dense enough to need ~{_mib(cost)} once "
            f"parsed (more than {JSON_FACTOR}x its size + {_mib(JSON_BASE)}); refusing to parse it",
            where,
        )


def check_fields(path: str | os.PathLike | None, fields: int, size: int, where: str | None) -> None:
    """InputError when a text of ``size`` bytes split into ``fields`` parsed fields (a console
    line's ``key:value`` pairs) would take more than :data:`JSON_FACTOR` times its size: a
    line of a million two-byte fields is a million dict entries."""
    if size < JSON_CHECK_BYTES:
        return
    cost = _COST_FIELD * fields
    if cost > JSON_FACTOR * size + JSON_BASE:
        raise InputError(
            path,
            f"memory limit: {fields} fields in {_mib(size)} of text would need ~{_mib(cost)} "
            f"once parsed (more than {JSON_FACTOR}x its size + {_mib(JSON_BASE)}); refusing it",
            where,
        )


def protobuf_bytes(n_bytes: int) -> int:
    """Bytes of objects a protobuf record of ``n_bytes`` may decode into."""
    return PROTOBUF_BASE + PROTOBUF_FACTOR * n_bytes

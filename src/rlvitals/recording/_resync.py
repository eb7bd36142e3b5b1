"""Resynchronising a groups stream after a corrupt frame, in time linear in its size.

Used by the reader (every corrupt record in the middle of a stream) and by the writer (is a bad
tail followed by valid frames?). See :class:`Resync`.
"""

from __future__ import annotations

import bisect
import zlib

import numpy as np

from rlvitals.recording.layout import FRAME_HEADER, FRAME_MAGIC, MAX_PAYLOAD, Frame

__all__ = ["DIRECT_CRC_FACTOR", "Resync", "crc_shift", "next_valid"]


class Resync:
    """Finds valid frames after a corruption in time linear in the buffer, however crafted.

    Checking each candidate header's payload CRC on its own is quadratic when many valid-looking
    headers claim long, overlapping payloads (a crafted 4 MB stream took minutes). Instead, the
    first :meth:`after` indexes every valid frame from that point on, once:

    1. candidates: every ``RLVg`` whose 12-byte header CRC is right and whose payload fits
       (numpy, vectorised over all of them);
    2. payload CRCs: computed directly when the claimed payloads add up to no more than
       :data:`DIRECT_CRC_FACTOR` times the bytes scanned (the normal case: real frames do not
       overlap); otherwise from CRC states at every payload start and end, taken in one pass
       over the buffer, and the CRC algebra ``crc(payload) = state(end) ^ shift(state(start),
       length)`` (the shift by ``length`` zero bytes is a 32x32 bit matrix, applied to all
       candidates at once with byte tables for each power of two).

    Later calls bisect the index.
    """

    def __init__(self, buf: bytes):
        self.buf = buf
        self._from = -1
        self._offsets: list[int] = []
        self._frames: list[Frame] = []

    def after(self, pos: int) -> Frame | None:
        """The first valid frame whose header starts after ``pos``, or None."""
        if self._from < 0 or pos + 1 < self._from:
            self._frames = _valid_frames(self.buf, pos + 1)
            self._offsets = [f.offset for f in self._frames]
            self._from = pos + 1
        i = bisect.bisect_left(self._offsets, pos + 1)
        return self._frames[i] if i < len(self._frames) else None


DIRECT_CRC_FACTOR = 4
"""Payload bytes :class:`Resync` checksums one by one, per byte scanned, before it switches to the
CRC algebra (a real stream's candidates never overlap, so they add up to less than 1x)."""
_CRC_POLY = 0xEDB88320  # zlib's CRC-32, reflected


def _crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_CRC_POLY), t >> 1).astype(np.uint32)
    return t


_CRC_TABLE = _crc_table()
_shift_levels: list[np.ndarray] = []  # level j: (4, 256) tables of "advance by 2**j zero bytes"


def _tables_of(units: np.ndarray) -> np.ndarray:
    """Byte tables (4, 256) of the GF(2)-linear map whose images of the 32 unit bits are
    ``units``."""
    byte = np.arange(256)
    out = np.zeros((4, 256), dtype=np.uint32)
    for k in range(4):
        for bit in range(8):
            out[k, (byte >> bit) & 1 == 1] ^= units[8 * k + bit]
    return out


def _apply(tables: np.ndarray, v: np.ndarray) -> np.ndarray:
    return (
        tables[0][v & 0xFF]
        ^ tables[1][(v >> 8) & 0xFF]
        ^ tables[2][(v >> 16) & 0xFF]
        ^ tables[3][v >> 24]
    )


def _shift_tables(level: int) -> np.ndarray:
    """Tables of the map "run the CRC register over 2**level zero bytes"."""
    if not _shift_levels:
        units = np.uint32(1) << np.arange(32, dtype=np.uint32)
        _shift_levels.append(_tables_of(_CRC_TABLE[units & 0xFF] ^ (units >> 8)))
    while len(_shift_levels) <= level:
        prev = _shift_levels[-1]
        units = _apply(prev, _apply(prev, np.uint32(1) << np.arange(32, dtype=np.uint32)))
        _shift_levels.append(_tables_of(units))
    return _shift_levels[level]


def crc_shift(states: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``(n,)`` CRC registers ``states`` advanced over ``lengths`` zero bytes each: the term by
    which ``zlib.crc32(data, state)`` differs from ``zlib.crc32(data)`` for ``len(data) ==
    length``.

    >>> import zlib
    >>> s, d = zlib.crc32(b"head"), b"payload"
    >>> int(crc_shift(np.array([s], np.uint32), np.array([len(d)]))[0]) == (
    ...     zlib.crc32(d, s) ^ zlib.crc32(d))
    True
    """
    v = np.asarray(states, dtype=np.uint32).copy()
    lengths = np.asarray(lengths, dtype=np.int64)
    level = 0
    while lengths.size and (lengths >> level).any():
        sel = np.flatnonzero((lengths >> level) & 1)
        if sel.size:
            v[sel] = _apply(_shift_tables(level), v[sel])
        level += 1
    return v


def _header_crcs(arr: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """zlib CRC-32 of the 12 bytes at each of ``pos`` (vectorised)."""
    reg = np.full(pos.shape[0], 0xFFFFFFFF, dtype=np.uint32)
    for i in range(12):
        reg = _CRC_TABLE[(reg ^ arr[pos + i]) & 0xFF] ^ (reg >> 8)
    return reg ^ np.uint32(0xFFFFFFFF)


def _valid_frames(buf: bytes, start: int) -> list[Frame]:
    """Every valid frame whose header starts at or after ``start``, in order (see Resync)."""
    size = len(buf)
    if size - start < FRAME_HEADER.size:
        return []
    arr = np.frombuffer(buf, dtype=np.uint8)
    tail = arr[start:]
    m = FRAME_MAGIC
    hit = (
        (tail[: tail.size - 3] == m[0])
        & (tail[1 : tail.size - 2] == m[1])
        & (tail[2 : tail.size - 1] == m[2])
        & (tail[3:] == m[3])
    )
    pos = np.flatnonzero(hit) + start
    pos = pos[pos + FRAME_HEADER.size <= size]
    if pos.size == 0:
        return []
    words = np.stack([arr[pos + 4 + i] for i in range(12)], axis=1).astype(np.uint32)
    le = words[:, 0::4] | (words[:, 1::4] << 8) | (words[:, 2::4] << 16) | (words[:, 3::4] << 24)
    length, crc, hcrc = le[:, 0].astype(np.int64), le[:, 1], le[:, 2]
    ok = (_header_crcs(arr, pos) == hcrc) & (length <= MAX_PAYLOAD)
    ok &= pos + FRAME_HEADER.size + length <= size
    pos, length, crc = pos[ok], length[ok], crc[ok]
    if pos.size == 0:
        return []
    starts = pos + FRAME_HEADER.size
    ends = starts + length
    view = memoryview(buf)
    if int(length.sum()) <= DIRECT_CRC_FACTOR * (size - start) + (1 << 20):
        good = np.fromiter(
            (
                zlib.crc32(view[s:e]) == c
                for s, e, c in zip(starts.tolist(), ends.tolist(), crc.tolist(), strict=True)
            ),
            dtype=bool,
            count=pos.size,
        )
    else:
        marks, inverse = np.unique(np.concatenate([starts, ends]), return_inverse=True)
        states = np.empty(marks.shape[0], dtype=np.uint32)
        state, prev = 0, 0
        for i, at in enumerate(marks.tolist()):
            state = zlib.crc32(view[prev:at], state)
            states[i] = state
            prev = at
        s_state, e_state = states[inverse[: pos.size]], states[inverse[pos.size :]]
        good = (e_state ^ crc_shift(s_state, length)) == crc
    return [
        Frame(p, s, e)
        for p, s, e in zip(
            pos[good].tolist(), starts[good].tolist(), ends[good].tolist(), strict=True
        )
    ]


def next_valid(buf: bytes, pos: int) -> Frame | None:
    """The first valid frame starting after ``pos`` (resynchronisation), or None.

    Linear in ``len(buf)`` whatever the bytes (:class:`Resync`); a caller that resynchronises
    more than once in one buffer keeps a ``Resync`` instead.
    """
    return Resync(buf).after(pos)

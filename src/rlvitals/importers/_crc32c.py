"""CRC-32C (Castagnoli), the checksum of TFRecord framing, in pure Python and numpy.

Table-driven (reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF). One buffer at a
time in Python is slow (about 10 MB/s), so :func:`crc32c_many` checks many records at once:

- records up to :data:`SMALL_MAX` bytes are right-aligned in a ``(width, n)`` byte matrix (zero
  bytes on the left do not change a CRC register that starts at 0), and the table step runs once
  per column over all records; the init value's contribution, which depends only on the length,
  is xored in afterwards;
- longer records are cut into chunks of :data:`CHUNK` bytes whose registers are computed side by
  side, then folded with a precomputed "advance by CHUNK zero bytes" linear map (four 256-entry
  tables).

TFRecord stores ``mask(crc)``: the CRC rotated right by 15 bits plus 0xA282EAD8.

>>> hex(crc32c(b"123456789"))
'0xe3069283'
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK", "SMALL_MAX", "crc32c", "crc32c_many", "mask", "mask_many"]

_POLY = 0x82F63B78
_INIT = 0xFFFFFFFF
SMALL_MAX = 4096
"""Records up to this many bytes go through the right-aligned matrix path."""
CHUNK = 1024
"""Chunk length of the long-record path."""
_MIN_WIDTH = 8
_GATHER_CELLS = 1 << 20
"""Bytes gathered into one matrix at a time (bounds the working memory to a few MiB)."""
_PY_MAX = 64
_MASK_DELTA = 0xA282EAD8


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE_LIST = _make_table()
_TABLE = np.array(_TABLE_LIST, dtype=np.uint32)
_zero_regs: np.ndarray | None = None
_shift_tables: list[list[int]] | None = None


def _update(reg: int, data: bytes) -> int:
    t = _TABLE_LIST
    for b in data:
        reg = t[(reg ^ b) & 0xFF] ^ (reg >> 8)
    return reg


def _zero_step(reg: int) -> int:
    return _TABLE_LIST[reg & 0xFF] ^ (reg >> 8)


def _init_regs() -> np.ndarray:
    """``(SMALL_MAX + 1,)``: the register after feeding n zero bytes to the init value."""
    global _zero_regs
    if _zero_regs is None:
        regs = [_INIT]
        r = _INIT
        for _ in range(SMALL_MAX):
            r = _zero_step(r)
            regs.append(r)
        _zero_regs = np.array(regs, dtype=np.uint32)
    return _zero_regs


def _chunk_shift() -> list[list[int]]:
    """Four 256-entry tables of the linear map "feed CHUNK zero bytes", one per register byte."""
    global _shift_tables
    if _shift_tables is None:
        basis = np.array([1 << i for i in range(32)], dtype=np.uint32)
        for _ in range(CHUNK):
            basis = _TABLE[basis & 0xFF] ^ (basis >> 8)
        cols = basis.tolist()
        tables = []
        for byte in range(4):
            t = []
            for x in range(256):
                acc = 0
                for k in range(8):
                    if (x >> k) & 1:
                        acc ^= cols[8 * byte + k]
                t.append(acc)
            tables.append(t)
        _shift_tables = tables
    return _shift_tables


def _advance(reg: int, n: int) -> int:
    """The register after feeding ``n`` zero bytes."""
    s0, s1, s2, s3 = _chunk_shift()
    q, rest = divmod(n, CHUNK)
    for _ in range(q):
        reg = s0[reg & 0xFF] ^ s1[(reg >> 8) & 0xFF] ^ s2[(reg >> 16) & 0xFF] ^ s3[reg >> 24]
    for _ in range(rest):
        reg = _zero_step(reg)
    return reg


def _columns(block: np.ndarray, n: int) -> np.ndarray:
    """Run the table step over the rows of ``block`` ``(width, n)`` from a zero register."""
    reg = np.zeros(n, dtype=np.uint32)
    table = _TABLE
    for row in block:
        reg = table[(reg ^ row) & 0xFF] ^ (reg >> 8)
    return reg


def _small(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """Zero-init registers of records no longer than ``width``, right-aligned in a matrix."""
    pos = np.arange(width, dtype=np.int64)[:, None] - (width - lengths)[None, :]
    valid = pos >= 0
    if buf.size == 0:
        block = np.zeros(pos.shape, dtype=np.uint8)
    else:
        idx = np.minimum(starts[None, :] + np.where(valid, pos, 0), buf.size - 1)
        block = np.where(valid, buf[idx], np.uint8(0))
    return _columns(block, starts.shape[0])


def _large(buf: np.ndarray, start: int, length: int) -> int:
    m = -(-length // CHUNK)
    padded = np.zeros(m * CHUNK, dtype=np.uint8)
    padded[m * CHUNK - length :] = buf[start : start + length]
    regs = _columns(np.ascontiguousarray(padded.reshape(m, CHUNK).T), m).tolist()
    s0, s1, s2, s3 = _chunk_shift()
    r = 0
    for c in regs:
        r = s0[r & 0xFF] ^ s1[(r >> 8) & 0xFF] ^ s2[(r >> 16) & 0xFF] ^ s3[r >> 24] ^ c
    return (r ^ _advance(_INIT, length)) ^ 0xFFFFFFFF


def crc32c_many(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """CRC-32C of many slices of one buffer.

    Args:
        buf: ``(size,)`` uint8.
        starts, lengths: ``(n,)`` integers; slice ``i`` is ``buf[starts[i]:starts[i]+lengths[i]]``
            and must lie inside ``buf``.

    Returns:
        ``(n,)`` uint32 checksums (unmasked).
    """
    starts = np.asarray(starts, dtype=np.int64).reshape(-1)
    lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
    out = np.zeros(starts.shape[0], dtype=np.uint32)
    small = np.flatnonzero(lengths <= SMALL_MAX)
    if small.size:
        ls = lengths[small]
        widths = np.maximum(_MIN_WIDTH, 1 << np.ceil(np.log2(np.maximum(ls, 1))).astype(np.int64))
        for width in np.unique(widths).tolist():
            sel = small[widths == width]
            rows = max(1, _GATHER_CELLS // width)
            for i in range(0, sel.shape[0], rows):
                s = sel[i : i + rows]
                out[s] = _small(buf, starts[s], lengths[s], width)
        out[small] ^= _init_regs()[ls] ^ np.uint32(0xFFFFFFFF)
    for i in np.flatnonzero(lengths > SMALL_MAX).tolist():
        out[i] = _large(buf, int(starts[i]), int(lengths[i]))
    return out


def crc32c(data: bytes) -> int:
    """CRC-32C of one buffer (unmasked)."""
    if len(data) <= _PY_MAX:
        return _update(_INIT, data) ^ 0xFFFFFFFF
    buf = np.frombuffer(data, dtype=np.uint8)
    return int(crc32c_many(buf, np.zeros(1), np.array([len(data)]))[0])


def mask(crc: int) -> int:
    """TFRecord's masked CRC: rotate right by 15 bits, add 0xA282EAD8 (mod 2**32).

    >>> hex(mask(0))
    '0xa282ead8'
    """
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def mask_many(crcs: np.ndarray) -> np.ndarray:
    """:func:`mask` of a ``(n,)`` uint32 array."""
    c = crcs.astype(np.uint32)
    return ((c >> np.uint32(15)) | (c << np.uint32(17))) + np.uint32(_MASK_DELTA)

"""Compact storage for logged rows an importer must hold until the end of the file.

Some formats cannot hand their rows to the :class:`~rlvitals.recording.run.RunBuilder` as they
are read: a TRL console log's steps depend on how many lines the whole run printed, and a log
holding several runs back to back is split into runs only once every row is seen. Holding the
parsed dicts would cost about a kilobyte per row (a dict and a float object per value); a
:class:`Row` costs one small object plus 8 bytes per value (in the :class:`RowStore`'s shared
array) and shares its key tuple with every row of the same shape — the same order of memory as
the series the builder keeps.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rlvitals.recording.run import _to_float

__all__ = ["Row", "RowStore", "add_rows"]

_PLAIN = frozenset({float, int})


class RowStore:
    """Where the values of many :class:`Row` objects live (one ``array('d')``)."""

    def __init__(self) -> None:
        self.values = array("d")
        self._shapes: dict[tuple[str, ...], tuple[str, ...]] = {}

    def row(
        self, values: Mapping[str, Any], convert: Callable[[Any], float | None] = _to_float
    ) -> Row:
        """A compact copy of ``values``, numbers only: each value through ``convert`` (by
        default as the builder reads values: ``None`` and ``"nan"`` are NaN, numeric strings
        are numbers); values it gives None for are left out and counted in :attr:`Row.skipped`."""
        vals = list(values.values())
        if set(map(type, vals)) <= _PLAIN:  # the usual row: every value a float or an int
            shape = tuple(values)
            shape = self._shapes.setdefault(shape, shape)
            off = len(self.values)
            try:
                self.values.extend(vals)
                return Row(self, shape, off, 0)
            except OverflowError:  # an int beyond float range: the slow path says ±inf
                del self.values[off:]
        keys: list[str] = []
        nums: list[float] = []
        skipped = 0
        for k, v in values.items():
            x = v if type(v) is float else convert(v)
            if x is None:
                skipped += 1
                continue
            keys.append(k)
            nums.append(x)
        shape = tuple(keys)
        shape = self._shapes.setdefault(shape, shape)
        off = len(self.values)
        self.values.extend(nums)
        return Row(self, shape, off, skipped)


class Row(Mapping[str, float]):
    """A read-only ``{key: float}`` whose values live in a :class:`RowStore`."""

    __slots__ = ("_keys", "_off", "_store", "skipped")

    def __init__(self, store: RowStore, keys: tuple[str, ...], off: int, skipped: int) -> None:
        self._store = store
        self._keys = keys
        self._off = off
        self.skipped = skipped
        """Values of the source row that were not numbers (left out)."""

    def __getitem__(self, key: str) -> float:
        try:
            i = self._keys.index(key)
        except ValueError:
            raise KeyError(key) from None
        return self._store.values[self._off + i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def items(self):  # type: ignore[override]
        """``(key, value)`` pairs in order (one slice of the store, not one lookup per key)."""
        return zip(self._keys, self._store.values[self._off : self._off + len(self._keys)])


def add_rows(builder: Any, rows: list[tuple[int, Row, frozenset[str]]]) -> None:
    """``builder.add_row(step, {k: v for k, v in row.items() if k not in drop})`` for every
    ``(step, row, drop)``, in order, done column by column (``RunBuilder.add_columns``): the
    rows of one shape are gathered from the store with one numpy index per key."""
    if not rows:
        return
    import numpy as np

    n = len(rows)
    steps = np.fromiter((s for s, _, _ in rows), np.int64, n)
    store = rows[0][1]._store
    if any(r._store is not store for _, r, _ in rows):
        raise ValueError("rows of one call must share their store")
    keys = [r._keys for _, r, _ in rows]
    drops = [d for _, _, d in rows]
    by_shape: dict[tuple[tuple[str, ...], frozenset[str]], tuple[Any, Any]] = {}
    if len(set(map(id, keys))) == 1 and len(set(map(id, drops))) == 1:  # the usual log
        offs = np.fromiter((r._off for _, r, _ in rows), np.int64, n)
        by_shape[(keys[0], drops[0])] = (np.arange(n), offs)
    else:
        for i, (_, r, drop) in enumerate(rows):
            pos, offs = by_shape.setdefault((r._keys, drop), ([], []))
            pos.append(i)
            offs.append(r._off)
    values = np.frombuffer(store.values, dtype=np.float64) if store.values else np.zeros(0)
    parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for (keys, drop), (pos, offs) in by_shape.items():
        p = np.asarray(pos, dtype=np.int64)
        o = np.asarray(offs, dtype=np.int64)
        for j, k in enumerate(keys):
            if k not in drop:
                parts.setdefault(k, []).append((p, values[o + j]))
    columns = {}
    for k, got in parts.items():
        if len(got) == 1:
            columns[k] = got[0]
        else:
            p = np.concatenate([a for a, _ in got])
            v = np.concatenate([b for _, b in got])
            order = np.argsort(p, kind="stable")
            columns[k] = (p[order], v[order])
    builder.add_columns(steps, columns)

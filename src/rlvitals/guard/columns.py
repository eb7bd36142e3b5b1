"""The window's storage: a ring of the last W steps as float columns.

:class:`Columns` holds one ``(keys, W)`` matrix and the steps of its rows: a row is cleared, and
the window read out, with one numpy call whatever the number of keys.

>>> c = Columns(2)
>>> for step in (1, 2, 3):
...     row, evicted = c.slot(step)
...     c.put(row, "loss", float(step))
>>> steps, cols = c.table()
>>> steps.tolist(), cols["loss"].tolist()
([2, 3], [2.0, 3.0])
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MAX_COLUMNS", "Columns"]

MAX_COLUMNS = 512
"""Distinct scalar keys kept; later new keys are ignored (counted in ``dropped_keys``)."""


class Columns:
    """A ring of ``cap`` rows: ``steps`` and one float column per key (NaN = not logged).

    The columns are the rows of one ``(keys, cap)`` matrix: a row of the ring is cleared, and
    the window read out, with one numpy call whatever the number of keys.
    """

    def __init__(self, cap: int):
        self.cap = cap
        self.steps = np.zeros(cap, dtype=np.int64)
        self.index: dict[str, int] = {}
        self.data = np.full((8, cap), math.nan)
        self.head = 0
        self.n = 0
        self.dropped_keys: set[str] = set()

    def slot(self, step: int) -> tuple[int, int | None]:
        """The row of ``step`` (a new last row when it is new); returns ``(row, evicted step)``.

        Steps arrive in order; an older step than the last rewinds: later rows are dropped.
        """
        if self.n:
            last = (self.head + self.n - 1) % self.cap
            if self.steps[last] == step:
                return last, None
            while self.n and self.steps[(self.head + self.n - 1) % self.cap] > step:
                self._clear((self.head + self.n - 1) % self.cap)
                self.n -= 1
            if self.n and self.steps[(self.head + self.n - 1) % self.cap] == step:
                return (self.head + self.n - 1) % self.cap, None
        evicted = None
        if self.n == self.cap:
            evicted = int(self.steps[self.head])
            self._clear(self.head)
            self.head = (self.head + 1) % self.cap
            self.n -= 1
        row = (self.head + self.n) % self.cap
        self.steps[row] = step
        self.n += 1
        return row, evicted

    def _clear(self, row: int) -> None:
        self.data[:, row] = math.nan

    def row_of(self, step: int) -> int | None:
        """The row holding ``step``, or None."""
        if not self.n:
            return None
        idx = self.order()
        ring = self.steps[idx]
        pos = int(np.searchsorted(ring, step))
        return int(idx[pos]) if pos < self.n and ring[pos] == step else None

    def put(self, row: int, key: str, value: float, force: bool = False) -> None:
        i = self.index.get(key)
        if i is None:
            i = len(self.index)
            if i >= MAX_COLUMNS and not force:
                self.dropped_keys.add(key)
                return
            if i == self.data.shape[0]:
                grown = np.full((2 * i, self.cap), math.nan)
                grown[:i] = self.data
                self.data = grown
            self.index[key] = i
        self.data[i, row] = value

    def order(self) -> np.ndarray:
        return (self.head + np.arange(self.n)) % self.cap

    def table(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """``(steps, {key: column})`` in step order; fresh arrays, nothing shared with the ring."""
        k, n, head = len(self.index), self.n, self.head
        if head + n <= self.cap:
            steps, block = self.steps[head : head + n].copy(), self.data[:k, head : head + n].copy()
        else:
            idx = self.order()
            steps, block = self.steps[idx], self.data[:k].take(idx, axis=1)
        return steps, dict(zip(self.index, block))

"""The events layer: where each vitals series held, shifted and started, read once per run by
the detectors and the differential diagnosis alike.

Everything here works on *logged points*: the finite values of one series and the steps they
were logged at (NaN = the step did not log the key), so a run that logs every 10 steps and one
that logs every step are judged alike: lengths are counted in logged points, onsets and ends
are reported in training steps. Everything is vectorised numpy.

- reading: :class:`Points`, :func:`points`, :func:`eval_points`, :func:`first_present`; the
  finite points of a series are read once per :class:`~rlvitals.vitals.Vitals` and shared
  (:meth:`Events.of`), read-only, by every detector and the diagnosis;
- levels (:class:`Events`): a series' level at its first logged points (before anything
  happened), late in the run, in its first and last quarter, its first value, and the step that
  best splits it into two levels (its change point); the rolling levels are in
  :mod:`rlvitals.signal.rolling`;
- where a condition held: :class:`Span`, :func:`runs`, :func:`find_spans` (sustained, with
  noise bridged), :func:`hysteresis` (start and release conditions), :func:`onset_of` (from
  when it held for good), :func:`episode_of` (a stretch that may end),
  :func:`long_run_sustain`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from rlvitals._median import median
from rlvitals._record import record
from rlvitals.signal import bool_runs

if TYPE_CHECKING:
    from rlvitals.vitals.core import Vitals

__all__ = [
    "EARLY_SHARE",
    "ENTROPY_EARLY_SHARE",
    "LATE_SHARE",
    "LONG_RUN_POINTS",
    "Events",
    "Points",
    "Span",
    "episode_of",
    "eval_points",
    "find_spans",
    "first_present",
    "hysteresis",
    "long_run_sustain",
    "onset_of",
    "points",
    "runs",
]

LONG_RUN_POINTS = 2000
"""Runs with more logged points than this need longer episodes (:func:`long_run_sustain`)."""
EARLY_SHARE = 0.15
"""Share of the logged steps (at least 3) that make a series' early level (zoo dev: the first
~12 of 80 steps precede every injection at step 20)."""
ENTROPY_EARLY_SHARE = 0.05
"""Entropy's early level comes from a shorter start: on real runs it falls within the first
2% of the steps (real logs: 0.389 at step 1, 0.10 by step 20 of 1,100), and a baseline taken
after the fall hides the collapse."""
LATE_SHARE = 0.2
"""Share of the last logged steps that make its late level."""


# --------------------------------------------------------------------------------------------
# Reading series


@record(frozen=True)
class Points:
    """The finite values of one series.

    Attributes:
        name: series name.
        steps: ``(n,)`` int64 steps that logged a finite value.
        values: ``(n,)`` float64 the values.
    """

    name: str
    steps: np.ndarray
    values: np.ndarray

    @property
    def n(self) -> int:
        return int(self.values.shape[0])

    def between(self, first_step: int, last_step: int) -> np.ndarray:
        """The values logged at steps in ``[first_step, last_step]``; ``(m,)`` float64.

        >>> Points("x", np.array([1, 2, 5, 9]), np.array([1.0, 2, 3, 4])).between(2, 5).tolist()
        [2.0, 3.0]
        """
        return self.values[(self.steps >= first_step) & (self.steps <= last_step)]


def points(vitals: Vitals, name: str) -> Points | None:
    """The finite points of train series ``name``, or None when the series is absent or empty
    (a name the vitals cannot hold raises :class:`~rlvitals.vitals.UnknownSeriesError`)."""
    vitals.get(name)
    return Events.of(vitals).points(name)


def eval_points(vitals: Vitals, name: str) -> Points | None:
    """The finite points of eval series ``name`` (``eval/...``) on the eval step index."""
    return Events.of(vitals).points(name)


def _finite_points(name: str, steps: np.ndarray, x: np.ndarray | None) -> Points | None:
    if x is None:
        return None
    x = np.asarray(x, dtype=np.float64)
    mask = np.isfinite(x)
    if not mask.any():
        return None
    st, values = np.asarray(steps)[mask].astype(np.int64), x[mask]
    # shared by every reader of the run: nobody may change them in place
    st.flags.writeable = values.flags.writeable = False
    return Points(name, st, values)


def first_present(vitals: Vitals, names: Iterable[str]) -> Points | None:
    """The first of ``names`` that has finite points."""
    for name in names:
        p = points(vitals, name)
        if p is not None:
            return p
    return None


class Events:
    """Levels and onsets of a run's vitals series (NaN = not logged), over the finite points of
    each series, read once per vitals and shared: :meth:`of` gives every reader of one
    :class:`~rlvitals.vitals.Vitals` (each detector, the differential) the same instance."""

    def __init__(self, vitals: Any):
        # a weak reference: the vitals keep their events (:meth:`of`), and a cycle would keep
        # every window's vitals alive until the garbage collector runs (the live guard makes one
        # each check)
        self._vitals = weakref.ref(vitals)
        self.steps = np.asarray(vitals.steps)
        # name -> (the series array the points were read from, its points)
        self._points: dict[str, tuple[Any, Points | None]] = {}

    @property
    def v(self) -> Any:
        """The vitals these events are read from."""
        v = self._vitals()
        if v is None:
            raise ReferenceError("the vitals these events were read from are gone")
        return v

    @classmethod
    def of(cls, vitals: Any) -> Events:
        """The events of ``vitals``, made on first use and kept with them."""
        ev = vitals.__dict__.get("_events")
        if ev is None:
            ev = vitals.__dict__["_events"] = cls(vitals)
        return ev

    def points(self, name: str) -> Points | None:
        """The finite points of series ``name`` (``eval/...``: on the eval step index), or None
        when it is absent or never finite; read once while the series array is the same."""
        is_eval = name.startswith("eval/")
        x = (self.v.eval_series if is_eval else self.v.series).get(name)
        hit = self._points.get(name)
        if hit is None or hit[0] is not x:
            steps = self.v.eval_steps if is_eval else self.steps
            hit = self._points[name] = (x, _finite_points(name, steps, x))
        return hit[1]

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(steps, values)`` of the finite points of a series (None: fewer than 3)."""
        p = self.points(name)
        return None if p is None or p.n < 3 else (p.steps, p.values)

    def early(self, name: str, share: float = EARLY_SHARE) -> float | None:
        s = self.series(name)
        if s is None:
            return None
        n = max(3, int(len(s[1]) * share))
        return float(median(s[1][:n]))

    def late(self, name: str) -> float | None:
        s = self.series(name)
        if s is None:
            return None
        n = max(3, int(len(s[1]) * LATE_SHARE))
        return float(median(s[1][-n:]))

    def changepoint(self, name: str, min_seg: int = 5) -> int | None:
        """The step that best splits the series into two levels (largest between-segment
        variance), or None for a series too short."""
        s = self.series(name)
        if s is None or len(s[1]) < 2 * min_seg:
            return None
        st, x = s
        c = np.cumsum(x)
        n = len(x)
        i = np.arange(min_seg, n - min_seg + 1)
        left = c[i - 1] / i
        right = (c[-1] - c[i - 1]) / (n - i)
        score = i * (n - i) * (left - right) ** 2
        return int(st[i[int(np.argmax(score))]])

    def quarter(self, name: str, first: bool) -> tuple[float, float] | None:
        """(mean, median) of the first or last quarter of the run (at least 5 points)."""
        s = self.series(name)
        if s is None or len(s[1]) < 8:
            return None
        n = max(5, len(s[1]) // 4)
        x = s[1][:n] if first else s[1][-n:]
        return float(np.mean(x)), float(median(x))

    def half(self, name: str) -> float | None:
        """Median of the second half of the run."""
        s = self.series(name)
        return None if s is None else float(median(s[1][len(s[1]) // 2 :]))

    def first(self, name: str) -> float | None:
        s = self.series(name)
        return None if s is None else float(s[1][0])

    def onset(self, name: str, test: Any, hold: float = 0.7) -> int | None:
        """The first step from which ``test(value)`` holds on 3 logged steps in a row and on
        ``hold`` of the rest of the run."""
        s = self.series(name)
        return None if s is None else onset_of(s[0], test(s[1]), hold)

    @property
    def first_step(self) -> int:
        return int(self.steps[0]) if self.steps.size else 0

    def step_gap(self) -> float:
        return float(median(np.diff(self.steps))) if self.steps.size > 1 else 1.0


# --------------------------------------------------------------------------------------------
# Where a condition held


@record(frozen=True)
class Span:
    """A stretch of logged points where a condition held.

    Attributes:
        first, last: first and last index (inclusive) into the series' points.
        onset: training step of the first point.
        end: training step of the last point when the condition cleared; None while it is on
            (the stretch reaches the end of the series, or too few points follow to tell).
        hits: points in the stretch that met the condition (all of them unless noise was
            bridged).
    """

    first: int
    last: int
    onset: int
    end: int | None
    hits: int

    @property
    def n(self) -> int:
        """How many logged points the stretch covers."""
        return self.last - self.first + 1

    def median(self, x: np.ndarray) -> float:
        """The median of ``x`` (``(n,)``, aligned with the series' points) over the stretch."""
        return float(median(x[self.first : self.last + 1]))


def runs(mask: np.ndarray, min_len: int = 1, merge_gap: int = 0) -> list[tuple[int, int]]:
    """Runs of True at least ``min_len`` long, as ``(first, last)`` index pairs (inclusive).

    Runs separated by at most ``merge_gap`` False points are merged first.

    >>> runs(np.array([0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], bool), 3)
    [(1, 3), (8, 11)]
    >>> runs(np.array([0, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1], bool), 3, merge_gap=1)
    [(1, 11)]
    """
    starts, ends = bool_runs(np.asarray(mask, dtype=bool))
    merged: list[list[int]] = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        if merged and s - merged[-1][1] - 1 <= merge_gap:
            merged[-1][1] = e
        else:
            merged.append([s, e])
    return [(s, e) for s, e in merged if e - s + 1 >= min_len]


def find_spans(
    steps: np.ndarray,
    cond: np.ndarray,
    *,
    sustain: int,
    gap: int = 2,
    min_density: float = 0.7,
) -> list[Span]:
    """Stretches where ``cond`` holds on at least ``sustain`` consecutive-ish logged points.

    Runs of True separated by at most ``gap`` False points are merged (noise in a collapsed
    stretch does not split it); a merged stretch is kept when it holds ``>= sustain`` True
    points, its first ``sustain`` points are consecutive hits, and at least ``min_density`` of
    its points are hits. A stretch that reaches the last point, or is followed only by a few
    points (no more than ``gap``: too few to call a recovery), is ongoing (``end=None``).

    Args:
        steps: ``(n,)`` training step of each point.
        cond: ``(n,)`` bool, the condition at each point.

    >>> c = np.array([0, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0], dtype=bool)
    >>> [(s.onset, s.end) for s in find_spans(np.arange(11) * 10, c, sustain=3)]
    [(10, 60)]
    """
    starts, ends = bool_runs(cond)
    if starts.size == 0:
        return []
    # Merge runs separated by <= gap False points.
    sep = starts[1:] - ends[:-1] - 1
    brk = np.flatnonzero(sep > gap)
    g0 = np.concatenate(([0], brk + 1))
    g1 = np.concatenate((brk, [starts.size - 1]))
    lens = ends - starts + 1
    csum = np.concatenate(([0], np.cumsum(lens)))
    n = cond.shape[0]
    out: list[Span] = []
    for a, b in zip(g0.tolist(), g1.tolist()):
        i0, i1 = int(starts[a]), int(ends[b])
        hits = int(csum[b + 1] - csum[a])
        width = i1 - i0 + 1
        if hits < sustain or hits < min_density * width:
            continue
        # The onset is where a sustained stretch begins: skip leading isolated hits whose own
        # run is shorter than sustain and that are followed by a gap.
        k = a
        while k < b and lens[k] < min(sustain, 2) and starts[k + 1] - ends[k] - 1 > 0:
            k += 1
        if k != a:
            i0 = int(starts[k])
            hits = int(csum[b + 1] - csum[k])
            if hits < sustain:
                continue
        end = None if n - 1 - i1 <= min(gap, sustain - 1) else int(steps[i1])
        out.append(Span(i0, i1, int(steps[i0]), end, hits))
    return out


def hysteresis(
    p: Points,
    start: np.ndarray,
    release: Callable[[int], np.ndarray],
    sustain: int,
    max_episodes: int,
) -> list[Span]:
    """Episodes with hysteresis over the points of ``p``.

    An episode starts at the first run of ``sustain`` True points of ``start`` (``(p.n,)``
    bool) and lasts until the first run of ``sustain`` True points of ``release(first)`` (the
    release condition may depend on the onset, e.g. a baseline frozen there); its last point is
    the one before that run, or the final point when the condition never cleared (then ``end``
    is None). At most ``max_episodes`` are returned.

    >>> p = Points("x", np.arange(10, 140, 10), np.array([0, 0, 5, 5, 5, 5, 2, 0, 0, 0, 5, 5, 5.]))
    >>> [(e.onset, e.end, e.n) for e in hysteresis(p, p.values > 4, lambda i: p.values < 1, 2, 5)]
    [(30, 70, 5), (110, None, 3)]
    """
    n = start.shape[0]
    out: list[Span] = []
    pos = 0
    while pos < n and len(out) < max_episodes:
        found = runs(start[pos:], sustain)
        if not found:
            break
        first = pos + found[0][0]
        rel = np.asarray(release(first), dtype=bool)
        rel_runs = runs(rel[first + 1 :], sustain)
        last = n - 1 if not rel_runs else first + rel_runs[0][0]
        end = None if last >= n - 1 else int(p.steps[last])
        out.append(Span(first, last, int(p.steps[first]), end, last - first + 1))
        if not rel_runs:
            break
        pos = last + 1
    return out


def long_run_sustain(sustain: int, n: int) -> int:
    """``sustain`` raised by one per doubling of the run beyond :data:`LONG_RUN_POINTS` points.

    Noise alone makes a run of a few consecutive points past a threshold likely somewhere in a
    very long run (a 20,000-step log has thousands of chances); a slightly longer requirement
    keeps the false-alarm rate per run flat.

    >>> long_run_sustain(5, 1000), long_run_sustain(5, 20000)
    (5, 9)
    """
    if n <= LONG_RUN_POINTS:
        return sustain
    return sustain + math.ceil(math.log2(n / LONG_RUN_POINTS))


def onset_of(steps: np.ndarray, mask: np.ndarray, hold: float = 0.7, run: int = 3) -> int | None:
    """The first step where ``mask`` holds ``run`` times in a row and on ``hold`` of the rest
    (vectorised: a doctor run over 20,000 steps calls this a few dozen times)."""
    mask = np.asarray(mask, dtype=bool)
    n = mask.size
    if n == 0:
        return None
    run = min(run, n)
    streak = np.convolve(mask.astype(np.int32), np.ones(run, dtype=np.int32), "valid") == run
    rest = np.cumsum(mask[::-1])[::-1] / np.arange(n, 0, -1)  # share of mask[i:]
    ok = streak & (rest[: streak.size] >= hold)
    hit = np.flatnonzero(ok)
    return int(steps[hit[0]]) if hit.size else None


def episode_of(
    steps: np.ndarray, mask: np.ndarray, run: int = 3, gap: int = 3
) -> tuple[int, int | None, int, float] | None:
    """The first stretch where ``mask`` holds: it starts at ``run`` points in a row and ends at
    the last point before ``gap`` points in a row without it (single misses inside are bridged:
    a fault on three steps in four is one stretch). Returns ``(onset step, end step or None when
    it lasts to the end, points covered, share of them where mask holds)``, or None."""
    mask = np.asarray(mask, dtype=bool)
    n = mask.size
    if n < run:
        return None
    starts = np.flatnonzero(np.convolve(mask, np.ones(run, dtype=np.int32), "valid") == run)
    if starts.size == 0:
        return None
    i = int(starts[0])
    off = np.convolve(~mask[i:], np.ones(gap, dtype=np.int32), "valid") == gap
    stop = np.flatnonzero(off)
    last = n - 1 if stop.size == 0 else i + int(stop[0]) - 1
    covered = last - i + 1
    end = None if stop.size == 0 else int(steps[last])
    return int(steps[i]), end, covered, float(mask[i : last + 1].mean())

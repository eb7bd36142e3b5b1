"""Follow the doctor's conditions from check to check, with hysteresis.

A condition named at one check and not the next is noise, not news: ``watch`` used to open a
"reward hacking" at one refresh, drop it at the next and open it again, and its timeline only
ever said "opened". :class:`ConditionTracker` opens a condition once it is named at
:data:`OPEN_AFTER` checks in a row, closes it once it has been absent from :data:`CLOSE_AFTER`
checks in a row, and says ``reopened`` when a closed one comes back. ``HEALTHY`` is never
tracked: it is the absence of the others.

>>> t = ConditionTracker()
>>> [e.kind for e in t.update(["RUNAWAY_LENGTH"], step=10)]
[]
>>> [(e.kind, e.condition) for e in t.update(["RUNAWAY_LENGTH"], step=12)]
[('opened', 'RUNAWAY_LENGTH')]
>>> [e.kind for s in (14, 16, 18) for e in t.update([], step=s)]
['closed']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["CLOSE_AFTER", "OPEN_AFTER", "ConditionEvent", "ConditionTracker"]

OPEN_AFTER = 2
"""Consecutive checks that must name a condition before it is opened (one check's naming is
often the end of the window moving; zoo dev runs watched every 5 steps flip at most once)."""
CLOSE_AFTER = 3
"""Consecutive checks that must not name an open condition before it is closed."""


@dataclass(frozen=True)
class ConditionEvent:
    """A change in what the run has: ``opened``, ``closed`` or ``reopened`` at ``step``."""

    kind: str
    condition: str
    step: int


@dataclass
class _State:
    seen: int = 0
    missed: int = 0
    open: bool = False
    ever_closed: bool = False
    history: list[ConditionEvent] = field(default_factory=list)


class ConditionTracker:
    """Conditions opened, closed and reopened across checks (see the module docstring).

    Attributes:
        timeline: every event so far, in order.
    """

    def __init__(self, open_after: int = OPEN_AFTER, close_after: int = CLOSE_AFTER):
        if open_after < 1 or close_after < 1:
            raise ValueError("open_after and close_after must be >= 1")
        self.open_after, self.close_after = open_after, close_after
        self._states: dict[str, _State] = {}
        self.timeline: list[ConditionEvent] = []

    @property
    def open(self) -> list[str]:
        """The conditions open now, in the order they were first opened."""
        return [cid for cid, s in self._states.items() if s.open]

    def update(self, conditions: Sequence[str], step: int) -> list[ConditionEvent]:
        """One check named ``conditions`` (IDs, primary first) at ``step``: what changed."""
        named = [c for c in dict.fromkeys(conditions) if c != "HEALTHY"]
        events = []
        for cid in named:
            s = self._states.setdefault(cid, _State())
            s.seen, s.missed = s.seen + 1, 0
            if not s.open and s.seen >= self.open_after:
                s.open = True
                events.append(ConditionEvent("reopened" if s.ever_closed else "opened", cid, step))
        for cid, s in self._states.items():
            if cid in named:
                continue
            s.seen = 0
            if s.open:
                s.missed += 1
                if s.missed >= self.close_after:
                    s.open, s.ever_closed, s.missed = False, True, 0
                    events.append(ConditionEvent("closed", cid, step))
        self.timeline += events
        return events

"""Follow the doctor's conditions from check to check, with hysteresis.

A condition named at one check and not the next is noise, not news: ``watch`` used to open a
"reward hacking" at one refresh, drop it at the next and open it again, and its timeline only
ever said "opened". :class:`ConditionTracker` opens a condition once it is named at
:data:`OPEN_AFTER` checks in a row, closes it once it has been absent from :data:`CLOSE_AFTER`
checks in a row, and says ``reopened`` when a closed one comes back. ``HEALTHY`` is never
tracked: it is the absence of the others.

The live :class:`~rlvitals.Monitor` checks the collapse family every few steps and the whole
catalogue less often; a check that did not run any detector a condition is a sign of
(:func:`judged_by`) is no evidence about it either way: ``update(..., judged=...)`` leaves such
conditions as they were, so a condition the full checks name is not closed by the fast checks
between them. :func:`condition_of` names the condition an incident's detectors point to.

>>> t = ConditionTracker()
>>> [e.kind for e in t.update(["RUNAWAY_LENGTH"], step=10)]
[]
>>> [(e.kind, e.condition) for e in t.update(["RUNAWAY_LENGTH"], step=12)]
[('opened', 'RUNAWAY_LENGTH')]
>>> [e.kind for s in (14, 16, 18) for e in t.update([], step=s)]
['closed']
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CLOSE_AFTER",
    "OPEN_AFTER",
    "ConditionEvent",
    "ConditionTracker",
    "condition_of",
    "judged_by",
    "named_now",
]

OPEN_AFTER = 2
"""Consecutive checks that must name a condition before it is opened (one check's naming is
often the end of the window moving; zoo dev runs watched every 5 steps flip at most once)."""
CLOSE_AFTER = 3
"""Consecutive checks that must not name an open condition before it is closed."""


@dataclass(frozen=True)
class ConditionEvent:
    """A change in what the run has: ``opened``, ``closed`` or ``reopened`` at ``step``;
    ``since`` is the step of the last check that named it (for ``closed``), else ``step``."""

    kind: str
    condition: str
    step: int
    since: int | None = None


@dataclass
class _State:
    seen: int = 0
    missed: int = 0
    open: bool = False
    ever_closed: bool = False
    last: int | None = None
    history: list[ConditionEvent] = field(default_factory=list)


class ConditionTracker:
    """Conditions opened, closed and reopened across checks (see the module docstring).

    Args:
        open_after, close_after: the hysteresis (:data:`OPEN_AFTER`, :data:`CLOSE_AFTER`).
        keep: events the timeline keeps (the oldest are forgotten); None keeps every one. The
            live monitor keeps a bounded number: its memory does not grow with the run.

    Attributes:
        timeline: every event so far (the last ``keep``), in order.
    """

    def __init__(
        self, open_after: int = OPEN_AFTER, close_after: int = CLOSE_AFTER, keep: int | None = None
    ):
        if open_after < 1 or close_after < 1:
            raise ValueError("open_after and close_after must be >= 1")
        self.open_after, self.close_after = open_after, close_after
        self._states: dict[str, _State] = {}
        self.timeline: list[ConditionEvent] | deque[ConditionEvent] = (
            [] if keep is None else deque(maxlen=keep)
        )

    @property
    def open(self) -> list[str]:
        """The conditions open now, in the order they were first opened."""
        return [cid for cid, s in self._states.items() if s.open]

    def update(
        self,
        conditions: Sequence[str],
        step: int,
        judged: Callable[[str], bool] | None = None,
    ) -> list[ConditionEvent]:
        """One check named ``conditions`` (IDs, primary first) at ``step``: what changed.

        ``judged``: whether this check could have named a condition (:func:`judged_by`); one it
        could not is left as it was. None: every condition was judged (``watch``).
        """
        named = [c for c in dict.fromkeys(conditions) if c != "HEALTHY"]
        events = []
        for cid in named:
            s = self._states.setdefault(cid, _State())
            s.seen, s.missed, s.last = s.seen + 1, 0, step
            if not s.open and s.seen >= self.open_after:
                s.open = True
                kind = "reopened" if s.ever_closed else "opened"
                events.append(ConditionEvent(kind, cid, step, step))
        for cid, s in self._states.items():
            if cid in named or (judged is not None and not judged(cid)):
                continue
            s.seen = 0
            if s.open:
                s.missed += 1
                if s.missed >= self.close_after:
                    s.open, s.ever_closed, s.missed = False, True, 0
                    events.append(ConditionEvent("closed", cid, step, s.last))
        self.timeline.extend(events)
        return events


def named_now(calls: Sequence[Any]) -> list[str]:
    """The IDs of ``calls`` (primary first) a check names *now*: a condition whose episode
    ended before the check (``end_step`` set: a verifier fault that healed) is history, so the
    tracker closes it instead of keeping it open while its episode is still in the window.

    >>> from rlvitals.doctor.differential import ConditionCall
    >>> named_now([ConditionCall("VERIFIER_CONSTANT", 41, 0.85, end_step=60),
    ...            ConditionCall("TOO_HARD", 1, 0.8)])
    ['TOO_HARD']
    """
    return [c.id for c in calls if getattr(c, "end_step", None) is None]


def judged_by(detectors: Iterable[str]) -> Callable[[str], bool]:
    """Whether a check that ran ``detectors`` could name a condition: it ran at least one
    detector of the condition's family (the doctor's own rule,
    :data:`rlvitals.doctor.differential.SIGN_DETECTORS`; a condition it does not list is
    always judged).

    >>> judged = judged_by(["DEGENERATE_GROUPS", "ADV_COLLAPSE"])
    >>> judged("TOO_HARD"), judged("RUNAWAY_LENGTH")
    (True, False)
    """
    from rlvitals.doctor.differential import SIGN_DETECTORS

    ran = frozenset(detectors)

    def judged(cid: str) -> bool:
        signs = SIGN_DETECTORS.get(cid)
        return signs is None or not ran.isdisjoint(signs)

    return judged


def condition_of(detectors: Iterable[str], calls: Sequence[Any], prefer: Iterable[str] = ()) -> Any:
    """The condition (a :class:`~rlvitals.doctor.differential.ConditionCall` of ``calls``,
    ranked, primary first) an incident of ``detectors`` points to: among those whose signs
    (``findings``) include one of the detectors, one in ``prefer`` (the conditions open now)
    first, else the highest ranked; None when none does (HEALTHY never).

    >>> from rlvitals.doctor.differential import ConditionCall
    >>> calls = [ConditionCall("RUNAWAY_LENGTH", 40, 0.8, findings=["TRUNCATION"]),
    ...          ConditionCall("TOO_HARD", 52, 0.6, findings=["DEGENERATE_GROUPS"])]
    >>> condition_of(["DEGENERATE_GROUPS", "ACR_STALL"], calls).id
    'TOO_HARD'
    """
    ids = set(detectors)
    hits = [c for c in calls if c.id != "HEALTHY" and ids.intersection(c.findings)]
    if not hits:
        return None
    opened = set(prefer)
    return next((c for c in hits if c.id in opened), hits[0])

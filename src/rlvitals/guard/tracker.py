"""Follow the doctor's incidents from check to check: each one told once, then only its changes.

A live monitor diagnoses a sliding window every few steps, so the same collapse is reported by
every check for as long as it lasts, with an onset that can move as the window slides and data
arrives. :class:`IncidentTracker` matches each check's incidents (:mod:`rlvitals.doctor.incidents`) to
the ones it already follows, by theme and overlapping time, and says only what is new:

- ``opened``: an incident seen for the first time at or above ``alert_on`` severity;
- ``worse``: its severity rose above any it had, a detector joined it that never had, or it is
  ongoing again after it had recovered;
- ``recovered``: every finding of it cleared (the doctor gave it an end step).

An incident the doctor stops reporting without an end step (its onset left the window, or the
detector lost the healthy baseline it compares with) stays open and silent: only an end step
the doctor measured is a recovery. The tracker's memory is bounded: recovered incidents whose
end left the window, and incidents unseen for a window's length, are forgotten; each incident
sends at most :data:`MAX_UPDATES` updates (a flapping condition cannot flood anyone).

>>> from rlvitals.detectors import Finding, Severity
>>> from rlvitals.doctor.incidents import group_findings
>>> t = IncidentTracker()
>>> f = Finding("DEGENERATE_GROUPS", Severity.WARN, "ACR 1.0 >= 0.75", onset_step=61)
>>> [(e.kind, e.incident.onset_step) for e in t.update(group_findings([f]), step=65)]
[('opened', 61)]
>>> t.update(group_findings([f]), step=68)
[]
>>> f.end_step = 139
>>> [e.kind for e in t.update(group_findings([f]), step=150)]
['recovered']
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rlvitals.detectors.base import Severity

__all__ = ["MAX_UPDATES", "IncidentEvent", "IncidentTracker", "LiveIncident"]

MAX_UPDATES = 8
"""Updates (worse / recovered) one incident may send; later changes are followed silently."""
MATCH_GAP = 10
"""Steps by which two incidents' spans may miss each other and still be the same incident (the
doctor's own :data:`rlvitals.doctor.incidents.GAP_STEPS`)."""
MAX_TRACKED = 64
"""Incidents followed at once; the oldest recovered ones are forgotten first."""


def _rank(severity: Any) -> int:
    return Severity.parse(str(getattr(severity, "value", severity))).rank


@dataclass
class LiveIncident:
    """An incident as the tracker follows it across checks.

    Attributes:
        key: a number unique within this tracker (the same incident keeps it).
        theme, title, root, cause, actions: as the doctor's :class:`~rlvitals.doctor.incidents.Incident`
            said at the last check that reported it.
        severity: the highest severity it reached (``info``, ``warn``, ``critical``).
        onset_step: the earliest onset the doctor gave it.
        end_step: the step its findings cleared, while recovered; None while ongoing.
        detectors: every detector ID that has been part of it, in order of arrival.
        first_step, last_step: the check steps that first and last reported it.
        emitted: whether ``opened`` was sent (it is, once the severity reaches ``alert_on``).
        updates: updates sent so far.
        told_ended: whether the last word sent about it said it had ended.
    """

    key: int
    theme: str
    title: str
    root: str
    cause: str
    severity: str
    onset_step: int | None
    end_step: int | None
    detectors: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    first_step: int = 0
    last_step: int = 0
    emitted: bool = False
    updates: int = 0
    told_ended: bool = False

    @property
    def ongoing(self) -> bool:
        return self.end_step is None

    def lasting(self, step: int) -> int:
        """Steps it has lasted at ``step`` (onset to end, or to ``step`` while ongoing)."""
        if self.onset_step is None:
            return 0
        last = self.end_step if self.end_step is not None else max(step, self.last_step)
        return max(0, int(last) - int(self.onset_step) + 1)

    def summary(self) -> dict[str, Any]:
        """JSON-ready fields, as alerts carry them."""
        return {
            "key": self.key,
            "theme": self.theme,
            "title": self.title,
            "root": self.root,
            "detectors": list(self.detectors),
            "severity": self.severity,
            "onset_step": self.onset_step,
            "end_step": self.end_step,
            "cause": self.cause,
            "actions": list(self.actions[:3]),
        }


@dataclass
class IncidentEvent:
    """What changed about one incident at one check: ``opened``, ``worse`` or ``recovered``."""

    kind: str
    incident: LiveIncident
    changes: list[str] = field(default_factory=list)


class IncidentTracker:
    """Turns each check's incidents into events (module docstring).

    Args:
        alert_on: lowest severity that is told (``info``, ``warn``, ``critical``); incidents
            below it are followed silently until they reach it.
        window: steps of the monitor's window, for forgetting what left it.
    """

    def __init__(self, alert_on: str = "warn", window: int = 200):
        self.alert_rank = Severity.parse(alert_on).rank
        self.alert_on = alert_on
        self.window = int(window)
        self.incidents: list[LiveIncident] = []
        self._keys = itertools.count(1)

    @property
    def open(self) -> list[LiveIncident]:
        """Ongoing incidents, earliest onset first."""
        return sorted(
            (i for i in self.incidents if i.ongoing),
            key=lambda i: i.onset_step if i.onset_step is not None else 2**62,
        )

    def update(
        self, incidents: Sequence[Any], step: int, *, partial: bool = False
    ) -> list[IncidentEvent]:
        """Match one check's incidents (worst first, as the doctor sorts them) at ``step``.

        ``partial``: the check ran only some of the detectors (the monitor leaves out those an
        open incident already holds): a partial incident can add detectors or severity to the
        one it matches, never end it.
        """
        events: list[IncidentEvent] = []
        matched: set[int] = set()
        order = sorted(incidents, key=lambda i: i.onset_step if i.onset_step is not None else 2**62)
        for inc in order:
            live = self._match(inc, step, matched)
            if live is None:
                live = self._new(inc, step)
                events.extend(self._opened(live))
            else:
                events.extend(self._refresh(live, inc, step, partial))
            matched.add(live.key)
        self._forget(step)
        return events

    # -- matching -------------------------------------------------------------------------------

    def _match(self, inc: Any, step: int, taken: set[int]) -> LiveIncident | None:
        best, best_gap = None, None
        lo, hi = _span(inc.onset_step, inc.end_step, step)
        for live in self.incidents:
            if live.key in taken or live.theme != inc.theme:
                continue
            if inc.onset_step is None or live.onset_step is None:
                if inc.onset_step is None and live.onset_step is None and live.root == inc.root:
                    return live
                continue
            l_lo, l_hi = _span(live.onset_step, live.end_step, step)
            if lo > l_hi + MATCH_GAP or l_lo > hi + MATCH_GAP:
                continue
            gap = abs(int(live.onset_step) - int(inc.onset_step))
            if best_gap is None or gap < best_gap:
                best, best_gap = live, gap
        return best

    def _new(self, inc: Any, step: int) -> LiveIncident:
        live = LiveIncident(
            key=next(self._keys),
            theme=inc.theme,
            title=inc.title,
            root=inc.root,
            cause=inc.cause,
            severity=Severity(inc.severity).value,
            onset_step=inc.onset_step,
            end_step=inc.end_step,
            detectors=list(dict.fromkeys(inc.ids)),
            actions=list(inc.actions),
            first_step=step,
            last_step=step,
        )
        self.incidents.append(live)
        return live

    def _refresh(
        self, live: LiveIncident, inc: Any, step: int, partial: bool = False
    ) -> list[IncidentEvent]:
        changes: list[str] = []
        sev = Severity(inc.severity).value
        if _rank(sev) > _rank(live.severity):
            changes.append(f"severity {live.severity} -> {sev}")
            live.severity = sev
        joined = [d for d in dict.fromkeys(inc.ids) if d not in live.detectors]
        if joined:
            live.detectors.extend(joined)
            changes.append("+ " + ", ".join(joined))
        if inc.onset_step is not None and (
            live.onset_step is None or inc.onset_step < live.onset_step
        ):
            live.onset_step = inc.onset_step
        live.last_step = step
        if not partial:
            live.title, live.root, live.cause = inc.title, inc.root, inc.cause
            live.actions = list(inc.actions)
            live.end_step = inc.end_step
        if not live.emitted:
            return self._opened(live)
        events: list[IncidentEvent] = []
        ended = live.end_step is not None
        if live.told_ended and not ended:
            changes.append("ongoing again")
        if changes and live.updates < MAX_UPDATES:
            live.updates += 1
            events.append(IncidentEvent("worse", live, changes))
        if ended and not live.told_ended and live.updates < MAX_UPDATES:
            live.updates += 1
            events.append(IncidentEvent("recovered", live))
        live.told_ended = ended
        return events

    def _opened(self, live: LiveIncident) -> list[IncidentEvent]:
        """``opened`` once ``live`` reaches the alert severity (it is told from then on)."""
        if _rank(live.severity) < self.alert_rank:
            return []
        live.emitted = True
        live.told_ended = live.end_step is not None
        return [IncidentEvent("opened", live)]

    def _forget(self, step: int) -> None:
        start = step - self.window + 1
        keep = []
        for live in self.incidents:
            left = live.end_step is not None and live.end_step < start
            unseen = live.last_step < start
            if not (left or unseen):
                keep.append(live)
        if len(keep) > MAX_TRACKED:
            keep.sort(key=lambda i: (i.ongoing, i.last_step))
            keep = keep[-MAX_TRACKED:]
        self.incidents = keep


def _span(onset: int | None, end: int | None, step: int) -> tuple[int, int]:
    lo = int(onset) if onset is not None else step
    return lo, int(end) if end is not None else step

"""``Alert``: one thing the live guard tells people, in JSON and in Slack's payload.

Kinds, in the life of an incident: ``opened`` (once, when the doctor first reports it at or
above the alert severity), ``worse`` (its severity rose, a detector joined it, or it is
ongoing again after a recovery), ``recovered`` (every finding of it cleared), and ``halt`` (the
halt policy stopped the run because of it). In the life of a condition (the cause, from the
closed vocabulary of :mod:`rlvitals.conditions`, followed with hysteresis by a
:class:`~rlvitals.guard.conditions.ConditionTracker`): ``condition_opened``,
``condition_closed`` and ``condition_reopened``. An incident's alerts carry the condition its
signs point to at that check (``condition``), when the doctor named one.

The JSON form (:meth:`Alert.to_dict`) is what :class:`~rlvitals.guard.WebhookSink` POSTs::

    {"schema": 2, "source": "rlvitals", "kind": "opened", "step": 65, "severity": "warn",
     "run": "exp1", "title": "...", "message": "...", "time": 1760000000.0,
     "incident": {"key": 1, "theme": "collapse", "title": "...", "root": "DEGENERATE_GROUPS",
                  "detectors": [...], "severity": "warn", "onset_step": 61, "end_step": null,
                  "cause": "...", "actions": [...]},
     "condition": {"id": "TOO_HARD", "title": "...", "onset_step": 60, "confidence": 0.7,
                   "actions": [...]},
     "changes": [], "halt": null}

Schema 2 added ``condition`` and the three condition kinds; nothing of schema 1 changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALERT_KINDS",
    "ALERT_SCHEMA",
    "CONDITION_KINDS",
    "INCIDENT_KINDS",
    "Alert",
    "ConditionTeller",
    "condition_alert",
    "halt_alert",
    "incident_alert",
]

ALERT_SCHEMA = 2
"""Version of the JSON form of an alert (2: ``condition`` and the condition kinds)."""
INCIDENT_KINDS = ("opened", "worse", "recovered", "halt")
CONDITION_KINDS = ("condition_opened", "condition_closed", "condition_reopened")
ALERT_KINDS = INCIDENT_KINDS + CONDITION_KINDS
_EMOJI = {"critical": ":rotating_light:", "warn": ":warning:", "info": ":information_source:"}


@dataclass
class Alert:
    """One message of the live guard.

    Attributes:
        kind: one of :data:`ALERT_KINDS` (module docstring).
        step: the training step of the check that raised it.
        severity: ``info``, ``warn`` or ``critical`` (a recovery is ``info``).
        title: a few words, e.g. "Learning signal lost: the prompts are too easy".
        message: one line with the numbers (what the log line says).
        incident: the incident's summary (:meth:`LiveIncident.summary`), or None.
        changes: for ``worse``: what changed ("severity warn -> critical", "+ ACR_STALL").
        halt: for ``halt``: ``{"last_healthy_step", "resume_from", "rule"}``.
        run: the run's name, when the monitor was given one.
        time: wall-clock time (seconds since the epoch).
        condition: the condition it points to (``id``, ``title``, ``onset_step``,
            ``confidence``, ``actions``), or None.
    """

    kind: str
    step: int | None
    severity: str
    title: str
    message: str
    incident: dict[str, Any] | None = None
    changes: list[str] = field(default_factory=list)
    halt: dict[str, Any] | None = None
    run: str | None = None
    time: float = field(default_factory=time.time)
    condition: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (module docstring)."""
        return {
            "schema": ALERT_SCHEMA,
            "source": "rlvitals",
            "kind": self.kind,
            "step": self.step,
            "severity": self.severity,
            "run": self.run,
            "title": self.title,
            "message": self.message,
            "time": self.time,
            "incident": self.incident,
            "condition": self.condition,
            "changes": list(self.changes),
            "halt": self.halt,
        }

    @property
    def headline(self) -> str:
        """``"[warn] opened: <title>"``: the alert title sinks show (W&B, trackio, Slack)."""
        run = f"{self.run}: " if self.run else ""
        return f"rlvitals [{self.severity}] {run}{self.kind}: {self.title}"

    def text(self) -> str:
        """The alert as a few plain lines: the message, then what to try (the condition's
        advice first: it is chosen for the cause and filtered by the run's set-up)."""
        lines = [self.message]
        if self.kind not in ("opened", "halt", "condition_opened", "condition_reopened"):
            return "\n".join(lines)
        inc, cond = self.incident or {}, self.condition or {}
        if inc.get("cause"):
            lines.append(str(inc["cause"]))
        actions = list(dict.fromkeys([*(cond.get("actions") or []), *(inc.get("actions") or [])]))
        lines += [f"try: {action}" for action in actions[:2]]
        return "\n".join(lines)

    def slack_payload(self) -> dict[str, Any]:
        """A Slack incoming-webhook payload: ``text`` (the fallback) and ``blocks``.

        Slack's incoming webhooks take ``{"text": ..., "blocks": [...]}``; ``text`` alone is
        what Mattermost, Discord's ``/slack`` endpoints and Teams' Slack-compatible hooks read.
        """
        emoji = _EMOJI.get(self.severity, "")
        head = f"{emoji} *{_escape(self.headline)}*".strip()
        body = _escape(self.text())
        return {
            "text": f"{self.headline}\n{self.text()}",
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": head}},
                {"type": "section", "text": {"type": "mrkdwn", "text": body[:2900]}},
            ],
        }


def incident_alert(
    kind: str, inc: Any, step: int, changes: list[str], run: str | None, condition: Any = None
) -> Alert:
    """The alert of an incident's event (``opened``, ``worse``, ``recovered``): ``inc`` a
    :class:`~rlvitals.guard.LiveIncident`, ``condition`` the
    :class:`~rlvitals.doctor.differential.ConditionCall` its signs point to, or None."""
    ids = ", ".join(inc.detectors)
    since = f" since step {inc.onset_step}" if inc.onset_step is not None else ""
    cause = f"; likely cause: {condition.title} ({condition.id})" if condition is not None else ""
    if kind == "opened":
        ended = f", ended at step {inc.end_step}" if inc.end_step is not None else ""
        msg = f"[{inc.severity}] {inc.title} ({ids}){since}{ended}; seen at step {step}{cause}"
    elif kind == "worse":
        msg = f"[{inc.severity}] worse: {inc.title} ({ids}){since}: {'; '.join(changes)}{cause}"
    else:
        msg = (
            f"recovered: {inc.title} ({ids}){since}, ended at step {inc.end_step} "
            f"({inc.lasting(step)} steps)"
        )
    severity = "info" if kind == "recovered" else inc.severity
    return Alert(
        kind,
        step,
        severity,
        inc.title,
        msg,
        inc.summary(),
        list(changes),
        run=run,
        condition=condition_summary(condition),
    )


def halt_alert(halt: Any, step: int, run: str | None, condition: Any = None) -> Alert:
    """The alert of a :class:`~rlvitals.guard.Halt` decided at ``step``."""
    inc = halt.incident
    return Alert(
        "halt",
        step,
        inc["severity"],
        inc["title"],
        halt.message,
        inc,
        halt=halt.to_dict(),
        run=run,
        condition=condition_summary(condition),
    )


def condition_alert(event: Any, call: Any, severity: str, run: str | None) -> Alert:
    """The alert of a condition's ``opened`` / ``closed`` / ``reopened`` event
    (:class:`~rlvitals.guard.conditions.ConditionEvent`); ``call`` is the
    :class:`~rlvitals.doctor.differential.ConditionCall` of the check that opened it (None
    when it closed: the doctor no longer names it), ``severity`` the condition's."""
    from rlvitals.conditions import get_condition

    title = get_condition(event.condition).title
    name = f"{title} ({event.condition})"
    if event.kind == "closed":
        msg = f"condition closed: {name}, not named since step {event.since}"
        severity = "info"
    else:
        onset = getattr(call, "onset_step", None)
        since = f" since step {onset}" if onset is not None else ""
        msg = f"[{severity}] condition {event.kind}: {name}{since}; named at step {event.step}"
    return Alert(
        f"condition_{event.kind}",
        event.step,
        severity,
        title,
        msg,
        run=run,
        condition=condition_summary(call) or {"id": event.condition, "title": title},
    )


class ConditionTeller:
    """Which condition events (of a :class:`~rlvitals.guard.conditions.ConditionTracker`) are
    told, as what alert: an opening or reopening of a condition at or above ``alert_on`` (the
    condition's own severity, :func:`rlvitals.doctor.differential.condition_severity`), and the
    closing of one whose opening was told. The monitor and ``rlvitals watch`` tell alike.

    >>> from rlvitals.guard.conditions import ConditionEvent
    >>> teller = ConditionTeller("warn")
    >>> teller.alerts([ConditionEvent("opened", "SMALL_GROUPS", 9)])  # info: followed, not told
    []
    >>> events = [ConditionEvent("opened", "TOO_HARD", 9), ConditionEvent("closed", "TOO_HARD", 30, 21)]
    >>> [a.kind for a in teller.alerts(events)]
    ['condition_opened', 'condition_closed']
    """

    def __init__(self, alert_on: str = "warn"):
        from rlvitals.detectors.base import Severity

        self.rank = Severity.parse(alert_on).rank
        self.told: set[str] = set()

    def alerts(self, events: Any, calls: Any = (), run: str | None = None) -> list[Alert]:
        """The alerts of ``events``; ``calls``: the doctor's ConditionCalls of the check (their
        onset, confidence and advice go into the alerts); ``run``: the run's name."""
        from rlvitals.detectors.base import Severity
        from rlvitals.doctor.differential import condition_severity

        by_id = {c.id: c for c in calls}
        out = []
        for e in events:
            severity = condition_severity(e.condition)
            if e.kind == "closed":
                if e.condition not in self.told:
                    continue
                self.told.discard(e.condition)
            elif Severity.parse(severity).rank >= self.rank:
                self.told.add(e.condition)
            else:
                continue
            out.append(condition_alert(e, by_id.get(e.condition), severity, run))
        return out


def condition_summary(call: Any) -> dict[str, Any] | None:
    """The ``condition`` of an alert's JSON: what a reader acts on, of a ConditionCall."""
    if call is None:
        return None
    return {
        "id": call.id,
        "title": call.title,
        "onset_step": call.onset_step,
        "confidence": round(float(call.confidence), 2),
        "actions": list(call.actions),
    }


def _escape(text: str) -> str:
    """Slack mrkdwn escaping: ``&``, ``<`` and ``>`` are the three control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

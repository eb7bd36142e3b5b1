"""``Alert``: one thing the live guard tells people, in JSON and in Slack's payload.

Kinds, in the life of an incident: ``opened`` (once, when the doctor first reports it at or
above the alert severity), ``worse`` (its severity rose, a detector joined it, or it is
ongoing again after a recovery), ``recovered`` (every finding of it cleared), and ``halt`` (the
halt policy stopped the run because of it).

The JSON form (:meth:`Alert.to_dict`) is what :class:`~rlvitals.guard.WebhookSink` POSTs::

    {"schema": 1, "source": "rlvitals", "kind": "opened", "step": 65, "severity": "warn",
     "run": "exp1", "title": "...", "message": "...", "time": 1760000000.0,
     "incident": {"key": 1, "theme": "collapse", "title": "...", "root": "DEGENERATE_GROUPS",
                  "detectors": [...], "severity": "warn", "onset_step": 61, "end_step": null,
                  "cause": "...", "actions": [...]},
     "changes": [], "halt": null}
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ALERT_KINDS", "ALERT_SCHEMA", "Alert"]

ALERT_SCHEMA = 1
"""Version of the JSON form of an alert."""
ALERT_KINDS = ("opened", "worse", "recovered", "halt")
_EMOJI = {"critical": ":rotating_light:", "warn": ":warning:", "info": ":information_source:"}


@dataclass
class Alert:
    """One message of the live guard.

    Attributes:
        kind: ``opened``, ``worse``, ``recovered`` or ``halt``.
        step: the training step of the check that raised it.
        severity: ``info``, ``warn`` or ``critical`` (a recovery is ``info``).
        title: a few words, e.g. "Learning signal lost: the prompts are too easy".
        message: one line with the numbers (what the log line says).
        incident: the incident's summary (:meth:`LiveIncident.summary`), or None.
        changes: for ``worse``: what changed ("severity warn -> critical", "+ ACR_STALL").
        halt: for ``halt``: ``{"last_healthy_step", "resume_from", "rule"}``.
        run: the run's name, when the monitor was given one.
        time: wall-clock time (seconds since the epoch).
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
            "changes": list(self.changes),
            "halt": self.halt,
        }

    @property
    def headline(self) -> str:
        """``"[warn] opened: <title>"``: the alert title sinks show (W&B, trackio, Slack)."""
        run = f"{self.run}: " if self.run else ""
        return f"rlvitals [{self.severity}] {run}{self.kind}: {self.title}"

    def text(self) -> str:
        """The alert as a few plain lines: the message, then what to try."""
        lines = [self.message]
        inc = self.incident or {}
        if inc.get("cause") and self.kind in ("opened", "halt"):
            lines.append(str(inc["cause"]))
        for action in (inc.get("actions") or [])[:2]:
            if self.kind in ("opened", "halt"):
                lines.append(f"try: {action}")
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


def _escape(text: str) -> str:
    """Slack mrkdwn escaping: ``&``, ``<`` and ``>`` are the three control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

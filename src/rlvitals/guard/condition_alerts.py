"""``rlvitals watch``'s alerts: the conditions it follows, told to sinks as a monitor tells them.

``watch`` runs in its own process, beside the training: no W&B or trackio run is active there,
so its sinks are the webhooks of the environment (:func:`rlvitals.guard.sinks.env_sinks`:
``RLVITALS_WEBHOOK_URL``, ``RLVITALS_SLACK_WEBHOOK_URL``).

>>> got = []
>>> alerts = ConditionAlerts([got.append], run="train.log")
>>> alerts.event("opened", "ENTROPY_COLLAPSE", 12, "warn", "Entropy collapsed")
>>> alerts.close(), [(a.kind, a.step) for a in got]
(0, [('condition_opened', 12)])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlvitals.guard.alerts import Alert
from rlvitals.guard.sinks import DEFAULT_SINK_TIMEOUT, SinkRunner, env_sinks

__all__ = ["ConditionAlerts"]

_RANK = {"info": 0, "warn": 1, "critical": 2}


class ConditionAlerts:
    """``rlvitals watch``'s alerts: the conditions it follows
    (:class:`~rlvitals.guard.conditions.ConditionTracker`), told to sinks as a monitor tells
    them: ``condition_opened`` / ``condition_reopened`` for a condition at or above
    ``alert_on``, ``condition_closed`` when its opening was told.

    Args:
        sinks: sinks, callables or webhook URLs (default: :func:`env_sinks`; W&B and trackio
            have no run in a watching process).
        run: the run's name in the alerts (``watch`` gives the path it follows).
        alert_on: the lowest severity told.
        timeout: seconds one delivery may take (:class:`SinkRunner`).
    """

    def __init__(
        self,
        sinks: Iterable[Any] | None = None,
        *,
        run: str | None = None,
        alert_on: str = "warn",
        timeout: float = DEFAULT_SINK_TIMEOUT,
    ):
        if alert_on not in _RANK:
            raise ValueError(f"alert_on must be one of {', '.join(_RANK)}, got {alert_on!r}")
        self.runner = SinkRunner(env_sinks() if sinks is None else sinks, timeout=timeout)
        self.run, self.alert_on = run, alert_on
        self._told: set[str] = set()

    def event(self, kind: str, condition: str, step: int, severity: str, title: str) -> None:
        """A tracker event (``opened``, ``closed``, ``reopened``) of ``condition`` (its ID and
        ``title``) at ``step``; ``severity`` is the condition's."""
        name = f"{title} ({condition})"
        if kind == "closed":
            if condition not in self._told:
                return
            self._told.discard(condition)
            msg, severity = f"condition closed: {name}, not named since step {step}", "info"
        else:
            if _RANK.get(severity, 0) < _RANK[self.alert_on]:
                return
            self._told.add(condition)
            msg = f"[{severity}] condition {kind}: {name}; named at step {step}"
        alert = Alert(f"condition_{kind}", step, severity, title, msg, run=self.run)
        if hasattr(alert, "condition"):  # alert schema 2: which condition, as a monitor says
            alert.condition = {"id": condition, "title": title}
        self.runner.send(alert)

    def close(self, timeout: float = DEFAULT_SINK_TIMEOUT) -> int:
        """Deliver what is queued (at most ``timeout`` s); the alerts lost."""
        return self.runner.close(timeout)

"""``rlvitals watch``'s alerts: the conditions it follows, told to sinks as a monitor tells them.

``watch`` runs in its own process, beside the training: no W&B or trackio run is active there,
so its sinks are the webhooks of the environment (:func:`rlvitals.guard.sinks.env_sinks`:
``RLVITALS_WEBHOOK_URL``, ``RLVITALS_SLACK_WEBHOOK_URL``).

>>> from rlvitals.guard.conditions import ConditionEvent
>>> got = []
>>> alerts = ConditionAlerts([got.append], run="train.log")
>>> alerts.event(ConditionEvent("opened", "ENTROPY_COLLAPSE", 12))
>>> alerts.close(), [(a.kind, a.step, a.severity) for a in got]
(0, [('condition_opened', 12, 'warn')])
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlvitals.guard.alerts import ConditionTeller
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
        self.teller = ConditionTeller(alert_on)

    def event(self, event: Any, call: Any = None) -> None:
        """Tell a tracker's ``event`` (a :class:`~rlvitals.guard.conditions.ConditionEvent`)
        if it is to be told; ``call`` is the doctor's
        :class:`~rlvitals.doctor.differential.ConditionCall` of the condition at that check
        (its onset, confidence and advice go into the alert), or None. What is told, and
        how, is the monitor's (:class:`~rlvitals.guard.alerts.ConditionTeller`)."""
        for alert in self.teller.alerts([event], [] if call is None else [call], self.run):
            self.runner.send(alert)

    def close(self, timeout: float = DEFAULT_SINK_TIMEOUT) -> int:
        """Deliver what is queued (at most ``timeout`` s); the alerts lost."""
        return self.runner.close(timeout)

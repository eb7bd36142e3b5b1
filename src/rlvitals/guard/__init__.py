"""The live guard's actions: incidents told once, a halt policy, and where alerts go.

A :class:`~rlvitals.Monitor` (``rlvitals.guard.monitor``) runs the doctor over a sliding
window of a live run; this package decides what to do with what it finds:

- :class:`IncidentTracker` follows the doctor's incidents from check to check and turns them
  into :class:`Alert` s: each incident is ``opened`` once, then updated (``worse``,
  ``recovered``), never repeated;
- :class:`HaltPolicy` (rules of :class:`HaltRule`) decides when a run is dead enough to stop,
  and names the last healthy step, the checkpoint to resume from (:class:`Halt`);
- sinks deliver alerts: :class:`LogSink` (always, through ``logging``), :class:`WebhookSink`
  (JSON POST), :class:`SlackSink` (Slack-compatible payload), :class:`WandbSink`
  (``wandb.alert`` when a W&B run is active), :class:`TrackioSink` (``trackio.alert`` when a
  trackio run is), :class:`FileSink` (JSON lines) and any callable. :class:`SinkRunner` runs
  them off the training thread: a sink that raises, hangs past its timeout or meets a full
  disk is reported once through ``logging`` and never reaches the training loop.
  :func:`env_sinks` adds the webhooks ``RLVITALS_WEBHOOK_URL`` and
  ``RLVITALS_SLACK_WEBHOOK_URL`` name to the default sinks.

See docs/guard.md.
"""

from __future__ import annotations

from rlvitals.registry import lazy_exports

_LAZY = {
    "Alert": "rlvitals.guard.alerts",
    "IncidentTracker": "rlvitals.guard.tracker",
    "LiveIncident": "rlvitals.guard.tracker",
    "Halt": "rlvitals.guard.policy",
    "HaltPolicy": "rlvitals.guard.policy",
    "HaltRule": "rlvitals.guard.policy",
    "RlvitalsHalt": "rlvitals.guard.policy",
    "CallableSink": "rlvitals.guard.sinks",
    "FileSink": "rlvitals.guard.sinks",
    "LogSink": "rlvitals.guard.sinks",
    "SinkRunner": "rlvitals.guard.sinks",
    "SlackSink": "rlvitals.guard.sinks",
    "TrackioSink": "rlvitals.guard.sinks",
    "WandbSink": "rlvitals.guard.sinks",
    "WebhookSink": "rlvitals.guard.sinks",
    "default_sinks": "rlvitals.guard.sinks",
    "env_sinks": "rlvitals.guard.sinks",
    "ConditionAlerts": "rlvitals.guard.condition_alerts",
}
"""Each public name of the package and the module it is imported from on first use."""
__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)

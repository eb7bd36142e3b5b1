"""What a check of the monitor concludes, and where it goes: the log, the recording, the sinks.

:class:`Delivery` is the part of :class:`~rlvitals.Monitor` that judges a check's findings
(what is new, the incidents and conditions followed, the halt decision), turns what changed
into :class:`~rlvitals.guard.Alert` s and delivers each one: one log line
(logger ``rlvitals.guard``), an ``alert`` (or ``halt``) event in the recording, a message to
every sink (:class:`~rlvitals.guard.SinkRunner`, off the training thread). It also writes the
steps into the recording and reports, once, what went wrong on the way (a sink that failed,
a recording that met I/O errors).

Conditions are followed with the same hysteresis as ``rlvitals watch``
(:class:`~rlvitals.guard.conditions.ConditionTracker`): a condition is told ``opened`` once the
doctor named it at two checks in a row that could name it, ``closed`` after three that did not,
``reopened`` when it comes back; a condition below ``alert_on`` is followed but not told.
"""

from __future__ import annotations

import logging
from typing import Any

from rlvitals.guard.checks import MonitorCheck
from rlvitals.guard.inputs import plain_recorder

__all__ = ["Delivery"]

logger = logging.getLogger("rlvitals.guard")


class Delivery:
    """Alert emission and recording for :class:`~rlvitals.Monitor` (module docstring). Uses the
    monitor's ``recorder``, ``sinks``, ``log_sink``, ``guard``, ``alerts``, ``tracker``,
    ``conditions`` (a ConditionTracker), ``teller`` (a ConditionTeller) and ``name``."""

    # -- a check's judgement ----------------------------------------------------------------------

    def _judged(
        self,
        step: int,
        partial: bool,
        findings: list,
        detectors: list,
        incidents: list,
        conditions: list = (),
    ) -> MonitorCheck:
        """A check's findings: what is new, the incidents' and the conditions' alerts, the halt
        decision."""
        findings, calls = list(findings), list(conditions)
        new, seen = [], set()
        for f in findings:
            if f.id not in self._active and f.id not in seen:
                seen.add(f.id)
                new.append(f)
        self._active = (self._active - set(detectors)) | {f.id for f in findings}
        out = MonitorCheck(
            step,
            checked=True,
            findings=findings,
            new=new,
            incidents=list(incidents),
            conditions=calls,
        )
        out.condition_events, told = self._condition_alerts(step, calls, detectors)
        out.alerts += self._incident_alerts(
            self.tracker.update(incidents, step, partial=partial), step, calls
        )
        out.alerts += told
        if self.policy and self.halted is None:
            # only what this check saw: an incident the doctor no longer reports is not evidence
            seen = [i for i in self.tracker.open if i.last_step == step]
            halt = self.policy.decide(seen, step, self.checkpoints)
            if halt is not None:
                self.halted = out.halt = halt
                out.alerts.append(self._halt_alert(halt, step, calls))
        for alert in out.alerts:
            self._send(alert)
        self._report_problems(step)
        self.checks += 1
        return out

    # -- alerts ---------------------------------------------------------------------------------

    def _incident_alerts(self, events: list, step: int, calls: list) -> list:
        """The alerts of the incident tracker's events, each with the condition it points to
        (an open one first)."""
        from rlvitals.guard.alerts import incident_alert
        from rlvitals.guard.conditions import condition_of

        opened = self.conditions.open
        return [
            incident_alert(
                e.kind,
                e.incident,
                step,
                e.changes,
                self.name,
                condition_of(e.incident.detectors, calls, opened),
            )
            for e in events
        ]

    def _condition_alerts(self, step: int, calls: list, detectors: list) -> tuple[list, list]:
        """Follow the conditions named at a check (``calls``, primary first) with hysteresis;
        returns ``(events, alerts)``: every event, and the alerts of those told
        (:class:`~rlvitals.guard.alerts.ConditionTeller`: at or above ``alert_on``; a closing
        when its opening was told)."""
        from rlvitals.guard.conditions import judged_by, named_now

        events = self.conditions.update(named_now(calls), step, judged_by(detectors))
        return events, self.teller.alerts(events, calls, self.name)

    def _halt_alert(self, halt: Any, step: int, calls: list) -> Any:
        from rlvitals.guard.alerts import halt_alert
        from rlvitals.guard.conditions import condition_of

        detectors = halt.incident.get("detectors") or []
        return halt_alert(
            halt, step, self.name, condition_of(detectors, calls, self.conditions.open)
        )

    def _send(self, alert: Any) -> None:
        self.alerts.append(alert)
        self.guard.run("logging an alert", self.log_sink.send, alert)
        if self.recorder is not None:
            inc = alert.incident or {}
            kind = "halt" if alert.kind == "halt" else "alert"
            data = {
                "alert": alert.kind,
                "id": inc.get("root"),
                "ids": inc.get("detectors"),
                "severity": alert.severity,
                "theme": inc.get("theme"),
                "onset_step": inc.get("onset_step"),
                "end_step": inc.get("end_step"),
                "incident": inc.get("key"),
                "changes": alert.changes,
            }
            if alert.condition is not None:
                data["condition"] = alert.condition["id"]
            if alert.halt is not None:
                data.update({k: v for k, v in alert.halt.items() if k != "step"})
            self.guard.run(
                "recording an alert",
                self.recorder.log_event,
                alert.step,
                kind,
                alert.message,
                **data,
            )
        self.sinks.send(alert)

    def _report_problems(self, step: int) -> None:
        for name, what in self.sinks.take_problems():
            if self.recorder is not None:
                self.guard.run(
                    "recording a sink problem",
                    self.recorder.log_event,
                    step,
                    "note",
                    f"alert sink {name!r} {what}",
                    sink=name,
                )
        if self.recorder is not None:
            errors = self.guard.run("reading the recorder", lambda: self.recorder.stats["errors"])
            if isinstance(errors, int) and errors > self._recorder_errors:
                if self._recorder_errors == 0:
                    logger.warning(
                        "rlvitals: the recording in %s met I/O errors (%d so far); training "
                        "continues, lost records are counted and reported in the recording",
                        getattr(self.recorder, "path", "?"),
                        errors,
                    )
                self._recorder_errors = errors

    # -- recording ----------------------------------------------------------------------------

    def _open_recorder(self) -> None:
        from rlvitals.recording import Recorder

        path, self.recording_dir = self.recording_dir, None  # one attempt, even if it fails
        self.recorder = Recorder(path, self.manifest)
        self.recording_dir = path
        self._own_recorder = True

    def _record_groups(self, step, r, g, prompts, adv, lens) -> None:
        rec = self.recorder
        if rec is None:
            return
        if plain_recorder(rec):  # checked by _groups already: the recorder's own checks skipped
            rec._log_host_groups(step, r, g, prompts, lens, adv)
        else:
            rec.log_groups(step, r, g, prompts=prompts, lengths=lens, advantages=adv)

    def _record_scalars(self, step: int, scalars: dict[str, Any], plain: dict) -> None:
        rec = self.recorder
        if rec is None:
            return
        if plain_recorder(rec) and len(plain) == len(scalars):  # every value a number
            rec._log_floats(step, plain)
        else:
            rec.log_scalars(step, scalars)

    def _close_recording(self) -> None:
        """Close the monitor's own recording, with a note of the failures met, if any."""
        self.guard.run(
            "recording the failures",
            self.guard.note,
            self.recorder,
            self.last_step,
            "rlvitals monitor",
        )
        self.guard.run("closing the recording", self.recorder.close)

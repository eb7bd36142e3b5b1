"""What one check of the live monitor runs, and what it returns.

A :class:`~rlvitals.Monitor` checks the collapse family and the cheap critical detectors every
``check_every`` steps (the *fast* checks) and the whole catalogue every ``full_every`` steps.
:class:`CheckPlans` makes each check's :class:`~rlvitals.DoctorConfig` once: the full one, the
fast one (:data:`FAST_EXTRA` besides the collapse family), and while a collapse is open and
told, the *partial* fast ones that leave out the detectors already part of it
(:data:`OPEN_BACKOFF`); and the :func:`rlvitals.doctor.prepare` of each. :class:`MonitorCheck`
is what a check did; :func:`run_check` runs one.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAST_EXTRA", "OPEN_BACKOFF", "CheckPlans", "MonitorCheck", "run_check"]

FAST_EXTRA = ("GRAD_NONFINITE", "ZERO_GRAD_STEPS")
"""Detectors checked every ``check_every`` steps besides the collapse family: cheap ones whose
findings are critical (non-finite gradients) or belong to a collapse (exactly-zero updates).
The rest of the catalogue (length, entropy, KL, clipping, throughput, ...) is checked every
``full_every`` steps."""
OPEN_BACKOFF = 3
"""While a collapse is open and told (and no halt rule waits on it), only one fast check in this
many runs the detectors already part of it: the others run only those that could still join
it. The collapse detectors cost most during a collapse, when they have least new to say."""
_UNSET = object()


@dataclass
class MonitorCheck:
    """What one :meth:`Monitor.observe` or :meth:`Monitor.check` did.

    Attributes:
        step: the last step fed when it ran.
        checked: whether the doctor ran (``observe`` runs it every ``check_every`` steps).
        findings: every finding over the window, worst first (when checked).
        new: findings whose detector ID was silent at the previous check.
        incidents: the doctor's incidents over the window.
        alerts: the alerts sent at this check (:class:`~rlvitals.guard.Alert`).
        halt: the :class:`~rlvitals.guard.Halt` decided at this check, or None.
        conditions: the conditions the doctor named over the window, primary first
            (:class:`~rlvitals.doctor.differential.ConditionCall`).
        condition_events: what changed in the conditions followed with hysteresis
            (:class:`~rlvitals.guard.conditions.ConditionEvent`: opened, closed, reopened).
    """

    step: int | None
    checked: bool = False
    findings: list[Any] = field(default_factory=list)
    new: list[Any] = field(default_factory=list)
    incidents: list[Any] = field(default_factory=list)
    alerts: list[Any] = field(default_factory=list)
    halt: Any = None
    conditions: list[Any] = field(default_factory=list)
    condition_events: list[Any] = field(default_factory=list)


class CheckPlans:
    """The configs of the monitor's checks, each made (and prepared) once.

    Args:
        config: the user's :class:`~rlvitals.DoctorConfig`, or None for the default one.
    """

    def __init__(self, config: Any = None):
        self.config = config
        self._default: Any = None
        self._fast: Any = _UNSET
        self._prepared: dict[int, Any] = {}
        self._partial: dict[tuple[str, ...], Any] = {}
        self._partials = 0

    def full(self) -> Any:
        """``config``, or the default :class:`~rlvitals.DoctorConfig` (made once)."""
        if self.config is not None:
            return self.config
        if self._default is None:
            from rlvitals.doctor import DoctorConfig

            self._default = DoctorConfig()
        return self._default

    def fast(self) -> Any:
        """The config of the fast checks: the selected detectors of the collapse family and
        :data:`FAST_EXTRA` (None when none of them is selected)."""
        if self._fast is _UNSET:
            from rlvitals.doctor import select_detectors

            base = self.full()
            ids = sorted(
                c.id for c in select_detectors(base) if c.family == "collapse" or c.id in FAST_EXTRA
            )
            self._fast = dataclasses.replace(base, select=ids) if ids else None
        return self._fast

    def prepared(self, config: Any) -> Any:
        """:func:`rlvitals.doctor.prepare` of a check's config, once per config (the full one,
        the fast one, the partial ones of an open collapse: each made once)."""
        hit = self._prepared.get(id(config))
        if hit is None or hit.config is not config:
            from rlvitals.doctor import prepare

            hit = self._prepared[id(config)] = prepare(config)
        return hit

    def partial(self, config: Any, tracker: Any) -> tuple[Any, bool]:
        """``(config, partial)`` of a fast check: while a collapse incident of ``tracker`` (an
        :class:`~rlvitals.guard.IncidentTracker`; None when a halt rule waits: every check is
        whole then) is open and told, two checks in :data:`OPEN_BACKOFF` leave its detectors
        out. ``(None, True)``: nothing is left to run."""
        told = set()
        for i in () if tracker is None else tracker.incidents:
            if i.ongoing and i.emitted and i.theme == "collapse":
                told.update(i.detectors)
        if not told:
            self._partials = 0
            return config, False
        self._partials += 1
        if self._partials % OPEN_BACKOFF == 0:
            return config, False
        ids = [d for d in config.select if d not in told]
        if not ids:
            return None, True
        if len(ids) == len(config.select):
            return config, True  # nothing told is selected here: the fast config itself
        key = tuple(ids)  # subsets of the fast detectors: a handful at most, each made once
        part = self._partial.get(key)
        if part is None:
            part = self._partial[key] = dataclasses.replace(config, select=ids)
        return part, True


def run_check(window: Any, manifest: Any, config: Any, prepared: Any) -> tuple:
    """The doctor over a :class:`~rlvitals.guard.window.StepWindow` with a check's config and
    its :func:`~rlvitals.doctor.prepare`: ``(findings, detectors, incidents, conditions)``."""
    from rlvitals.doctor import diagnose

    window.close_step()
    d = diagnose(window.run(manifest), config, prepared=prepared, explain=False)
    return d.findings, d.detectors, d.incidents, d.conditions

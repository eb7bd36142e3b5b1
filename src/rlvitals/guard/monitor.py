"""``Monitor``: watch a run as it trains; warn once, alert where people look, stop a dead run.

Feed it one call per step, from any loop::

    mon = rlvitals.Monitor(recording_dir="runs/exp1", halt_on="collapse:20",
                           sinks=["https://hooks.example/rlvitals"])
    for step in range(1, n_steps + 1):
        rewards = ...                                  # (n,) with group_ids (n,), or (N, G)
        mon.observe(step, rewards, group_ids, loss=loss, grad_norm=gn)
        if mon.should_stop:                            # mon.halted.last_healthy_step: resume there
            break
    mon.close()

What one ``observe`` does:

1. reduces the step's per-group rewards to the per-step series the doctor derives from a
   recording (ACR and its split, pass rate, expected collapse, advantage spread; see
   :mod:`rlvitals.guard.window`) and keeps the last ``window`` steps of those and of the
   scalars: memory does not grow with the run;
2. writes the step into a recording, when given a directory (or a :class:`Recorder`);
3. every ``check_every`` steps, runs the real doctor (:func:`rlvitals.doctor.diagnose`) over
   the window: the collapse family and the cheap critical detectors (:data:`FAST_EXTRA`), and
   every ``full_every`` steps the whole catalogue. Its incidents go through an
   :class:`~rlvitals.guard.IncidentTracker`: each incident is told once (``opened``), then only
   when it gets worse or recovers; every alert is one log line (logger ``rlvitals.guard``), an
   ``alert`` event in the recording, and a message to each sink (W&B / trackio alerts when a run
   of theirs is active, webhooks, Slack, your callables: :mod:`rlvitals.guard.sinks`);
4. asks the halt policy (``halt_on``, :class:`~rlvitals.guard.HaltPolicy`) whether an ongoing
   incident is reason to stop; then :attr:`should_stop` is true and :attr:`halted` names the
   last healthy step and the checkpoint to resume from.

Latency: a detector that needs ``sustain`` consecutive steps fires ``sustain - 1`` steps after
the onset on the window's data; with ``check_every = c`` the monitor tells it at most ``c - 1``
steps later, so a collapse within ``sustain + 2`` steps of its onset at the default ``c = 3``
(the rest of the catalogue within ``full_every - 1`` steps more). Once a collapse is told, and
no halt rule waits on it, fast checks skip the detectors already part of it two times in three
(:data:`OPEN_BACKOFF`): a detector joining it is still told on time, its recovery may be told up
to ``3 c - 1`` steps late.

``background=True`` (the TRL callback's default) keeps steps 1 and 3 in a helper process
(:mod:`rlvitals.guard.checker`): the training process records, hands each step's data
over and reads the answers without waiting; a check's alerts and halt then arrive at a later
``observe`` (or :meth:`Monitor.poll`), normally the next one, dated at the step judged. The
training process keeps the messages of the window's steps (references to the bytes it sent,
no reduction): if the helper dies, the window is refilled from them and the check in flight is
run in-process before anything is judged, so onsets, halts and the resume point do not move.

Nothing here may stop or slow training: bad *arguments* raise at the call (they are bugs in the
caller, as with the :class:`~rlvitals.Recorder`), everything else (a doctor error, a full disk,
a sink that raises or hangs) is contained, reported once through ``logging`` and counted;
warnings raised inside (numpy's, the recorder's) are silenced so ``-W error`` cannot turn them
into exceptions in the training loop.

The older feeding API remains: :meth:`feed_scalars` / :meth:`feed_groups` only store,
:meth:`check` diagnoses now (here the second prompt's group fails every completion from step 50):

>>> from rlvitals import Manifest, Monitor
>>> mon = Monitor(Manifest(trainer="mine", group_size=4), window=200, sinks=[])
>>> for step in range(1, 101):
...     mon.feed_scalars(step, {"loss": 0.1, "grad_norm": 0.3})
...     second = [1.0, 0.0, 1.0, 0.0] if step < 50 else [0.0] * 4
...     mon.feed_groups(step, [1.0] * 4 + second, [0] * 4 + [1] * 4)
>>> check = mon.check()
>>> [(f.id, f.onset_step) for f in check.new if f.id == "DEGENERATE_GROUPS"]
[('DEGENERATE_GROUPS', 50)]
>>> [a.kind for a in check.alerts]
['opened']
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import sys
import threading
import time
import warnings
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.guard.containment import Guard
from rlvitals.guard.window import (
    StepWindow,
    _prompt_list,
    known_range,
    plain_scalars,
    run_of,
    unwire,
    wire,
)
from rlvitals.recording.run import Manifest, Run

__all__ = [
    "DEFAULT_CHECK_EVERY",
    "DEFAULT_FULL_EVERY",
    "DEFAULT_MONITOR_WINDOW",
    "Monitor",
    "MonitorCheck",
]

logger = logging.getLogger("rlvitals.guard")

DEFAULT_MONITOR_WINDOW = 200
"""Steps the monitor keeps and diagnoses. Long enough for the detectors' own windows (the
doctor judges runs of at least ~30 steps; ACR windows are 25 steps, the stall rule 50)."""
DEFAULT_CHECK_EVERY = 3
"""Steps between two checks of the fast detectors: a collapse is told within ``sustain + 2``
steps of its onset (module docstring)."""
DEFAULT_FULL_EVERY = 15
"""Steps between two checks of the whole catalogue (length, entropy, KL, clipping, throughput
drift over tens of steps)."""
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
DEFAULT_FLUSH_SECONDS = 10.0
"""Background mode: how long ``flush``/``check`` wait for the check in flight."""
ALERTS_KEPT = 1000
"""Alerts kept in :attr:`Monitor.alerts` (the oldest are forgotten)."""


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
    """

    step: int | None
    checked: bool = False
    findings: list[Any] = field(default_factory=list)
    new: list[Any] = field(default_factory=list)
    incidents: list[Any] = field(default_factory=list)
    alerts: list[Any] = field(default_factory=list)
    halt: Any = None


class Monitor:
    """A live guard over a sliding window of a run (see the module docstring).

    Args:
        manifest: what is known about the run (trainer, group size, reward range, estimator).
        window: steps kept and diagnosed (the most recent ones).
        config: a :class:`~rlvitals.DoctorConfig` (detector selection and knobs, tau, ...).
        check_every: steps between checks of the fast detectors in :meth:`observe` (0: the
            monitor never checks by itself; call :meth:`check`).
        full_every: steps between checks of the whole catalogue (a multiple of
            ``check_every`` is best; 0 = only fast checks, and :meth:`check`).
        recording_dir: record the run into this directory (a crash-safe recording that
            ``rlvitals doctor`` and ``rlvitals watch`` read); or pass ``recorder``.
        recorder: a :class:`~rlvitals.Recorder` to write into (the monitor does not close it).
        halt_on: when to stop: a :class:`~rlvitals.guard.HaltPolicy`, a rule, or rule text
            (``"critical"``, ``"collapse:20"``, ``"ADV_COLLAPSE"``; see
            :mod:`rlvitals.guard.policy`). None never halts.
        alert_on: lowest incident severity that is told (``info``, ``warn``, ``critical``).
        sinks: where alerts go besides the log: sinks, callables or webhook URLs. None (default)
            = W&B and trackio alerts, each active only while a run of theirs is; ``[]`` = log only.
        sink_timeout: seconds a sink may take per alert before it is reported as hung.
        name: the run's name in alerts.
        checkpoints: ``() -> [(step, path), ...]``, the checkpoints saved so far, for the halt
            to name the one to resume from.
        background: run the checks' detectors in a helper process
            (:mod:`rlvitals.guard.checker`): the training process only hands the
            window over and reads the answers, so a check costs it ~0.1 ms instead of the
            check itself. A check's alerts and halt then arrive at a later ``observe`` (or
            :meth:`poll`), normally the next one; their ``step`` is the step checked. If the
            helper cannot start or fails, the monitor says so once and checks in-process,
            first refilling the window from the steps this process kept (the messages it
            sent) and running the check that was in flight: what is told, the halt and the
            step to resume from are those of a run whose helper never failed.
    """

    def __init__(
        self,
        manifest: Manifest | None = None,
        *,
        window: int = DEFAULT_MONITOR_WINDOW,
        config: Any = None,
        check_every: int = DEFAULT_CHECK_EVERY,
        full_every: int = DEFAULT_FULL_EVERY,
        recording_dir: str | os.PathLike | None = None,
        recorder: Any = None,
        halt_on: Any = None,
        alert_on: str = "warn",
        sinks: Iterable[Any] | None = None,
        sink_timeout: float | None = None,
        name: str | None = None,
        checkpoints: Callable[[], Iterable[tuple[int, Any]]] | None = None,
        background: bool = False,
    ):
        from rlvitals.guard.policy import HaltPolicy
        from rlvitals.guard.sinks import DEFAULT_SINK_TIMEOUT, LogSink, SinkRunner, default_sinks
        from rlvitals.guard.tracker import IncidentTracker
        from rlvitals.signal import DEFAULT_TAU

        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
        if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 0:
            raise ValueError(f"check_every must be an integer >= 0, got {check_every!r}")
        if isinstance(full_every, bool) or not isinstance(full_every, int) or full_every < 0:
            raise ValueError(f"full_every must be an integer >= 0, got {full_every!r}")
        if recording_dir is not None and recorder is not None:
            raise ValueError("give recording_dir or recorder, not both")
        self.manifest = manifest or Manifest()
        self.window = window
        self.config = config
        self.check_every = check_every
        self.full_every = full_every
        self.name = name
        self.checkpoints = checkpoints
        self.policy = HaltPolicy.parse(halt_on)
        self.tracker = IncidentTracker(alert_on, window)
        self.log_sink = LogSink()
        timeout = DEFAULT_SINK_TIMEOUT if sink_timeout is None else float(sink_timeout)
        self.sinks = SinkRunner(default_sinks() if sinks is None else sinks, timeout=timeout)
        self.guard = Guard("monitor")
        self.recording_dir = None if recording_dir is None else Path(recording_dir)
        self.recorder = recorder
        self._own_recorder = False
        tau = getattr(config, "tau", DEFAULT_TAU)
        self._window = StepWindow(window, tau=tau, reward_range=known_range(self.manifest))
        self.alerts: deque[Any] = deque(maxlen=ALERTS_KEPT)
        self.halted: Any = None
        self.last_step: int | None = None
        self.checks = 0
        self.seconds = 0.0
        self.check_seconds = 0.0
        self._last_check: int | None = None
        self._last_full: int | None = None
        self._fast_config: Any = _UNSET
        self._default_config: Any = None
        self._plans: dict[int, Any] = {}
        self._partial_configs: dict[tuple[str, ...], Any] = {}
        self._partials = 0
        self._dirty = False
        self._active: set[str] = set()
        self._recorder_errors = 0
        self.closed = False
        self.background = bool(background)
        self.background_failure: str | None = None
        self._owed = 0  # a check fell due while one was in flight: 1 fast, 2 full
        self._checker: Any = None
        self._held: deque[int] = deque(maxlen=window)  # background mode: the window's steps
        # Background mode: the messages of the window's steps, as sent (the wire bytes, no
        # reduction), to refill the window here if the helper goes away; and the check in
        # flight, to run it here over the same steps.
        self._sent: OrderedDict[int, list[tuple]] = OrderedDict()
        self._asked: tuple | None = None  # (config, step, partial) of the check in flight
        self._owed_here = 0  # a check owed when the helper went away: 1 fast, 2 full
        self._polled: int | None = None
        self._sent_configs: set[tuple[str, ...] | None] = set()
        if self.background:
            from rlvitals.guard.checker import Checker

            self._checker = Checker()  # it imports while the run starts; requests wait
            if not (
                self._checker.start()
                and self._checker.send(("init", window, tau, self.manifest), now=True)
            ):
                self._checker_broke()

    # -- feeding ------------------------------------------------------------------------------

    def observe(
        self,
        step: int,
        rewards: Any = None,
        group_ids: Any = None,
        *,
        prompts: Any = None,
        advantages: Any = None,
        lengths: Any = None,
        check: bool | None = None,
        values: dict[str, Any] | None = None,
        **scalars: Any,
    ) -> MonitorCheck:
        """Take one step; check every ``check_every`` steps (``check=True/False`` forces it).

        Args:
            step: the training step (steps go up; an earlier step means the run went back, and
                the window forgets the later ones).
            rewards: ``(n,)`` reward per completion with ``group_ids`` ``(n,)`` (any order,
                ragged groups), or ``(N, G)`` one row per group; numpy or torch (any device);
                NaN = unscorable. None when the step has no rewards to give.
            group_ids: ``(n,)`` the group of each reward (None with 2-D rewards).
            prompts: one id per distinct group (sorted-id order), for expected collapse from
                each prompt's own pass rate; or None.
            advantages: ``(n,)`` the advantages the trainer used, or None (GRPO's recomputed).
            lengths: ``(n,)`` completion lengths, recorded only.
            check: True runs the doctor now (the whole catalogue when it is due, else the fast
                detectors), False never, None on schedule.
            values: scalars as a mapping (keys that are not Python names, or would clash with
                the arguments above); merged with ``**scalars``.
            **scalars: what the trainer logs at this step (``loss=...``, ``grad_norm=...``; any
                key the importers know: ``**{"train/reward": 0.5}``). Non-numbers are skipped.

        Returns:
            A :class:`MonitorCheck` (``checked`` says whether the doctor ran).

        Raises:
            TypeError, ValueError: bad arguments (a non-integer step, shapes that disagree).
        """
        start = time.perf_counter()
        step = _check_step(step)
        if values:
            scalars = {**values, **scalars} if scalars else values  # read here, never kept
        groups = None
        if rewards is not None:
            groups = _groups(rewards, group_ids, advantages, lengths)
        try:
            with _quiet():
                got = None
                if self._checker is not None and step != self._polled:
                    self._polled = step  # once per step is soon enough (poll() any time)
                    got = self.guard.run("reading the helper's answers", self._collect)
                if self.recorder is None and self.recording_dir is not None:
                    self.guard.run("opening the recording", self._open_recorder)
                if groups is not None:
                    r, g, adv, lens = groups
                    self.guard.run(
                        "recording groups", self._record_groups, step, r, g, prompts, adv, lens
                    )
                    sent = self._checker is not None and self._feed(
                        ("groups", step, wire(r), wire(g), _prompt_list(prompts), wire(adv))
                    )
                    if not sent:
                        self.guard.run(
                            "reading the groups", self._window.add_groups, step, r, g, prompts, adv
                        )
                if scalars:
                    plain = plain_scalars(scalars)
                    self.guard.run("recording scalars", self._record_scalars, step, scalars, plain)
                    sent = self._checker is not None and self._feed(("scalars", step, plain))
                    if not sent:
                        self.guard.run(
                            "reading the scalars", self._window.add_scalars, step, scalars
                        )
                self._seen(step)
                full = bool(self.check_every) and self._due(step, self._last_full, self.full_every)
                if check is None:
                    due = full or self._due(step, self._last_check, self.check_every)
                else:
                    due = bool(check)
                    full = full or (due and not self.check_every)
                if self._owed_here and check is not False and self.halted is None:
                    due, full = True, full or self._owed_here == 2  # owed when the helper went
                    self._owed_here = 0
                if due:
                    now = self.guard.run(
                        "running the doctor", self._check, full, default=MonitorCheck(step)
                    )
                    if now.checked or got is None:
                        return now
                return got or MonitorCheck(step)
        finally:
            self.seconds += time.perf_counter() - start

    def feed_scalars(self, step: int, values: dict[str, Any]) -> None:
        """Add one logged row (numbers only; others are ignored); rows of one step merge."""
        self.observe(step, check=False, values={str(k): v for k, v in values.items()})

    def feed_groups(
        self,
        step: int,
        rewards: Any,
        group_ids: Any,
        *,
        prompts: Any = None,
        advantages: Any = None,
    ) -> None:
        """Add one batch of per-group rewards ``(n,)`` with group ids ``(n,)`` at ``step``;
        several batches at one step accumulate."""
        self.observe(step, rewards, group_ids, prompts=prompts, advantages=advantages, check=False)

    def _seen(self, step: int) -> None:
        held = self._held
        if not held or step > held[-1]:
            held.append(step)
        else:
            while held and held[-1] > step:  # the run went back: as the window forgets
                held.pop()
            if not held or held[-1] != step:
                held.append(step)
        if self.last_step is None or step > self.last_step:
            self.last_step = step
        elif step < self.last_step:
            self.last_step = step
            if self._last_check is not None and self._last_check > step:
                self._last_check = step
            if self._last_full is not None and self._last_full > step:
                self._last_full = step
        self._dirty = True

    def _due(self, step: int, last: int | None, every: int) -> bool:
        """A check is due when ``step`` reached the next multiple of ``every`` since ``last``."""
        if not every or self.halted is not None:
            return False
        return step // every > (last or 0) // every

    def due(self, step: int) -> bool:
        """Whether :meth:`observe` at ``step`` would check on its own schedule."""
        return self._due(step, self._last_check, self.check_every)

    # -- reading ------------------------------------------------------------------------------

    @property
    def n_steps(self) -> int:
        """Steps currently held."""
        return len(self._held) if self._checker is not None else self._window.n_steps

    @property
    def should_stop(self) -> bool:
        """True once the halt policy decided to stop (:attr:`halted` says why)."""
        return self.halted is not None

    @property
    def incidents(self) -> list[Any]:
        """The incidents followed now (:class:`~rlvitals.guard.LiveIncident`)."""
        return list(self.tracker.incidents)

    def run(self) -> Run:
        """The window as a :class:`Run` (what the doctor reads at a check; in background mode
        asked of the helper, which holds the window)."""
        if self._checker is not None:
            packed = self._ask(("packed", None))
            if isinstance(packed, tuple):
                return run_of(packed)
            if isinstance(packed, BaseException):
                raise RuntimeError(
                    f"the monitor's helper process could not send its window: {packed}"
                )
            if self._checker is not None:
                raise TimeoutError(
                    f"the monitor's helper process did not send its window within "
                    f"{DEFAULT_FLUSH_SECONDS:.0f} s"
                )
        return self._window.run(self.manifest)  # (after a helper's failure: from then on)

    def diagnose(self, *, fast: bool = False) -> Any:
        """:func:`rlvitals.doctor.diagnose` over the window (``fast``: only the detectors of
        the fast checks); returns its ``Diagnosis``."""
        from rlvitals.doctor import diagnose

        config = self._fast() if fast else self.config
        with _quiet():
            return diagnose(self.run(), config)

    def check(self) -> MonitorCheck:
        """Diagnose the window now with the whole catalogue: alerts for what changed, the halt
        decision (in background mode the helper's answer is waited for, at most
        :data:`DEFAULT_FLUSH_SECONDS`; the alerts of what it answered are in :attr:`alerts`)."""
        return self._check(True, inline=True)

    def _full_config(self) -> Any:
        """``config``, or the default :class:`~rlvitals.DoctorConfig` (made once)."""
        if self.config is not None:
            return self.config
        if self._default_config is None:
            from rlvitals.doctor import DoctorConfig

            self._default_config = DoctorConfig()
        return self._default_config

    def _fast(self) -> Any:
        """The config of the fast checks: the selected detectors of the collapse family and
        :data:`FAST_EXTRA` (None when none of them is selected)."""
        if self._fast_config is _UNSET:
            from rlvitals.doctor import select_detectors

            base = self._full_config()
            ids = sorted(
                c.id for c in select_detectors(base) if c.family == "collapse" or c.id in FAST_EXTRA
            )
            self._fast_config = dataclasses.replace(base, select=ids) if ids else None
        return self._fast_config

    # -- the check ----------------------------------------------------------------------------

    def _check(self, full: bool, inline: bool = False) -> MonitorCheck:
        start = time.perf_counter()
        step = self.last_step
        self._last_check = step
        if full:
            self._last_full = step
        self._dirty = False
        if self.n_steps == 0 or step is None:
            return MonitorCheck(step, checked=True)
        config, partial = self._full_config(), False
        if not full:
            config = self._fast()
            if config is None:
                return MonitorCheck(step)
            config, partial = self._partial(config)
            if config is None:
                return MonitorCheck(step)
        if self._checker is not None:
            got = self._check_there(config, step, partial, inline)
            if self._checker is not None:  # still usable: handed over (or answered)
                self.check_seconds += time.perf_counter() - start
                return got or MonitorCheck(step)
        out = self._check_here(config, step, partial)
        self.check_seconds += time.perf_counter() - start
        return out

    def _check_here(self, config: Any, step: int, partial: bool) -> MonitorCheck:
        """A check over this process's window, judged as of ``step``."""
        self._window.close_step()
        from rlvitals.doctor import diagnose

        with _quiet():
            diagnosis = diagnose(
                self._window.run(self.manifest),
                config,
                prepared=self._prepared(config),
                explain=False,
            )
        return self._judged(
            step, partial, diagnosis.findings, diagnosis.detectors, diagnosis.incidents
        )

    def _judged(
        self, step: int, partial: bool, findings: list, detectors: list, incidents: list
    ) -> MonitorCheck:
        """A check's findings: what is new, the incidents' alerts, the halt decision."""
        findings = list(findings)
        new, seen = [], set()
        for f in findings:
            if f.id not in self._active and f.id not in seen:
                seen.add(f.id)
                new.append(f)
        self._active = (self._active - set(detectors)) | {f.id for f in findings}
        out = MonitorCheck(
            step, checked=True, findings=findings, new=new, incidents=list(incidents)
        )
        for event in self.tracker.update(incidents, step, partial=partial):
            out.alerts.append(self._alert(event.kind, event.incident, step, event.changes))
        if self.policy and self.halted is None:
            # only what this check saw: an incident the doctor no longer reports is not evidence
            seen = [i for i in self.tracker.open if i.last_step == step]
            halt = self.policy.decide(seen, step, self.checkpoints)
            if halt is not None:
                self.halted = out.halt = halt
                out.alerts.append(self._halt_alert(halt, step))
        for alert in out.alerts:
            self._send(alert)
        self._report_problems(step)
        self.checks += 1
        return out

    # -- background checks (Monitor(background=True); rlvitals.guard.checker) ---------

    def _feed(self, message: tuple) -> bool:
        """Background mode: send a step's data to the helper, which holds the window; False
        when the monitor's own window must take it (no helper, or it just broke)."""
        checker = self._checker
        if checker is None:
            return False
        self._keep(message)
        if checker.send(message):
            return True
        self._checker_broke()  # the refill holds this message too
        return True

    def _keep(self, message: tuple) -> None:
        """Keep a step's message for a refill (:meth:`_checker_broke`): the last ``window``
        steps, forgotten past a rewind as the window forgets them."""
        step, sent = message[1], self._sent
        if sent and next(reversed(sent)) > step:  # the run went back
            for s in [s for s in sent if s > step]:
                del sent[s]
        sent.setdefault(step, []).append(message)
        while len(sent) > self.window:
            sent.popitem(last=False)

    def _config_key(self, config: Any) -> tuple[str, ...] | None:
        """The helper's name for ``config`` (sent once): its selection. Every config a check
        uses is the full one or it with another ``select`` (:meth:`_fast`, :meth:`_partial`)."""
        key = None if config.select is None else tuple(config.select)
        if key not in self._sent_configs:
            self._sent_configs.add(key)
            self._checker.send(("config", key, config))
        return key

    def _check_there(
        self, config: Any, step: int, partial: bool, wait: bool
    ) -> MonitorCheck | None:
        """A check in the helper. Not ``wait``: handed over (its answer is judged at a later
        call); while one is in flight it is owed, and sent when the answer is in. ``wait``
        (:meth:`check`): the answer, waited for at most :data:`DEFAULT_FLUSH_SECONDS`."""
        checker = self._checker
        if wait:
            self._flush_checker(DEFAULT_FLUSH_SECONDS)  # the check in flight first, judged
            checker = self._checker
            if checker is None:
                return None
        key = self._config_key(config)
        if checker.ask(("check", key), (step, partial)):
            self._asked = (config, step, partial)
            return self._answers(checker.wait(DEFAULT_FLUSH_SECONDS)) if wait else None
        if checker.usable:  # busy
            self._owed = max(self._owed, 2 if config is self._full_config() else 1)
            return None
        self._checker_broke()
        return None

    def _ask(self, request: tuple) -> Any:
        """Background mode: the helper's answer to ``request``, waited for (bounded)."""
        self._flush_checker(DEFAULT_FLUSH_SECONDS)
        checker = self._checker
        if checker is None or not checker.ask(request, None):
            return None
        answers = checker.wait(DEFAULT_FLUSH_SECONDS)  # nothing else was in flight
        return answers[0][1] if answers else None

    def _collect(self) -> MonitorCheck | None:
        """Judge the answers the helper sent since the last call (without waiting)."""
        checker = self._checker
        if checker is None or checker.proc is None:
            return None
        return self._answers(checker.poll())

    def _answers(self, answers: list) -> MonitorCheck | None:
        checker = self._checker
        quiet = checker is None or (checker.usable and not checker.problems)
        if quiet and not answers and not self._owed:
            return None  # most steps: nothing came, nothing is owed, nothing broke
        out = None
        if checker is not None:
            for site, err in checker.take_problems():
                self.guard.report(site, err)
        for meta, answer in answers:
            if meta is None:
                continue  # an answer to _ask, not a check
            step, partial = meta
            if isinstance(answer, BaseException):
                self.guard.report("running the doctor", answer)
                continue
            if self.last_step is not None and step > self.last_step:
                continue  # the run went back past this check's step since it was sent
            got = self._judged(step, partial, *answer)
            if out is not None:  # several answers at once: one result, every alert in it
                got.alerts[:0] = out.alerts
                got.halt = got.halt or out.halt
            out = got
        if self._checker is not None and not self._checker.usable:
            redone = self._checker_broke()
            if redone is not None:
                if out is not None:
                    redone.alerts[:0] = out.alerts
                    redone.halt = redone.halt or out.halt
                out = redone
        elif self._owed and self._checker is not None and self._checker.in_flight is None:
            full, self._owed = self._owed == 2, 0
            self._check(full)
        return out

    def _checker_broke(self) -> MonitorCheck | None:
        """Say once that the window and the checks are in the training process from now on.

        Before anything is judged here, the window is refilled from the messages of its steps
        this process kept (:meth:`_keep`), and the check the helper had in flight is run here
        over exactly the steps it covered: onsets, alerts, halts and the step to resume from
        are those of a run whose helper never went away. Returns that check (None if none
        was in flight)."""
        checker, self._checker = self._checker, None
        if checker is None:
            return None
        why = checker.broken or "unknown"
        lost = checker.in_flight[1] if checker.in_flight is not None else None
        checker.close()
        owed, self._owed = self._owed, 0
        asked, self._asked = self._asked, None
        sent, self._sent = self._sent, OrderedDict()
        logger.warning(
            "rlvitals: the monitor's helper process is not usable (%s); the window (%d steps "
            "kept here) and the checks are in the training process from now on",
            why,
            len(sent),
        )
        self.background_failure = why
        redo = asked if asked is not None and lost == (asked[1], asked[2]) else None
        out = None
        for step, messages in sent.items():
            if redo is not None and step > redo[1]:
                out = self.guard.run("running the doctor", self._check_here, *redo)
                redo = None
            for m in messages:
                self.guard.run(
                    "reading the groups" if m[0] == "groups" else "reading the scalars",
                    self._refill,
                    m,
                )
        if redo is not None:
            out = self.guard.run("running the doctor", self._check_here, *redo)
        self._owed_here = owed
        return out

    def _refill(self, message: tuple) -> None:
        if message[0] == "groups":
            _, step, r, g, prompts, adv = message
            self._window.add_groups(step, unwire(r), unwire(g), prompts, unwire(adv))
        else:
            self._window.add_scalars(message[1], message[2])

    def poll(self) -> MonitorCheck | None:
        """Background mode: judge the checks the helper answered since the last call (alerts,
        halt) without waiting; None when nothing arrived. ``observe`` does this too."""
        with _quiet():
            return self.guard.run("reading the helper's answers", self._collect)

    def _prepared(self, config: Any) -> Any:
        """:func:`rlvitals.doctor.prepare` of a check's config, once per config (the full one,
        the fast one, the partial ones of an open collapse: each made once)."""
        hit = self._plans.get(id(config))
        if hit is None or hit.config is not config:
            from rlvitals.doctor import prepare

            hit = self._plans[id(config)] = prepare(config)
        return hit

    def _partial(self, config: Any) -> tuple[Any, bool]:
        """``(config, partial)`` of a fast check: while a collapse is open and told and no halt
        rule waits, two checks in :data:`OPEN_BACKOFF` leave out the detectors already in it."""
        opened = [
            i for i in self.tracker.incidents if i.ongoing and i.emitted and i.theme == "collapse"
        ]
        if not opened or self.policy:
            self._partials = 0
            return config, False
        self._partials += 1
        if self._partials % OPEN_BACKOFF == 0:
            return config, False
        told = {d for i in opened for d in i.detectors}
        ids = [d for d in config.select if d not in told]
        if not ids:
            return None, True
        if len(ids) == len(config.select):
            return config, True  # nothing told is selected here: the fast config itself
        key = tuple(ids)  # subsets of the fast detectors: a handful at most, each made once
        part = self._partial_configs.get(key)
        if part is None:
            part = self._partial_configs[key] = dataclasses.replace(config, select=ids)
        return part, True

    def _alert(self, kind: str, inc: Any, step: int, changes: list[str]) -> Any:
        from rlvitals.guard.alerts import Alert

        ids = ", ".join(inc.detectors)
        since = f" since step {inc.onset_step}" if inc.onset_step is not None else ""
        if kind == "opened":
            ended = f", ended at step {inc.end_step}" if inc.end_step is not None else ""
            msg = f"[{inc.severity}] {inc.title} ({ids}){since}{ended}; seen at step {step}"
        elif kind == "worse":
            msg = f"[{inc.severity}] worse: {inc.title} ({ids}){since}: {'; '.join(changes)}"
        else:
            msg = (
                f"recovered: {inc.title} ({ids}){since}, ended at step {inc.end_step} "
                f"({inc.lasting(step)} steps)"
            )
        severity = "info" if kind == "recovered" else inc.severity
        return Alert(
            kind, step, severity, inc.title, msg, inc.summary(), list(changes), run=self.name
        )

    def _halt_alert(self, halt: Any, step: int) -> Any:
        from rlvitals.guard.alerts import Alert

        inc = halt.incident
        return Alert(
            "halt",
            step,
            inc["severity"],
            inc["title"],
            halt.message,
            inc,
            halt=halt.to_dict(),
            run=self.name,
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
        if _plain_recorder(rec):  # checked by _groups already: the recorder's own checks skipped
            rec._log_host_groups(step, r, g, prompts, lens, adv)
        else:
            rec.log_groups(step, r, g, prompts=prompts, lengths=lens, advantages=adv)

    def _record_scalars(self, step: int, scalars: dict[str, Any], plain: dict) -> None:
        rec = self.recorder
        if rec is None:
            return
        if _plain_recorder(rec) and len(plain) == len(scalars):  # every value a number
            rec._log_floats(step, plain)
        else:
            rec.log_scalars(step, scalars)

    # -- the end ------------------------------------------------------------------------------

    def _flush_checker(self, timeout: float | None) -> None:
        """Background mode: wait (at most ``timeout`` s) for the check in flight, and judge it."""
        deadline = time.monotonic() + (DEFAULT_FLUSH_SECONDS if timeout is None else timeout)
        while True:  # an answer may send the check owed meanwhile: wait for that one too
            checker = self._checker
            if checker is None or checker.proc is None or checker.in_flight is None:
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.guard.run("reading the helper's answers", self._wait_answers, checker, left)

    def _wait_answers(self, checker: Any, timeout: float) -> None:
        self._answers(checker.wait(timeout))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` s) until every alert reached its sinks; flush the recording.
        In background mode the check in flight is waited for (and judged) first."""
        with _quiet():
            self._flush_checker(timeout)
        done = self.sinks.flush(timeout)
        if self.recorder is not None:
            self.guard.run("flushing the recording", self.recorder.flush)
        self._report_problems(self.last_step or 0)
        return done

    def close(self, timeout: float = 2.0) -> None:
        """Deliver pending alerts (waiting at most ``timeout`` s), close an own recording."""
        if self.closed:
            return
        self.closed = True
        with _quiet():
            self._flush_checker(timeout)
            if self._checker is not None:
                self.guard.run("stopping the helper process", self._checker.close)
            self.sinks.close(timeout)
            self._report_problems(self.last_step or 0)
            if self.recorder is not None and self._own_recorder:
                errors = dict(self.guard.errors)
                if errors:
                    self.guard.run(
                        "recording the failures",
                        self.recorder.log_event,
                        self.last_step,
                        "note",
                        f"rlvitals monitor failed {sum(errors.values())} times",
                        errors=errors,
                    )
                self.guard.run("closing the recording", self.recorder.close)

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------------

    def set_manifest(self, manifest: Manifest) -> None:
        """Replace what is known about the run (before the first step)."""
        self.manifest = manifest
        self._window.known_range = known_range(manifest)
        if self._checker is not None and not self._checker.send(("manifest", manifest), now=True):
            self._checker_broke()


# -- arguments ----------------------------------------------------------------------------------


def _check_step(step: Any) -> int:
    if type(step).__module__.startswith("torch") and getattr(step, "ndim", 1) == 0:
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"step must be an integer, got {step!r}")
    return int(step)


def _host(x: Any, name: str) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        t = x.detach().cpu()
        try:
            return t.numpy()
        except TypeError:  # bfloat16 and friends
            return t.float().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numbers, got dtype {a.dtype}")
    return a


def _groups(rewards: Any, group_ids: Any, advantages: Any, lengths: Any) -> tuple:
    r = _host(rewards, "rewards")
    if r.dtype.kind != "f" or r.dtype.itemsize > 8:
        r = r.astype(np.float64)
    elif r.dtype.itemsize < 4:
        r = r.astype(np.float32)
    if group_ids is None:
        if r.ndim != 2:
            raise ValueError(
                f"rewards of shape {r.shape} need group_ids (n,); or pass (N, G) rewards"
            )
        n_groups, size = r.shape
        r = r.reshape(-1)
        g = np.repeat(np.arange(n_groups, dtype=np.int64), size)
    else:
        if r.ndim != 1:
            raise ValueError(f"rewards with group_ids must be (n,), got shape {r.shape}")
        g = _host(group_ids, "group_ids").reshape(-1)
        if g.shape != r.shape:
            raise ValueError(f"rewards {r.shape} and group_ids {g.shape} differ")
    adv = None
    if advantages is not None:
        adv = _host(advantages, "advantages").reshape(-1)
        if adv.shape != r.shape:
            raise ValueError(f"advantages {adv.shape} and rewards {r.shape} differ")
    lens = None
    if lengths is not None:
        lens = _host(lengths, "lengths").reshape(-1)
        if lens.shape != r.shape:
            raise ValueError(f"lengths {lens.shape} and rewards {r.shape} differ")
    return r, g, adv, lens


def _plain_recorder(rec: Any) -> bool:
    """Whether ``rec`` is a :class:`~rlvitals.recording.Recorder` itself (not a subclass or a
    stand-in), whose private paths may skip the checks the monitor made (no import here: if
    the module is not loaded, no recorder of it exists)."""
    mod = sys.modules.get("rlvitals.recording.writer")
    return mod is not None and type(rec) is mod.Recorder


_QUIET = threading.local()


class _Silence:
    """The outermost :func:`_quiet`: warnings ignored, numpy's floating-point errors too."""

    __slots__ = ("_errstate", "_warnings")

    def __enter__(self) -> None:
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")
        self._errstate = np.errstate(all="ignore")
        self._errstate.__enter__()
        _QUIET.on = True

    def __exit__(self, *exc: object) -> None:
        _QUIET.on = False
        try:
            self._errstate.__exit__(*exc)
        finally:
            self._warnings.__exit__(*exc)


_NESTED = contextlib.nullcontext()


def _quiet() -> contextlib.AbstractContextManager[None]:
    """No warning from inside the monitor reaches the caller's warning filters (``-W error``
    would make it an exception in the training loop); numpy's floating-point ones included.
    Re-entrant: a nested use (a hook calling the monitor) is a shared no-op (it runs several
    times a step: no generator, no new object)."""
    return _NESTED if getattr(_QUIET, "on", False) else _Silence()

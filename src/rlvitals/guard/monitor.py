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
   the window: the collapse family and the cheap critical detectors (:data:`~rlvitals.guard.checks.FAST_EXTRA`), and
   every ``full_every`` steps the whole catalogue. Its incidents go through an
   :class:`~rlvitals.guard.IncidentTracker`: each incident is told once (``opened``), then only
   when it gets worse or recovers; every alert is one log line (logger ``rlvitals.guard``), an
   ``alert`` event in the recording, and a message to each sink (W&B / trackio alerts when a run
   of theirs is active, webhooks, Slack, your callables: :mod:`rlvitals.guard.sinks`);
4. follows the conditions the doctor names (the causes, :mod:`rlvitals.conditions`) with the
   hysteresis of ``rlvitals watch`` (:class:`~rlvitals.guard.conditions.ConditionTracker`):
   ``condition_opened`` once a condition is named at two checks in a row, ``condition_closed``
   after three without it, ``condition_reopened`` when it comes back (:attr:`conditions`
   keeps the timeline); every incident alert carries the condition its signs point to;
5. asks the halt policy (``halt_on``, :class:`~rlvitals.guard.HaltPolicy`) whether an ongoing
   incident is reason to stop; then :attr:`should_stop` is true and :attr:`halted` names the
   last healthy step and the checkpoint to resume from.

Latency: a detector that needs ``sustain`` consecutive steps fires ``sustain - 1`` steps after
the onset on the window's data; with ``check_every = c`` the monitor tells it at most ``c - 1``
steps later, so a collapse within ``sustain + 2`` steps of its onset at the default ``c = 3``
(the rest of the catalogue within ``full_every - 1`` steps more). Once a collapse is told, and
no halt rule waits on it, fast checks skip the detectors already part of it two times in three
(:data:`~rlvitals.guard.checks.OPEN_BACKOFF`): a detector joining it is still told on time, its recovery may be told up
to ``3 c - 1`` steps late.

Everything runs in the training process (issue 24's decision, benchmarks/RESULTS.md "Live
guard"): ``observe`` costs ~0.5-0.7 ms at 512 x 16 and a check ~2-2.5 ms every few steps,
nothing measurable on a real training step. A helper process that held the window and ran the
checks saved ~0.5 ms a step of a 40 ms toy step, and spent ~1-2 ms of another core; it is gone.

The parts: the window (:mod:`rlvitals.guard.window`), what each check runs
(:mod:`rlvitals.guard.checks`), where alerts go (:mod:`rlvitals.guard.delivery`), the
arguments (:mod:`rlvitals.guard.inputs`).

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

import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rlvitals.guard.checks import CheckPlans, MonitorCheck, run_check
from rlvitals.guard.containment import Guard, quiet
from rlvitals.guard.delivery import Delivery
from rlvitals.guard.inputs import check_step, plain_scalars, step_groups
from rlvitals.guard.window import StepWindow, known_range
from rlvitals.recording.run import Manifest, Run

__all__ = [
    "DEFAULT_CHECK_EVERY",
    "DEFAULT_FULL_EVERY",
    "DEFAULT_MONITOR_WINDOW",
    "Monitor",
    "MonitorCheck",
]

DEFAULT_MONITOR_WINDOW = 200
"""Steps the monitor keeps and diagnoses. Long enough for the detectors' own windows (the
doctor judges runs of at least ~30 steps; ACR windows are 25 steps, the stall rule 50)."""
DEFAULT_CHECK_EVERY = 3
"""Steps between two checks of the fast detectors: a collapse is told within ``sustain + 2``
steps of its onset (module docstring)."""
DEFAULT_FULL_EVERY = 15
"""Steps between two checks of the whole catalogue (length, entropy, KL, clipping, throughput
drift over tens of steps)."""
ALERTS_KEPT = 1000
"""Alerts kept in :attr:`Monitor.alerts` (the oldest are forgotten)."""


class Monitor(Delivery):
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

    Attributes:
        alerts: the last :data:`ALERTS_KEPT` alerts sent.
        tracker: the incidents followed (:class:`~rlvitals.guard.IncidentTracker`).
        conditions: the conditions followed, with hysteresis; ``conditions.timeline`` is every
            opened / closed / reopened (the last :data:`ALERTS_KEPT`), ``conditions.open``
            those open now.
        halted: the :class:`~rlvitals.guard.Halt` that stopped the run, or None.
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
    ):
        from rlvitals.guard.alerts import ConditionTeller
        from rlvitals.guard.conditions import ConditionTracker
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
        self.conditions = ConditionTracker(keep=ALERTS_KEPT)
        self.teller = ConditionTeller(alert_on)
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
        self.plans = CheckPlans(config)
        self._active: set[str] = set()
        self._recorder_errors = 0
        self.closed = False

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
        step = check_step(step)
        if values:
            scalars = {**values, **scalars} if scalars else values  # read here, never kept
        groups = None
        if rewards is not None:
            groups = step_groups(rewards, group_ids, advantages, lengths)
        try:
            with quiet():
                if self.recorder is None and self.recording_dir is not None:
                    self.guard.run("opening the recording", self._open_recorder)
                if groups is not None:
                    r, g, adv, lens = groups
                    self.guard.run(
                        "recording groups", self._record_groups, step, r, g, prompts, adv, lens
                    )
                    self.guard.run(
                        "reading the groups", self._window.add_groups, step, r, g, prompts, adv
                    )
                if scalars:
                    # each value read once (a torch scalar's .item() waits for its device)
                    plain = plain_scalars(scalars)
                    self.guard.run("recording scalars", self._record_scalars, step, scalars, plain)
                    self.guard.run("reading the scalars", self._window.add_scalars, step, plain)
                self._seen(step)
                full = bool(self.check_every) and self._due(step, self._last_full, self.full_every)
                if check is None:
                    due = full or self._due(step, self._last_check, self.check_every)
                else:
                    due = bool(check)
                    full = full or (due and not self.check_every)
                if due:
                    return self.guard.run(
                        "running the doctor", self._check, full, default=MonitorCheck(step)
                    )
                return MonitorCheck(step)
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
        if self.last_step is None or step > self.last_step:
            self.last_step = step
        elif step < self.last_step:
            self.last_step = step
            if self._last_check is not None and self._last_check > step:
                self._last_check = step
            if self._last_full is not None and self._last_full > step:
                self._last_full = step

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
        return self._window.n_steps

    @property
    def should_stop(self) -> bool:
        """True once the halt policy decided to stop (:attr:`halted` says why)."""
        return self.halted is not None

    @property
    def incidents(self) -> list[Any]:
        """The incidents followed now (:class:`~rlvitals.guard.LiveIncident`)."""
        return list(self.tracker.incidents)

    def run(self) -> Run:
        """The window as a :class:`Run` (what the doctor reads at a check)."""
        return self._window.run(self.manifest)

    def diagnose(self, *, fast: bool = False) -> Any:
        """:func:`rlvitals.doctor.diagnose` over the window (``fast``: only the detectors of
        the fast checks); returns its ``Diagnosis``."""
        from rlvitals.doctor import diagnose

        config = self.plans.fast() if fast else self.config
        with quiet():
            return diagnose(self.run(), config)

    def check(self) -> MonitorCheck:
        """Diagnose the window now with the whole catalogue: alerts for what changed, the halt
        decision."""
        return self._check(True)

    # -- the check ----------------------------------------------------------------------------

    def _check(self, full: bool) -> MonitorCheck:
        start = time.perf_counter()
        step = self.last_step
        self._last_check = step
        if full:
            self._last_full = step
        if self.n_steps == 0 or step is None:
            return MonitorCheck(step, checked=True)
        config, partial = self.plans.full(), False
        if not full:
            config = self.plans.fast()
            if config is None:
                return MonitorCheck(step)
            config, partial = self.plans.partial(config, None if self.policy else self.tracker)
            if config is None:
                return MonitorCheck(step)
        with quiet():
            found = run_check(self._window, self.manifest, config, self.plans.prepared(config))
        out = self._judged(step, partial, *found)
        self.check_seconds += time.perf_counter() - start
        return out

    # -- the end ------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` s) until every alert reached its sinks; flush the recording."""
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
        with quiet():
            self.sinks.close(timeout)
            self._report_problems(self.last_step or 0)
            if self.recorder is not None and self._own_recorder:
                self._close_recording()

    def __enter__(self) -> Monitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ------------------------------------------------------------------------------

    def set_manifest(self, manifest: Manifest) -> None:
        """Replace what is known about the run (before the first step)."""
        self.manifest = manifest
        self._window.known_range = known_range(manifest)

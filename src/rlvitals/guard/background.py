"""The monitor's background mode (``Monitor(background=True)``): checks in a helper process.

:class:`BackgroundChecks` is the part of :class:`~rlvitals.Monitor` that hands each step's data
to the helper (:mod:`rlvitals.guard.checker`), asks it for checks, judges its answers as they
arrive, and takes the window and the checks back into the training process when the helper
goes away. The training process keeps the messages of the window's steps (references to the
bytes it sent, no reduction): if the helper dies, the window is refilled from them and the
check in flight is run in-process before anything is judged, so onsets, halts and the resume
point do not move.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import Any

from rlvitals.guard.checks import MonitorCheck
from rlvitals.guard.containment import quiet

__all__ = ["DEFAULT_FLUSH_SECONDS", "BackgroundChecks"]

logger = logging.getLogger("rlvitals.guard")

DEFAULT_FLUSH_SECONDS = 10.0
"""Background mode: how long ``flush``/``check`` wait for the check in flight."""


class BackgroundChecks:
    """The background-mode methods of :class:`~rlvitals.Monitor` (module docstring). They use
    the monitor's ``_checker`` (None when checks run in-process), its window and its check."""

    _checker: Any

    def _start_checker(self, tau: float) -> None:
        """Start the helper (it imports while the run starts; requests wait); if it cannot
        start, say so once and check in-process."""
        from rlvitals.guard.checker import Checker

        self._checker = Checker()
        if not (
            self._checker.start()
            and self._checker.send(("init", self.window, tau, self.manifest), now=True)
        ):
            self._checker_broke()

    def _no_window(self, packed: Any) -> None:
        """Raise why the helper did not send its window (unless it broke meanwhile: then the
        monitor holds the window itself)."""
        if isinstance(packed, BaseException):
            raise RuntimeError(f"the monitor's helper process could not send its window: {packed}")
        if self._checker is not None:
            raise TimeoutError(
                f"the monitor's helper process did not send its window within "
                f"{DEFAULT_FLUSH_SECONDS:.0f} s"
            )

    def _hold(self, step: int) -> None:
        """Keep the window's steps (:attr:`~rlvitals.Monitor.n_steps` while the helper holds
        the window), forgetting those past a rewind as the window forgets them."""
        held = self._held
        if not held or step > held[-1]:
            held.append(step)
        else:
            while held and held[-1] > step:  # the run went back
                held.pop()
            if not held or held[-1] != step:
                held.append(step)

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
        uses is the full one or it with another ``select`` (:class:`~rlvitals.guard.checks.CheckPlans`)."""
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
            self._owed = max(self._owed, 2 if config is self.plans.full() else 1)
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
                self.guard.run(f"reading the {m[0]}", self._window.take, m)
        if redo is not None:
            out = self.guard.run("running the doctor", self._check_here, *redo)
        self._owed_here = owed
        return out

    def poll(self) -> MonitorCheck | None:
        """Background mode: judge the checks the helper answered since the last call (alerts,
        halt) without waiting; None when nothing arrived. ``observe`` does this too."""
        with quiet():
            return self.guard.run("reading the helper's answers", self._collect)

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

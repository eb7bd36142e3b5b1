"""The live monitor's window and checks in a helper process (``Monitor(background=True)``).

A check runs the doctor's detectors over the monitor's window: ~1-3 ms of Python and numpy,
every few steps, and reducing each step's groups into the window costs more on top. On a tiny
model that is several percent of a training step, and in the training process it is time the
step waits for (a thread would hold the GIL just the same). In background mode a helper
process (this module's :func:`main`, started with the same interpreter and the training
process's own rlvitals package) holds the window (:class:`~rlvitals.guard.window.
StepWindow`) and runs :func:`rlvitals.doctor.diagnose` over it when asked; it sends back the
findings, incidents and conditions. The training process keeps the recording, the incident and
condition trackers, the halt policy, the alerts and their sinks (W&B and trackio alerts, your
callables, need it).

What the training process pays: per step, converting its arrays to bytes and queueing them
(:meth:`Checker.send`); per check, writing the queued steps and the request in one write to the
pipe (non-blocking: what the pipe does not take waits in memory for the next call); per step,
reading whatever answers arrived (non-blocking). It never waits for the helper except in
:meth:`Checker.wait` (``Monitor.check``, ``run``, ``flush``, ``close``, bounded by a timeout).

One request is in flight at a time; a check that falls due meanwhile is sent once the answer is
in, with the window as it is then (so a slow helper delays checks, it never queues them up).
If the helper cannot start, dies, does not answer within :data:`HANG_SECONDS`, or cannot be
sent something, the checker is *broken*: the monitor says so once and holds the window and the
checks in the training process from the next step on (the helper's window is lost).

The helper's standard streams go to ``/dev/null``: it talks only through its two pipes (the
descriptors named on its command line), so nothing it prints can reach the training logs. It
reads until the training process closes its end (or dies: the kernel closes it), then exits.
POSIX only; elsewhere ``background=True`` checks in-process.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
import warnings
import weakref
from pathlib import Path
from typing import Any

__all__ = ["HANG_SECONDS", "Checker", "main"]

HANG_SECONDS = 60.0
"""A check the helper has not answered after this long marks it broken (it is killed)."""
MAX_OUTBOX = 64 << 20
"""Bytes waiting for the pipe beyond which the helper is taken as stuck (broken)."""
_PIPE_SIZE = 1 << 20
"""Pipe capacity asked for (Linux ``F_SETPIPE_SZ``; 1 MiB is the unprivileged maximum)."""
_BOOT = """
import importlib.util, os, sys
package = sys.argv[1]
if sys.path and sys.path[0] == "":
    del sys.path[0]  # not the training script's folder: nothing in it shadows a module here
spec = importlib.util.spec_from_file_location(
    "rlvitals", os.path.join(package, "__init__.py"), submodule_search_locations=[package]
)
module = importlib.util.module_from_spec(spec)
sys.modules["rlvitals"] = module
spec.loader.exec_module(module)
from rlvitals.guard.checker import main
sys.exit(main(sys.argv[2:]))
"""
"""The helper's start: the rlvitals package the training process imported (wherever it found
it: an install, a source tree on its ``sys.path``), everything else from the interpreter's
own path."""
BATCH_MESSAGES = 64
"""Messages gathered before they are written even without a request (bounds the memory)."""
_HEAD = struct.Struct("<Q")
_READ = 1 << 20


class Checker:
    """The training process's end of the helper (module docstring).

    Attributes:
        broken: why the helper cannot be used (None while it can).
        cpu_seconds: the helper's CPU time, as of its last answer (``start_cpu_seconds`` of
            it were its start-up).
        answered: checks answered.
    """

    def __init__(self) -> None:
        self.broken: str | None = None
        self.cpu_seconds = 0.0
        self.answered = 0
        self.proc: subprocess.Popen | None = None
        self._w: int | None = None
        self._r: int | None = None
        self._outbox = bytearray()
        self._inbox = bytearray()
        self.problems: list[tuple[str, BaseException]] = []
        self._pending: list[tuple] = []
        self._next = 0
        self.in_flight: tuple[int, Any, float] | None = None  # (request id, meta, sent at)
        self.ready = False  # the helper said it is up (its imports take a few tenths of a s)
        self.start_cpu_seconds = 0.0  # the helper's CPU time when it said so
        self.started_at = 0.0
        self._finalizer: Any = None

    # -- life ---------------------------------------------------------------------------------

    def start(self) -> bool:
        """Start the helper; False (and :attr:`broken` says why) when it cannot be."""
        if os.name != "posix":
            self.broken = "a helper process needs POSIX pipes"
            return False
        to_child = from_child = None
        try:
            to_child, from_child = os.pipe(), os.pipe()
            child_fds = (to_child[0], from_child[1])
            package = str(Path(__file__).resolve().parents[1])  # this very rlvitals
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, package, *map(str, child_fds)],
                pass_fds=child_fds,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C at the terminal is the trainer's to handle
            )
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            self.broken = f"cannot start the helper process: {e}"
            _close_fds(*(to_child or ()), *(from_child or ()))
            return False
        os.close(to_child[0])
        os.close(from_child[1])
        self._w, self._r = to_child[1], from_child[0]
        self.started_at = time.monotonic()
        # a monitor dropped without close(): its pipes close, so the helper exits (and is reaped)
        self._finalizer = weakref.finalize(self, _let_go, self.proc, self._w, self._r)
        for fd in (self._w, self._r):
            os.set_blocking(fd, False)
            with contextlib.suppress(OSError, AttributeError):
                import fcntl

                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)  # type: ignore[attr-defined]
        return True

    @property
    def usable(self) -> bool:
        return self.broken is None and self.proc is not None

    def close(self) -> None:
        """Close the pipes: the helper exits on its own; a thread reaps it (and kills it if it
        has not exited within 5 s), so closing never waits for its interpreter to shut down."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        proc, self.proc = self.proc, None
        _let_go(proc, self._w, self._r)
        self._w = self._r = None
        if self.broken is None:
            self.broken = "closed"

    def _break(self, why: str) -> None:
        if self.broken is None:
            self.broken = why
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
        self.close()

    # -- requests -----------------------------------------------------------------------------

    def send(self, message: tuple, now: bool = False) -> bool:
        """Send ``message`` (a step's groups or scalars, the manifest, a config); False when
        the helper is broken. Messages travel together with the next request (one write, one
        wake-up of the helper for several steps) or once :data:`BATCH_MESSAGES` gathered;
        ``now`` sends at once (what cannot be pickled shows here). Never waits: what the pipe
        does not take waits in memory."""
        if not self.usable:
            return False
        self._pending.append(message)
        if now or len(self._pending) >= BATCH_MESSAGES:
            self._frame()
            self._flush()
        return self.usable

    def ask(self, request: tuple, meta: Any) -> bool:
        """Ask the helper ``request`` (``("check", config key)`` or ``("packed", None)``);
        False while another request is in flight (or the helper is broken). ``meta`` comes
        back with the answer (:meth:`poll`)."""
        if not self.usable or self.in_flight is not None:
            return False
        self._next += 1
        self.in_flight = (self._next, meta, time.monotonic())
        self._pending.append(("ask", self._next, *request))
        self._frame()
        self._flush()
        return self.usable

    def take_problems(self) -> list[tuple[str, BaseException]]:
        """Failures the helper reported reading the data it was sent: ``[(site, error)]``."""
        out, self.problems = self.problems, []
        return out

    def _frame(self) -> None:
        """The messages gathered so far into one frame of the outbox."""
        try:
            data = pickle.dumps(self._pending, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # something the helper cannot be sent: the monitor takes over
            self._pending = []
            self._break(f"cannot send the helper process what it needs ({type(e).__name__}: {e})")
            return
        self._pending = []
        self._outbox += _HEAD.pack(len(data))
        self._outbox += data

    def _flush(self) -> None:
        while self._outbox and self._w is not None:
            try:
                n = os.write(self._w, self._outbox)
            except BlockingIOError:
                break
            except OSError as e:
                self._break(f"the helper process went away ({e.strerror or e})")
                return
            del self._outbox[:n]
        if len(self._outbox) > MAX_OUTBOX:
            self._break("the helper process stopped reading")

    # -- answers -------------------------------------------------------------------------------

    def poll(self) -> list[tuple[Any, Any]]:
        """Answers arrived so far, without waiting: ``[(meta, answer), ...]``; an answer is
        ``(findings, detectors, incidents)`` or an ``Exception`` raised in the helper."""
        if self.proc is None or (self.ready and self.in_flight is None and not self._outbox):
            return []  # nothing is owed to us: no system call (a dead helper shows at a request)
        self._flush()
        out = self._read()
        now = time.monotonic()
        late = self.in_flight is not None and now - self.in_flight[2] > HANG_SECONDS
        late = late or (not self.ready and now - self.started_at > HANG_SECONDS)
        if late and not out and self.usable:
            self._break(f"the helper process did not answer within {HANG_SECONDS:.0f} s")
        return out

    def wait(self, timeout: float) -> list[tuple[Any, Any]]:
        """Wait at most ``timeout`` s for the request in flight; what :meth:`poll` returns."""
        deadline = time.monotonic() + timeout
        out = self.poll()
        while self.in_flight is not None and self.usable:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with contextlib.suppress(OSError, ValueError):
                select.select([self._r], [self._w] if self._outbox else [], [], min(left, 0.05))
            out += self.poll()
        return out

    def wait_ready(self, timeout: float) -> bool:
        """Wait at most ``timeout`` s for the helper to say it is up; whether it is."""
        deadline = time.monotonic() + timeout
        while not self.ready and self.usable and time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                select.select([self._r], [], [], 0.05)
            self.poll()
        return self.ready and self.usable

    def _read(self) -> list[tuple[Any, Any]]:
        while self._r is not None:
            try:
                chunk = os.read(self._r, _READ)
            except BlockingIOError:
                break
            except OSError as e:
                self._break(f"the helper process went away ({e.strerror or e})")
                break
            if not chunk:
                self._break("the helper process exited")
                break
            self._inbox += chunk
            if len(chunk) < _READ:
                break  # the pipe is drained for now: no second system call to learn it
        out = []
        while len(self._inbox) >= _HEAD.size:
            (n,) = _HEAD.unpack_from(self._inbox)
            if len(self._inbox) < _HEAD.size + n:
                break
            data = bytes(self._inbox[_HEAD.size : _HEAD.size + n])
            del self._inbox[: _HEAD.size + n]
            try:
                req, answer, cpu = pickle.loads(data)
            except Exception as e:  # a garbled answer: nothing after it can be trusted
                self._break(f"unreadable answer from the helper process ({e!r})")
                break
            self.cpu_seconds = cpu
            if req == 0:
                self.ready, self.start_cpu_seconds = True, cpu
            elif req < 0:
                self.problems.append(answer)
            elif self.in_flight is not None and self.in_flight[0] == req:
                out.append((self.in_flight[1], answer))
                self.in_flight = None
                self.answered += 1
        return out


def _let_go(proc: subprocess.Popen | None, *fds: int | None) -> None:
    """Close our ends of the pipes (the helper exits on EOF) and reap it on a thread."""
    _close_fds(*fds)
    if proc is not None and proc.poll() is None:
        threading.Thread(target=_reap, args=(proc,), name="rlvitals-reap", daemon=True).start()


def _reap(proc: subprocess.Popen) -> None:
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)


def _close_fds(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


# -- the helper ---------------------------------------------------------------------------------


class _Helper:
    """The helper's state: the window (as the monitor would hold it), the manifest, configs."""

    def __init__(self) -> None:
        # what it works with, imported (the catalogue loaded) before the helper says it is up
        from rlvitals import doctor
        from rlvitals.detectors import load_all
        from rlvitals.guard import checks, window

        load_all()
        self.doctor, self.checks, self.w = doctor, checks, window
        self.window: Any = None
        self.manifest: Any = None
        self.configs: dict[Any, tuple[Any, Any]] = {}

    def take(self, message: tuple) -> tuple[int, Any] | None:
        """Apply one message; ``(request id, answer)`` for a question, an error report for
        data it could not read, else None."""
        kind = message[0]
        if kind == "init":
            _, size, tau, self.manifest = message
            self.window = self.w.StepWindow(
                size, tau=tau, reward_range=self.w.known_range(self.manifest)
            )
        elif kind == "manifest":
            self.manifest = message[1]
            self.window.known_range = self.w.known_range(self.manifest)
        elif kind == "config":
            _, key, config = message
            self.configs[key] = (config, self.doctor.prepare(config))
        elif kind in ("groups", "scalars"):
            try:
                self.window.take(message)
            except Exception as e:
                error = RuntimeError(f"{type(e).__name__}: {e} (in the helper)")
                return -1, (f"reading the {kind}", error)
        elif kind == "ask":
            _, req, what, key = message
            try:
                if what == "packed":
                    return req, self.window.packed(self.manifest)
                return req, self.checks.run_check(self.window, self.manifest, *self.configs[key])
            except Exception as e:  # the monitor contains and reports it, as in-process
                return req, RuntimeError(f"{type(e).__name__}: {e}")
        return None


def main(argv: list[str] | None = None) -> int:
    """The helper: read messages from one descriptor, answer on the other, until EOF."""
    import numpy as np

    args = sys.argv[1:] if argv is None else argv
    r, w = int(args[0]), int(args[1])
    warnings.simplefilter("ignore")
    np.seterr(all="ignore")
    try:
        return _serve(r, w)
    except BrokenPipeError:  # the training process went away (also while closing our end)
        return 0


def _serve(r: int, w: int) -> int:
    helper = _Helper()
    with os.fdopen(r, "rb") as inp, os.fdopen(w, "wb") as out:

        def say(req: int, answer: Any) -> bool:
            try:
                blob = pickle.dumps((req, answer, time.process_time()), pickle.HIGHEST_PROTOCOL)
            except Exception as e:  # an unpicklable finding: say so rather than go silent
                blob = pickle.dumps((req, RuntimeError(repr(e)), time.process_time()))
            try:
                out.write(_HEAD.pack(len(blob)) + blob)
                out.flush()
            except BrokenPipeError:
                return False
            return True

        if not say(0, None):
            return 0
        while True:
            head = inp.read(_HEAD.size)
            if len(head) < _HEAD.size:
                return 0  # the training process closed its end, or died
            (n,) = _HEAD.unpack(head)
            data = inp.read(n)
            if len(data) < n:
                return 0
            for message in pickle.loads(data):
                reply = helper.take(message)
                if reply is not None and not say(*reply):
                    return 0


if __name__ == "__main__":
    sys.exit(main())

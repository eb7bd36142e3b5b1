"""Where alerts go, delivered off the training thread; every failure contained and told once.

A sink is anything with ``send(alert)`` (and optionally ``name``); a plain callable is wrapped in
:class:`CallableSink`. :class:`SinkRunner` gives each sink its own daemon thread and a bounded
queue, so the training loop only ever enqueues:

- a sink that **raises** (a 500 from the webhook, a bug in a callback, ``ENOSPC`` from a full
  disk) is reported through ``logging`` (logger ``rlvitals.guard``) and counted; its later
  alerts are still tried;
- a sink that **hangs** past ``timeout`` seconds is reported; alerts meant for it wait in its
  queue, and are dropped (counted) once the queue is full;
- each sink's first problem is reported, once; later ones (of any kind) are only counted;
- at :meth:`SinkRunner.close`, the alerts a sink never got (still queued or in delivery when
  the close gave up, or dropped) are counted as lost and said for each sink;
- the training thread never waits for a sink, except in :meth:`SinkRunner.flush` /
  :meth:`SinkRunner.close`, which wait at most their timeout.

Each alert is delivered in a copy of the ``contextvars`` context of the thread that raised it:
trackio keeps its current run in a context variable a worker thread would not see otherwise.

Webhooks from the environment (:func:`env_sinks`): ``RLVITALS_WEBHOOK_URL`` and
``RLVITALS_SLACK_WEBHOOK_URL`` add a :class:`WebhookSink` / :class:`SlackSink` to the default
sinks of every monitor (the TRL callback, the veRL guard, your loop with ``sinks=None``) and to
``rlvitals watch`` (:class:`rlvitals.guard.condition_alerts.ConditionAlerts`), with no code change in the training script. A
value that is not an http(s) URL is said once on ``rlvitals.guard`` and ignored; it never
stops a run.

>>> got = []
>>> runner = SinkRunner([got.append])
>>> from rlvitals.guard.alerts import Alert
>>> runner.send(Alert("opened", 5, "warn", "demo", "demo alert"))
>>> runner.flush(2.0), [a.step for a in got]
(True, [5])
>>> runner.close()  # the alerts lost
0
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import queue
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from rlvitals.guard.alerts import Alert

__all__ = [
    "DEFAULT_SINK_TIMEOUT",
    "ENV_SLACK",
    "ENV_WEBHOOK",
    "CallableSink",
    "FileSink",
    "LogSink",
    "SinkRunner",
    "SlackSink",
    "TrackioSink",
    "WandbSink",
    "WebhookSink",
    "default_sinks",
    "env_sinks",
    "sink_name",
]

logger = logging.getLogger("rlvitals.guard")

DEFAULT_SINK_TIMEOUT = 5.0
"""Seconds a sink may take to deliver one alert before it is reported as hung (and the HTTP
timeout of the webhook sinks)."""
QUEUE_SIZE = 64
"""Alerts waiting per sink; beyond, new alerts for that sink are dropped and counted."""


def sink_name(sink: Any) -> str:
    """The name a sink is reported under: its ``name``, else its class or function name."""
    name = getattr(sink, "name", None)
    if isinstance(name, str) and name:
        return name
    return getattr(sink, "__qualname__", None) or type(sink).__name__


class LogSink:
    """One log line per alert on the ``rlvitals.guard`` logger (WARNING; a recovery is INFO).

    The monitor always has one; it runs on the training thread (logging never raises).
    """

    name = "log"

    def __init__(self, logger_name: str = "rlvitals.guard"):
        self.logger = logging.getLogger(logger_name)

    def send(self, alert: Alert) -> None:
        level = logging.INFO if alert.kind == "recovered" else logging.WARNING
        self.logger.log(level, "rlvitals: %s", alert.message)


class WebhookSink:
    """POST each alert as JSON to ``url`` (``Content-Type: application/json``).

    Args:
        url: the endpoint.
        timeout: seconds for the whole request (connect and response).
        headers: extra HTTP headers (an auth token, ...).
        payload: ``"json"`` (:meth:`Alert.to_dict`) or ``"slack"`` (:meth:`Alert.slack_payload`).
        name: what failures are reported under (default ``webhook``).

    A response outside 2xx is a failure (reported once, like any other).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_SINK_TIMEOUT,
        headers: dict[str, str] | None = None,
        payload: str = "json",
        name: str | None = None,
    ):
        if payload not in ("json", "slack"):
            raise ValueError(f"payload must be 'json' or 'slack', got {payload!r}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"webhook url must start with http:// or https://, got {url!r}")
        self.url = url
        self.timeout = float(timeout)
        self.headers = dict(headers or {})
        self.payload = payload
        self.name = name or ("slack" if payload == "slack" else "webhook")

    def body(self, alert: Alert) -> dict[str, Any]:
        return alert.slack_payload() if self.payload == "slack" else alert.to_dict()

    def send(self, alert: Alert) -> None:
        data = json.dumps(self.body(alert), allow_nan=False, default=str).encode("utf-8")
        req = urllib.request.Request(
            self.url,
            data=data,
            method="POST",
            headers={"Content-Type": "application/json", "User-Agent": "rlvitals", **self.headers},
        )
        with urllib.request.urlopen(req, timeout=self.timeout) as resp:
            resp.read(1 << 16)


class SlackSink(WebhookSink):
    """A Slack incoming webhook (or any Slack-compatible one: Mattermost, Discord ``/slack``):
    ``{"text": ..., "blocks": [...]}``."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_SINK_TIMEOUT, name: str = "slack"):
        super().__init__(url, timeout=timeout, payload="slack", name=name)


class WandbSink:
    """``wandb.alert`` on the active W&B run; does nothing while no run is active.

    wandb is never imported by this sink: it acts only when the program imported wandb and
    ``wandb.run`` is set (``wandb.init`` ran, e.g. through ``report_to="wandb"``).
    """

    name = "wandb"

    def send(self, alert: Alert) -> None:
        wandb = sys.modules.get("wandb")
        if wandb is None or getattr(wandb, "run", None) is None:
            return
        levels = getattr(wandb, "AlertLevel", None)
        level = None
        if levels is not None:
            level = {"critical": levels.ERROR, "warn": levels.WARN}.get(alert.severity, levels.INFO)
        wandb.alert(title=alert.headline[:64], text=alert.text(), level=level, wait_duration=0)


class TrackioSink:
    """``trackio.alert`` on the current trackio run; does nothing while no run is current."""

    name = "trackio"

    def send(self, alert: Alert) -> None:
        trackio = sys.modules.get("trackio")
        if trackio is None:
            return
        try:
            from trackio import context_vars
        except ImportError:
            return
        if context_vars.current_run.get() is None:
            return
        levels = trackio.AlertLevel
        level = {"critical": levels.ERROR, "warn": levels.WARN}.get(alert.severity, levels.INFO)
        trackio.alert(title=alert.headline, text=alert.text(), level=level)


class FileSink:
    """Append each alert as one JSON line to ``path`` (created with its parents)."""

    def __init__(self, path: str | os.PathLike, *, name: str = "file"):
        self.path = os.fspath(path)
        self.name = name

    def send(self, alert: Alert) -> None:
        line = json.dumps(alert.to_dict(), allow_nan=False, default=str) + "\n"
        parent = os.path.dirname(self.path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)


class CallableSink:
    """A user function ``fn(alert)``; its return value is ignored."""

    def __init__(self, fn: Callable[[Alert], Any], *, name: str | None = None):
        if not callable(fn):
            raise TypeError(f"a sink must be callable or have send(alert), got {fn!r}")
        self.fn = fn
        self.name = name or sink_name(fn)

    def send(self, alert: Alert) -> None:
        self.fn(alert)


ENV_WEBHOOK = "RLVITALS_WEBHOOK_URL"
"""Environment variable: URL(s) each alert is POSTed to as JSON (a :class:`WebhookSink`)."""
ENV_SLACK = "RLVITALS_SLACK_WEBHOOK_URL"
"""Environment variable: Slack incoming-webhook URL(s) (a :class:`SlackSink`)."""
_ENV_TOLD: set[tuple[str, str]] = set()


def _redacted(url: str) -> str:
    """What an error may show of a webhook URL: its scheme and host (the path of a Slack
    webhook is its secret).

    >>> _redacted("https://hooks.slack.com/services/T0/B0/secret"), _redacted("hooks.slack.com/x")
    ('https://hooks.slack.com/...', "'hooks.slack...'")
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme and parts.netloc:
        return f"{parts.scheme}://{parts.hostname or ''}/..."
    return repr(url[:11] + "...") if len(url) > 11 else repr(url)


def _url_problem(url: str) -> str | None:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (ValueError for a port that is not a number in range)
    except ValueError:
        return "is not a valid URL (its port?)"
    if parts.scheme not in ("http", "https"):
        return "does not start with http:// or https://"
    if not parts.hostname:
        return "names no host"
    return None


def env_sinks(environ: Mapping[str, str] | None = None) -> list[WebhookSink]:
    """The webhook sinks the environment asks for: a :class:`WebhookSink` for each URL in
    :data:`ENV_WEBHOOK`, a :class:`SlackSink` for each in :data:`ENV_SLACK` (several URLs are
    separated by commas or spaces). Never raises: a value that is not an http(s) URL with a
    host is said once per process on the ``rlvitals.guard`` logger (scheme and host only: a
    webhook's path is its secret) and left out.

    >>> [s.name for s in env_sinks({"RLVITALS_SLACK_WEBHOOK_URL": "https://hooks.slack.com/x"})]
    ['slack (RLVITALS_SLACK_WEBHOOK_URL)']
    """
    env = os.environ if environ is None else environ
    out: list[WebhookSink] = []
    for var, payload in ((ENV_WEBHOOK, "json"), (ENV_SLACK, "slack")):
        for url in str(env.get(var) or "").replace(",", " ").split():
            problem = _url_problem(url)
            if problem is None:
                kind = "slack" if payload == "slack" else "webhook"
                out.append(WebhookSink(url, payload=payload, name=f"{kind} ({var})"))
            elif (var, url) not in _ENV_TOLD:
                _ENV_TOLD.add((var, url))
                logger.warning(
                    "rlvitals guard: %s: %s %s; no alerts are sent there (training continues)",
                    var,
                    _redacted(url),
                    problem,
                )
    return out


def default_sinks() -> list[Any]:
    """The sinks a monitor has unless told otherwise: W&B and trackio alerts, each inert until
    its library has an active run, and the webhooks of the environment (:func:`env_sinks`)."""
    return [WandbSink(), TrackioSink(), *env_sinks()]


def as_sink(obj: Any) -> Any:
    """``obj`` if it has ``send``, a :class:`CallableSink` for a callable, a
    :class:`WebhookSink` for an http(s) URL."""
    if callable(getattr(obj, "send", None)):
        return obj
    if isinstance(obj, str) and obj.startswith(("http://", "https://")):
        return WebhookSink(obj)
    return CallableSink(obj)


# ------------------------------------------------------------------------------------------


class _Worker:
    def __init__(self, sink: Any, name: str, size: int):
        self.sink, self.name = sink, name
        self.queue: queue.Queue = queue.Queue(maxsize=size)
        self.thread: threading.Thread | None = None
        self.busy_since: float | None = None

    def start(self, run: Callable[[_Worker], None]) -> None:
        if self.thread is None:
            self.thread = threading.Thread(
                target=run, args=(self,), name=f"rlvitals-sink-{self.name}", daemon=True
            )
            self.thread.start()


class SinkRunner:
    """Deliver alerts to sinks off the calling thread (module docstring).

    Args:
        sinks: sinks, callables or webhook URLs.
        timeout: seconds one delivery may take before the sink is reported as hung.
        queue_size: alerts waiting per sink before new ones are dropped.

    Attributes:
        counts: ``(sink name, what)`` → how many: ``sent``, ``failed``, ``dropped``, ``lost``
            (not delivered at :meth:`close`), and the problems ``raise``, ``hang``, ``full``.
        problems: sink name → the first problem reported for it.
    """

    def __init__(
        self,
        sinks: Iterable[Any] = (),
        *,
        timeout: float = DEFAULT_SINK_TIMEOUT,
        queue_size: int = QUEUE_SIZE,
    ):
        self.timeout = float(timeout)
        self.workers: list[_Worker] = []
        names: Counter[str] = Counter()
        for s in sinks:
            sink = as_sink(s)
            name = sink_name(sink)
            names[name] += 1
            if names[name] > 1:
                name = f"{name}#{names[name]}"
            self.workers.append(_Worker(sink, name, queue_size))
        self.counts: Counter[tuple[str, str]] = Counter()
        self.problems: dict[str, str] = {}
        self._told: set[str] = set()
        self._lock = threading.Lock()
        self._new: list[tuple[str, str]] = []
        self.closed = False

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.workers]

    def send(self, alert: Alert) -> None:
        """Queue ``alert`` for every sink; never raises, never blocks."""
        if self.closed:
            return
        now = time.monotonic()
        for w in self.workers:
            ctx = contextvars.copy_context()  # one per sink: a context is entered by one thread
            self._hang_check(w, now)
            try:
                w.queue.put_nowait((ctx, alert))
            except queue.Full:
                self.counts[(w.name, "dropped")] += 1
                self._problem(w.name, "full", f"{w.queue.maxsize} alerts waiting: new ones dropped")
                continue
            w.start(self._drain)

    def _drain(self, w: _Worker) -> None:
        while True:
            item = w.queue.get()
            try:
                if item is None:
                    return
                ctx, alert = item
                w.busy_since = time.monotonic()
                try:
                    ctx.run(w.sink.send, alert)
                    self.counts[(w.name, "sent")] += 1
                except Exception as err:  # a sink must never reach the training loop
                    self.counts[(w.name, "failed")] += 1
                    self._problem(w.name, "raise", f"raised {type(err).__name__}: {err}")
                finally:
                    w.busy_since = None
            finally:
                w.queue.task_done()

    def _hang_check(self, w: _Worker, now: float) -> None:
        """Report ``w`` as hung when its delivery in progress started over the timeout ago."""
        busy = w.busy_since
        if busy is not None and now - busy > self.timeout:
            what = f"did not return within {self.timeout:g} s (alerts wait in its queue)"
            self._problem(w.name, "hang", what)

    def _problem(self, name: str, kind: str, what: str) -> None:
        with self._lock:
            self.counts[(name, kind)] += 1
            if name in self._told:
                return
            self._told.add(name)
            self.problems[name] = what
            self._new.append((name, what))
        logger.warning(
            "rlvitals guard: alert sink %r %s; training continues (its further problems are "
            "counted, not reported)",
            name,
            what,
        )

    def take_problems(self) -> list[tuple[str, str]]:
        """Problems reported since the last call, as ``(sink name, what)``."""
        with self._lock:
            out, self._new = self._new, []
        return out

    def pending(self) -> int:
        """Alerts not yet delivered (queued or in delivery)."""
        return sum(w.queue.unfinished_tasks for w in self.workers)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued alert is delivered or ``timeout`` seconds passed (default:
        the sink timeout); True when nothing is left. Reports sinks still busy as hung."""
        deadline = time.monotonic() + (self.timeout if timeout is None else float(timeout))
        while self.pending():
            if time.monotonic() >= deadline:
                for w in self.workers:
                    if w.queue.unfinished_tasks:
                        self._hang_check(w, time.monotonic())
                return False
            time.sleep(0.005)
        return True

    def close(self, timeout: float = 1.0) -> int:
        """Flush for at most ``timeout`` seconds, then stop the workers (a hung one is left to
        die with the process: its thread is a daemon). Idempotent.

        Returns the alerts lost: those still waiting or in delivery at the end (counted as
        ``lost``) and those dropped on a full queue. Each sink that lost any is said, always
        (not only the first problem): a ``logging`` warning and a :meth:`take_problems` entry.
        """
        if self.closed:
            return 0
        self.flush(timeout)
        self.closed = True
        lost = 0
        for w in self.workers:
            waiting = w.queue.unfinished_tasks
            dropped = self.counts[(w.name, "dropped")]
            if waiting:
                self.counts[(w.name, "lost")] += waiting
            if waiting or dropped:
                lost += waiting + dropped
                what = (
                    f"lost {waiting + dropped} alert(s): {waiting} not delivered at close "
                    f"(waiting or in delivery after {timeout:g} s), {dropped} dropped on a full "
                    "queue"
                )
                with self._lock:
                    self.problems[w.name] = what
                    self._new.append((w.name, what))
                logger.warning("rlvitals guard: alert sink %r %s", w.name, what)
            if w.thread is not None:
                with contextlib.suppress(queue.Full):
                    w.queue.put_nowait(None)
        return lost

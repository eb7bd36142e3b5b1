"""A progress bar on stderr for long imports, shown only when it helps.

Importers report ``progress(done_bytes, total_bytes)`` now and then (see
:data:`rlvitals.importers.Progress`). :class:`ProgressBar` is such a callback: it draws nothing
for inputs that finish within :data:`SHOW_AFTER_S` seconds, and nothing at all unless stderr is a
terminal or the bar is forced (``force=True``, or ``RLVITALS_PROGRESS=1`` in the environment;
``RLVITALS_PROGRESS=0`` turns it off everywhere). It never uses a background thread: it redraws
from the callback, at most every :data:`REDRAW_EVERY_S` seconds.

>>> with ProgressBar("run.jsonl", force=False) as bar:
...     bar(10, 100)
>>> bar.shown
False
"""

from __future__ import annotations

import os
import sys
import time
from typing import IO, Any

__all__ = [
    "ENV_VAR",
    "REDRAW_EVERY_S",
    "SHOW_AFTER_S",
    "LiveLine",
    "ProgressBar",
    "progress_enabled",
]

SHOW_AFTER_S = 1.0
"""Inputs read faster than this never show a bar."""
REDRAW_EVERY_S = 0.1
"""Minimum time between two redraws."""
ENV_VAR = "RLVITALS_PROGRESS"
"""``1`` forces the bar on (even when stderr is not a terminal), ``0`` turns it off."""


def progress_enabled(force: bool | None = None, stream: IO[str] | None = None) -> bool:
    """Whether a bar may be drawn: ``force`` wins, then ``$RLVITALS_PROGRESS``, then isatty."""
    if force is not None:
        return force
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env in ("1", "true", "yes", "on"):
        return True
    if env in ("0", "false", "no", "off"):
        return False
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class LiveLine:
    """One line of rich progress columns on ``stream`` (stderr by default), drawn from callbacks
    (never a thread): :meth:`_open` starts it, :meth:`_draw` redraws it, :meth:`close` removes
    it. ``enabled`` is :func:`progress_enabled`'s answer; ``force`` also makes rich draw on a
    stream that is not a terminal. Shared by :class:`ProgressBar` and the scan's counter."""

    def __init__(self, *, force: bool | None = None, stream: IO[str] | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = progress_enabled(force, self.stream)
        self.force = force
        self._last_draw = 0.0
        self._progress: Any = None
        self._task: Any = None
        self._shown = False

    @property
    def shown(self) -> bool:
        """True once the line has been drawn (stays True after :meth:`close`)."""
        return self._shown

    def _open(self, columns: tuple, description: str, total: int | None) -> None:
        from rich.console import Console
        from rich.progress import Progress

        console = Console(file=self.stream, force_terminal=bool(self.force) or None)
        self._progress = Progress(*columns, console=console, auto_refresh=False, transient=True)
        self._progress.start()
        self._shown = True
        self._task = self._progress.add_task(description, total=total)

    def _draw(self, **update: Any) -> None:
        self._last_draw = time.monotonic()
        self._progress.update(self._task, **update)
        self._progress.refresh()

    def close(self) -> None:
        """Remove the line (idempotent)."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProgressBar(LiveLine):
    """``progress(done, total)`` callback drawing a rich bar on ``stream`` (stderr by default).

    Args:
        label: what is being read (usually the path), shown left of the bar.
        force: True/False to override the terminal check; None to decide from the environment.
        stream: where to draw; default ``sys.stderr``.
        show_after: seconds before the bar may appear (None: :data:`SHOW_AFTER_S`).

    Use it as a context manager so the bar is removed when reading ends.
    """

    def __init__(
        self,
        label: str,
        *,
        force: bool | None = None,
        stream: IO[str] | None = None,
        show_after: float | None = None,
    ):
        super().__init__(force=force, stream=stream)
        self.label = label
        self.show_after = SHOW_AFTER_S if show_after is None else show_after
        self.calls = 0
        self._start = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        self.calls += 1
        if not self.enabled:
            return
        if self._progress is None:
            if time.monotonic() - self._start < self.show_after or (total and done >= total):
                return
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            columns = (
                TextColumn("reading {task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
            )
            self._open(columns, _short(self.label), max(total, 1))
        elif time.monotonic() - self._last_draw < REDRAW_EVERY_S and done < total:
            return
        self._draw(completed=done, total=max(total, done, 1))


def _short(label: str, width: int = 40) -> str:
    return label if len(label) <= width else "…" + label[-(width - 1) :]

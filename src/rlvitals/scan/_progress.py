"""The scan's progress on stderr: entries walked while finding runs, then runs read of runs known.

Shown only when stderr is a terminal, or when forced (``--progress``, ``RLVITALS_PROGRESS=1``);
``--no-progress`` or ``RLVITALS_PROGRESS=0`` turns it off (:func:`rlvitals.progress.
progress_enabled`). It is redrawn from the callbacks, at most every
:data:`rlvitals.progress.REDRAW_EVERY_S` seconds, and removed when the scan ends.

>>> with Counter(force=False) as c:
...     c.finding(512, 3); c.reading(1, 3)
>>> c.shown
False
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from rlvitals.progress import REDRAW_EVERY_S, progress_enabled

__all__ = ["Counter"]


class Counter:
    """``finding(entries, targets)`` and ``reading(done, total)`` callbacks drawing one line."""

    def __init__(self, *, force: bool | None = None, stream: IO[str] | None = None):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = progress_enabled(force, self.stream)
        self.force = force
        self._progress: Any = None
        self._task: Any = None
        self._last = 0.0
        self.shown = False

    def _open(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        console = Console(file=self.stream, force_terminal=bool(self.force) or None)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
            auto_refresh=False,
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task("finding runs", total=None)
        self.shown = True

    def _draw(self, final: bool, **update: Any) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self._progress is None:
            self._open()
        elif now - self._last < REDRAW_EVERY_S and not final:
            return
        self._last = now
        self._progress.update(self._task, **update)
        self._progress.refresh()

    def finding(self, entries: int, targets: int) -> None:
        self._draw(False, description=f"finding runs: {targets} in {entries} entries")

    def reading(self, done: int, total: int) -> None:
        self._draw(done >= total, description="reading runs", completed=done, total=total)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def __enter__(self) -> Counter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

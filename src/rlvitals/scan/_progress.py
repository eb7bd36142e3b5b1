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

import time
from typing import Any

from rlvitals.progress import REDRAW_EVERY_S, LiveLine

__all__ = ["Counter"]


class Counter(LiveLine):
    """``finding(entries, targets)`` and ``reading(done, total)`` callbacks drawing one line."""

    def _show(self, final: bool, **update: Any) -> None:
        if not self.enabled:
            return
        if self._progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeRemainingColumn,
            )

            columns = (
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
            )
            self._open(columns, "finding runs", None)
        elif time.monotonic() - self._last_draw < REDRAW_EVERY_S and not final:
            return
        self._draw(**update)

    def finding(self, entries: int, targets: int) -> None:
        self._show(False, description=f"finding runs: {targets} in {entries} entries")

    def reading(self, done: int, total: int) -> None:
        self._show(done >= total, description="reading runs", completed=done, total=total)

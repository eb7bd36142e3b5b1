"""Error containment for code that runs inside someone else's training loop.

A monitoring or estimation hook must never stop or slow a training run. :class:`Guard` runs a hook
body, catches any exception, counts it per site, reports the first failure of each site once on
the ``rlvitals.integrations`` logger (the exception, where it was raised and the traceback) and
returns a fallback value so the caller carries on.

The report goes through ``logging``, never ``warnings``: under ``-W error`` (or pytest's
``filterwarnings = error``) a warning is an exception, and one issued while handling a failure
would escape into the trainer (issue 11: four real TRL runs stopped at steps 6, 2, 0 and 0 of 8).
A logging handler that fails prints its own error and returns; it does not raise.

:func:`quiet` is the other half: no warning raised inside rlvitals (numpy's floating-point ones
included) reaches the caller's warning filters while a hook body runs.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = ["Guard", "quiet"]

logger = logging.getLogger("rlvitals.integrations")

T = TypeVar("T")


class Guard:
    """Counts and reports failures of hook bodies; see the module docstring.

    Attributes:
        errors: failures per site.
        reports: the one-line report of each site's first failure, in order.

    >>> g = Guard("demo")
    >>> g.run("divide", lambda: 1 / 0, default=-1)
    -1
    >>> dict(g.errors), g.reports[0][:45]
    ({'divide': 1}, 'rlvitals demo: divide failed (ZeroDivisionErr')
    """

    def __init__(self, owner: str):
        self.owner = owner
        self.errors: Counter[str] = Counter()
        self.reports: list[str] = []

    @property
    def total(self) -> int:
        return sum(self.errors.values())

    def run(
        self, site: str, fn: Callable[..., T], *args: Any, default: Any = None, **kwargs: Any
    ) -> T | Any:
        """``fn(*args, **kwargs)``, or ``default`` when it raises (reported once per site)."""
        try:
            return fn(*args, **kwargs)
        except Exception as err:  # never let a hook stop training
            self.report(site, err)
            return default

    def note(self, recorder: Any, step: int | None, who: str) -> None:
        """Record a ``note`` event saying how often ``who`` failed, per site (none: nothing)."""
        errors = dict(self.errors)
        if errors:
            what = f"{who} failed {sum(errors.values())} times"
            recorder.log_event(step, "note", what, errors=errors)

    def report(self, site: str, err: BaseException) -> None:
        """Count a failure at ``site``; log it with its traceback the first time."""
        self.errors[site] += 1
        if self.errors[site] > 1:
            return
        try:
            frames = traceback.extract_tb(err.__traceback__)
            where = (
                f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}"
                if frames
                else ""
            )
            message = (
                f"rlvitals {self.owner}: {site} failed ({type(err).__name__}: {err}){where}; "
                "training continues without it (further failures here are counted, not reported)"
            )
            self.reports.append(message)
            logger.warning(
                "%s\n%s",
                message,
                "".join(traceback.format_exception(type(err), err, err.__traceback__)),
            )
        except Exception:  # pragma: no cover - a broken __str__ must not escape either
            self.reports.append(f"rlvitals {self.owner}: {site} failed")


_QUIET = threading.local()


class _Silence:
    """The outermost :func:`quiet`: warnings ignored, numpy's floating-point errors too."""

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


def quiet() -> contextlib.AbstractContextManager[None]:
    """No warning from inside the guard reaches the caller's warning filters (``-W error``
    would make it an exception in the training loop); numpy's floating-point ones included.
    Re-entrant: a nested use (a hook calling the monitor) is a shared no-op (it runs several
    times a step: no generator, no new object).

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("error")
    ...     with quiet():
    ...         warnings.warn("never raised")
    """
    return _NESTED if getattr(_QUIET, "on", False) else _Silence()

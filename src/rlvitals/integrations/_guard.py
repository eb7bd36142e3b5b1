"""Error containment for code that runs inside someone else's training loop.

A monitoring or estimation hook must never stop or slow a training run. :class:`Guard` runs a hook
body, catches any exception, counts it per site, reports the first failure of each site once (a
:class:`RlvitalsHookWarning` with the exception and where it was raised, plus the full traceback on
the ``rlvitals`` logger) and returns a fallback value so the caller carries on.
"""

from __future__ import annotations

import logging
import traceback
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Guard", "RlvitalsHookWarning"]

logger = logging.getLogger("rlvitals.integrations")

T = TypeVar("T")


class RlvitalsHookWarning(RuntimeWarning):
    """An rlvitals hook failed inside a training loop; training continued without it."""


class Guard:
    """Counts and reports failures of hook bodies; see the module docstring.

    Attributes:
        errors: failures per site.

    >>> g = Guard("demo")
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     g.run("divide", lambda: 1 / 0, default=-1)
    -1
    >>> dict(g.errors)
    {'divide': 1}
    """

    def __init__(self, owner: str):
        self.owner = owner
        self.errors: Counter[str] = Counter()

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

    def report(self, site: str, err: BaseException) -> None:
        """Count a failure at ``site``; warn with a traceback summary the first time."""
        self.errors[site] += 1
        if self.errors[site] > 1:
            return
        frames = traceback.extract_tb(err.__traceback__)
        where = (
            f" at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        )
        message = (
            f"rlvitals {self.owner}: {site} failed ({type(err).__name__}: {err}){where}; "
            "training continues without it (further failures here are counted, not reported)"
        )
        warnings.warn(message, RlvitalsHookWarning, stacklevel=3)
        logger.warning(
            "%s\n%s",
            message,
            "".join(traceback.format_exception(type(err), err, err.__traceback__)),
        )

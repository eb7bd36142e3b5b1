"""The message vocabulary: how numbers, comparisons and spans of steps are written, and the id
a prompt is known by.

Detectors write their findings with these, and renderers label findings with them, so a number
or a span reads the same everywhere. Nothing here decides anything.

>>> fmt(0.0312345), fmt(1234.5), fmt(7), fmt(2.5e-7)
('0.0312', '1234', '7', '2.5e-07')
>>> compare(0.0499, ">=", 0.05), compare(4e-4, "<", 0.001)
('0.0499 >= 0.05', '0.0004 < 0.001')
>>> span_text(112, None, 148), span_text(60, 139, 139)
('for 37 steps since step 112', 'from step 60 to 139 (80 steps)')
>>> span_label(60, 139), span_label(5, None), span_label(None, None)
('steps 60-139', 'since step 5', 'whole run')
>>> prompt_id("3+4=")
'ae8ef05dd12c'
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

__all__ = [
    "compare",
    "fmt",
    "number",
    "prompt_id",
    "rnd",
    "span_label",
    "span_text",
    "terminal_safe",
]

_MAX_DIGITS = 6
"""Most significant digits :func:`compare` uses to make a comparison readable."""
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def fmt(x: Any, digits: int = 3) -> str:
    """A number for a message: integers as they are, floats with ``digits`` significant digits
    (whole numbers from 1000 on), ``n/a`` for None.

    >>> fmt(None), fmt(float("nan")), fmt(0.5), fmt(12.345, 4)
    ('n/a', 'nan', '0.5', '12.35')
    """
    if x is None:
        return "n/a"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if 1000 <= abs(x) < 1e9:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def number(x: Any) -> str:
    """A metric value for a report table: 4 significant digits, integers and strings as they are
    (where :func:`fmt` writes a number into a sentence).

    >>> number(0.123456), number(12), number(None), number(True), number(float("nan"))
    ('0.1235', '12', '-', 'yes', 'nan')
    """
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
            return f"{x:.3g}"
        return f"{x:.4g}"
    return str(x)


def compare(value: float, op: str, threshold: float) -> str:
    """``"value op threshold"`` with enough digits that the printed numbers show the relation
    the detector found (never ``0.000 < 0.000`` or ``0.049 >= 0.05``).

    When the relation does not hold for the exact numbers either (a caller's mistake), the
    numbers are printed with the most digits.
    """
    holds = _OPS[op](value, threshold)
    for d in range(3, _MAX_DIGITS + 1):
        a, b = fmt(value, d), fmt(threshold, d)
        try:
            shown = _OPS[op](float(a), float(b))
        except ValueError:  # nan, n/a
            break
        if shown == holds and (a != b or op in ("<=", ">=")):
            return f"{a} {op} {b}"
    return f"{fmt(value, _MAX_DIGITS)} {op} {fmt(threshold, _MAX_DIGITS)}"


def rnd(x: Any, digits: int = 4) -> float | None:
    """``x`` rounded to ``digits`` significant digits for ``Finding.metrics``; NaN/inf → None.

    >>> rnd(0.123456), rnd(12345.678), rnd(float("inf")), rnd(0)
    (0.1235, 12346.0, None, 0.0)
    """
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x):
        return None
    if x == 0:
        return 0.0
    return round(x, max(0, digits - 1 - math.floor(math.log10(abs(x)))))


def span_text(
    onset: int, end: int | None, last: int, *, total: bool = False, points: int | None = None
) -> str:
    """Where a condition held, for a message.

    Args:
        onset: its first step.
        end: its last step when it cleared; None while it is still on.
        last: its last logged step (== ``end`` when it cleared).
        total: the condition holds on every logged step of the run (``points`` of them).
    """
    n = last - onset + 1
    if total:
        return f"on every logged step ({points} points, steps {onset}-{last})"
    if end is None:
        return f"for {n} steps since step {onset}"
    return f"from step {onset} to {end} ({n} steps)"


def span_label(onset: int | None, end: int | None) -> str:
    """A finding's span as a short label: ``since step 60``, ``steps 60-139``, ``whole run``."""
    if onset is None:
        return "whole run"
    if end is None:
        return f"since step {onset}"
    if end == onset:
        return f"step {onset}"
    return f"steps {onset}-{end}"


def terminal_safe(text: Any) -> str:
    """``text`` as a string with control characters (ESC, CSI, OSC, BEL, ...) made visible, so
    a string read from a log cannot move the cursor or rewrite the terminal.

    >>> terminal_safe("grpo\\x1b]0;pwned\\x07")
    'grpo\\\\x1b]0;pwned\\\\x07'
    """
    s = str(text)
    if not any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in s):
        return s
    return "".join(
        ch if ord(ch) >= 160 or (32 <= ord(ch) < 127) or ch in "\t\n" else repr(ch)[1:-1]
        for ch in s
    )


def prompt_id(prompt: Any) -> str:
    """A prompt's id: the first 12 hexadecimal digits of the SHA-1 of ``repr(prompt)``.

    The TRL callback records it per group (``rlvitals.integrations.trl._batch``), and the
    history estimators file a prompt under it (the lab trainer, the veRL sampler's keys), so a
    recorded group and an estimator's posterior name a prompt alike.
    """
    import hashlib  # here: importing it costs the doctor's start-up ~12 M instructions

    return hashlib.sha1(repr(prompt).encode("utf-8")).hexdigest()[:12]

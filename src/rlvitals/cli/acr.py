"""``rlvitals acr``: the Advantage Collapse Rate of every step of a run with per-group rewards."""

from __future__ import annotations

import argparse
import json
import math
import sys

from rlvitals.cli import add_input_flags
from rlvitals.errors import InputError

HELP = "ACR per step (exact, from per-group rewards) with its split and the paper's summaries"
EXAMPLE = "example: rlvitals acr --example collapse --every 10"


def register(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("path", nargs="?", help="run with per-group rewards (e.g. groups JSONL)")
    src.add_argument("--example", metavar="NAME", help="use a bundled example run")
    add_input_flags(p, "which run of a store holding several", format_alias=True)
    p.add_argument(
        "--tau",
        type=float,
        default=1e-6,
        help="collapse tolerance on a group's reward std (default 1e-6)",
    )
    p.add_argument("--every", type=int, default=1, help="print every Nth step (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def load_table(path, fmt, run, lenient: bool, tau: float, every: int, flag: str = "--"):
    """The ACR table of a run (:func:`rlvitals.doctor.acr_table.acr_table`: the doctor's vitals
    and its ACR_STALL) after checking ``tau`` and ``every`` (their names prefixed by ``flag`` in
    the messages): :class:`InputError` for a bad value, a run without per-group rewards or
    without a scorable one. Shared by ``rlvitals acr`` and the MCP ``acr`` tool."""
    import numpy as np

    from rlvitals.doctor.acr_table import acr_table
    from rlvitals.importers import load

    if every < 1:
        raise InputError(None, f"{flag}every must be >= 1, got {every}")
    if not (math.isfinite(tau) and tau >= 0):
        raise InputError(None, f"{flag}tau must be a finite number >= 0, got {tau}")
    t = acr_table(load(path, fmt, run=run, lenient=lenient), tau=tau)
    if t is None:
        raise InputError(
            path, "run has no per-group rewards; try the doctor instead ('rlvitals doctor')"
        )
    if not np.isfinite(t.acr).any():
        raise InputError(path, "no group has a scorable reward (every reward is null or NaN)")
    return t


def json_rows(t, every: int = 1) -> list[dict]:
    """Every ``every``-th step of the table ``t`` as ``{"step", "acr", "solve_all",
    "solve_none", "flat", "expected"}`` (NaN as None, 6 decimals)."""
    cols = ("acr", "solve_all", "solve_none", "flat", "expected")
    return [
        {"step": int(t.steps[i]), **{c: _f(getattr(t, c)[i]) for c in cols}}
        for i in range(0, t.steps.size, every)
    ]


def run(args: argparse.Namespace) -> int:
    from rlvitals.examples import example_path

    path = example_path(args.example) if args.example else args.path
    t = load_table(path, args.input_format, args.run, args.lenient, args.tau, args.every)
    summary = t.summary()
    if args.json:
        doc = {"summary": summary, "steps": json_rows(t)}
        json.dump(doc, sys.stdout, indent=1, allow_nan=False)
        print()
        return 0
    out = sys.stdout
    out.write(f"{'step':>7} {'ACR':>6} {'easy':>6} {'hard':>6} {'flat':>6} {'expect':>6}\n")
    for i in range(0, t.steps.size, args.every):
        out.write(
            f"{t.steps[i]:>7d} {t.acr[i]:6.3f} {t.solve_all[i]:6.3f} "
            f"{t.solve_none[i]:6.3f} {t.flat[i]:6.3f} {t.expected[i]:6.3f}\n"
        )
    out.write(
        f"\n{summary['steps']} steps  ACR mean {_num(summary['acr_mean'])}  "
        f"ACR_100 {_num(summary['acr_100'])}  last windowed ACR "
        f"{_num(summary['acr_windowed_last'])}\n"
    )
    lo, hi = t.reward_range
    out.write(f"split judged in the reward range [{lo:g}, {hi:g}]\n")
    for f in t.stalls:
        out.write(f"stall ({f.severity.value}): {f.message}\n")
    return 0


def _f(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, 6)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"

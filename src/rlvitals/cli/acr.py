"""``rlvitals acr``: the Advantage Collapse Rate of every step of a run with per-group rewards."""

from __future__ import annotations

import argparse
import json
import math
import sys

from rlvitals.errors import InputError

HELP = "ACR per step (exact, from per-group rewards) with its split and the paper's summaries"
EXAMPLE = "example: rlvitals acr --example collapse --every 10"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acr", help=HELP, description=HELP + ".", epilog=EXAMPLE)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("path", nargs="?", help="run with per-group rewards (e.g. groups JSONL)")
    src.add_argument("--example", metavar="NAME", help="use a bundled example run")
    p.add_argument(
        "--input-format",
        "--format",
        dest="fmt",
        metavar="FMT",
        help="force the input format instead of sniffing it",
    )
    p.add_argument("--run", metavar="NAME", help="which run of a store holding several")
    p.add_argument(
        "--lenient",
        action="store_true",
        help="skip damaged records that strict reading refuses (a corrupt record in the middle "
        "of a recording, an invalid JSONL line); each skip is listed in the warnings",
    )
    p.add_argument(
        "--tau",
        type=float,
        default=1e-6,
        help="collapse tolerance on a group's reward std (default 1e-6)",
    )
    p.add_argument("--every", type=int, default=1, help="print every Nth step (default 1)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from rlvitals.doctor.acr_table import acr_table
    from rlvitals.examples import example_path
    from rlvitals.importers import load

    if args.every < 1:
        raise InputError(None, f"--every must be >= 1, got {args.every}")
    if not (math.isfinite(args.tau) and args.tau >= 0):
        raise InputError(None, f"--tau must be a finite number >= 0, got {args.tau}")
    path = example_path(args.example) if args.example else args.path
    r = load(path, args.fmt, run=args.run, lenient=args.lenient)
    t = acr_table(r, tau=args.tau)  # the doctor's vitals and its ACR_STALL, one call
    if t is None:
        raise InputError(path, "run has no per-group rewards; try 'rlvitals doctor' instead")
    if not np.isfinite(t.acr).any():
        raise InputError(path, "no group has a scorable reward (every reward is null or NaN)")
    summary = t.summary()
    if args.json:
        rows = [
            {
                "step": int(st),
                "acr": _f(a),
                "solve_all": _f(sa),
                "solve_none": _f(sn),
                "flat": _f(fl),
                "expected": _f(e),
            }
            for st, a, sa, sn, fl, e in zip(
                t.steps, t.acr, t.solve_all, t.solve_none, t.flat, t.expected
            )
        ]
        json.dump({"summary": summary, "steps": rows}, sys.stdout, indent=1, allow_nan=False)
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

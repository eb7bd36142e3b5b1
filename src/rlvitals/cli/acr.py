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

    from rlvitals.examples import example_path
    from rlvitals.importers import load
    from rlvitals.signal import acr_100, acr_volatility, stall_spans, windowed_acr
    from rlvitals.vitals import acr_series

    if args.every < 1:
        raise InputError(None, f"--every must be >= 1, got {args.every}")
    path = example_path(args.example) if args.example else args.path
    r = load(path, args.fmt, run=args.run)
    found = acr_series(r, tau=args.tau)  # the doctor's vitals read the same series and range
    if found is None:
        raise InputError(path, "run has no per-group rewards; try 'rlvitals doctor' instead")
    s, rr = found
    vol = acr_volatility(s.acr)
    summary = {
        "steps": int(s.steps.size),
        "acr_mean": _f(np.nanmean(s.acr)),
        "acr_100": _f(acr_100(s.acr, s.steps)),
        "acr_windowed_last": _f(windowed_acr(s.acr)[-1]),
        "volatility_max": _f(np.nanmax(vol)) if np.isfinite(vol).any() else None,
        "stalls": stall_spans(s.acr, s.steps),
        "reward_range": [rr.low, rr.high],
    }
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
                s.steps, s.acr, s.acr_solve_all, s.acr_solve_none, s.acr_flat, s.expected_acr
            )
        ]
        json.dump({"summary": summary, "steps": rows}, sys.stdout, indent=1)
        print()
        return 0
    out = sys.stdout
    out.write(f"{'step':>7} {'ACR':>6} {'easy':>6} {'hard':>6} {'flat':>6} {'expect':>6}\n")
    for i in range(0, s.steps.size, args.every):
        out.write(
            f"{s.steps[i]:>7d} {s.acr[i]:6.3f} {s.acr_solve_all[i]:6.3f} "
            f"{s.acr_solve_none[i]:6.3f} {s.acr_flat[i]:6.3f} {s.expected_acr[i]:6.3f}\n"
        )
    out.write(
        f"\n{summary['steps']} steps  ACR mean {summary['acr_mean']:.3f}  "
        f"ACR_100 {summary['acr_100']:.3f}  last windowed ACR {summary['acr_windowed_last']:.3f}\n"
    )
    for a, b in summary["stalls"]:
        out.write(f"stall: ACR > 0.35 from step {a} to {b} ({b - a + 1} steps)\n")
    return 0


def _f(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else round(x, 6)

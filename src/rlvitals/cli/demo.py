"""``rlvitals demo``: a GRPO run collapses on CPU, the doctor finds it, AVSPO from the same seed."""

from __future__ import annotations

import argparse

HELP = "train GRPO until it collapses, diagnose it, retrain with AVSPO (about 2 min on CPU)"
EXAMPLE = "example: rlvitals demo --out rlvitals-demo"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="rlvitals-demo", help="folder (default rlvitals-demo)")
    p.add_argument("--preset", default="default", help="default, or smoke (seconds, tests)")
    p.add_argument("--cache", help="cache of base policies (default ~/.cache/rlvitals/lab)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda (the first visible GPU)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.cli.lab import _require, lab_errors

    _require()
    from rlvitals.lab.demo import demo

    with lab_errors():
        demo(
            args.out,
            preset=args.preset,
            cache_dir=args.cache,
            device=args.device,
            show=False if args.no_progress else None,
        )
    return 0

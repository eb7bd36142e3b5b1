"""``rlvitals explain ID``: print a detector's page (what it means, how it decides, what to try)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "run"]

HELP = "print a detector's page: what is happening, how it decides, what to try, its knobs"
EXAMPLE = """\
IDs are case-insensitive; 'rlvitals detectors' lists them.

example: rlvitals explain ADV_COLLAPSE"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain",
        help=HELP,
        description=HELP + ".",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("id", metavar="ID", help="detector ID, e.g. ADV_COLLAPSE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.detectors import DETECTORS, load_all
    from rlvitals.errors import InputError
    from rlvitals.report.pages import detector_page

    load_all()
    det_id = args.id.strip().upper().replace("-", "_")
    if det_id not in DETECTORS:
        raise InputError(
            None, f"unknown detector {args.id!r}; valid: " + ", ".join(DETECTORS.names())
        )
    sys.stdout.write(detector_page(DETECTORS.get(det_id), links=False))
    return 0

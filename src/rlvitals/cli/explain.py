"""``rlvitals explain ID``: print a detector's page (what it means, how it decides, what to try)."""

from __future__ import annotations

import argparse
import sys

from rlvitals.cli import add_json_flags

__all__ = ["register", "run"]

HELP = "print a detector's page: what is happening, how it decides, what to try, its knobs"
EXAMPLE = """\
IDs are case-insensitive; 'rlvitals detectors' lists them.

example: rlvitals explain ADV_COLLAPSE"""


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "id", metavar="ID", help="detector ID (ADV_COLLAPSE) or condition ID (RUNAWAY_LENGTH)"
    )
    add_json_flags(p, "print the page as JSON (its ID, kind and text)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.conditions import CONDITIONS
    from rlvitals.detectors import DETECTORS, load_all
    from rlvitals.errors import InputError
    from rlvitals.report.pages import condition_page, detector_page

    load_all()
    det_id = args.id.strip().upper().replace("-", "_")
    if det_id in DETECTORS:
        page = detector_page(DETECTORS.get(det_id), links=False)
        kind = "detector"
    elif det_id in CONDITIONS:
        page = condition_page(CONDITIONS[det_id])
        kind = "condition"
    else:
        raise InputError(
            None,
            f"unknown detector or condition {args.id!r}; detectors: "
            + ", ".join(DETECTORS.names())
            + "; conditions: "
            + ", ".join(CONDITIONS),
        )
    if args.output_format == "json":
        import json

        sys.stdout.write(json.dumps({"id": det_id, "kind": kind, "page": page}, indent=1) + "\n")
    else:
        sys.stdout.write(page)
    return 0

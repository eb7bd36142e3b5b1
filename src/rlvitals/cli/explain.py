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
    from rlvitals.report.pages import condition_page, detector_page, explained

    kind, subject = explained(args.id)
    if kind == "detector":
        page = detector_page(subject, links=False)
    else:
        page = condition_page(subject)
    if args.output_format == "json":
        import json

        out = {"id": subject.id, "kind": kind, "page": page}
        sys.stdout.write(json.dumps(out, indent=1) + "\n")
    else:
        sys.stdout.write(page)
    return 0

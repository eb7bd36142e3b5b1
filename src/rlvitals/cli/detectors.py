"""``rlvitals detectors``: the detector catalogue (ID, severity, family, what it finds)."""

from __future__ import annotations

import argparse
import json
import sys

from rlvitals.cli import add_json_flags

__all__ = ["register", "run"]

HELP = "list the detector catalogue: ID, severity, family, what each finds"
EXAMPLE = """\
examples:
  rlvitals detectors
  rlvitals detectors --family collapse
  rlvitals detectors --json"""


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", metavar="NAME", help="only this family (collapse, entropy, ...)")
    add_json_flags(p, "print JSON (ID, severity, family, key metrics, knobs with defaults)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.report.pages import catalogue_row, detectors_of, summary

    classes = detectors_of(args.family)
    if args.output_format == "json":
        json.dump([catalogue_row(c) for c in classes], sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    w_id = max(len(c.id) for c in classes)
    w_fam = max(len(c.family) for c in classes)
    out = sys.stdout
    out.write(f"{'ID':<{w_id}}  {'severity':<8}  {'family':<{w_fam}}  what it finds\n")
    for c in classes:
        out.write(f"{c.id:<{w_id}}  {c.severity.value:<8}  {c.family:<{w_fam}}  {summary(c)}\n")
    out.write(f"\n{len(classes)} detectors; 'rlvitals explain ID' prints a detector's page.\n")
    return 0

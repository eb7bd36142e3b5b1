"""``rlvitals compare A B``: two runs side by side (configuration, divergence, incidents)."""

from __future__ import annotations

import argparse
import os
import sys

from rlvitals.errors import InputError

__all__ = ["register", "run"]

HELP = "compare two runs: config differences, the first step their vitals diverge, incidents"
EXAMPLE = """\
A and B are runs any importer reads (the same store twice with --run-a / --run-b compares two
of its runs). Exit code 0, or 2 for bad input.

examples:
  rlvitals compare runs/lr1e-6 runs/lr3e-6
  rlvitals compare mlruns/ mlruns/ --run-a baseline --run-b avspo -o compare.html"""
_SUFFIXES = {".txt": "text", ".json": "json", ".md": "md", ".html": "html"}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help=HELP,
        description=HELP + ".",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="A", help="the first run (file or folder)")
    p.add_argument("b", metavar="B", help="the second run")
    p.add_argument("--run-a", metavar="NAME", help="which run of A, when A holds several")
    p.add_argument("--run-b", metavar="NAME", help="which run of B, when B holds several")
    p.add_argument(
        "--input-format", dest="input_format", metavar="FMT", help="force the input format"
    )
    p.add_argument(
        "--format",
        dest="report_format",
        choices=("text", "json", "md", "html"),
        help="output format (default: from the -o suffix, else text)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the comparison to FILE")
    p.add_argument("--config", metavar="FILE", help="rlvitals.toml or pyproject.toml to read")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.cli import EXIT_OK
    from rlvitals.compare import compare_paths, render_compare
    from rlvitals.doctor.config import load_config
    from rlvitals.report.common import one_line

    fmt = args.report_format
    if fmt is None and args.output:
        fmt = _SUFFIXES.get(os.path.splitext(args.output)[1].lower())
        if fmt is None:
            raise InputError(args.output, "-o: no format for this file name (or pass --format)")
    if args.output:
        from rlvitals.cli._output import refuse_input_target

        refuse_input_target(args.output, [args.a, args.b])
    config = load_config(args.config, start_dir=".")
    c = compare_paths(
        args.a,
        args.b,
        run_a=args.run_a,
        run_b=args.run_b,
        fmt=args.input_format,
        config=config,
    )
    text = render_compare(c, fmt or "text")
    if args.output:
        from rlvitals.cli._output import write_replacing

        write_replacing(args.output, text)
        print(f"rlvitals: wrote {one_line(args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return EXIT_OK

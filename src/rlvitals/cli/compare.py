"""``rlvitals compare A B``: two runs side by side (configuration, divergence, incidents)."""

from __future__ import annotations

import argparse
import os

from rlvitals.cli import add_input_flags

__all__ = ["register", "run"]

HELP = "compare two runs: config differences, the first step their vitals diverge, incidents"
EXAMPLE = """\
A and B are runs any importer reads (the same store twice with --run-a / --run-b compares two
of its runs). Exit code 0, or 2 for bad input.

examples:
  rlvitals compare runs/lr1e-6 runs/lr3e-6
  rlvitals compare mlruns/ mlruns/ --run-a baseline --run-b avspo -o compare.html"""
_SUFFIXES = {".txt": "text", ".json": "json", ".md": "md", ".html": "html"}


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", help="the first run (file or folder)")
    p.add_argument("b", metavar="B", help="the second run")
    p.add_argument("--run-a", metavar="NAME", help="which run of A, when A holds several")
    p.add_argument("--run-b", metavar="NAME", help="which run of B, when B holds several")
    add_input_flags(p, None, lenient=False)
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
    from rlvitals.cli._output import check_output, emit
    from rlvitals.compare import compare_paths, render_compare
    from rlvitals.doctor.config import load_config

    fmt = check_output(
        args.output,
        [args.a, args.b],
        args.report_format,
        lambda out: _SUFFIXES.get(os.path.splitext(out)[1].lower()),
        ", ".join(_SUFFIXES),
    )
    config = load_config(args.config, start_dir=".")
    c = compare_paths(
        args.a,
        args.b,
        run_a=args.run_a,
        run_b=args.run_b,
        fmt=args.input_format,
        config=config,
    )
    emit(render_compare(c, fmt), args.output)
    return EXIT_OK

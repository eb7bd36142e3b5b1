"""The ``rlvitals`` command line: a thin layer over the library.

Each command lives in its own module ``rlvitals.cli.<name>`` with ``HELP`` (one line),
``EXAMPLE`` (the end of its help), ``register(parser)`` (which adds its arguments to the parser
made here from those two and sets ``func``) and a ``run(args) -> int``. ``main(argv=None) -> int``.
Bad input (:class:`rlvitals.InputError`) prints one line and exits 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from rlvitals._version import __version__
from rlvitals.errors import InputError, MissingExtraError
from rlvitals.registry import import_module

__all__ = ["COMMANDS", "build_parser", "main"]

# Command modules, in the order ``rlvitals --help`` lists them.
COMMANDS: tuple[str, ...] = (
    "doctor",
    "scan",
    "compare",
    "watch",
    "detectors",
    "explain",
    "acr",
    "inspect",
    "lab",
    "demo",
    "mcp",
)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors: one line, exit 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``only``) one command's: a command's module is imported only when
    it is registered, so ``rlvitals doctor`` does not pay for ``scan``'s or ``lab``'s imports."""
    parser = _Parser(
        prog="rlvitals",
        description="Vital signs for GRPO / RLVR training runs: measure advantage collapse, "
        "diagnose runs, mitigate inside trainers.",
        epilog="example: rlvitals doctor --example collapse",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rlvitals {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in (only,) if only in COMMANDS else COMMANDS:
        command = import_module(f"rlvitals.cli.{name}")
        p = sub.add_parser(
            name,
            help=command.HELP,
            description=command.HELP + ".",
            epilog=command.EXAMPLE,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.register(p)
        _common_flags(p)
    return parser


def _common_flags(p: argparse.ArgumentParser) -> None:
    """Every command takes ``--no-progress`` and ``-o FILE``: a command without progress output
    accepts the first as a no-op (scripts can pass it everywhere), and one that prints its
    result gets ``-o`` from here: what it prints is written to FILE, whole, never into an
    input (:mod:`rlvitals.cli._output`)."""
    have = {o for a in p._actions for o in a.option_strings}
    if "--no-progress" not in have:
        p.add_argument(
            "--no-progress",
            dest="progress",
            action="store_const",
            const=False,
            help="no progress output (this command shows none; accepted for uniformity)",
        )
    if "-o" not in have and "--output" not in have:
        p.add_argument(
            "-o",
            "--output",
            dest="common_output",
            metavar="FILE",
            help="write to FILE instead of stdout",
        )


def add_input_flags(
    p: argparse.ArgumentParser,
    run_help: str | None,
    *,
    format_alias: bool = False,
    lenient: bool = True,
) -> None:
    """``--input-format FMT`` (``--format`` too with ``format_alias``, where the command's
    output format is another flag's), ``--run NAME`` (unless ``run_help`` is None) and
    ``--lenient`` (with ``lenient``): how a command reads its run (:func:`rlvitals.load`'s
    ``fmt``, ``run`` and ``lenient``)."""
    p.add_argument(
        *(("--input-format", "--format") if format_alias else ("--input-format",)),
        dest="input_format",
        metavar="FMT",
        help="force the input format instead of sniffing it from the content",
    )
    if run_help is not None:
        p.add_argument("--run", metavar="NAME", help=run_help)
    if lenient:
        p.add_argument(
            "--lenient",
            action="store_true",
            help="skip damaged records that strict reading refuses (a corrupt record in the "
            "middle of a recording, an invalid JSONL line); each skip is listed in the warnings",
        )


def add_json_flags(p: argparse.ArgumentParser, json_help: str, flag: str = "--format") -> None:
    """``--json`` (``json_help``: its help) or ``FLAG text|json`` (``--format``, or
    ``--output-format`` where ``--format`` names the input format): ``args.output_format``."""
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--json", dest="output_format", action="store_const", const="json", help=json_help
    )
    out.add_argument(flag, dest="output_format", choices=("text", "json"), help="text or json")
    p.set_defaults(output_format="text")


def add_progress_flags(p: argparse.ArgumentParser, always: str, never: str) -> None:
    """``--progress`` (``always``: its help) and ``--no-progress`` (``never``), exclusive:
    ``args.progress`` is True, False or None (shown only when stderr is a terminal)."""
    bar = p.add_mutually_exclusive_group()
    for flag, const, text in (("--progress", True, always), ("--no-progress", False, never)):
        bar.add_argument(flag, dest="progress", action="store_const", const=const, help=text)
    p.set_defaults(progress=None)


def _run_to_file(args: argparse.Namespace) -> int:
    """Run a command whose output ``-o`` (from :func:`_common_flags`) sends to a file."""
    import io

    from rlvitals.cli._output import emit, refuse_input_target

    inputs = [str(getattr(args, n)) for n in ("path", "a", "b") if getattr(args, n, None)]
    inputs += getattr(args, "paths", None) or []
    refuse_input_target(args.common_output, inputs)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = int(args.func(args))
    emit(buf.getvalue(), args.common_output)
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return EXIT_USAGE
    # A log may hold strings stdout cannot encode (a JSON "\ud800", a non-UTF-8 file name):
    # they are printed escaped, never a UnicodeEncodeError half-way through a report.
    with contextlib.suppress(AttributeError, ValueError):
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        if getattr(args, "common_output", None):
            return _run_to_file(args)
        return int(args.func(args))
    except (InputError, MissingExtraError) as err:
        from rlvitals.report.common import one_line  # the message quotes the input: sanitise

        print(f"rlvitals: error: {one_line(err)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rlvitals: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK

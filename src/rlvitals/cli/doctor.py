"""``rlvitals doctor``: diagnose a run and print (or write) the report.

``--format`` names the REPORT format here, as the doctor's interface has always said
(``--format text|json|md|html``); ``--input-format`` forces the input format (what ``--format``
means in ``rlvitals inspect``). ``--output-format`` is accepted as a synonym of ``--format``.
Exit codes: 0 nothing at or above ``--fail-on``, 1 something is, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from rlvitals.errors import InputError

__all__ = ["register", "run"]

HELP = "diagnose a run: which failure, since which step, what it cost, what to try"
EXAMPLE = """\
--format names the REPORT format (text, json, md, html); to force the INPUT format use
--input-format (what --format means in 'rlvitals inspect'). Without --format, -o report.html
picks the format from the file suffix. Exit codes: 0 = nothing at or above --fail-on,
1 = something is, 2 = bad input or usage.

examples:
  rlvitals doctor --example collapse
  rlvitals doctor outputs/grpo/trainer_state.json --format html -o report.html
  rlvitals doctor train.log --input-format verl_console --fail-on critical
  rlvitals doctor run/ --format md >> "$GITHUB_STEP_SUMMARY\""""
FAIL_ON = ("info", "warn", "critical", "never")


def register(sub: argparse._SubParsersAction) -> None:
    from rlvitals.examples import EXAMPLES
    from rlvitals.report import ReportFormat

    p = sub.add_parser(
        "doctor",
        help=HELP,
        description=HELP + ".",
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("path", nargs="?", help="a run: file or directory any importer reads")
    src.add_argument(
        "--example",
        metavar="NAME",
        help=f"diagnose a bundled example run ({', '.join(sorted(EXAMPLES))})",
    )
    fmts = [f.value for f in ReportFormat]
    p.add_argument(
        "--format",
        "--output-format",
        dest="report_format",
        choices=fmts,
        metavar="{" + ",".join(fmts) + "}",
        help="report format (default: from the -o suffix, else text)",
    )
    p.add_argument(
        "--run",
        metavar="NAME",
        help="which run of a store holding several (MLflow, wandb/, trackio, ...; "
        "'rlvitals inspect' lists them); - as PATH reads standard input",
    )
    p.add_argument(
        "--input-format",
        dest="input_format",
        metavar="FMT",
        help="force the input format instead of sniffing it (see 'rlvitals inspect')",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout"
    )
    p.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default=None,
        help="lowest severity that makes the exit code 1 (default: the config's, else warn)",
    )
    p.add_argument(
        "--select",
        action="append",
        metavar="IDS",
        help="run only these detectors (comma-separated IDs or families, ALL)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        metavar="IDS",
        help="skip these detectors (comma-separated IDs or families)",
    )
    p.add_argument(
        "--metric",
        action="append",
        metavar="KEY=NAME",
        help="read the run's KEY as the rlvitals metric NAME (repeatable; the "
        "config's [metrics] table does the same), e.g. my/pass_rate=reward_mean",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="rlvitals.toml or pyproject.toml to read (default: search from the "
        "current directory upward)",
    )
    bar = p.add_mutually_exclusive_group()
    bar.add_argument(
        "--progress",
        dest="progress",
        action="store_const",
        const=True,
        help="always show a progress bar on stderr while reading",
    )
    bar.add_argument(
        "--no-progress",
        dest="progress",
        action="store_const",
        const=False,
        help="never show the progress bar",
    )
    p.set_defaults(func=run, progress=None)


def _ids(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _metric_args(values: list[str]) -> dict[str, str]:
    from rlvitals.recording.metrics import metric_names

    pairs = {}
    for v in values:
        key, sep, name = v.rpartition("=")
        if not sep or not key.strip() or not name.strip():
            raise InputError(None, f"--metric wants KEY=NAME, got {v!r}")
        pairs[key.strip()] = name.strip()
    try:
        return metric_names(pairs)
    except ValueError as e:
        raise InputError(None, f"--metric: {e}") from None


def run(args: argparse.Namespace) -> int:
    from rlvitals.cli import EXIT_FINDINGS, EXIT_OK
    from rlvitals.config import load_config
    from rlvitals.doctor import diagnose_path
    from rlvitals.examples import example_path
    from rlvitals.progress import ProgressBar
    from rlvitals.report import RenderOptions, render, suffix_format

    fmt = args.report_format or (suffix_format(args.output) if args.output else None) or "text"
    config = load_config(args.config, start_dir=".")
    if args.select:
        config.select = _ids(args.select)
    if args.ignore:
        config.ignore = [*config.ignore, *_ids(args.ignore)]
    if args.fail_on:
        config.fail_on = args.fail_on
    if args.metric:
        config.metrics = {**config.metrics, **_metric_args(args.metric)}
    try:
        config.validate()
    except ValueError as e:
        raise InputError(args.config or config.source, str(e)) from None
    path = example_path(args.example) if args.example else Path(args.path)
    with ProgressBar(str(path), force=args.progress) as bar:
        diagnosis = diagnose_path(
            path, fmt=args.input_format, config=config, progress=bar, run=args.run
        )
    to_terminal = args.output is None and sys.stdout.isatty()
    options = RenderOptions(
        color=fmt == "text" and to_terminal and not os.environ.get("NO_COLOR"),
        width=shutil.get_terminal_size().columns if to_terminal else None,
    )
    report = render(diagnosis, fmt, options)
    if args.output:
        out = Path(args.output)
        try:
            out.write_text(report, encoding="utf-8")
        except OSError as e:
            raise InputError(out, f"cannot write the report: {e.strerror or e}") from None
        worst = diagnosis.worst()
        print(
            f"rlvitals: wrote {out} ({len(diagnosis.findings)} finding(s)"
            + (f", worst {worst.value})" if worst else ")"),
            file=sys.stderr,
        )
    else:
        sys.stdout.write(report)
        sys.stdout.flush()
    return EXIT_FINDINGS if diagnosis.fails(config.fail_on) else EXIT_OK

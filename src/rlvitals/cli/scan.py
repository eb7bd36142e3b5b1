"""``rlvitals scan``: one row per run across a sweep, a tracking store or a shared disk.

Exit codes as ``doctor``: 0 no run has a finding at or above ``--fail-on``; 1 some run has;
2 bad usage, no run found, or (unless ``--allow-unjudged`` or ``--fail-on never``) a run that
could not be read or judged. A run that cannot be read is a row with its error, never a crash.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from rlvitals.cli import add_progress_flags
from rlvitals.errors import InputError

__all__ = ["register", "run"]

HELP = "scan many runs: one row per run (ACR, worst incident, final metric), cached, in parallel"
EXAMPLE = """\
PATH is a file, a folder (walked: every format rlvitals reads, stores of several runs
expanded: an MLflow store, a W&B folder, a trackio database) or a quoted glob. Rows come from
the cache when a run's files are unchanged (--no-cache reads everything again). The HTML page
plots ACR_100 against the final metric with the paper's line. Exit codes: 0 = no run at or
above --fail-on, 1 = some run is, 2 = usage, no run found, or a run not read or not judged
(--allow-unjudged accepts those).

examples:
  rlvitals scan sweep/ mlruns/ --sort acr_100
  rlvitals scan 'outputs/*/trainer_state.json' -o scan.html --reports reports/
  rlvitals scan /shared/runs --engine ray --format csv -o runs.csv --fail-on never"""


def register(p: argparse.ArgumentParser) -> None:
    from rlvitals.cli.doctor import add_judging_flags
    from rlvitals.scan import ENGINES, FORMATS, SORT_KEYS

    p.add_argument("paths", nargs="+", metavar="PATH", help="files, folders or quoted globs")
    p.add_argument(
        "--format",
        dest="report_format",
        choices=FORMATS,
        help="output format (default: from the -o suffix, else text)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write the table to FILE")
    p.add_argument(
        "--reports",
        metavar="DIR",
        help="also write each run's own HTML report into DIR (made when missing); the HTML "
        "page links every run to its report",
    )
    p.add_argument(
        "--sort",
        choices=sorted(SORT_KEYS),
        metavar="KEY",
        help=f"sort the rows by KEY ({', '.join(sorted(SORT_KEYS))}); default: walk order",
    )
    p.add_argument("--reverse", action="store_true", help="sort in descending order")
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        metavar="N",
        help="runs read at once (processes; Ray CPUs of a local Ray); default: the CPUs here",
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default="process",
        help="process (a process pool, default), serial, or ray (the ray extra: "
        "pip install -e '.[ray]' in an rlvitals checkout)",
    )
    p.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="Ray cluster to run on (default: $RAY_ADDRESS, else a local Ray instance)",
    )
    p.add_argument(
        "--follow-links",
        action="store_true",
        help="follow symbolic links to files outside the scanned folders (default: not "
        "followed, said in a note)",
    )
    p.add_argument("--no-cache", action="store_true", help="read every run, use no cache")
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where the cache lives (default: $XDG_CACHE_HOME/rlvitals, ~/.cache/rlvitals)",
    )
    p.add_argument(
        "--eval-key",
        metavar="KEY",
        help="the eval series to report as the final metric (default: per run, an accuracy-"
        "like eval key first, then a score, then a reward; the key is said)",
    )
    p.add_argument(
        "--against",
        choices=("auto", "eval", "reward"),
        default="auto",
        help="what ACR_100 is correlated with: the final eval metric, the final train reward, "
        "or auto (eval when 3+ runs have one)",
    )
    add_judging_flags(p, "runs that could not be read or judged do not make the exit code 2")
    add_progress_flags(
        p,
        "always show the progress counter on stderr",
        "never show it (default: only when stderr is a terminal)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
    from rlvitals.cli._output import check_output, emit
    from rlvitals.cli.doctor import config_from_args
    from rlvitals.report.common import one_line
    from rlvitals.scan import Counter, default_cache_dir, discover, render_scan, scan, suffix_format

    if args.jobs is not None and args.jobs < 1:
        raise InputError(None, f"--jobs must be 1 or more, got {args.jobs}")
    config = config_from_args(args)
    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    with Counter(force=args.progress) as counter:
        found = discover(
            args.paths,
            skip=[cache_dir],
            on_entry=counter.finding,
            follow_links=args.follow_links,
        )
        if not found.targets:
            raise InputError(
                " ".join(args.paths), f"no run found ({found.skipped} file(s) looked at)"
            )
        fmt = check_output(
            args.output,
            [t.path for t in found.targets],
            args.report_format,
            suffix_format,
            ".txt, .csv, .json, .md, .html",
        )
        result = scan(
            args.paths,
            jobs=args.jobs,
            engine=args.engine,
            config=config,
            cache=not args.no_cache,
            cache_dir=cache_dir,
            eval_key=args.eval_key,
            progress=counter.reading,
            ray_address=args.ray_address,
            discovery=found,
        )
    if args.reports:
        from rlvitals.scan import write_reports

        page_dir = os.path.dirname(os.path.abspath(args.output)) if args.output else None
        for problem in write_reports(result, args.reports, config=config, page_dir=page_dir):
            print(f"rlvitals: {one_line(problem)}", file=sys.stderr)
    allow = bool(config.allow_unjudged)
    to_terminal = args.output is None and sys.stdout.isatty()
    text = render_scan(
        result,
        fmt,
        sort=args.sort,
        reverse=args.reverse,
        fail_on=config.fail_on,
        allow_unjudged=allow,
        width=shutil.get_terminal_size().columns if to_terminal else None,
        against=args.against,
    )
    emit(text, args.output, f" ({len(result.rows)} run(s), {len(result.errors)} unreadable)")
    if config.fail_on == "never":
        return EXIT_OK
    if not allow and any(r.error or r.not_judged for r in result.rows):
        bad = sum(1 for r in result.rows if r.error or r.not_judged)
        print(
            f"rlvitals: {bad} run(s) could not be read or judged (exit 2; --allow-unjudged "
            "accepts them)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_FINDINGS if result.failing(config.fail_on, allow) else EXIT_OK

"""``rlvitals doctor``: diagnose a run and print (or write) the report.

``--format`` names the REPORT format here, as the doctor's interface has always said
(``--format text|json|md|html``); ``--input-format`` forces the input format (what ``--format``
means in ``rlvitals inspect``). ``--output-format`` is accepted as a synonym of ``--format``.
Exit codes: 0 nothing at or above ``--fail-on``, 1 something is, 2 bad input or usage, or a run
the collapse family could not judge (unless ``--allow-unjudged``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rlvitals.cli import add_input_flags, add_progress_flags
from rlvitals.errors import InputError

__all__ = ["register", "run"]

HELP = "diagnose a run: which failure, since which step, what it cost, what to try"
EXAMPLE = """\
--format names the REPORT format (text, json, md, html); to force the INPUT format use
--input-format (what --format means in 'rlvitals inspect'). Without --format, -o report.html
picks the format from the file suffix. Exit codes: 0 = nothing at or above --fail-on,
1 = something is, 2 = bad input or usage, or a run the collapse family could not judge
(--allow-unjudged accepts it: "not judged" is never a green pass).

examples:
  rlvitals doctor --example collapse
  rlvitals doctor outputs/grpo/trainer_state.json --format html -o report.html
  rlvitals doctor train.log --input-format verl_console --fail-on critical
  rlvitals doctor run/ --format md >> "$GITHUB_STEP_SUMMARY"
  rlvitals doctor mlflow://127.0.0.1:5000/0a1b2c3d4e5f --fail-on critical"""
FAIL_ON = ("info", "warn", "critical", "never")


def register(p: argparse.ArgumentParser) -> None:
    from rlvitals.examples import EXAMPLES
    from rlvitals.report import ReportFormat

    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "path",
        nargs="?",
        help="a run: file or directory any importer reads, or an MLflow server's "
        "mlflow://HOST:PORT/RUN_ID",
    )
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
    add_input_flags(
        p,
        "which run of a store holding several (MLflow, wandb/, trackio, ...; "
        "'rlvitals inspect' lists them); - as PATH reads standard input",
    )
    p.add_argument(
        "--split-phases",
        action="store_true",
        help="read the phases of a curriculum (a TRL log_history whose runs carry a 'phase' "
        "field) as separate runs (default: one run, steps continuing; pick one with --run N)",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout"
    )
    add_judging_flags(
        p,
        "exit 0 even when the collapse family could not judge the run (default: a run "
        "that could not be judged exits 2, never a green pass)",
    )
    p.add_argument(
        "--group-size",
        type=int,
        metavar="G",
        help="completions per prompt, for a log that does not say it (or to override it): "
        "saturation and expected collapse need it",
    )
    p.add_argument(
        "--reward-range",
        metavar="MIN,MAX",
        help="the reward's range, for a log that does not say it (e.g. 0,1 or -1,4)",
    )
    add_progress_flags(
        p, "always show a progress bar on stderr while reading", "never show the progress bar"
    )
    p.set_defaults(func=run)


def add_judging_flags(p: argparse.ArgumentParser, allow_unjudged: str) -> None:
    """``--fail-on``, ``--allow-unjudged`` (``allow_unjudged``: its help), ``--select``,
    ``--ignore``, ``--metric`` and ``--config``: the flags :func:`config_from_args` reads, shared
    by ``doctor``, ``scan`` and ``watch``."""
    p.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default=None,
        help="lowest severity that makes the exit code 1 (default: the config's, else warn)",
    )
    p.add_argument("--allow-unjudged", action="store_true", default=None, help=allow_unjudged)
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


def config_from_args(args: argparse.Namespace):
    """The doctor's configuration: the config file (``--config``, else found from here), then
    the flags a command has (``select``, ``ignore``, ``fail_on``, ``metric``, ``allow_unjudged``,
    ``group_size``, ``reward_range``: an absent attribute is not given); validated. Shared by
    ``doctor``, ``scan`` and ``watch``."""
    from rlvitals.doctor.config import load_config

    config = load_config(args.config, start_dir=".")

    def flag(name: str):
        return getattr(args, name, None)

    if flag("select"):
        config.select = _ids(args.select)
    if flag("ignore"):
        config.ignore = [*config.ignore, *_ids(args.ignore)]
    if flag("fail_on"):
        config.fail_on = args.fail_on
    if flag("metric"):
        config.metrics = {**config.metrics, **_metric_args(args.metric)}
    if flag("allow_unjudged"):
        config.allow_unjudged = True
    if flag("group_size") is not None:
        config.group_size, config.group_size_source = args.group_size, "--group-size"
    if flag("reward_range") is not None:
        config.reward_range = _reward_range(args.reward_range)
    where = "command line" if flag("group_size") is not None else (args.config or config.source)
    try:
        config.validate()
    except ValueError as e:
        raise InputError(where, str(e)) from None
    return config


def run(args: argparse.Namespace) -> int:
    from rlvitals.cli._output import check_output, emit
    from rlvitals.doctor import diagnose_path
    from rlvitals.examples import example_path
    from rlvitals.importers import is_url
    from rlvitals.progress import ProgressBar
    from rlvitals.report import RenderOptions, render, suffix_format

    config = config_from_args(args)
    path = example_path(args.example) if args.example else Path(args.path)
    if not args.example and is_url(args.path):
        path = args.path  # an MLflow server's mlflow://HOST:PORT/RUN_ID: Path() folds '//'
    formats = ".txt, .json, .md or .html"
    fmt = check_output(
        args.output, [path], args.report_format, suffix_format, formats, "report format"
    )
    input_format = args.input_format
    # the folder itself, or the one run inside
    charts: list[Path] = []
    if isinstance(path, Path) and path.is_dir() and input_format is None:
        input_format = _folder_format(path)
        if input_format is None:
            found = _runs_in(path)
            charts = _chart_exports(found)
            if not charts:
                path = _the_one_run(path, found)
    with ProgressBar(str(path), force=args.progress) as bar:
        if charts:
            from rlvitals.doctor import check_understood, diagnose

            merged = _merge_charts(path, charts, args.run)
            diagnosis = diagnose(merged, config)
            check_understood(diagnosis.run, path)
        else:
            diagnosis = diagnose_path(
                path,
                fmt=input_format,
                config=config,
                progress=bar,
                run=args.run,
                lenient=args.lenient,
                split_phases=getattr(args, "split_phases", False),
            )
    to_terminal = args.output is None and sys.stdout.isatty()
    options = RenderOptions(
        color=fmt == "text" and to_terminal and not os.environ.get("NO_COLOR"),
        width=_terminal_columns() if to_terminal else None,
    )
    worst = diagnosis.worst()
    said = f" ({len(diagnosis.findings)} finding(s)" + (f", worst {worst.value})" if worst else ")")
    emit(render(diagnosis, fmt, options), args.output, said)
    return exit_code(diagnosis, config, path)


def exit_code(diagnosis, config, source: object) -> int:
    """The exit code of a diagnosis of ``source``: 2 for a run the collapse family could not
    judge (said on stderr; unless ``config.allow_unjudged`` or ``fail_on`` is ``never``), else
    1 for something at or above ``config.fail_on``, else 0. Shared by ``doctor`` and ``watch``."""
    from rlvitals.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE

    unjudged = diagnosis.not_judged()
    if unjudged and not config.allow_unjudged and config.fail_on != "never":
        from rlvitals.report.common import one_line  # the path and reasons come from input

        print(
            f"rlvitals: {one_line(source)}: not judged: {one_line(unjudged)} "
            "(exit 2; --allow-unjudged accepts it)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    return EXIT_FINDINGS if diagnosis.fails(config.fail_on) else EXIT_OK


def _folder_format(folder: Path) -> str | None:
    """The importer that reads ``folder`` itself as a run (a recording, a TRL output folder,
    a TensorBoard or W&B folder, an MLflow store), or None; its name is passed on, so the folder
    is sniffed once."""
    from rlvitals.importers import sniff

    try:
        return sniff(folder).name
    except (InputError, OSError, ValueError):
        return None


def _runs_in(folder: Path) -> list:
    """The runs inside ``folder``, found as ``rlvitals scan`` finds them (files that are not
    logs, a README or a ``label.json``, are never taken for one): scan's targets."""
    from rlvitals.scan import discover

    return [t for t in discover([folder]).targets if t.fmt is not None]


def _chart_exports(found: list) -> list[Path]:
    """The files of ``found`` when they are two or more W&B chart exports and nothing else (the
    usual way to export charts: one metric per CSV), else ``[]``."""
    paths = sorted({Path(t.path) for t in found})
    if len(paths) < 2 or any(t.fmt != "wandb_chart" for t in found):
        return []
    return paths


def _merge_charts(folder: Path, paths: list[Path], run: str | None):
    """One run from a folder of W&B chart exports, merged by step
    (:func:`rlvitals.guard.follow.merge_runs`). The files must show the same run."""
    import dataclasses
    from functools import reduce

    from rlvitals.guard.follow import merge_runs
    from rlvitals.importers import load

    runs = [load(p, "wandb_chart", run=run) for p in paths]
    names = {r.manifest.config.get("run") for r in runs}
    if len(names) != 1:
        shown = ", ".join(sorted(str(n) for n in names))
        raise InputError(
            folder,
            f"its chart exports show different runs ({shown}): name one with --run, or "
            f"judge them with rlvitals scan {folder}",
        )
    merged = reduce(merge_runs, runs)
    merged.manifest.source = str(folder)
    note = f"{len(paths)} W&B chart exports of run {names.pop()!r} merged by step"
    return dataclasses.replace(merged, warnings=[*merged.warnings, note])


def _the_one_run(folder: Path, found: list) -> Path:
    """The one run of ``found`` (:func:`_runs_in`); several runs: an error that lists them and
    says how to pick one."""
    if len(found) == 1:
        return Path(found[0].path)
    if not found:
        raise InputError(
            folder, "no run rlvitals can read in this folder (rlvitals scan lists what it finds)"
        )
    names = ", ".join(str(Path(t.path).relative_to(folder)) for t in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    raise InputError(
        folder,
        f"holds {len(found)} runs ({names}{more}): name one (rlvitals doctor {found[0].path}) "
        f"or judge them all with rlvitals scan {folder}",
    )


def _reward_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:  # not two numbers
        raise InputError(None, f"--reward-range wants MIN,MAX (e.g. 0,1), got {text!r}") from None
    return lo, hi


def _terminal_columns() -> int:
    import shutil  # only for a report to the terminal: shutil is ~1 ms of every start-up

    return shutil.get_terminal_size().columns

"""``rlvitals inspect``: what rlvitals read from a run — format, steps, series, groups, warnings.

``--format`` forces the *input* format (as in every command); JSON *output* is ``--json`` (or
``--output-format json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rlvitals.cli import add_input_flags, add_json_flags, add_progress_flags

__all__ = ["register", "render_text", "run"]

HELP = "show what rlvitals reads from a run: format, steps, series with coverage, groups"
EXAMPLE = """\
--format names the INPUT format (as in every rlvitals command); for JSON output use --json
(or --output-format json).

PATH may be - (standard input: zcat train.log.gz | rlvitals inspect -); --run NAME chooses a run
of a store holding several (rlvitals inspect mlruns/ --run my-run).

example: rlvitals inspect outputs/grpo/trainer_state.json --json"""
MAX_LISTED = 50
"""Unknown keys and warnings listed in text output before '... and N more'."""


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "path",
        help="a run: file or directory (TRL output dir, JSONL, CSV, ...); - reads standard "
        "input; gzip/zstd files are read as they are",
    )
    add_input_flags(
        p,
        "which run of a store holding several (MLflow, a wandb/ folder, trackio, a log with "
        "runs back to back); listed in the output",
        format_alias=True,
    )
    add_json_flags(
        p, "print JSON instead of text (same as --output-format json)", "--output-format"
    )
    add_progress_flags(
        p,
        "always show the progress bar on stderr (even when not a terminal)",
        "never show the progress bar",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rlvitals.doctor.inspection import describe
    from rlvitals.importers import load
    from rlvitals.progress import ProgressBar

    with ProgressBar(str(args.path), force=args.progress) as bar:
        r = load(args.path, args.input_format, progress=bar, run=args.run, lenient=args.lenient)
    info = describe(r)
    if args.output_format == "json":
        json.dump(info, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(info))
    return 0


def _steps_text(s: dict[str, Any]) -> str:
    if not s["count"]:
        return "0"
    return f"{s['count']} (first {s['first']}, last {s['last']})"


def _listed(items: list[str], indent: str = "  ") -> list[str]:
    lines = [f"{indent}{x}" for x in items[:MAX_LISTED]]
    if len(items) > MAX_LISTED:
        lines.append(f"{indent}... and {len(items) - MAX_LISTED} more")
    return lines


def _coverage_lines(series: dict[str, float]) -> list[str]:
    width = max((len(n) for n in series), default=0)
    return [f"  {n:<{width}}  {100 * c:5.1f}%" for n, c in series.items()]


def render_text(info: dict[str, Any]) -> str:
    """The text form of :func:`describe`'s summary.

    Every string in it came from the input (key names, run names, paths, warnings): each is
    made safe for a terminal and kept on one line first (escape sequences shown, not sent)."""
    from rlvitals.report.common import terminal_strings

    info = terminal_strings(info)
    lines = [f"source         {info['source']}"]
    fmt = info["format"] or "?"
    if info["format_description"]:
        fmt += f"  ({info['format_description']})"
    lines.append(f"format         {fmt}")
    lines.append(f"trainer        {info['trainer'] or 'unknown'}")
    steps = _steps_text(info["steps"])
    if info["logging_steps"]:
        steps += f", logged every {info['logging_steps']} steps"
    lines.append(f"steps          {steps}")
    if info.get("step_key"):
        lines.append(f"step from      {info['step_key']}")
    if info.get("trainer_version"):
        lines.append(f"version        {info['trainer_version']}")
    known = [
        f"{k} {info[k]}"
        for k in (
            "group_size",
            "scale_rewards",
            "estimator",
            "adv_scale",
            "kl_coef",
            "filters_zero_var",
        )
        if info[k] is not None
    ]
    lines.append(f"config         {', '.join(known) if known else 'nothing known'}")
    ev = info.get("collapse_evidence") or []
    lines.append(f"collapse data  {', '.join(ev) if ev else 'none'}")
    if info.get("reward_std_kind"):
        lines.append(f"reward_std     {info['reward_std_kind']}")
    runs = info.get("runs") or []
    if runs:
        listed = ", ".join(r.get("name", "?") + (" (read)" if r.get("read") else "") for r in runs)
        lines.append(f"runs           {len(runs)}: {listed}  (choose with --run NAME)")
    g = info["groups"]
    if g["present"]:
        sizes = ", ".join(str(s) for s in g["group_sizes"])
        adv = ", with advantages" if g["advantages"] else ""
        lines.append(
            f"group data     yes: {g['groups']} groups over {g['steps']} steps "
            f"({g['first_step']}..{g['last_step']}), group sizes {sizes}{adv}"
        )
    else:
        lines.append("group data     no")
    lines.append(f"\nseries ({len(info['series'])}, coverage over {info['steps']['count']} steps)")
    lines += _coverage_lines(info["series"]) or ["  (none)"]
    if info["eval_series"]:
        lines.append(
            f"\neval series ({len(info['eval_series'])}, coverage over "
            f"{_steps_text(info['eval_steps'])} eval steps)"
        )
        lines += _coverage_lines(info["eval_series"])
    if info["unknown_keys"]:
        lines.append(f"\nunknown keys ({len(info['unknown_keys'])}, kept under their raw names)")
        lines += _listed(info["unknown_keys"])
        lines.append(
            "  (one that is a metric under another name: rlvitals doctor RUN "
            "--metric KEY=NAME, or a [metrics] table in rlvitals.toml)"
        )
    if info["warnings"]:
        lines.append(f"\nwarnings ({len(info['warnings'])})")
        lines += _listed(info["warnings"])
    return "\n".join(lines) + "\n"

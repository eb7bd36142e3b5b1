"""``rlvitals watch``: follow a run while it trains, with a live view of its vitals and incidents.

One library object does the work: :class:`rlvitals.guard.follow.RunFollower` re-reads the run
when it changed (a recording directory, or a growing log of any format the importers read:
torn last lines and rotation tolerated); the doctor diagnoses it; a
:class:`~rlvitals.guard.conditions.ConditionTracker` says which conditions opened, closed or
reopened, with hysteresis (a condition named at one refresh only is not news); the
view (:mod:`rlvitals.guard.view`) is redrawn in place (printed once when stdout is not a
terminal, and with ``--once``). Exit codes as ``rlvitals doctor`` for the last diagnosis:
0 nothing at or above ``--fail-on``, 1 something is, 2 bad input (or a run the collapse family
could not judge, unless ``--allow-unjudged``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time

from rlvitals.cli import add_input_flags, add_json_flags
from rlvitals.errors import InputError

__all__ = ["register", "run"]

HELP = "follow a run while it trains: live ACR, vitals and incidents as they appear"
EXAMPLE = """\
Reads a recording directory (rlvitals.Monitor, RlvitalsCallback, the veRL guard) or any log
the importers read, again whenever it changes. Ctrl-C stops; the exit code is the doctor's for
the last refresh: 0 = nothing at or above --fail-on, 1 = something is, 2 = bad input or a run
the collapse family could not judge. Conditions opened and closed (warn and above) are also
POSTed to $RLVITALS_WEBHOOK_URL (JSON) and $RLVITALS_SLACK_WEBHOOK_URL (Slack), when set.

examples:
  rlvitals watch outputs/grpo/rlvitals
  rlvitals watch train.log --interval 10
  rlvitals watch runs/exp1 --once --fail-on critical
  RLVITALS_SLACK_WEBHOOK_URL=https://hooks.slack.com/services/... rlvitals watch train.log"""
DEFAULT_INTERVAL = 2.0
"""Seconds between two looks at the input (at least 3x the last read's time)."""
DEFAULT_WAIT = 600.0
"""Seconds ``watch`` waits for a path that does not exist yet (a run about to start)."""


def register(p: argparse.ArgumentParser) -> None:
    from rlvitals.cli.doctor import add_judging_flags

    p.add_argument("path", help="a recording directory, or a log file or folder being written")
    p.add_argument("--once", action="store_true", help="one refresh, then exit")
    p.add_argument(
        "--interval",
        type=float,
        default=DEFAULT_INTERVAL,
        metavar="SECONDS",
        help=f"seconds between looks at the input (default {DEFAULT_INTERVAL:g})",
    )
    p.add_argument(
        "--idle-exit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="exit once the input has not changed for this long (the run ended)",
    )
    add_judging_flags(p, "exit 0 even when the collapse family could not judge the run")
    add_input_flags(p, "which run of a store holding several", lenient=False)
    p.add_argument(
        "--plain",
        action="store_true",
        help="never redraw in place: print the view at every change (logs, CI)",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"wait this long for a path that does not exist yet (default {DEFAULT_WAIT:g}; "
        "0 with --once)",
    )
    add_json_flags(p, "no live view: at exit, print the last diagnosis as the doctor's JSON")
    p.set_defaults(func=run)


def _wait_for(path: str, seconds: float, interval: float) -> None:
    """Return once ``path`` exists (a run not started yet); InputError after ``seconds``."""
    import os

    if os.path.exists(path) or seconds <= 0:
        return  # a path that is not there is the follower's one-line error
    print(f"rlvitals: waiting for {path} to appear (up to {seconds:g} s)", file=sys.stderr)
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            raise InputError(path, f"did not appear within {seconds:g} s (--wait)")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def run(args: argparse.Namespace) -> int:
    from rlvitals.guard.condition_alerts import ConditionAlerts

    # conditions opened and closed go to $RLVITALS_WEBHOOK_URL / $RLVITALS_SLACK_WEBHOOK_URL
    alerts = ConditionAlerts(run=args.path)
    try:
        return _watch(args, alerts)
    finally:
        alerts.close()


def _watch(args: argparse.Namespace, alerts) -> int:
    from rich.console import Console

    from rlvitals.cli.doctor import config_from_args, exit_code
    from rlvitals.conditions import get_condition
    from rlvitals.doctor import diagnose
    from rlvitals.doctor.differential import condition_severity
    from rlvitals.guard.conditions import ConditionTracker, named_now
    from rlvitals.guard.follow import RunFollower
    from rlvitals.guard.view import watch_view

    if args.interval <= 0 or (args.idle_exit is not None and args.idle_exit <= 0):
        raise InputError(None, "--interval and --idle-exit must be positive seconds")
    wait = args.wait if args.wait is not None else (0.0 if args.once else DEFAULT_WAIT)
    if wait < 0:
        raise InputError(None, f"--wait must be >= 0 seconds, got {wait:g}")
    config = config_from_args(args)
    _wait_for(args.path, wait, args.interval)

    follower = RunFollower(args.path, args.input_format, args.run)
    tracker = ConditionTracker()
    events: list[tuple] = []
    console = Console(highlight=False, emoji=False, soft_wrap=False)
    live_mode = not args.once and not args.plain and console.is_terminal
    state = {"diagnosis": None, "changed": None}

    def refresh() -> bool:
        if not follower.poll():
            return False
        d = diagnose(follower.run, config)
        step = int(d.vitals.steps[-1]) if d.vitals.n_steps else 0
        calls = {c.id: c for c in d.conditions}
        for e in tracker.update(named_now(d.conditions), step):
            what = f"{get_condition(e.condition).title} ({e.condition})"
            severity = "info" if e.kind == "closed" else condition_severity(e.condition)
            events.append((step, e.kind, severity, what))
            alerts.event(e, calls.get(e.condition))
        state["diagnosis"], state["changed"] = d, time.time()
        return True

    def view(live: bool):
        note = None if follower.error is None else f"last read failed: {follower.error}"
        return watch_view(
            state["diagnosis"],
            events,
            source=args.path,
            updated=state["changed"],
            live=live,
            note=note,
        )

    def show(live) -> None:
        """The view: redrawn in place (``live``), else printed (text); nothing before a read."""
        if state["diagnosis"] is None:
            return
        if live is not None:
            live.update(view(True), refresh=True)
        elif args.output_format == "text":
            console.print(view(False))

    refresh()
    if not args.once:
        last_change = time.monotonic()
        in_place = contextlib.nullcontext()
        if live_mode and args.output_format == "text":
            from rich.live import Live

            in_place = Live(console=console, auto_refresh=False, transient=False)
        try:
            with in_place as live:
                show(live)
                while not _idle(args, last_change):
                    time.sleep(max(args.interval, 3 * follower.read_seconds))
                    changed = refresh()
                    if changed:
                        last_change = time.monotonic()
                    if changed or live is not None:
                        show(live)
        except KeyboardInterrupt:
            print("rlvitals: watch stopped", file=sys.stderr)
    if state["diagnosis"] is None:
        raise follower.error or InputError(args.path, "nothing to read")
    if args.output_format == "json":
        from rlvitals.report import render

        sys.stdout.write(render(state["diagnosis"], "json"))
        sys.stdout.flush()
    elif args.once:
        show(None)
    return exit_code(state["diagnosis"], config, args.path)


def _idle(args: argparse.Namespace, last_change: float) -> bool:
    return args.idle_exit is not None and time.monotonic() - last_change >= args.idle_exit

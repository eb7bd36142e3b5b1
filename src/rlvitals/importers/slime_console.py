"""slime console logs: ``perf <rollout_id>: {...}``, ``rollout <id>: {...}``, ``step <n>: {...}``.

The writer (THUDM/slime): ``slime/ray/rollout.py`` @ 00de6b00 (``print(f"perf {rollout_id}:
{log_dict}")``; newer versions ``logger.info`` with ``configure_logger``'s
``[%(asctime)s] %(filename)s:%(lineno)d - `` prefix), and the Megatron actor
(``slime/backends/megatron_utils/model.py``: ``step {accumulated_step_id}: {log_dict}`` with
``train/step``). Lines may carry a Ray ``(RolloutManager pid=...)`` prefix and colours::

    (RolloutManager pid=12345) [2026-01-01 12:00:00] rollout.py:612 - perf 3: {'rollout/response_len/mean': 812.5,
    'rollout/zero_std/count_0.0': 5, 'rollout/zero_std/count_1.0': 2, 'perf/rollout_time': 61.2}

- **Step axis**: ``rollout/step`` = the rollout id after ``perf`` / ``rollout`` / ``eval``
  (slime's W&B step for ``rollout/*``). A ``step N:`` train line (``train/step``, N =
  rollout_id x num_steps_per_rollout + k) joins the rollout logged before it (slime trains on
  a rollout after logging it); its ``train/`` keys land on that rollout's step, the last one
  of the rollout winning.
- **Collapse evidence**: ``rollout/zero_std/count_<r>`` (groups whose rewards are all equal,
  labelled ``str(round(r, 1))``) and ``rollout/dynamic_filter/drop_*`` (groups the dynamic
  filter dropped) are counts; the vitals turn them into shares with ``--rollout-batch-size``
  when the launch command is in the log, and say so when it is not.
- The launch command (``train.py --n-samples-per-prompt 8 ...``), when printed, gives the
  trainer facts (:mod:`rlvitals.trainers.slime`).
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._console import CommandCatcher, check_step, parse_cli_flags, parse_dict_repr
from rlvitals.importers._console_lines import ESC, sniff_log, strip_ansi, strip_ray_repeat
from rlvitals.importers._lines import iter_lines
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import slime as slime_facts

__all__ = ["load_slime_console"]

CONF = 0.9
_ROW = re.compile(r"(?:^|[\s>\]-])(perf|rollout|eval|step) ([0-9]{1,19}): (\{'.*\})\s*$")
_ROW_BYTES = re.compile(rb"(?:perf|rollout) [0-9]+: \{'(?:rollout|perf)/")
_MARKS = (b"slime", b"RolloutManager", b"MegatronTrainRayActor")
"""Words of a slime log's start-up lines: with one in the head, rows are looked for past it
(the pre-check declares them too, so it passes whatever the sniffer accepts)."""
_MARK = re.compile(b"|".join(map(re.escape, _MARKS)))
_LAUNCH = re.compile(r"((?:slime\.|\btrain(?:_async)?\.py)\S*)\s")


def _sniff(path: Path, head: bytes) -> float:
    return sniff_log(path, head, _ROW_BYTES, _MARK, CONF)


def _flags_key(flags: dict) -> dict:
    return {k.replace("-", "_"): v for k, v in flags.items()}


def load_slime_console(path: Path, progress: Progress | None = None) -> Run:
    """Read a slime console log into a ``Run`` on the ``rollout/step`` axis (module docstring)."""
    builder = RunBuilder(
        Manifest(source=str(path), trainer="slime", step_key="rollout/step (the rollout id)")
    )
    catcher = CommandCatcher(_LAUNCH)
    last_rollout: int | None = None
    early_train = 0
    n = 0
    for lineno, raw, complete in iter_lines(path, progress):
        if not catcher.done and (catcher.capturing or b"--n-samples-per-prompt" in raw):
            catcher.feed(raw.decode("utf-8", "replace"))
        if b": {'" not in raw:
            continue
        line = raw.decode("utf-8", "replace")
        if "\x1b" in line:
            line = strip_ansi(line)
        m = _ROW.search(strip_ray_repeat(line.rstrip()))
        if m is None:
            continue
        where = f"line {lineno}"
        kind, num = m.group(1), check_step(path, m.group(2), where)
        try:
            values = parse_dict_repr(m.group(3))
        except ValueError as e:
            if not complete:
                builder.warn(f"{path}: {where}: torn last line ignored (still being written?)")
                continue
            raise InputError(path, str(e), where) from None
        if kind == "step":
            if last_rollout is None:
                early_train += 1
                continue
            values.pop("train/step", None)
            builder.add_row(last_rollout, values)
        else:
            if kind != "eval":
                last_rollout = num
            values.pop("rollout/step", None)
            if kind == "eval":
                values = {
                    (k if k.startswith("eval/") else f"eval/{k}"): v for k, v in values.items()
                }
            builder.add_row(num, values)
        n += 1
    if n == 0:
        raise InputError(
            path, "no slime log lines found (expected 'perf N: {...}' or 'rollout N: {...}')"
        )
    if early_train:
        builder.warn(
            f"{path}: {early_train} train step lines before the first rollout were skipped"
        )
    if catcher.entrypoint is not None:
        flags = _flags_key(parse_cli_flags(catcher.command))
        builder.manifest.config = {"entrypoint": catcher.entrypoint, **flags}
        apply_facts(
            builder.manifest,
            slime_facts.facts(
                {**flags, "num_steps_per_rollout": flags.get("num_steps_per_rollout", 1)}
            ),
            overwrite=True,
        )
    return builder.build()


register(
    Importer(
        name="slime_console",
        description="slime console log ('perf N: {...}', 'rollout N: {...}', 'step N: {...}')",
        sniff=_sniff,
        load=load_slime_console,
        precheck=Precheck(text=True, marks=(b": {'rollout/", b": {'perf/", *_MARKS, ESC)),
        files=(".log", ".txt", ".out", ".err"),
    )
)

"""SkyRL console logs: ``Step N:`` and a pretty-printed dict, per step (``trainer.logger=console``).

The writer (``skyrl`` 0.3.0 on PyPI, ``skyrl/train/utils/tracking.py``, ``ConsoleLogger.log``):
``logger.info(f"Step {step}: \\n{pprint.pformat(stringify_floats(data))}")`` through loguru
(format of ``skyrl/train/utils/utils.py``, ``configure_ray_worker_logging``; colours kept)::

    2026-12-01 23:33:14.271 | INFO     | skyrl.train.utils.tracking:log:189 - Step 3:
    {'generate/batch_num_seq': 320,
     'loss/avg_final_rewards': '0.4188',
     'reward/avg_pass_at_5': '0.6250',
     'reward/avg_raw_reward': '0.4188',
     'reward/num_zero_variance_filtered': 17,
     'trainer/global_step': 3}

Keys sorted, one per line; floats are ``.4f`` strings (``'0.0000'`` for 1e-5), ints bare.
Through Ray every line carries the worker's prefix (``(skyrl_entrypoint pid=N, ip=A)``) and
loguru's colour codes: both are dropped, and lines of other processes printed amid a dict (a
different prefix) are skipped.

- **Step**: N of ``Step N:`` (= ``trainer/global_step``, from 1; an eval before training is
  step 0); never ``trainer/epoch``.
- **Keys**: ``reward/avg_raw_reward`` (mean reward), ``policy/*``, ``loss/*``, ``generate/*``,
  ``timing/*``; eval ``eval/*``. ``reward/avg_pass_at_{n}`` names G (n =
  ``n_samples_per_prompt``). SkyRL logs no reward std; ``reward/num_zero_variance_filtered`` (a
  count of groups, only with ``zero_variance_filter``) over ``generate/batch_num_seq / G``
  groups is the zero-variance share.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._console import check_step, number_or_none, parse_dict_values
from rlvitals.importers._console_lines import (
    ESC,
    sniff_log,
    split_ray_prefix,
    strip_ansi,
    strip_ray_repeat,
)
from rlvitals.importers._lines import iter_lines
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["load_skyrl_console"]

CONF = 0.9
MAX_BLOCK_LINES = 10_000
"""A dict longer than this many lines is bad input."""
_HEADER = re.compile(r"(?:^|- )Step ([0-9]{1,19}): ?$")
_HEADER_BYTES = re.compile(rb"(?m)- Step [0-9]+: ?\r?\n\{'")
"""A header line and the first line of its dict, in bytes without colour codes and Ray
prefixes (:func:`~rlvitals.importers._console_lines.clean_bytes`)."""
_MARKS = (b"skyrl", b"SkyRL")
"""Words of a SkyRL log's start-up lines (declared by the pre-check too)."""
_MARK = re.compile(b"|".join(map(re.escape, _MARKS)))
_PASS_AT = re.compile(r"^reward/avg_pass_at_([0-9]{1,6})$")


def _sniff(path: Path, head: bytes) -> float:
    return sniff_log(path, head, _HEADER_BYTES, _MARK, CONF)


def load_skyrl_console(path: Path, progress: Progress | None = None) -> Run:
    """Read a SkyRL console log (``Step N:`` + dict blocks) into a ``Run``."""
    builder = RunBuilder(
        Manifest(source=str(path), trainer="skyrl", step_key="'Step N:' (trainer/global_step)")
    )
    step: int | None = None
    block: list[str] = []
    prefix = ""  # the header's Ray prefix: the dict's lines carry the same one
    start = 0
    n = 0
    g = None

    def finish(complete: bool) -> None:
        nonlocal block, step, n, g
        text = "\n".join(block)
        block, s = [], step
        step = None
        try:
            values = parse_dict_values(text)
        except ValueError as e:
            if not complete:
                builder.warn(f"{path}: line {start}: torn last step ignored (still being written?)")
                return
            raise InputError(path, f"step dict: {e}", f"line {start}") from None
        row = {}
        for k, v in values.items():
            if k == "trainer/global_step":
                continue
            x = number_or_none(v)
            if x is None:
                builder.skipped_values += 1
                continue
            row[k] = x
            m = _PASS_AT.match(k)
            if m and g is None:
                g = int(m.group(1))
        builder.add_row(s, row)
        n += 1

    for lineno, raw, _complete in iter_lines(path, progress):
        line = raw.decode("utf-8", "replace")
        if "\x1b" in line:
            line = strip_ansi(line)
        ours, line = split_ray_prefix(line.rstrip("\r"))
        if step is not None:
            if ours != prefix:
                continue  # another process's line, printed amid the dict
            if not block and not line.lstrip().startswith("{"):
                step = None  # a header without its dict
            else:
                block.append(line)
                if line.rstrip().endswith("}"):
                    finish(True)
                elif len(block) > MAX_BLOCK_LINES:
                    raise InputError(
                        path, f"step dict longer than {MAX_BLOCK_LINES} lines", f"line {start}"
                    )
                continue
        if "Step " in line:
            m = _HEADER.search(strip_ray_repeat(line.rstrip()))
            if m:
                step = check_step(path, m.group(1), f"line {lineno}")
                start, prefix = lineno + 1, ours
    if step is not None and block:
        finish(False)
    if n == 0:
        raise InputError(path, "no SkyRL step blocks found (expected 'Step N:' then a dict)")
    if g is not None:
        builder.manifest.group_size = g
        builder.manifest.config["group_size_source"] = "the name of reward/avg_pass_at_{n}"
    warn_skipped(builder, path)
    return builder.build()


register(
    Importer(
        name="skyrl_console",
        description="SkyRL console log ('Step N:' then a pretty-printed dict)",
        sniff=_sniff,
        load=load_skyrl_console,
        precheck=Precheck(text=True, marks=(b"Step ", *_MARKS, ESC)),
        files=(".log", ".txt", ".out", ".err"),
    )
)

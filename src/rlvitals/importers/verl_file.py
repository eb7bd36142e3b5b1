"""veRL's ``file`` logger: one ``{"step": N, "data": {key: value}}`` JSON object per line.

Enabled with ``trainer.logger=[...,file]``; the path comes from ``VERL_FILE_LOGGER_PATH``
(``verl/utils/tracking.py``, ``FileLogger``, veRL 0.9.1). NaN is written as ``null``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._lines import iter_json_lines, json_step
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["load_verl_file"]

CONF_FILE_LOGGER = 0.95
CONF_FILE_LOGGER_TORN = 0.9

_FILE_HEAD = re.compile(rb'\A\s*\{\s*"step"\s*:\s*-?\d+\s*,\s*"data"\s*:\s*\{')


def load_verl_file(path: Path, progress: Progress | None = None) -> Run:
    """Read veRL's ``file`` logger JSONL (``{"step": N, "data": {...}}`` per line).

    Non-numeric values in ``data`` are skipped (and counted in a warning); ``null`` is NaN.
    A torn last line is dropped with a warning.

    Raises:
        InputError: a line that is not such an object (naming the line), or no record at all.
    """
    builder = RunBuilder(
        Manifest(source=str(path), trainer="verl", logging_steps=1, step_key="step (global_steps)")
    )
    n = 0
    for lineno, obj in iter_json_lines(path, builder.warnings, progress):
        where = f"line {lineno}"
        if not isinstance(obj, dict) or "step" not in obj or "data" not in obj:
            raise InputError(path, 'expected {"step": N, "data": {...}}', where)
        step = json_step(path, obj, "step", where)
        data = obj["data"]
        if not isinstance(data, dict):
            raise InputError(path, "'data' must be an object", where)
        builder.add_row(step, data)
        n += 1
    if n == 0:
        raise InputError(path, 'no veRL file-logger records ({"step": N, "data": {...}}) found')
    if builder.skipped_values:
        builder.warn(f"{path}: {builder.skipped_values} non-numeric value(s) ignored")
    return builder.build()


def _sniff_file(path: Path, head: bytes) -> float:
    if not head or path.is_dir():
        return 0.0
    first = head.lstrip().split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        return CONF_FILE_LOGGER_TORN if _FILE_HEAD.match(head) else 0.0
    if (
        isinstance(obj, dict)
        and isinstance(obj.get("step"), int)
        and not isinstance(obj.get("step"), bool)
        and isinstance(obj.get("data"), dict)
    ):
        return CONF_FILE_LOGGER
    return 0.0


register(
    Importer(
        name="verl_file",
        description='veRL file logger JSONL ({"step": N, "data": {...}} per line)',
        sniff=_sniff_file,
        load=load_verl_file,
        precheck=Precheck(starts=b"{[", marks=(b'"data"',)),
        files=(".jsonl", ".json"),
    )
)

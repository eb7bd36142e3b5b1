"""veRL rollout dumps: ``trainer.rollout_data_dir``, one ``<step>.jsonl`` file per step.

One row per completion with ``input`` (prompt text), ``output``, ``score``, ``step`` (and ``gts``
plus reward extras in newer versions), written by ``RayPPOTrainer._write_generations``
(``verl/trainer/ppo/ray_trainer.py``, veRL 0.9.1). Rows are grouped by ``uid`` when present,
else by ``input`` within a step: the groups' rewards make ACR exact. The prompt id is a short
stable hash of the input text.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from array import array
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._console import parse_number
from rlvitals.importers._lines import iter_json_lines, json_step
from rlvitals.importers._siblings import numbered_entries
from rlvitals.importers._source import input_size, is_stream
from rlvitals.recording.run import GroupTable, Manifest, Run, RunBuilder

__all__ = ["load_verl_rollouts"]

PROMPT_ID_HEX = 12
"""Length of the prompt id (hex digits of a BLAKE2b hash of the prompt text)."""
CONF_ROLLOUTS = 0.9
CONF_ROLLOUTS_WEAK = 0.6
CONF_ROLLOUTS_NAMES_ONLY = 0.2

_ROLLOUT_NAME = re.compile(r"(\d{1,18})\.jsonl")


def _rollout_files(path: Path) -> list[tuple[int, Path]]:
    return numbered_entries(path, _ROLLOUT_NAME, Path.is_file)


def _prompt_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _score(path: Path, v: Any, where: str) -> float:
    if isinstance(v, (bool, int, float)):
        try:
            return float(v)
        except OverflowError:  # an int beyond float range
            return math.inf if v > 0 else -math.inf
    if v is None:
        return float("nan")
    if isinstance(v, str):
        x = parse_number(v.strip())
        if x is not None:
            return x
    raise InputError(path, f"'score' is not a number: {str(v)[:40]!r}", where)


def _read_rollout_file(
    path: Path,
    file_step: int | None,
    warnings: list[str],
    groups: dict[tuple[int, bytes], int],
    out: tuple[list[int], list[array], list[str]],
) -> None:
    steps, rewards, prompts = out
    for lineno, obj in iter_json_lines(path, warnings, objects=True):
        where = f"line {lineno}"
        text = obj.get("input")
        if not isinstance(text, str):
            raise InputError(path, "row has no 'input' string (the prompt)", where)
        if "score" not in obj:
            raise InputError(path, "row has no 'score'", where)
        score = _score(path, obj["score"], where)
        if "step" in obj:
            step = json_step(path, obj, "step", where)
        elif file_step is not None:
            step = file_step
        else:
            raise InputError(path, "row has no 'step' and the file name is not <step>.jsonl", where)
        uid = obj.get("uid")
        key = _prompt_digest(uid if isinstance(uid, str) else text)
        gi = groups.get((step, key))
        if gi is None:
            gi = groups[(step, key)] = len(steps)
            steps.append(step)
            rewards.append(array("d"))
            prompts.append(_prompt_digest(text).hex()[:PROMPT_ID_HEX])
        rewards[gi].append(score)


def load_verl_rollouts(path: Path, progress: Progress | None = None) -> Run:
    """Read veRL rollout dumps (a directory of ``<step>.jsonl``, or one such file).

    Rows with the same ``uid`` (else the same ``input`` text) in one step form a group; the
    group's ``score`` values are its rewards. Prompt ids are the first 12 hex digits of a
    BLAKE2b hash of the input text.

    Returns:
        A ``Run`` with ``groups`` set, no per-step scalars, trainer ``verl``; ``group_size``
        when every group has the same size.

    Raises:
        InputError: a bad row (naming file and line), or no rollout file.
    """
    builder = RunBuilder(
        Manifest(source=str(path), trainer="verl", step_key="step (else N of <N>.jsonl)")
    )
    if not is_stream(path) and path.is_dir():
        files: list[tuple[int | None, Path]] = list(_rollout_files(path))
        if not files:
            raise InputError(path, "no <step>.jsonl rollout files found")
    else:
        m = _ROLLOUT_NAME.fullmatch(path.name)
        files = [(int(m.group(1)) if m else None, path)]
    total = sum(input_size(f) or 0 for _, f in files)  # a stream or a .gz: unknown
    done = 0
    groups: dict[tuple[int, bytes], int] = {}
    out: tuple[list[int], list[array], list[str]] = ([], [], [])
    for file_step, f in files:
        _read_rollout_file(f, file_step, builder.warnings, groups, out)
        groups.clear()  # a group never spans two files
        done += input_size(f) or 0
        if progress is not None:
            progress(done, total)
    steps, rewards, prompts = out
    if not steps:
        raise InputError(path, "no rollout rows found")
    builder.groups = GroupTable.from_lists(steps, rewards, prompts)
    sizes = builder.groups.sizes()
    lo, hi = int(sizes.min()), int(sizes.max())
    if lo == hi:
        builder.manifest.group_size = lo
    else:
        builder.warn(
            f"{path}: group sizes differ ({lo}..{hi}); rows with the same prompt text in one step "
            "are merged into one group"
        )
    return builder.build()


def _looks_like_rollout_row(line: bytes) -> float:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return CONF_ROLLOUTS_WEAK if line.lstrip().startswith(b'{"input"') else 0.0
    if isinstance(obj, dict) and isinstance(obj.get("input"), str) and "score" in obj:
        return CONF_ROLLOUTS
    return 0.0


def _sniff_rollouts(path: Path, head: bytes) -> float:
    if not is_stream(path) and path.is_dir():
        try:
            files = _rollout_files(path)
            if not files:
                return 0.0
            with open(files[0][1], "rb") as f:
                first = f.read(65536).lstrip().split(b"\n", 1)[0]
        except OSError:
            return 0.0
        return _looks_like_rollout_row(first) or CONF_ROLLOUTS_NAMES_ONLY
    if not head:
        return 0.0
    return _looks_like_rollout_row(head.lstrip().split(b"\n", 1)[0])


register(
    Importer(
        name="verl_rollouts",
        description="veRL rollout dumps (trainer.rollout_data_dir: <step>.jsonl with input, score)",
        sniff=_sniff_rollouts,
        load=load_verl_rollouts,
        precheck=Precheck(starts=b"{[", marks=(b'"input"',), dirs=True),
        files=(".jsonl",),
    )
)

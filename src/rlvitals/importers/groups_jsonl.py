"""Per-group rewards as JSONL: one line per group, ``{"step", "group" or "prompt", "rewards"}``.

Optional per-line keys: ``lengths`` and ``advantages`` (lists as long as ``rewards``).
Rewards may be ``null`` or ``NaN`` (unscorable). Groups are keyed by ``group`` when present,
else by ``prompt``; the ACR of a step is exact from these rows. Only ``prompt`` is a prompt id
(the same prompt across steps: each prompt's own pass rate then sets its expected collapse);
a ``group`` is a label within its step and says nothing about which prompt it was.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, register
from rlvitals.importers._lines import iter_json_lines
from rlvitals.importers._source import is_stream, read_prefix
from rlvitals.recording.run import GroupTable, Manifest, Run, RunBuilder

__all__ = ["load_groups_jsonl"]


def _sniff(path: Path, head: bytes) -> float:
    if not head:
        return 0.0
    first = head.lstrip().split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except ValueError:
        return 0.0
    if isinstance(obj, dict) and "rewards" in obj and isinstance(obj["rewards"], list):
        return 0.9 if ("step" in obj and ("group" in obj or "prompt" in obj)) else 0.5
    return 0.0


_STEP_MIN, _STEP_MAX = -(1 << 63), (1 << 63) - 1


def _group_key(path: Path, lineno: int, key: Any) -> str:
    """The group id as text: strings as they are, anything else as compact JSON."""
    if isinstance(key, str):
        return key
    try:
        return json.dumps(key, sort_keys=True)
    except (RecursionError, ValueError):
        raise InputError(path, "'group'/'prompt' is nested too deeply", f"line {lineno}") from None


def _floats(path: Path, lineno: int, key: str, values: Any) -> list[float]:
    if not isinstance(values, list):
        raise InputError(path, f"'{key}' must be a list", f"line {lineno}")
    out = []
    for v in values:
        if v is None:
            out.append(math.nan)
        elif isinstance(v, float):
            out.append(v)
        elif isinstance(v, int) and not isinstance(v, bool):
            try:
                out.append(float(v))
            except OverflowError:  # an integer beyond float range
                out.append(math.inf if v > 0 else -math.inf)
        else:
            raise InputError(path, f"'{key}' holds a non-number: {str(v)[:40]!r}", f"line {lineno}")
    return out


def load_groups_jsonl(path: Path, progress=None) -> Run:
    """Read a per-group rewards JSONL file into a ``Run`` with a ``GroupTable``."""
    if not is_stream(path) and path.is_dir():
        raise InputError(path, "is a directory; the groups_jsonl format reads one file")
    if not read_prefix(path, 1):
        raise InputError(path, "file is empty")
    builder = RunBuilder(Manifest(source=str(path)))
    steps: list[int] = []
    rewards: list[list[float]] = []
    prompts: list[Any] = []
    lengths: list[list[float]] = []
    advs: list[list[float]] = []
    has_len = has_adv = True
    for lineno, obj in iter_json_lines(path, builder.warnings, progress):
        if not isinstance(obj, dict):
            raise InputError(path, "expected a JSON object per line", f"line {lineno}")
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise InputError(path, f"'step' must be an integer, got {step!r:.40}", f"line {lineno}")
        if not _STEP_MIN <= step <= _STEP_MAX:
            raise InputError(path, "'step' is out of the 64-bit range", f"line {lineno}")
        key = obj.get("group", obj.get("prompt"))
        if key is None:
            raise InputError(path, "line has neither 'group' nor 'prompt'", f"line {lineno}")
        r = _floats(path, lineno, "rewards", obj.get("rewards"))
        if not r:
            raise InputError(path, "'rewards' is empty", f"line {lineno}")
        steps.append(step)
        rewards.append(r)
        prompt = obj.get("prompt")
        prompts.append(None if prompt is None else _group_key(path, lineno, prompt))
        for name, store in (("lengths", lengths), ("advantages", advs)):
            v = obj.get(name)
            if v is None:
                if name == "lengths":
                    has_len = False
                else:
                    has_adv = False
                store.append([])
                continue
            vals = _floats(path, lineno, name, v)
            if len(vals) != len(r):
                raise InputError(path, f"'{name}' and 'rewards' differ in length", f"line {lineno}")
            store.append(vals)
    if not steps:
        raise InputError(path, "no group records found")
    builder.groups = GroupTable.from_lists(
        steps,
        rewards,
        prompts if any(x is not None for x in prompts) else None,
        lengths if has_len else None,
        advs if has_adv else None,
    )
    sizes = {len(r) for r in rewards}
    if len(sizes) == 1:
        builder.manifest.group_size = sizes.pop()
    return builder.build()


register(
    Importer(
        name="groups_jsonl",
        description="per-group rewards JSONL ({step, group|prompt, rewards: [...]})",
        sniff=_sniff,
        load=load_groups_jsonl,
    )
)

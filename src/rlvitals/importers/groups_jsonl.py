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
from array import array
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, register
from rlvitals.importers._lines import check_file, iter_json_lines, json_float
from rlvitals.importers._steps import as_step
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


def _group_key(path: Path, lineno: int, key: Any) -> str:
    """The group id as text: strings as they are, anything else as compact JSON."""
    if isinstance(key, str):
        return key
    try:
        return json.dumps(key, sort_keys=True)
    except (RecursionError, ValueError):
        raise InputError(path, "'group'/'prompt' is nested too deeply", f"line {lineno}") from None


def _floats(path: Path, lineno: int, key: str, values: Any, out: array) -> int:
    """Append ``values`` (a list of numbers or nulls) to ``out`` as float64; their count."""
    if not isinstance(values, list):
        raise InputError(path, f"'{key}' must be a list", f"line {lineno}")
    for v in values:
        x = math.nan if v is None else json_float(v)  # an int beyond float range is ±inf
        if x is None:
            raise InputError(path, f"'{key}' holds a non-number: {str(v)[:40]!r}", f"line {lineno}")
        out.append(x)
    return len(values)


class _Columns:
    """Per-group rows held compactly (8 bytes a value, not a Python float in a list: a file of
    many groups must not take 5x its size) until :meth:`table` puts them in step order."""

    def __init__(self) -> None:
        self.steps = array("q")
        self.sizes = array("q")
        self.rewards = array("d")
        self.prompts: list[Any] = []
        self.extra = {"lengths": array("d"), "advantages": array("d")}
        self.has = {"lengths": True, "advantages": True}

    def table(self) -> GroupTable:
        steps = np.frombuffer(self.steps, dtype=np.int64)
        sizes = np.frombuffer(self.sizes, dtype=np.int64)
        starts = np.zeros(sizes.shape[0], dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        order = np.argsort(steps, kind="stable")
        sizes_o = sizes[order]
        offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
        np.cumsum(sizes_o, out=offsets[1:])
        in_order = bool((order == np.arange(order.shape[0])).all())
        # Row i of group order[j] moves to offsets[j] + i (no copy when already in step order).
        rows = (
            None
            if in_order
            else np.repeat(starts[order] - offsets[:-1], sizes_o) + np.arange(offsets[-1])
        )

        def take(a: array, present: bool) -> np.ndarray | None:
            if not present:
                return None
            flat = np.frombuffer(a, dtype=np.float64)  # a view: the array stays alive with it
            return flat if rows is None else flat[rows]

        prompts = None
        if any(p is not None for p in self.prompts):
            prompts = np.asarray(self.prompts, dtype=object)[order]
        return GroupTable(
            step=steps[order],
            offsets=offsets,
            rewards=take(self.rewards, True),
            prompt=prompts,
            lengths=take(self.extra["lengths"], self.has["lengths"]),
            advantages=take(self.extra["advantages"], self.has["advantages"]),
        )


def load_groups_jsonl(path: Path, progress=None) -> Run:
    """Read a per-group rewards JSONL file into a ``Run`` with a ``GroupTable``."""
    check_file(path, "groups_jsonl")
    builder = RunBuilder(Manifest(source=str(path), step_key="step"))
    cols = _Columns()
    group_sizes: set[int] = set()
    for lineno, obj in iter_json_lines(path, builder.warnings, progress, objects=True):
        step = obj.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise InputError(path, f"'step' must be an integer, got {step!r:.40}", f"line {lineno}")
        if as_step(step) is None:
            raise InputError(path, "'step' is out of the 64-bit range", f"line {lineno}")
        key = obj.get("group", obj.get("prompt"))
        if key is None:
            raise InputError(path, "line has neither 'group' nor 'prompt'", f"line {lineno}")
        n = _floats(path, lineno, "rewards", obj.get("rewards"), cols.rewards)
        if not n:
            raise InputError(path, "'rewards' is empty", f"line {lineno}")
        prompt = obj.get("prompt")
        for name, store in cols.extra.items():
            v = obj.get(name)
            if v is None:  # one line without it: the column is dropped for every group
                cols.has[name] = False
                continue
            if not isinstance(v, list):
                raise InputError(path, f"'{name}' must be a list", f"line {lineno}")
            if len(v) != n:
                raise InputError(path, f"'{name}' and 'rewards' differ in length", f"line {lineno}")
            _floats(path, lineno, name, v, store if cols.has[name] else array("d"))
        cols.steps.append(step)
        cols.sizes.append(n)
        cols.prompts.append(None if prompt is None else _group_key(path, lineno, prompt))
        group_sizes.add(n)
    if not cols.steps:
        raise InputError(path, "no group records found")
    builder.groups = cols.table()
    if len(group_sizes) == 1:
        builder.manifest.group_size = group_sizes.pop()
    return builder.build()


register(
    Importer(
        name="groups_jsonl",
        description="per-group rewards JSONL ({step, group|prompt, rewards: [...]})",
        sniff=_sniff,
        load=load_groups_jsonl,
        precheck=Precheck(starts=b"{[", marks=(b'"rewards"',)),
        files=(".jsonl",),
    )
)

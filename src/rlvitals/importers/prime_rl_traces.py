"""prime-rl rollouts: ``traces/step_<n>/train/traces.jsonl`` → exact per-group ACR.

The writer (PrimeIntellect-ai/prime-rl ``src/prime_rl/monitors/file.py`` @ 0b77f237,
``FileMonitor.log_episodes``): every rollout episode is appended, as it completes, to
``<output_dir>/traces/step_<n>/<kind>/traces.jsonl`` (``kind`` is ``train`` or ``eval``), one
``orjson`` line per ``verifiers.v1`` episode record (``episode.to_record()``); older releases
kept them under ``rollouts/step_<n>/``. What is read from a record is what prime-rl's own reader
takes from it (``src/prime_rl/monitors/file/traces/index.py`` @ 13e96a12,
``summarize_episode``)::

    {"id": "...", "group": {"id": "..."}, "ok": true, "errors": [],
     "traces": [{"id": "...", "rewards": {"correct": {"score": 1.0, "weight": 1.0}},
                 "info": {"kind": "train", "advantage": 0.25, "train": {"logged_at_step": 7}},
                 ...}], ...}

- **Groups**: the episodes of one ``group.id`` within a step folder (the G rollouts of one
  example); prime-rl scores a group as a whole, so its episodes arrive together, in any order
  inside the file (they complete asynchronously). Each episode's reward is the mean over its
  reward-bearing traces of ``sum(score * weight)`` (a judge seat without rewards does not
  count); its advantage the mean of the traces' ``info.advantage``. An episode without rewards
  (a failed rollout) is unscorable (NaN), as prime-rl's reader leaves it without a reward.
- **Step**: ``n`` of ``step_<n>``, the orchestrator step the episode *arrived* at. prime-rl is
  asynchronous: the step a trace was trained at reaches the files later, as ``trained_at_step``
  annotations (``annotations/orchestrator.jsonl``, ``utils/trace_updates.py`` @ 0b77f237), and
  only for the traces that were shipped — groups dropped for zero advantage never get one. The
  collapse that matters is the pre-filter one (DESIGN.md 3.6), so groups are placed at their
  arrival step, the axis prime-rl's own ``metrics.jsonl`` uses; annotations are not needed.
- **Evaluation** episodes (``<kind>`` = ``eval``) are not read: they are not trained on.
- A folder: the output folder (``traces/`` or ``rollouts/`` inside it), the traces folder, or
  one ``step_<n>`` folder. When the output folder also holds the FileMonitor's
  ``metrics.jsonl`` (:mod:`rlvitals.importers.prime_rl`), its rows join the run on the same
  step axis. One ``traces.jsonl`` file alone is read too (its step from the ``step_<n>`` folder
  it is in, else step 1, said).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._lines import iter_json_lines, json_float
from rlvitals.importers._siblings import numbered_entries
from rlvitals.importers._source import is_regular, is_stream
from rlvitals.importers.prime_rl import read_metric_rows
from rlvitals.recording.run import GroupTable, Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import prime_rl as prime_facts

__all__ = ["load_prime_rl_traces"]

CONF = 0.9
_STEP_DIR = re.compile(r"^step_([0-9]{1,18})$")
_ROOTS = ("", "traces", "rollouts")
_FILE = "traces.jsonl"
_MAX_DEPTH = 3
"""How far below ``step_<n>/train/`` a ``traces.jsonl`` may sit (an environment's folder)."""
_METRICS = ("metrics.jsonl", os.path.join("monitors", "file", "metrics.jsonl"))


def _sniff(path: Path, head: bytes) -> float:
    if not head:
        try:
            return CONF if _trace_files(path, first=True) else 0.0
        except OSError:
            return 0.0
    if not head.lstrip().startswith(b"{") or b'"traces":' not in head[:65536]:
        return 0.0
    if b'"group":' not in head[:65536] and b'"rewards":' not in head[:65536]:
        return 0.0
    return CONF if path.name == _FILE else 0.6


def _step_dirs(root: Path) -> list[tuple[int, Path]]:
    return numbered_entries(root, _STEP_DIR, lambda p: p.is_dir() and not p.is_symlink())


def _files_under(d: Path, depth: int, first: bool) -> list[Path]:
    out: list[Path] = []
    try:
        entries = sorted(os.scandir(d), key=lambda e: e.name)
    except OSError:
        return out
    for e in entries:
        if e.name == _FILE and is_regular(Path(e.path)):
            out.append(Path(e.path))
        elif depth > 0 and e.name != "annotations" and e.is_dir(follow_symlinks=False):
            out += _files_under(Path(e.path), depth - 1, first)
        if first and out:
            break
    return out


def _trace_files(path: Path, first: bool = False) -> list[tuple[int, Path]]:
    """``(step, traces.jsonl)`` of the train episodes under ``path`` (module docstring)."""
    if is_stream(path) or not path.is_dir():
        return []
    m = _STEP_DIR.match(path.name)
    roots = [(int(m.group(1)), path)] if m else []
    if not roots:
        for sub in _ROOTS:
            r = path / sub if sub else path
            if r.is_dir():
                roots = _step_dirs(r)
                if roots:
                    break
    out = []
    for step, d in roots:
        train = d / "train"
        if train.is_dir():
            out += [(step, f) for f in _files_under(train, _MAX_DEPTH, first)]
            if first and out:
                break
    return out


def _output_dir(path: Path) -> Path:
    """The prime-rl output folder of a traces path (where ``metrics.jsonl`` lives)."""
    if _STEP_DIR.match(path.name):
        path = path.parent
    if path.name in ("traces", "rollouts"):
        path = path.parent
    return path


def _episode(rec: Any) -> tuple[Any, float, float | None] | None:
    """``(group id, reward, advantage)`` of one episode record, None when it is no episode."""
    if not isinstance(rec, dict) or not isinstance(rec.get("traces"), list):
        return None
    group = rec.get("group")
    gid = group.get("id") if isinstance(group, dict) else None
    if gid is not None and not isinstance(gid, (str, int)):
        gid = str(gid)
    rewards, advs = [], []
    for t in rec["traces"]:
        if not isinstance(t, dict):
            continue
        parts = t.get("rewards")
        if isinstance(parts, dict) and parts:
            total = 0.0
            for r in parts.values():
                if not isinstance(r, dict):
                    continue
                score, weight = json_float(r.get("score")), json_float(r.get("weight"))
                total += (score or 0.0) * (1.0 if weight is None else weight)
            rewards.append(total)
        info = t.get("info")
        a = json_float(info.get("advantage")) if isinstance(info, dict) else None
        if a is not None:
            advs.append(a)
    reward = sum(rewards) / len(rewards) if rewards else math.nan
    adv = sum(advs) / len(advs) if advs else None
    return gid, reward, adv


def load_prime_rl_traces(path: Path, progress: Progress | None = None) -> Run:
    """Read prime-rl's train rollouts (and ``metrics.jsonl`` beside them) into a ``Run``."""
    builder = RunBuilder(
        Manifest(source=str(path), trainer="prime_rl", step_key="n of traces/step_<n>")
    )
    if is_stream(path) or not path.is_dir():
        m = _STEP_DIR.match(path.parent.parent.name) if not is_stream(path) else None
        if m is None:
            builder.warn(f"{path}: not inside a step_<n> folder: its step is unknown, read as 1")
            builder.manifest.step_key = "none (one traces.jsonl, step 1 assumed)"
        files = [(int(m.group(1)) if m else 1, path)]
        out_dir = None
    else:
        files = _trace_files(path)
        if not files:
            raise InputError(path, "no traces/step_<n>/train/traces.jsonl here")
        out_dir = _output_dir(path)
    # step -> group id -> ([rewards], [advantages or None])
    steps: dict[int, dict[Any, tuple[list[float], list[float | None]]]] = {}
    skipped = ungrouped = 0
    for step, f in files:
        groups = steps.setdefault(step, {})
        for lineno, rec in iter_json_lines(f, builder.warnings, progress, objects=True):
            ep = _episode(rec)
            if ep is None:
                skipped += 1
                continue
            gid, r, a = ep
            if gid is None:
                ungrouped += 1
                gid = ("no group", lineno, str(f))
            rs, advs = groups.setdefault(gid, ([], []))
            rs.append(r)
            advs.append(a)
    n_groups = sum(len(g) for g in steps.values())
    if n_groups == 0:
        raise InputError(path, "no prime-rl episodes in the traces")
    if skipped:
        builder.warn(f"{path}: {skipped} lines that are not episode records were skipped")
    if ungrouped:
        builder.warn(f"{path}: {ungrouped} episodes without a group id, each read as its own group")
    builder.groups = _table(steps)
    sizes = builder.groups.sizes()
    g = int(np.bincount(sizes).argmax())
    if np.any(sizes != g):
        builder.warn(f"{path}: group sizes vary ({int(sizes.min())}-{int(sizes.max())}); G = {g}")
    for step, groups in steps.items():
        builder.add_row(step, {"rlvitals/samples": float(sum(len(v[0]) for v in groups.values()))})
    metrics = next((out_dir / m for m in _METRICS if out_dir and is_regular(out_dir / m)), None)
    if metrics is not None:
        read_metric_rows(builder, metrics, progress)
        builder.manifest.config["metrics_file"] = str(metrics)
    apply_facts(builder.manifest, prime_facts.facts({"rollouts_per_example": g}))
    builder.manifest.group_size = g
    return builder.build()


def _table(steps: dict[int, dict[Any, tuple[list[float], list[float | None]]]]) -> GroupTable:
    """One group per episode group, in step order; advantages only when every episode has one."""
    groups = [g for step in sorted(steps) for g in steps[step].values()]
    gstep = [step for step in sorted(steps) for _ in steps[step]]
    has_adv = all(a is not None for _, ad in groups for a in ad)
    advs = [ad for _, ad in groups] if has_adv else None
    return GroupTable.from_lists(gstep, [rs for rs, _ in groups], advantages=advs)


register(
    Importer(
        name="prime_rl_traces",
        description="prime-rl rollouts (traces/step_<n>/train/traces.jsonl, with metrics.jsonl)",
        sniff=_sniff,
        load=load_prime_rl_traces,
        precheck=Precheck(starts=b"{[", marks=(b'"traces":',), dirs=True),
        files=(".jsonl",),
    )
)

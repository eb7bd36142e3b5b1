"""ms-swift ``completions.jsonl`` (``log_completions=True``): per-sample rewards → per-group.

The writer (ms-swift 4.6.0, ``swift/rlhf_trainers/grpo_trainer.py``, ``GRPOTrainer.log``): one
JSON line per log call, a dict of equal-length lists — ``"step"`` (**strings**,
``str(global_step)``), ``"prompt"``, ``"completion"``, one column per reward function
(unweighted), ``"advantages"``, and extra columns::

    {"step": ["12", "12", ...], "prompt": ["...", ...], "completion": [...],
     "MathAccuracy": [1.0, 0.0, ...], "advantages": [0.87, -0.87, ...]}

A row's reward is the sum of the reward-function columns (weighted by ``reward_weights`` from
``args.json`` beside it). The G completions of a prompt are consecutive rows; G is
``num_generations`` from ``args.json``, else the greatest common divisor of the runs of one
prompt. Each line holds the last generation batch only (the writer's deques keep
``generation_batch_size`` rows), so a step's groups are a sample of its groups.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._swift import args_near, read_completions
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import ms_swift as swift_facts

__all__ = ["load_ms_swift_completions"]

CONF = 0.9
_HEAD = re.compile(rb'\A\s*\{"step": \["[0-9]+"')


def _sniff(path: Path, head: bytes) -> float:
    if not head or not _HEAD.match(head):
        return 0.0
    return CONF if b'"prompt": [' in head or b'"advantages": [' in head else 0.6


def load_ms_swift_completions(path: Path, progress: Progress | None = None) -> Run:
    """Read an ms-swift ``completions.jsonl`` into a ``Run`` with per-group rewards."""
    builder = RunBuilder(Manifest(source=str(path), trainer="ms_swift", step_key="step (strings)"))
    args = args_near(path)
    if args is not None:
        apply_facts(builder.manifest, swift_facts.facts(args), overwrite=True)
    samples, funcs = read_completions(path, builder.warnings, None, args, progress)
    table, g, uneven = samples.table(builder.manifest.group_size)
    if table is None:
        raise InputError(path, "no completions found")
    builder.groups = table
    builder.manifest.group_size = builder.manifest.group_size or g
    builder.manifest.config["reward_functions"] = funcs
    if uneven:
        builder.warn(f"{path}: {uneven} runs of one prompt are not a multiple of G={g}")
    return builder.build()


register(
    Importer(
        name="ms_swift_completions",
        description="ms-swift completions.jsonl (per-sample rewards, step as strings)",
        sniff=_sniff,
        load=load_ms_swift_completions,
        precheck=Precheck(starts=b"{[", marks=(b'"step": ["',), within=256),
        files=(".jsonl",),
        companion_of="ms_swift",
    )
)

"""ms-swift GRPO ``logging.jsonl`` (``swift rlhf --rlhf_type grpo``), with its output directory.

The writer (ms-swift 4.6.0): ``swift/trainers/patcher.py`` patches transformers' progress
callbacks to call ``add_train_message`` and append every log call to
``<output_dir>/logging.jsonl``::

    {"loss": -0.03259968, ..., "reward": 0.9375, "reward_std": 0.17677669,
     "frac_reward_zero_std": 0.75, "epoch": 0.16666667, "global_step/max_steps": "2/500",
     "elapsed_time": "1m 5s", "remaining_time": "4h 28m 0s", "memory(GiB)": 61.23,
     "train_speed(s/it)": 32.345679}

- **Step**: ``global_step/max_steps`` (``"12/500"`` → 12; Megatron writes ``iteration``), never
  ``epoch``; there is no ``step`` key.
- Eval rows (``eval_*``) become eval series; the summary row (``train_runtime``) and the final
  object ``sft.py`` appends (``{"last_model_checkpoint", "global_step", "log_history", ...}``)
  are not steps. A resumed run appends again: repeated steps keep the later values (warning).
- ``args.json`` beside it gives the trainer facts (:mod:`rlvitals.trainers.ms_swift`: G,
  estimator, KL, ``dynamic_sample``); ms-swift's ``reward_std`` is the mean of the per-group stds.
- ``completions.jsonl`` beside it (``log_completions=True``) adds per-group rewards
  (:mod:`~rlvitals.importers._swift`).
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._lines import iter_json_lines
from rlvitals.importers._source import is_stream
from rlvitals.importers._swift import args_near, read_completions, split_step
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import ms_swift as swift_facts

__all__ = ["load_ms_swift"]

CONF = 0.95
_HEAD = re.compile(rb'"(?:global_step/max_steps|iteration)": "[0-9]+/[0-9]+"')
_BOOKKEEPING = ("elapsed_time", "remaining_time", "global_step/max_steps", "iteration")
_SUMMARY = ("train_runtime", "train_loss")
_REWARD_FN = re.compile(r"^rewards/(.+)/mean$")


def _sniff(path: Path, head: bytes) -> float:
    if not head or not _HEAD.search(head):
        return 0.0
    return CONF if (b'"elapsed_time"' in head or b'"train_speed(s/it)"' in head) else 0.5


def _shape(keys: tuple[str, ...]) -> tuple[str, list[str]]:
    """``(kind, reward functions)`` of a row with these keys: kind ``summary``, ``train`` or
    ``eval`` (memoised per key set: a log repeats a few shapes thousands of times)."""
    row = [k for k in keys if k not in _BOOKKEEPING]
    if any(k in row for k in _SUMMARY) and "loss" not in row:
        return "summary", []
    if any(not is_eval_key(k) for k in row if k != "epoch"):
        return "train", [m.group(1) for k in row if (m := _REWARD_FN.match(k))]
    return "eval", []


def load_ms_swift(path: Path, progress: Progress | None = None) -> Run:
    """Read an ms-swift ``logging.jsonl`` (and its ``args.json`` / ``completions.jsonl``)."""
    builder = RunBuilder(Manifest(source=str(path), trainer="ms_swift"), ignore=_BOOKKEEPING)
    key = None
    seen: set[int] = set()
    repeated = 0
    n = 0
    funcs: dict[str, None] = {}
    shapes: dict[tuple[str, ...], tuple[str, list[str]]] = {}
    for lineno, obj in iter_json_lines(path, builder.warnings, progress, objects=True):
        raw = obj.get("global_step/max_steps")
        if raw is None:
            raw = obj.get("iteration")
        if raw is None:
            if "log_history" in obj or "last_model_checkpoint" in obj:
                continue  # the final summary object of sft.py
            raise InputError(path, "line has no 'global_step/max_steps'", f"line {lineno}")
        step = split_step(raw)
        if step is None:
            raise InputError(path, f"step {str(raw)[:30]!r} is not 'N/M'", f"line {lineno}")
        if key is None:
            key = "global_step/max_steps" if "global_step/max_steps" in obj else "iteration"
        shape = tuple(obj)
        info = shapes.get(shape)
        if info is None:
            info = shapes[shape] = _shape(shape)
            funcs.update(dict.fromkeys(info[1]))
        kind = info[0]
        if kind == "train":
            if step in seen:
                repeated += 1
            seen.add(step)
            builder.add_row(step, obj)  # the builder ignores the bookkeeping keys
        elif kind == "eval":
            builder.add_row(step, {k: v for k, v in obj.items() if k != "epoch"})
        else:
            builder.manifest.config["summary"] = {
                k: v
                for k, v in obj.items()
                if k not in _BOOKKEEPING and isinstance(v, (int, float, str))
            }
            continue
        n += 1
    if n == 0:
        raise InputError(path, "no ms-swift log rows found")
    builder.manifest.step_key = f"'{key}' (N of 'N/M')"
    if repeated:
        builder.warn(
            f"{path}: {repeated} rows repeat an earlier step (a resumed run?); the later values were kept"
        )
    args = args_near(path)
    if args is not None:
        builder.manifest.config["args"] = {
            k: v for k, v in args.items() if isinstance(v, (int, float, str, bool)) or v is None
        }
        apply_facts(builder.manifest, swift_facts.facts(args), overwrite=True)
    else:
        apply_facts(builder.manifest, swift_facts.facts({"rlhf_type": "grpo"}), overwrite=False)
        builder.manifest.group_size = None
        builder.manifest.kl_coef = None
    comp = path.parent / "completions.jsonl"
    if not is_stream(path) and comp.is_file():
        samples, _ = read_completions(comp, builder.warnings, list(funcs) or None, args)
        table, g, uneven = samples.table(builder.manifest.group_size)
        if table is not None:
            builder.groups = table
            builder.manifest.group_size = builder.manifest.group_size or g
            if uneven:
                builder.warn(f"{comp}: {uneven} runs of one prompt are not a multiple of G={g}")
    warn_skipped(builder, path)
    return builder.build()


register(
    Importer(
        name="ms_swift",
        description="ms-swift logging.jsonl ('global_step/max_steps': 'N/M'; args.json, completions.jsonl beside it)",
        sniff=_sniff,
        load=load_ms_swift,
        precheck=Precheck(starts=b"{[", marks=(b'"global_step/max_steps"', b'"iteration": "')),
        files=(".jsonl",),
    )
)

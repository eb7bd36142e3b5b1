"""TRL / transformers ``trainer_state.json``: the ``log_history`` of a run, plus what it knows.

The file is written by ``TrainerState.save_to_json`` (``json.dumps(asdict(state), indent=2,
sort_keys=True)``), so a NaN metric appears as a bare ``NaN`` and a metric TRL could not compute
as ``null``; both become NaN. What is read:

- ``log_history`` rows with a ``step``: training rows become series; rows whose metric keys are
  all ``eval_*`` become eval series (their ``epoch`` is dropped so an eval step is never a gap
  in the training series); the final summary row (``train_runtime``, ``total_flos``,
  ``train_loss``) becomes ``manifest.config["summary"]`` and a ``summary`` event, never a step.
- The state's scalars (``global_step``, ``max_steps``, ``logging_steps``, ``eval_steps``, ...) go
  to ``manifest.config``; ``logging_steps`` also to ``manifest.logging_steps``.
- The GRPO configuration is not in the state. It is taken from a readable sibling file only:
  a JSON or YAML file next to the state (or next to its ``checkpoint-N`` folder) whose top level
  holds ``num_generations``, such as ``args.to_json_string()`` saved by the user or a TRL CLI
  ``--config`` YAML. ``training_args.bin`` is a pickle and is never opened.
- A ``completions/`` folder next to the state (TRL's ``log_completions=True``) adds per-group
  rewards (:mod:`rlvitals.importers.trl_completions`).

The path may be the JSON file, an output directory holding ``trainer_state.json``, or one whose
latest ``checkpoint-N/`` holds it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._source import input_size, is_stream
from rlvitals.importers._steps import as_step
from rlvitals.importers._trl_files import (
    MAX_STATE_BYTES,
    STATE_NAME,
    SUMMARY_KEYS,
    StateHints,
    add_log_row,
    apply_args_file,
    find_state,
    is_checkpoint_dir,
    is_eval_row,
    read_json,
)
from rlvitals.importers._trl_tables import attach_groups, table_files
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["load_trl_state"]

_STATE_SKIP = frozenset(
    {
        "log_history",
        "stateful_callbacks",
        "is_local_process_zero",
        "is_world_process_zero",
        "is_hyper_param_search",
    }
)


def _sniff(path: Path, head: bytes) -> float:
    if path.is_dir():
        try:
            return 0.9 if find_state(path) is not None else 0.0
        except OSError:
            return 0.0
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"{"):
        return 0.0
    if b'"log_history"' in head:
        return 0.95
    return 0.6 if path.name == STATE_NAME else 0.0


def load_trl_state(path: Path, progress: Progress | None = None) -> Run:
    """Read a ``trainer_state.json`` (or an output directory holding one) into a ``Run``."""
    state_path = find_state(path)
    if state_path is None:
        raise InputError(path, f"no {STATE_NAME} here or in a checkpoint-N/ folder")
    total = input_size(state_path) or 0
    if progress is not None:
        progress(0, total)
    state = read_json(state_path, MAX_STATE_BYTES)
    if not isinstance(state, dict):
        raise InputError(state_path, "expected a JSON object with 'log_history'")
    history = state.get("log_history")
    if not isinstance(history, list):
        raise InputError(state_path, "'log_history' is missing or not a list")

    manifest = Manifest(source=str(state_path), trainer="trl", step_key="step")
    for k, v in state.items():
        if k not in _STATE_SKIP and (v is None or isinstance(v, (int, float, str))):
            manifest.config[k] = v
    ls = as_step(state.get("logging_steps"))
    if ls is not None and ls > 0:
        manifest.logging_steps = ls
    builder = RunBuilder(manifest, ignore=("step",))
    bad_steps = 0
    for i, row in enumerate(history):
        if not isinstance(row, dict):
            raise InputError(state_path, "log entry is not an object", f"log_history[{i}]")
        step = as_step(row.get("step"))
        if step is None:
            bad_steps += 1
            continue
        if SUMMARY_KEYS.intersection(row):
            kind = "summary"
        else:
            kind = "eval" if is_eval_row(row) else "train"
        add_log_row(builder, step, row, kind)
        if progress is not None and i % 4096 == 0:
            progress(total * i // max(len(history), 1), total)
    if bad_steps:
        builder.warn(
            f"{state_path}: {bad_steps} log_history entries without an integer 'step' were skipped"
        )
    warn_skipped(builder, state_path)

    args = apply_args_file(manifest, state_path)
    _attach_completions(state_path, builder, lambda: StateHints.from_state(state, args))
    if progress is not None:
        progress(total, total)
    return builder.build()


def _attach_completions(
    state_path: Path, builder: RunBuilder, hints: Callable[[], StateHints]
) -> None:
    """Add per-group rewards from a ``completions/`` folder next to the run, when present.

    ``hints`` is called only when there is such a folder (it scans the whole log)."""
    if is_stream(state_path):
        return
    root = state_path.parent
    if is_checkpoint_dir(root) and not (root / "completions").is_dir():
        root = root.parent
    comp = root / "completions"
    files = table_files(comp) if comp.is_dir() else []
    if not files:
        return
    try:
        attach_groups(files, builder, hints())
    except MissingExtraError as e:
        builder.warn(f"{comp}: completion tables not read: {e}")


register(
    Importer(
        name="trl_state",
        description="TRL / transformers trainer_state.json (log_history), file or output dir",
        sniff=_sniff,
        load=load_trl_state,
        precheck=Precheck(
            starts=b"{[", marks=(b'"log_history"',), names=("trainer_state.json",), dirs=True
        ),
        files=(".json",),
    )
)

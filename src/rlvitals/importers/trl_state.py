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

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Importer, Progress, register
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Event, Manifest, Run, RunBuilder

__all__ = [
    "MAX_STATE_BYTES",
    "StateHints",
    "find_args_file",
    "find_state",
    "load_trl_state",
    "read_args",
    "state_hints_near",
]

STATE_NAME = "trainer_state.json"
MAX_STATE_BYTES = 1 << 30
"""A bigger ``trainer_state.json`` is refused rather than parsed into memory (1 GiB)."""
MAX_ARGS_BYTES = 1 << 20
"""Sibling config files larger than this are not read."""
SUMMARY_KEYS = frozenset({"train_runtime", "total_flos"})
"""Keys that mark the final summary row ``Trainer.train()`` logs."""
_SUMMARY_DROP = frozenset(
    {"train_runtime", "total_flos", "train_loss", "train_samples_per_second",
     "train_steps_per_second"}
)
_STATE_SKIP = frozenset({"log_history", "stateful_callbacks", "is_local_process_zero",
                         "is_world_process_zero", "is_hyper_param_search"})
_NOT_METRICS = frozenset({"step", "epoch"})
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
_ARGS_SUFFIXES = (".json", ".yaml", ".yml")
_REWARD_FN_RE = re.compile(r"^rewards/(.+)/mean$")
_ARGS_KEYS = ("num_generations", "scale_rewards", "beta", "loss_type", "reward_weights",
              "num_generations_eval", "logging_steps", "max_completion_length", "epsilon",
              "epsilon_high", "temperature", "learning_rate", "per_device_train_batch_size",
              "gradient_accumulation_steps", "steps_per_generation", "num_iterations",
              "multi_objective_aggregation", "importance_sampling_level")
"""GRPO arguments copied from a sibling config into ``manifest.config["args"]``."""


def _checkpoints(d: Path) -> list[Path]:
    found = []
    for c in d.iterdir():
        m = _CHECKPOINT_RE.match(c.name)
        if m and (c / STATE_NAME).is_file():
            found.append((int(m.group(1)), c))
    return [c for _, c in sorted(found)]


def find_state(path: Path) -> Path | None:
    """The ``trainer_state.json`` that ``path`` (a file or an output directory) stands for."""
    if path.is_file():
        return path
    if not path.is_dir():
        return None
    if (path / STATE_NAME).is_file():
        return path / STATE_NAME
    try:
        cks = _checkpoints(path)
    except OSError:
        return None
    return cks[-1] / STATE_NAME if cks else None


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


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 2**63:
        return int(v)
    return None


def _read_json(path: Path, limit: int) -> Any:
    size = path.stat().st_size
    if size > limit:
        raise InputError(path, f"file is {size} bytes, more than the {limit} this reader accepts")
    raw = path.read_bytes()
    if not raw.strip():
        raise InputError(path, "file is empty")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", f"byte {e.start}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"invalid JSON: {e.msg}", f"line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer with too many digits
        raise InputError(path, f"invalid JSON: {e}") from None


def find_args_file(state: Path) -> tuple[Path, dict[str, Any]] | None:
    """A readable sibling config of ``state`` and its GRPO arguments, or None.

    Looks next to the state, then next to its ``checkpoint-N`` folder, for a JSON/YAML file whose
    top level holds ``num_generations`` (first in name order). Never opens a pickle.
    """
    dirs = [state.parent]
    if _CHECKPOINT_RE.match(state.parent.name):
        dirs.append(state.parent.parent)
    for d in dirs:
        try:
            candidates = sorted(p for p in d.iterdir() if p.suffix.lower() in _ARGS_SUFFIXES)
        except OSError:
            continue
        for p in candidates:
            if p.name == STATE_NAME or not p.is_file():
                continue
            args = read_args(p)
            if args is not None:
                return p, args
    return None


def read_args(path: Path) -> dict[str, Any] | None:
    """The GRPO arguments of a JSON/YAML config file, or None when it is not one.

    A file qualifies when its top level is a mapping holding ``num_generations``.
    """
    try:
        if path.stat().st_size > MAX_ARGS_BYTES:
            return None
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    if "num_generations" not in text:  # cheap test before parsing every sibling
        return None
    if path.suffix.lower() == ".json":
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return None
    else:
        try:
            import yaml
        except ImportError:
            return None
        try:
            obj = yaml.safe_load(text)
        except Exception:  # any YAML error: not a config we can use
            return None
    if not isinstance(obj, dict) or "num_generations" not in obj:
        return None
    return {k: obj[k] for k in _ARGS_KEYS if k in obj}


def _apply_args(manifest: Manifest, args: dict[str, Any]) -> None:
    """Set group size, scaling, KL coefficient and estimator from GRPO arguments."""
    g = _as_int(args.get("num_generations"))
    if g is not None and g > 0:
        manifest.group_size = g
    scale = args.get("scale_rewards")
    if isinstance(scale, bool):  # TRL maps True/False to "group"/"none"
        scale = "group" if scale else "none"
    if isinstance(scale, str) and scale in ("group", "batch", "none"):
        manifest.scale_rewards = scale
    beta = args.get("beta")
    if isinstance(beta, (int, float)) and not isinstance(beta, bool) and math.isfinite(beta):
        manifest.kl_coef = float(beta)
    loss_type = args.get("loss_type")
    if loss_type == "dr_grpo" or manifest.scale_rewards == "none":
        manifest.estimator = "dr_grpo"
    elif manifest.scale_rewards in ("group", "batch"):
        manifest.estimator = "grpo"


@dataclass(frozen=True)
class StateHints:
    """What a ``trainer_state.json`` (and its sibling config) tells the completions reader.

    Attributes:
        eval_steps: steps with an eval row; TRL's completions table of such a step holds the
            eval completions (the eval log call overwrites the training table of that step).
        reward_funcs: reward function names, from the ``rewards/<name>/mean`` keys, in order.
        group_size: ``num_generations`` from a sibling config, when known.
        reward_weights: ``reward_weights`` from a sibling config, when known.
    """

    eval_steps: frozenset[int] = frozenset()
    reward_funcs: tuple[str, ...] = ()
    group_size: int | None = None
    reward_weights: tuple[float, ...] | None = None

    @classmethod
    def from_state(cls, state: dict[str, Any], args: dict[str, Any]) -> StateHints:
        evals: set[int] = set()
        funcs: dict[str, None] = {}
        history = state.get("log_history")
        for row in history if isinstance(history, list) else ():
            if not isinstance(row, dict):
                continue
            step = _as_int(row.get("step"))
            if step is not None and _is_eval_row(row):
                evals.add(step)
            for k in row:
                m = _REWARD_FN_RE.match(k) if isinstance(k, str) else None
                if m:
                    funcs[m.group(1)] = None
        g = _as_int(args.get("num_generations"))
        w = args.get("reward_weights")
        weights = None
        if isinstance(w, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in w
        ):
            weights = tuple(float(x) for x in w)
        return cls(frozenset(evals), tuple(funcs), g if g and g > 0 else None, weights)


def state_hints_near(folder: Path) -> tuple[Path, StateHints] | None:
    """Hints from the ``trainer_state.json`` of the output directory holding ``folder``.

    ``folder`` is a ``completions/`` directory; its parent is TRL's ``output_dir``. Returns None
    when there is no readable state there (the caller then works without hints).
    """
    state_path = find_state(folder.parent) if folder.parent != folder else None
    if state_path is None or state_path.parent == folder:
        return None
    try:
        state = _read_json(state_path, MAX_STATE_BYTES)
    except (InputError, OSError):
        return None
    if not isinstance(state, dict):
        return None
    found = find_args_file(state_path)
    return state_path, StateHints.from_state(state, found[1] if found else {})


_EVAL_ROW_CACHE: dict[tuple[Any, ...], bool] = {}


def _is_eval_row(row: dict[str, Any]) -> bool:
    """True when every metric key of the row is an eval key (memoised by the row's key set:
    a log repeats a handful of shapes thousands of times)."""
    shape = tuple(row)
    hit = _EVAL_ROW_CACHE.get(shape)
    if hit is None:
        metric_keys = [k for k in row if k not in _NOT_METRICS]
        hit = bool(metric_keys) and all(isinstance(k, str) and is_eval_key(k) for k in metric_keys)
        if len(_EVAL_ROW_CACHE) < 4096:
            _EVAL_ROW_CACHE[shape] = hit
    return hit


def load_trl_state(path: Path, progress: Progress | None = None) -> Run:
    """Read a ``trainer_state.json`` (or an output directory holding one) into a ``Run``."""
    state_path = find_state(path)
    if state_path is None:
        raise InputError(path, f"no {STATE_NAME} here or in a checkpoint-N/ folder")
    total = state_path.stat().st_size
    if progress is not None:
        progress(0, total)
    state = _read_json(state_path, MAX_STATE_BYTES)
    if not isinstance(state, dict):
        raise InputError(state_path, "expected a JSON object with 'log_history'")
    history = state.get("log_history")
    if not isinstance(history, list):
        raise InputError(state_path, "'log_history' is missing or not a list")

    manifest = Manifest(source=str(state_path), trainer="trl")
    for k, v in state.items():
        if k not in _STATE_SKIP and (v is None or isinstance(v, (int, float, str))):
            manifest.config[k] = v
    ls = _as_int(state.get("logging_steps"))
    if ls is not None and ls > 0:
        manifest.logging_steps = ls
    builder = RunBuilder(manifest, ignore=("step",))
    add_row = builder.add_row
    bad_steps = 0
    for i, row in enumerate(history):
        if not isinstance(row, dict):
            raise InputError(state_path, "log entry is not an object", f"log_history[{i}]")
        step = _as_int(row.get("step"))
        if step is None:
            bad_steps += 1
            continue
        if SUMMARY_KEYS.intersection(row):
            summary = {k: v for k, v in row.items() if isinstance(v, (int, float, str))}
            manifest.config["summary"] = summary
            builder.add_event(Event(step, "summary", "end-of-training summary row", summary))
            rest = {k: v for k, v in row.items() if k not in _SUMMARY_DROP and k not in _NOT_METRICS}
            if rest:  # anything else in that row is still a step's metric
                add_row(step, rest)
            continue
        if _is_eval_row(row):
            add_row(step, {k: v for k, v in row.items() if k not in _NOT_METRICS})
        else:
            add_row(step, row)  # the builder ignores "step"
        if progress is not None and i % 4096 == 0:
            progress(total * i // max(len(history), 1), total)
    if bad_steps:
        builder.warn(f"{state_path}: {bad_steps} log_history entries without an integer "
                     "'step' were skipped")
    if builder.skipped_values:
        builder.warn(f"{state_path}: {builder.skipped_values} non-numeric values ignored")

    found = find_args_file(state_path)
    args: dict[str, Any] = {}
    if found is not None:
        args_file, args = found
        manifest.config["args"] = args
        manifest.config["args_source"] = str(args_file)
        _apply_args(manifest, args)
    _attach_completions(state_path, builder, lambda: StateHints.from_state(state, args))
    if progress is not None:
        progress(total, total)
    return builder.build()


def _attach_completions(
    state_path: Path, builder: RunBuilder, hints: Callable[[], StateHints]
) -> None:
    """Add per-group rewards from a ``completions/`` folder next to the run, when present.

    ``hints`` is called only when there is such a folder (it scans the whole log)."""
    from rlvitals.importers import trl_completions

    root = state_path.parent
    if _CHECKPOINT_RE.match(root.name) and not (root / "completions").is_dir():
        root = root.parent
    comp = root / "completions"
    if not comp.is_dir() or not trl_completions.table_files(comp):
        return
    try:
        trl_completions.attach_groups(comp, builder, hints())
    except MissingExtraError as e:
        builder.warn(f"{comp}: completion tables not read: {e}")


register(
    Importer(
        name="trl_state",
        description="TRL / transformers trainer_state.json (log_history), file or output dir",
        sniff=_sniff,
        load=load_trl_state,
    )
)

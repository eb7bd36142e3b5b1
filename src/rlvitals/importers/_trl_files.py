"""The files of a TRL output directory besides its completions tables: ``trainer_state.json``
(where it is, its JSON, its eval rows) and a readable sibling config holding the GRPO arguments
(``rlvitals.importers._trl_tables`` reads the tables). Both TRL importers import these modules,
never each other.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Manifest
from rlvitals.trainers import apply_facts
from rlvitals.trainers import trl as trl_facts

__all__ = [
    "MAX_STATE_BYTES",
    "STATE_NAME",
    "StateHints",
    "apply_args",
    "find_args_file",
    "find_state",
    "is_checkpoint_dir",
    "is_eval_row",
    "read_args",
    "read_json",
    "state_hints_near",
    "step_int",
]

STATE_NAME = "trainer_state.json"
MAX_STATE_BYTES = 1 << 30
"""A bigger ``trainer_state.json`` is refused rather than parsed into memory (1 GiB)."""
MAX_ARGS_BYTES = 1 << 20
"""Sibling config files larger than this are not read."""
_NOT_METRICS = frozenset({"step", "epoch"})
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
_ARGS_SUFFIXES = (".json", ".yaml", ".yml")
_REWARD_FN_RE = re.compile(r"^rewards/(.+)/mean$")
_ARGS_KEYS = (
    "num_generations",
    "scale_rewards",
    "beta",
    "loss_type",
    "reward_weights",
    "num_generations_eval",
    "logging_steps",
    "max_completion_length",
    "epsilon",
    "epsilon_high",
    "temperature",
    "learning_rate",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "num_iterations",
    "multi_objective_aggregation",
    "importance_sampling_level",
)
"""GRPO arguments copied from a sibling config into ``manifest.config["args"]``."""


def is_checkpoint_dir(path: Path) -> bool:
    """True for a ``checkpoint-N`` folder."""
    return bool(_CHECKPOINT_RE.match(path.name))


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


def step_int(v: Any) -> int | None:
    """``v`` as an int64 step (ints and integral floats), or None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float) and math.isfinite(v) and v == int(v) and abs(v) < 2**63:
        return int(v)
    return None


def read_json(path: Path, limit: int) -> Any:
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
        raise InputError(
            path, f"invalid JSON: {e.msg}", f"line {e.lineno} column {e.colno}"
        ) from None
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


def apply_args(manifest: Manifest, args: dict[str, Any]) -> None:
    """Set group size, scaling, KL coefficient and estimator from GRPO arguments (the trainer
    facts of :mod:`rlvitals.trainers.trl`)."""
    apply_facts(manifest, trl_facts.facts(args), overwrite=True)


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
            step = step_int(row.get("step"))
            if step is not None and is_eval_row(row):
                evals.add(step)
            for k in row:
                m = _REWARD_FN_RE.match(k) if isinstance(k, str) else None
                if m:
                    funcs[m.group(1)] = None
        g = step_int(args.get("num_generations"))
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
        state = read_json(state_path, MAX_STATE_BYTES)
    except (InputError, OSError):
        return None
    if not isinstance(state, dict):
        return None
    found = find_args_file(state_path)
    return state_path, StateHints.from_state(state, found[1] if found else {})


_EVAL_ROW_CACHE: dict[tuple[Any, ...], bool] = {}


def is_eval_row(row: dict[str, Any]) -> bool:
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

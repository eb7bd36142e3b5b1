"""The files of a TRL output directory that both TRL importers read.

``trainer_state.json`` (where it is, its JSON, its eval rows), a readable sibling config holding
the GRPO arguments, and the ``completions/`` tables (``log_completions=True``). The
``trl_state`` importer attaches the tables to a run; the ``trl_completions`` importer reads them
with the state's hints. Both import this module, never each other.

The completions tables: on every log call TRL's ``GRPOTrainer`` (1.x) writes
``<output_dir>/completions/completions_<global_step:05d>.parquet`` with pandas: columns ``step``,
``prompt``, ``completion``, one column per reward function (named after the function), any
``log_extra`` columns, and ``advantage``. It holds the last generation batch before the log, in
generation order: the G completions of a prompt are consecutive rows. How a table becomes
groups:

- Reward of a row: the weighted sum of the reward-function columns (TRL's default
  ``sum_then_normalize``), NaN only when every function returned None. Reward functions are
  named by the ``rewards/<name>/mean`` keys of a ``trainer_state.json`` next to the folder; without
  one, every numeric column except ``step`` and ``advantage`` counts as a reward function.
  Weights come from a sibling config's ``reward_weights``; otherwise 1.
- Groups: runs of consecutive rows with the same prompt, cut into chunks of G. G is
  ``num_generations`` from a sibling config, else the greatest common divisor of the run lengths.
- Step: the ``step`` column. When the state is available, tables of steps with an eval row are
  skipped: the eval log call overwrites that step's training table with eval completions.

``pyarrow`` is an optional dependency (``pip install 'rlvitals[parquet]'``), imported on use.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Progress
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import GroupTable, Manifest, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import trl as trl_facts

__all__ = [
    "MAX_STATE_BYTES",
    "PARQUET_MAGIC",
    "STATE_NAME",
    "StateHints",
    "apply_args",
    "attach_groups",
    "find_args_file",
    "find_state",
    "is_checkpoint_dir",
    "is_eval_row",
    "pyarrow_parquet",
    "read_args",
    "read_json",
    "read_table_groups",
    "state_hints_near",
    "step_int",
    "table_files",
]

STATE_NAME = "trainer_state.json"
MAX_STATE_BYTES = 1 << 30
"""A bigger ``trainer_state.json`` is refused rather than parsed into memory (1 GiB)."""
MAX_ARGS_BYTES = 1 << 20
"""Sibling config files larger than this are not read."""
PARQUET_MAGIC = b"PAR1"
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
_NAME_RE = re.compile(r"^completions_(\d+)\.parquet$")
_RESERVED = frozenset({"step", "prompt", "completion", "advantage", "image", "images"})


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


# --- completions tables --------------------------------------------------------------------


def pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("reading TRL completions tables", "parquet", "pyarrow") from None
    return pq


def table_files(folder: Path) -> list[Path]:
    """``completions_<step>.parquet`` files of ``folder``, in step order."""
    found = []
    try:
        for p in folder.iterdir():
            m = _NAME_RE.match(p.name)
            if m and p.is_file():
                found.append((int(m.group(1)), p))
    except OSError:
        return []
    return [p for _, p in sorted(found)]


def _arrow_errors() -> tuple[type[BaseException], ...]:
    import pyarrow as pa

    return (
        pa.ArrowException,
        OSError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        NotImplementedError,
        OverflowError,
    )


def _prompt_key(v: Any) -> str:
    if isinstance(v, str):
        return v
    return json.dumps(v, sort_keys=True, default=str)


def _read_one(
    path: Path, hints: Any
) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray | None]:
    """``(steps (n,), prompt keys (n,), rewards (n,), advantages (n,) or None)`` of one table."""
    pq = pyarrow_parquet()
    import pyarrow as pa

    try:
        schema = pq.read_schema(path)
    except _arrow_errors() as e:
        raise InputError(path, f"not a readable parquet file: {_one_line(e)}") from None
    names = list(schema.names)
    for need in ("step", "prompt"):
        if need not in names:
            raise InputError(path, f"no '{need}' column; not a TRL completions table")
    numeric = [
        n
        for n in names
        if n not in _RESERVED
        and (
            pa.types.is_floating(schema.field(n).type)
            or pa.types.is_integer(schema.field(n).type)
            or pa.types.is_boolean(schema.field(n).type)
            or pa.types.is_null(schema.field(n).type)
        )
    ]
    funcs = [n for n in names if hints is not None and n in hints.reward_funcs]
    reward_cols = funcs or numeric
    if not reward_cols:
        raise InputError(path, "no reward columns (numeric columns besides step and advantage)")
    cols = ["step", "prompt", *reward_cols] + (["advantage"] if "advantage" in names else [])
    try:
        table = pq.read_table(path, columns=cols)
        steps_raw = table.column("step").to_pylist()
        prompts = [_prompt_key(v) for v in table.column("prompt").to_pylist()]
        per_func = [
            np.asarray(table.column(c).to_pylist(), dtype=np.float64).reshape(-1)
            for c in reward_cols
        ]
        adv = (
            np.asarray(table.column("advantage").to_pylist(), dtype=np.float64).reshape(-1)
            if "advantage" in names
            else None
        )
    except (*_arrow_errors(), RecursionError) as e:
        raise InputError(path, f"cannot read table: {_one_line(e)}") from None
    steps = np.zeros(len(steps_raw), dtype=np.int64)
    for i, s in enumerate(steps_raw):
        if isinstance(s, bool) or not isinstance(s, int) or not -(1 << 63) <= s < (1 << 63):
            raise InputError(path, f"'step' is not an integer: {s!r:.40}", f"row {i}")
        steps[i] = s
    weights = None
    if (
        hints is not None
        and hints.reward_weights
        and funcs
        and len(hints.reward_weights) == len(hints.reward_funcs)
    ):
        wmap = dict(zip(hints.reward_funcs, hints.reward_weights))
        weights = [wmap[c] for c in reward_cols]
    stack = np.stack(per_func, axis=1) if per_func else np.zeros((len(steps), 0))
    if weights is not None:
        stack = stack * np.asarray(weights)
    with np.errstate(invalid="ignore"):
        all_nan = np.isnan(stack).all(axis=1)
        rewards = np.where(all_nan, np.nan, np.nansum(stack, axis=1))
    return steps, prompts, rewards, adv


def _runs(prompts: list[str]) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` of consecutive equal prompts."""
    out, start = [], 0
    for i in range(1, len(prompts) + 1):
        if i == len(prompts) or prompts[i] != prompts[start]:
            out.append((start, i))
            start = i
    return out


def read_table_groups(
    files: list[Path],
    hints: Any = None,
    progress: Progress | None = None,
    warnings: list[str] | None = None,
) -> tuple[GroupTable | None, int | None]:
    """Read TRL completion tables into a :class:`GroupTable` and the group size used.

    Args:
        files: ``completions_<step>.parquet`` paths.
        hints: :class:`StateHints` or None.
        progress: ``(done_bytes, total_bytes)`` callback.
        warnings: list to append notes to.

    Returns ``(table or None when no training table was read, G or None)``.
    """
    warnings = [] if warnings is None else warnings
    sizes = [p.stat().st_size for p in files]
    total, done = sum(sizes), 0
    tables = []
    skipped_eval = []
    for p, size in zip(files, sizes):
        steps, prompts, rewards, adv = _read_one(p, hints)
        done += size
        if progress is not None:
            progress(done, total)
        if steps.size and hints is not None and int(steps[0]) in hints.eval_steps:
            skipped_eval.append(int(steps[0]))
            continue
        if steps.size:
            tables.append((p, steps, prompts, rewards, adv))
    if skipped_eval:
        warnings.append(
            f"{files[0].parent}: {len(skipped_eval)} tables hold eval completions (steps "
            f"{_few(skipped_eval)}) and were not used as training groups"
        )
    if hints is None and files:
        warnings.append(
            f"{files[0].parent}: no trainer_state.json next to this folder, so eval tables "
            "cannot be told from training ones; every table was read as training groups"
        )
    if not tables:
        return None, None
    runs = [_runs(t[2]) for t in tables]
    g = hints.group_size if hints is not None else None
    if g is None:
        g = reduce(math.gcd, (b - a for rs in runs for a, b in rs), 0) or None
    step_l, rew_l, pr_l, adv_l = [], [], [], []
    has_adv = all(t[4] is not None for t in tables)
    uneven = 0
    for (_p, steps, prompts, rewards, adv), rs in zip(tables, runs):
        for a, b in rs:
            if g and (b - a) % g:
                uneven += 1
            chunk = g or (b - a)
            for s in range(a, b, chunk):
                e = min(s + chunk, b)
                step_l.append(int(steps[s]))
                rew_l.append(rewards[s:e])
                pr_l.append(prompts[s])
                adv_l.append(adv[s:e] if has_adv else None)
    if uneven:
        warnings.append(
            f"{files[0].parent}: {uneven} runs of one prompt are not a multiple of G={g} rows"
        )
    table = GroupTable.from_lists(step_l, rew_l, pr_l, None, adv_l if has_adv else None)
    return table, g


def attach_groups(
    folder: Path, builder: RunBuilder, hints: Any = None, progress: Progress | None = None
) -> None:
    """Read ``folder``'s completion tables into ``builder.groups`` (and its group size)."""
    files = table_files(folder)
    table, g = read_table_groups(files, hints, progress, builder.warnings)
    if table is None:
        return
    builder.groups = table
    if builder.manifest.group_size is None:
        sizes = np.unique(table.sizes())
        if g is not None and sizes.size == 1 and int(sizes[0]) == g:
            builder.manifest.group_size = g
    builder.manifest.config["completions_tables"] = len(files)


def _few(xs: list[int], n: int = 5) -> str:
    head = ", ".join(str(x) for x in xs[:n])
    return head + (", ..." if len(xs) > n else "")


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return (msg[0] if msg else type(e).__name__)[:200]

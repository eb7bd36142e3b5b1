"""TRL's completions tables (``log_completions=True``): how a table becomes per-group rewards.

On every log call TRL's ``GRPOTrainer`` (1.x) writes
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
Read by both TRL importers (``trl_state`` attaches the tables to a run, ``trl_completions``
reads them alone).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Progress
from rlvitals.importers._groups import Samples, prompt_keys
from rlvitals.importers._siblings import numbered_entries
from rlvitals.importers._trl_files import StateHints
from rlvitals.recording.run import GroupTable, RunBuilder

__all__ = [
    "PARQUET_MAGIC",
    "attach_groups",
    "pyarrow_parquet",
    "read_table_groups",
    "table_files",
]

PARQUET_MAGIC = b"PAR1"
_NAME_RE = re.compile(r"^completions_(\d+)\.parquet$")
_RESERVED = frozenset({"step", "prompt", "completion", "advantage", "image", "images"})


def pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("reading TRL completions tables", "parquet", "pyarrow") from None
    return pq


def table_files(folder: Path) -> list[Path]:
    """``completions_<step>.parquet`` files of ``folder``, in step order."""
    try:
        return [p for _, p in numbered_entries(folder, _NAME_RE, Path.is_file)]
    except OSError:
        return []


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
        prompts = prompt_keys(table.column("prompt").to_pylist())
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


def read_table_groups(
    files: list[Path],
    hints: StateHints | None = None,
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
            tables.append((steps, prompts, rewards, adv))
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
    samples = Samples(digest=False)  # a group's prompt id is its prompt's text
    for steps, prompts, rewards, adv in tables:
        samples.add_block(steps, prompts, rewards, adv)
    table, g, uneven = samples.table(hints.group_size if hints is not None else None)
    if uneven:
        warnings.append(
            f"{files[0].parent}: {uneven} runs of one prompt are not a multiple of G={g} rows"
        )
    return table, g


def attach_groups(
    files: list[Path],
    builder: RunBuilder,
    hints: StateHints | None = None,
    progress: Progress | None = None,
) -> bool:
    """Read completion tables into ``builder.groups`` (and its group size, when every group has
    the G used); False when none of them holds training completions."""
    table, g = read_table_groups(files, hints, progress, builder.warnings)
    if table is None:
        return False
    builder.groups = table
    if builder.manifest.group_size is None:
        sizes = np.unique(table.sizes())
        if g is not None and sizes.size == 1 and int(sizes[0]) == g:
            builder.manifest.group_size = g
    builder.manifest.config["completions_tables"] = len(files)
    return True


def _few(xs: list[int], n: int = 5) -> str:
    head = ", ".join(str(x) for x in xs[:n])
    return head + (", ..." if len(xs) > n else "")


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return (msg[0] if msg else type(e).__name__)[:200]

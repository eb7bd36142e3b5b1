"""ms-swift output directories: ``args.json``, ``logging.jsonl``, ``completions.jsonl``.

Shared by :mod:`~rlvitals.importers.ms_swift` (``logging.jsonl``) and
:mod:`~rlvitals.importers.ms_swift_completions`. Read from ms-swift 4.6.0 (PyPI):
``swift/trainers/patcher.py`` (``add_train_message``: ``'global_step/max_steps': '12/500'``),
``swift/rlhf_trainers/grpo_trainer.py`` (``GRPOTrainer.log``: the completions table, one JSON
line of equal-length lists per log call, ``"step"`` as strings), ``swift/utils/io_utils.py``
(``JsonlWriter``: ``json.dumps(obj, ensure_ascii=False) + "\\n"``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers._groups import Samples, prompt_keys
from rlvitals.importers._lines import iter_json_lines
from rlvitals.importers._siblings import read_config
from rlvitals.importers._source import is_stream

__all__ = ["NOT_REWARDS", "args_near", "read_completions", "split_step"]

ARGS_NAME = "args.json"
MAX_ARGS_BYTES = 4 << 20
NOT_REWARDS = frozenset(
    {"step", "prompt", "completion", "advantages", "entropy", "num_turns", "solution", "images"}
)
"""Columns of ``completions.jsonl`` that are not reward functions."""
_NUMBER_TYPES = frozenset({int, float, type(None)})
_FLOAT_TYPES = frozenset({int, float})
_BATCH = 1 << 16
_STEP_OF = re.compile(r"^\s*([0-9]{1,18})\s*/\s*[0-9]{1,18}\s*$")


def split_step(v: Any) -> int | None:
    """``"12/500"`` → 12 (``global_step/max_steps``, Megatron ``iteration``); None otherwise.

    >>> split_step("12/500"), split_step("x/2"), split_step(3)
    (12, None, None)
    """
    if not isinstance(v, str):
        return None
    m = _STEP_OF.match(v)
    return int(m.group(1)) if m else None


def args_near(path: Path) -> dict[str, Any] | None:
    """The ``args.json`` next to ``path`` (ms-swift saves it in ``output_dir``), or None."""
    if is_stream(path):
        return None
    p = path.parent / ARGS_NAME
    return read_config(p, MAX_ARGS_BYTES) if p.is_file() else None


def _weights(args: dict[str, Any] | None, n: int) -> list[float] | None:
    w = (args or {}).get("reward_weights")
    if isinstance(w, list) and len(w) == n and all(isinstance(x, (int, float)) for x in w):
        return [float(x) for x in w]
    return None


def _numeric(col: list[Any]) -> bool:
    """True when every cell is a number (not a bool) or None."""
    return set(map(type, col)) <= _NUMBER_TYPES


class _Batch:
    """Rows of many lines, as plain lists, moved into :class:`Samples` every :data:`_BATCH`
    rows: per line, only C-level list work; numpy once per batch."""

    def __init__(self, samples: Samples, weight: float) -> None:
        self.samples = samples
        self.weight = weight
        self.steps: list[int] = []
        self.keys: list[Any] = []
        self.rewards: list[Any] = []
        self.adv: list[Any] = []
        self.has_adv = True
        self.known: dict[Any, int] = {}

    def step_cells(self, path: Path, steps: list[Any], where: str) -> None:
        """Add the ``step`` cells of one line (``"12"`` strings, or ints); InputError otherwise."""
        try:
            unique = set(steps)
        except TypeError:  # a list or dict cell
            raise InputError(path, "'step' holds a non-step value", where) from None
        known = self.known
        for s in unique:
            if s in known:
                continue
            if isinstance(s, str) and s.isascii() and s.strip().isdigit() and len(s) < 19:
                known[s] = int(s)
            elif type(s) is int and abs(s) < 2**63:
                known[s] = s
            else:
                raise InputError(path, f"'step' holds {str(s)[:30]!r}, not a step", where)
        if len(unique) == 1:
            self.steps.extend([known[steps[0]]] * len(steps))
        else:
            self.steps.extend(map(known.__getitem__, steps))
        if len(known) > _BATCH:  # bounded: steps seen long ago are not seen again
            self.known = {}

    def flush(self) -> None:
        if not self.steps:
            return
        rewards = np.array(self.rewards, dtype=np.float64)  # None → NaN
        if self.weight != 1.0:
            rewards *= self.weight
        adv = np.array(self.adv, dtype=np.float64) if self.has_adv else None
        self.samples.add_block(np.array(self.steps, dtype=np.int64), self.keys, rewards, adv)
        self.steps, self.keys, self.rewards, self.adv = [], [], [], []


def read_completions(
    path: Path,
    warnings: list[str],
    reward_funcs: list[str] | None = None,
    args: dict[str, Any] | None = None,
    progress=None,
) -> tuple[Samples, list[str]]:
    """Per-sample rewards of a ``completions.jsonl``: ``(samples, reward function columns)``.

    A row's reward is the sum of its reward-function columns (weighted by ``reward_weights``
    from ``args.json`` when given; NaN only when every function gave None); the functions are
    ``reward_funcs`` (the ``rewards/<f>/mean`` keys of ``logging.jsonl``) when known, else every
    numeric column but :data:`NOT_REWARDS`. Lines are read column by column and batched into
    numpy arrays, not row by row.
    """
    samples = Samples()
    funcs: list[str] | None = list(reward_funcs) if reward_funcs else None
    batch: _Batch | None = None
    batch_use: list[str] = []
    weights: list[float] = []
    for lineno, obj in iter_json_lines(path, warnings, progress):
        where = f"line {lineno}"
        if type(obj) is not dict or type(obj.get("step")) is not list:
            raise InputError(path, 'expected {"step": [...], "prompt": [...], ...} per line', where)
        steps = obj["step"]
        n = len(steps)
        if not all(type(v) is list and len(v) == n for v in obj.values()):
            raise InputError(path, "columns of one line differ in length", where)
        if funcs is None:
            funcs = [k for k, v in obj.items() if k not in NOT_REWARDS and _numeric(v)]
        use = [f for f in funcs if f in obj]
        if not use and reward_funcs:  # the metric names did not match: find the columns
            funcs = [k for k, v in obj.items() if k not in NOT_REWARDS and _numeric(v)]
            use = [f for f in funcs if f in obj]
        if not use:
            raise InputError(path, "no reward-function column", where)
        for f in use:
            if not _numeric(obj[f]):
                raise InputError(path, f"reward {f!r} holds a non-number", where)
        if batch is None or use != batch_use:
            if batch is not None:
                batch.flush()
            w = _weights(args, len(use)) or [1.0] * len(use)
            batch_use, weights = use, w
            batch = _Batch(samples, w[0] if len(use) == 1 else 1.0)
        if n == 0:
            continue
        batch.step_cells(path, steps, where)
        if len(use) == 1:
            batch.rewards.extend(obj[use[0]])
        else:
            total = np.zeros(n)
            seen = np.zeros(n, dtype=bool)
            for f, wf in zip(use, weights):
                col = obj[f]
                x = np.array(col, dtype=np.float64)
                if None in col:
                    none = np.fromiter((v is None for v in col), bool, n)
                    total += np.where(none, 0.0, wf * x)
                    seen |= ~none
                else:
                    total += wf * x
                    seen[:] = True
            total[~seen] = np.nan
            batch.rewards.extend(total.tolist())
        adv = obj.get("advantages")
        if adv is None:
            batch.has_adv = False
            batch.adv.extend([None] * n)
        elif set(map(type, adv)) <= _FLOAT_TYPES:
            batch.adv.extend(adv)
        else:  # anything but a number is unknown (NaN)
            batch.adv.extend(float(v) if type(v) in _FLOAT_TYPES else None for v in adv)
        prompts = obj.get("prompt")
        batch.keys.extend(prompt_keys(prompts) if prompts is not None else [None] * n)
        if len(batch.steps) >= _BATCH:
            batch.flush()
    if batch is not None:
        batch.flush()
    return samples, funcs or []

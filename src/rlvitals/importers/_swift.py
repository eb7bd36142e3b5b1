"""ms-swift output directories: ``args.json``, ``logging.jsonl``, ``completions.jsonl``.

Shared by :mod:`~rlvitals.importers.ms_swift` (``logging.jsonl``) and
:mod:`~rlvitals.importers.ms_swift_completions`. Read from ms-swift 4.6.0 (PyPI):
``swift/trainers/patcher.py`` (``add_train_message``: ``'global_step/max_steps': '12/500'``),
``swift/rlhf_trainers/grpo_trainer.py`` (``GRPOTrainer.log``: the completions table, one JSON
line of equal-length lists per log call, ``"step"`` as strings), ``swift/utils/io_utils.py``
(``JsonlWriter``: ``json.dumps(obj, ensure_ascii=False) + "\\n"``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers._groups import Samples
from rlvitals.importers._lines import iter_json_lines
from rlvitals.importers._source import is_stream

__all__ = ["NOT_REWARDS", "args_near", "read_completions", "split_step"]

ARGS_NAME = "args.json"
MAX_ARGS_BYTES = 4 << 20
NOT_REWARDS = frozenset(
    {"step", "prompt", "completion", "advantages", "entropy", "num_turns", "solution", "images"}
)
"""Columns of ``completions.jsonl`` that are not reward functions."""
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
    try:
        if not p.is_file() or p.stat().st_size > MAX_ARGS_BYTES:
            return None
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _weights(args: dict[str, Any] | None, n: int) -> list[float] | None:
    w = (args or {}).get("reward_weights")
    if isinstance(w, list) and len(w) == n and all(isinstance(x, (int, float)) for x in w):
        return [float(x) for x in w]
    return None


def read_completions(
    path: Path,
    warnings: list[str],
    reward_funcs: list[str] | None = None,
    args: dict[str, Any] | None = None,
    progress=None,
) -> tuple[Samples, list[str]]:
    """Per-sample rewards of a ``completions.jsonl``: ``(samples, reward function columns)``.

    A row's reward is the sum of its reward-function columns (weighted by ``reward_weights``
    from ``args.json`` when given); the functions are ``reward_funcs`` (the ``rewards/<f>/mean``
    keys of ``logging.jsonl``) when known, else every numeric column but :data:`NOT_REWARDS`.
    """
    samples = Samples()
    funcs: list[str] | None = list(reward_funcs) if reward_funcs else None
    for lineno, obj in iter_json_lines(path, warnings, progress):
        where = f"line {lineno}"
        if not isinstance(obj, dict) or not isinstance(obj.get("step"), list):
            raise InputError(path, 'expected {"step": [...], "prompt": [...], ...} per line', where)
        steps = obj["step"]
        n = len(steps)
        cols = {k: v for k, v in obj.items() if isinstance(v, list) and len(v) == n}
        if len(cols) != len(obj):
            raise InputError(path, "columns of one line differ in length", where)
        if funcs is None:
            funcs = [
                k
                for k, v in cols.items()
                if k not in NOT_REWARDS
                and all(
                    x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                    for x in v
                )
            ]
        use = [f for f in funcs if f in cols]
        if not use and reward_funcs:  # the metric names did not match: find the columns
            funcs = [
                k
                for k, v in cols.items()
                if k not in NOT_REWARDS
                and all(
                    x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))
                    for x in v
                )
            ]
            use = [f for f in funcs if f in cols]
        if not use:
            raise InputError(path, "no reward-function column", where)
        w = _weights(args, len(use)) or [1.0] * len(use)
        prompts = cols.get("prompt") or [None] * n
        adv = cols.get("advantages")
        for i in range(n):
            s = steps[i]
            if isinstance(s, str) and s.isascii() and s.strip().isdigit() and len(s) < 19:
                step = int(s)
            elif isinstance(s, int) and not isinstance(s, bool) and abs(s) < 2**63:
                step = s
            else:
                raise InputError(path, f"'step' holds {str(s)[:30]!r}, not a step", where)
            total = 0.0
            seen = False
            for f, wf in zip(use, w):
                x = cols[f][i]
                if isinstance(x, (int, float)) and not isinstance(x, bool):
                    total += wf * float(x)
                    seen = True
                elif x is not None:
                    raise InputError(path, f"reward {f!r} holds a non-number", where)
            a = adv[i] if adv is not None else None
            a = float(a) if isinstance(a, (int, float)) and not isinstance(a, bool) else None
            p = prompts[i]
            key = p if isinstance(p, str) else json.dumps(p, sort_keys=True, default=str)
            samples.add(step, key, total if seen else float("nan"), a)
    return samples, funcs or []

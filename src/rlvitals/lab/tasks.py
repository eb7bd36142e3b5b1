"""Tasks with verifiable rewards and a difficulty dial, for the lab.

A task makes prompts of a given *size* (the number of operands, the length of a list) and
checks completions against the one right answer. Difficulty comes in two layers:

- the size: bigger problems are harder for the same policy;
- the **level** (L0-L6), defined as in He et al. (ICML 2026) by the base policy's pass rate:
  L0 ~ 95%, L1 80%, L2 60%, L3 40%, L4 20%, L5 5%, L6 1% (:data:`LEVEL_TARGETS`). A level is a
  mixture of sizes whose pass rates, measured on the base policy, average to the target
  (:func:`level_mixture`; the measuring lives in :mod:`rlvitals.lab.policy`);
- the **mixed level** LM (:data:`MIXED_LEVEL` = 7): the paper's regime, an explicit mixture of
  easy, medium and hard sizes (:data:`MIXED_MIXTURE`, sizes 3 / 10 / 13 at 0.3 / 0.4 / 0.3 of
  the ``sum`` task) whose groups collapse on both sides: He et al.'s GRPO runs sit at an ACR
  near 0.4 at about 40% accuracy, with all-right and all-wrong groups both common. The
  calibrated levels L0-L6 each mix two neighbouring sizes, so at a hard level nearly every
  collapsed group is all-wrong and only AVSPO's "push failures down" half is exercised.

Training and held-out evaluation prompts never overlap: a prompt belongs to the evaluation
split when a hash of its text falls in the evaluation fifth (:func:`split_of`), whatever seed or
level drew it. Rewards are binary (exact answer) or partial credit (share of answer characters
in the right place). Pure Python; no torch.

>>> task = get_task("sum")
>>> import random
>>> p = task.make(3, random.Random(0))
>>> p.prompt, p.answer
('6+6+0=', '12')
>>> task.reward(p, "12"), task.reward(p, "13"), task.reward(p, "13", partial=True)
(1.0, 0.0, 0.5)
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "EVAL_FRACTION",
    "LEVEL_NAMES",
    "LEVEL_TARGETS",
    "MIXED_LEVEL",
    "MIXED_MIXTURE",
    "TASKS",
    "Problem",
    "Task",
    "get_task",
    "level_mixture",
    "level_name",
    "make_prompts",
    "partial_credit",
    "split_of",
]

LEVEL_TARGETS: tuple[float, ...] = (0.95, 0.80, 0.60, 0.40, 0.20, 0.05, 0.01)
"""Base-policy pass rate of levels L0..L6 (He et al. 2026)."""
MIXED_LEVEL = len(LEVEL_TARGETS)
"""Level number of the mixed level LM (the paper's regime: collapse on both sides)."""
MIXED_MIXTURE: dict[int, float] = {3: 0.3, 10: 0.4, 13: 0.3}
"""Sizes and weights of the mixed level (ours, issue 26: chosen on the tiny ``sum`` policy,
whose pass rates at T = 1 are about 0.93, 0.52 and 0.04 at these sizes; GRPO's ACR on it is
about 0.4, split between all-right and all-wrong groups, docs/lab.md). It is not calibrated:
with another model or task the same sizes give other pass rates."""
LEVEL_NAMES: tuple[str, ...] = (*(f"L{i}" for i in range(len(LEVEL_TARGETS))), "LM")
"""Printed name of every level number (0..7)."""
EVAL_FRACTION = 5
"""One prompt text in this many (by hash) belongs to the held-out evaluation split."""
SPLITS = ("train", "eval")


@dataclass(frozen=True)
class Problem:
    """One prompt with its verifiable answer.

    Attributes:
        prompt: the text the policy continues, e.g. ``"3+4+5="``.
        answer: the one right completion, e.g. ``"12"``.
        size: the task size it was drawn at.
    """

    prompt: str
    answer: str
    size: int


@dataclass(frozen=True)
class Task:
    """A generated task family.

    Attributes:
        name: registry name.
        summary: one line.
        sizes: the sizes it can draw (easiest first).
        sft_sizes: the sizes the warm-start phase trains on.
        answer_chars: the longest answer in characters (sets ``max_completion_length``).
    """

    name: str
    summary: str
    sizes: tuple[int, ...]
    sft_sizes: tuple[int, ...]
    answer_chars: int

    def make(self, size: int, rng: random.Random) -> Problem:
        """Draw one problem of ``size``."""
        return _MAKERS[self.name](size, rng)

    def reward(self, problem: Problem, completion: str, *, partial: bool = False) -> float:
        """1.0 for the exact answer (leading/trailing spaces ignored), else 0.0; with
        ``partial`` the share of answer characters in the right place (:func:`partial_credit`)."""
        got = _first_token(completion)
        if got == problem.answer:
            return 1.0
        return partial_credit(got, problem.answer) if partial else 0.0


def _first_token(text: str) -> str:
    """The completion up to its first whitespace after any leading whitespace: a general LM may
    go on after the answer; the tiny lab policy stops with an end-of-sequence token."""
    m = re.match(r"\s*(\S*)", text)
    return m.group(1) if m else ""


def partial_credit(got: str, answer: str) -> float:
    """Share of positions where ``got`` and ``answer`` agree, over the longer of the two.

    Numbers are aligned on their last digit (units with units), other answers on their first
    character.

    >>> partial_credit("13", "12"), partial_credit("2", "12"), partial_credit("1243", "1234")
    (0.5, 0.5, 0.5)
    """
    if not got or not answer:
        return 0.0
    if got.isdigit() and answer.isdigit():
        got, answer = got[::-1], answer[::-1]
    same = sum(a == b for a, b in zip(got, answer))
    return same / max(len(got), len(answer))


def _sum(size: int, rng: random.Random) -> Problem:
    xs = [rng.randint(0, 9) for _ in range(size)]
    return Problem("+".join(map(str, xs)) + "=", str(sum(xs)), size)


def _sort(size: int, rng: random.Random) -> Problem:
    xs = [rng.randint(0, 9) for _ in range(size)]
    return Problem("".join(map(str, xs)) + ">", "".join(map(str, sorted(xs))), size)


_MAKERS = {"sum": _sum, "sort": _sort}

TASKS: dict[str, Task] = {
    "sum": Task(
        "sum",
        "add single digits: '3+4+5=' -> '12'; size = number of operands",
        sizes=tuple(range(2, 17)),
        sft_sizes=tuple(range(1, 13)),
        answer_chars=3,
    ),
    "sort": Task(
        "sort",
        "sort digits: '3142>' -> '1234'; size = number of digits",
        sizes=tuple(range(2, 17)),
        sft_sizes=tuple(range(1, 13)),
        answer_chars=16,
    ),
}
"""Every task by name."""


def get_task(name: str) -> Task:
    """The task called ``name``; an unknown name raises ValueError listing the valid ones."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid: {', '.join(TASKS)}")
    return TASKS[name]


def split_of(prompt: str) -> str:
    """``"eval"`` for one prompt text in :data:`EVAL_FRACTION` (by SHA-1), else ``"train"``.

    >>> split_of("2+2="), split_of("3+4=")
    ('train', 'eval')
    """
    h = int(hashlib.sha1(prompt.encode("utf-8")).hexdigest()[:8], 16)
    return "eval" if h % EVAL_FRACTION == 0 else "train"


def level_name(level: int) -> str:
    """``"L3"`` for a calibrated level, ``"LM"`` for :data:`MIXED_LEVEL`.

    >>> level_name(3), level_name(MIXED_LEVEL)
    ('L3', 'LM')
    """
    return LEVEL_NAMES[level]


def level_mixture(pass_rates: dict[int, float], target: float) -> dict[int, float]:
    """Sizes and weights whose pass rates average to ``target``.

    Args:
        pass_rates: size -> base-policy pass rate, as measured.
        target: the level's pass rate.

    The sizes are ordered by measured pass rate (easiest first); the two neighbours that bracket
    the target are mixed so the weighted pass rate equals it. A target above every measured
    rate gives the easiest size alone, below every rate the hardest.

    >>> level_mixture({1: 0.9, 2: 0.5, 3: 0.1}, 0.4)
    {2: 0.75, 3: 0.25}
    >>> level_mixture({1: 0.9, 2: 0.5}, 0.99)
    {1: 1.0}
    """
    if not pass_rates:
        raise ValueError("no measured pass rates")
    order = sorted(pass_rates, key=lambda s: (-pass_rates[s], s))
    rates = [pass_rates[s] for s in order]
    if target >= rates[0]:
        return {order[0]: 1.0}
    if target <= rates[-1]:
        return {order[-1]: 1.0}
    for i in range(len(order) - 1):
        hi, lo = rates[i], rates[i + 1]
        if lo <= target <= hi:
            if hi - lo < 1e-12:
                return {order[i]: 1.0}
            w = round((target - lo) / (hi - lo), 6)
            mix = {order[i]: w, order[i + 1]: round(1.0 - w, 6)}
            return {s: v for s, v in mix.items() if v > 0}
    return {order[-1]: 1.0}  # pragma: no cover - the loop always brackets


def make_prompts(
    task: Task,
    mixture: dict[int, float],
    n: int,
    *,
    seed: int,
    split: str,
    exclude: Sequence[str] = (),
) -> list[Problem]:
    """``n`` problems of the ``split`` ("train" or "eval"), sizes drawn from ``mixture``.

    Deterministic for ``seed``. Problems of the other split are redrawn, so the two splits never
    share a prompt; small prompt spaces (one operand has ten prompts) may repeat a prompt inside
    a split. ``exclude`` lists prompt texts to redraw as well.
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    sizes = sorted(mixture)
    weights = [mixture[s] for s in sizes]
    rng = random.Random(f"{task.name}:{split}:{seed}")
    banned = set(exclude)
    out: list[Problem] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 1000 * max(n, 1):
            raise RuntimeError(f"could not draw {n} {split} prompts of sizes {sizes}")
        size = rng.choices(sizes, weights)[0]
        p = task.make(size, rng)
        if split_of(p.prompt) != split or p.prompt in banned:
            continue
        out.append(p)
    return out

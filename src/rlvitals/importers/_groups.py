"""Per-sample rows → per-group rewards: consecutive runs of one prompt, cut into groups of G.

Trainers write a step's completions prompt by prompt (TRL's and ms-swift's ``RepeatSampler``,
NeMo-RL's ``repeat_interleave``): the G completions of a prompt are consecutive rows. Shared by
the importers of per-sample logs (ms-swift ``completions.jsonl``, NeMo-RL dumps).
"""

from __future__ import annotations

import math
from functools import reduce
from typing import Any

from rlvitals.recording.run import GroupTable

__all__ = ["Samples"]


class Samples:
    """Collects ``(step, prompt key, reward, advantage)`` rows; :meth:`table` groups them."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.prompts: list[Any] = []
        self.rewards: list[float] = []
        self.advantages: list[float] = []
        self.has_adv = True

    def add(self, step: int, prompt: Any, reward: float, advantage: float | None) -> None:
        self.steps.append(step)
        self.prompts.append(prompt)
        self.rewards.append(reward)
        if advantage is None:
            self.has_adv = False
        self.advantages.append(math.nan if advantage is None else advantage)

    def __len__(self) -> int:
        return len(self.steps)

    def _runs(self) -> list[tuple[int, int]]:
        out = []
        start = 0
        for i in range(1, len(self.steps) + 1):
            if (
                i == len(self.steps)
                or self.steps[i] != self.steps[start]
                or self.prompts[i] != self.prompts[start]
            ):
                out.append((start, i))
                start = i
        return out

    def table(self, g: int | None) -> tuple[GroupTable | None, int | None, int]:
        """``(groups, G used, runs whose length is not a multiple of G)``.

        Without ``g``, runs of one prompt are cut at the greatest common divisor of their
        lengths (a prompt sampled twice in a step gives a run of 2G).
        """
        if not self.steps:
            return None, g, 0
        runs = self._runs()
        if g is None:
            g = reduce(math.gcd, (b - a for a, b in runs), 0) or None
        st, rw, pr, ad = [], [], [], []
        uneven = 0
        for a, b in runs:
            if g and (b - a) % g:
                uneven += 1
            chunk = g or (b - a)
            for s in range(a, b, chunk):
                e = min(s + chunk, b)
                st.append(self.steps[s])
                rw.append(self.rewards[s:e])
                pr.append(str(self.prompts[s]))
                ad.append(self.advantages[s:e])
        table = GroupTable.from_lists(st, rw, pr, None, ad if self.has_adv else None)
        return table, g, uneven

"""Per-sample rows → per-group rewards: consecutive runs of one prompt, cut into groups of G.

Trainers write a step's completions prompt by prompt (TRL's and ms-swift's ``RepeatSampler``,
NeMo-RL's ``repeat_interleave``): the G completions of a prompt are consecutive rows. Shared by
the importers of per-sample logs (ms-swift ``completions.jsonl``, NeMo-RL dumps, TRL's
completions tables).

Memory: rows are kept as numpy arrays (8 bytes per step, reward and advantage), prompts only
where a run of one prompt starts; rows added one at a time wait in a small buffer.
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
from typing import Any

import numpy as np

from rlvitals.recording.run import GroupTable

__all__ = ["Samples", "prompt_keys"]

_FLUSH = 1 << 16
"""Rows added one by one are moved into numpy arrays every this many rows."""
_MERGE = 256
"""Blocks are merged into one array every this many blocks (bounds per-array overhead)."""
MAX_KEY_CHARS = 64
"""A longer prompt key is kept as a 64-bit digest (a group's prompt id, not its text)."""


def _key(prompt: Any) -> Any:
    if isinstance(prompt, str) and len(prompt) > MAX_KEY_CHARS:
        return (
            "blake2b:"
            + hashlib.blake2b(prompt.encode("utf-8", "replace"), digest_size=8).hexdigest()
        )
    return prompt


def prompt_keys(prompts: list[Any]) -> list[Any]:
    """Prompt cells as comparable keys: strings as they are, chat messages as compact JSON.

    >>> prompt_keys(["a", [{"role": "user", "content": "b"}]])
    ['a', '[{"content": "b", "role": "user"}]']
    """
    if set(map(type, prompts)) == {str}:
        return prompts
    return [
        p if isinstance(p, str) else json.dumps(p, sort_keys=True, default=str) for p in prompts
    ]


class Samples:
    """Collects ``(step, prompt key, reward, advantage)`` rows; :meth:`table` groups them.

    A new run of one prompt starts where the step or the prompt key changes from the row
    before. ``None`` as a prompt key means "no prompt id": such runs are told apart by the step
    only, and their groups carry no prompt. ``digest``: keep a prompt longer than
    :data:`MAX_KEY_CHARS` as its digest (False: as it is).
    """

    def __init__(self, digest: bool = True) -> None:
        self._key = _key if digest else lambda prompt: prompt
        self._steps: list[np.ndarray] = []
        self._rewards: list[np.ndarray] = []
        self._adv: list[np.ndarray] = []
        self._starts: list[np.ndarray] = []  # global row index of each run start
        self.prompts: list[Any] = []  # the prompt key of each run
        self.has_adv = True
        self._n = 0
        self._last: tuple[int | None, Any] = (None, None)
        self._buf: tuple[list[int], list[float], list[float]] = ([], [], [])
        self._buf_starts: list[int] = []

    def add(self, step: int, prompt: Any, reward: float, advantage: float | None) -> None:
        """One row."""
        if (step, prompt) != self._last or self._n == 0:
            self._buf_starts.append(self._n)
            self.prompts.append(self._key(prompt))
            self._last = (step, prompt)
        s, r, a = self._buf
        s.append(step)
        r.append(reward)
        if advantage is None:
            self.has_adv = False
            a.append(math.nan)
        else:
            a.append(advantage)
        self._n += 1
        if len(s) >= _FLUSH:
            self._flush()

    def add_block(
        self,
        steps: np.ndarray,
        prompts: list[Any],
        rewards: np.ndarray,
        advantages: np.ndarray | None,
    ) -> None:
        """Many rows at once: ``steps`` ``(n,)`` int64, ``prompts`` ``n`` keys, ``rewards``
        ``(n,)`` float64, ``advantages`` ``(n,)`` float64 or None (NaN = unknown)."""
        n = len(prompts)
        if n == 0:
            return
        self._flush()
        new = np.empty(n, dtype=bool)
        new[0] = self._n == 0 or (int(steps[0]), prompts[0]) != self._last
        if n > 1:
            new[1:] = steps[1:] != steps[:-1]
            new[1:] |= np.fromiter(map(operator.ne, prompts[1:], prompts[:-1]), bool, n - 1)
        at = np.flatnonzero(new)
        self._starts.append(at + self._n)
        self.prompts.extend(self._key(prompts[i]) for i in at.tolist())
        self._steps.append(np.asarray(steps, dtype=np.int64))
        self._rewards.append(np.asarray(rewards, dtype=np.float64))
        if advantages is None:
            self.has_adv = False
            self._adv.append(np.full(n, np.nan))
        else:
            self._adv.append(np.asarray(advantages, dtype=np.float64))
        self._n += n
        self._last = (int(steps[-1]), prompts[-1])
        if len(self._steps) >= _MERGE:
            self._merge()

    def _merge(self) -> None:
        for parts in (self._steps, self._rewards, self._adv, self._starts):
            if len(parts) > 1:
                parts[:] = [np.concatenate(parts)]

    def _flush(self) -> None:
        s, r, a = self._buf
        if s:
            self._steps.append(np.asarray(s, dtype=np.int64))
            self._rewards.append(np.asarray(r, dtype=np.float64))
            self._adv.append(np.asarray(a, dtype=np.float64))
            self._buf = ([], [], [])
        if self._buf_starts:
            self._starts.append(np.asarray(self._buf_starts, dtype=np.int64))
            self._buf_starts = []

    def __len__(self) -> int:
        return self._n

    def prompt_g(self) -> int | None:
        """The G that runs of one prompt give: the greatest common divisor of their lengths
        (a prompt drawn twice in a row makes a run of 2G); None when a row has no prompt key
        or no run is longer than one row."""
        if not self._n or any(p is None for p in self.prompts):
            return None
        self._flush()
        self._merge()
        g = int(np.gcd.reduce(np.diff(np.r_[self._starts[0], self._n])))
        return g if g >= 2 else None

    def forget_prompts(self) -> None:
        """Drop the prompt keys: runs are then told apart by the step only."""
        self._flush()
        self._merge()
        if not self._n:
            return
        steps = self._steps[0]
        self._starts = [np.flatnonzero(np.r_[True, steps[1:] != steps[:-1]])]
        self.prompts = [None] * len(self._starts[0])
        self._last = (int(steps[-1]), None)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(steps, rewards, advantages)`` of every row, ``(m,)`` each."""
        self._flush()
        self._merge()
        if not self._steps:
            return np.zeros(0, np.int64), np.zeros(0), np.zeros(0)
        return self._steps[0], self._rewards[0], self._adv[0]

    def table(self, g: int | None) -> tuple[GroupTable | None, int | None, int]:
        """``(groups, G used, runs whose length is not a multiple of G)``.

        Without ``g``, runs of one prompt are cut at the greatest common divisor of their
        lengths (a prompt sampled twice in a step gives a run of 2G).
        """
        if not self._n:
            return None, g, 0
        steps, rewards, adv = self.arrays()
        starts = self._starts[0]
        m = self._n
        ends = np.r_[starts[1:], m]
        lengths = ends - starts
        if g is None:
            g = int(np.gcd.reduce(lengths)) or None
        uneven = int(np.count_nonzero(lengths % g)) if g else 0
        if g:
            per_run = (lengths + g - 1) // g
            run = np.repeat(np.arange(len(starts)), per_run)
            k = np.arange(run.shape[0]) - np.repeat(np.cumsum(per_run) - per_run, per_run)
            cs = starts[run] + k * g
        else:
            run = np.arange(len(starts))
            cs = starts
        offsets = np.r_[cs, m].astype(np.int64)
        gstep = steps[cs]
        keys = self.prompts
        prompt = None
        if any(p is not None for p in keys):
            prompt = np.empty(len(keys), dtype=object)
            prompt[:] = [None if p is None else str(p) for p in keys]
            prompt = prompt[run]
        if gstep.shape[0] > 1 and bool((gstep[1:] < gstep[:-1]).any()):
            order = np.argsort(gstep, kind="stable")
            sizes = np.diff(offsets)[order]
            new_off = np.zeros(len(sizes) + 1, dtype=np.int64)
            np.cumsum(sizes, out=new_off[1:])
            rows = np.repeat(offsets[:-1][order] - new_off[:-1], sizes) + np.arange(m)
            gstep, offsets, rewards, adv = gstep[order], new_off, rewards[rows], adv[rows]
            prompt = None if prompt is None else prompt[order]
        table = GroupTable(
            step=gstep.astype(np.int64),
            offsets=offsets,
            rewards=rewards,
            prompt=prompt,
            advantages=adv if self.has_adv else None,
        )
        return table, g, uneven

"""A live monitor: feed a training run step by step, run the doctor over a sliding window.

:class:`Monitor` keeps the last ``window`` steps of scalars and per-group rewards in memory
(bounded: older steps are evicted as newer ones arrive), builds a :class:`~rlvitals.Run` of that
window on demand and runs :func:`rlvitals.doctor.diagnose` over it. :meth:`Monitor.check`
returns only *new* findings: a detector ID alerts again only after a check in which it was
silent (its condition cleared). It is trainer-agnostic; the TRL callback owns one, and a custom
loop can use it directly (here the second prompt's group starts failing every completion at
step 50):

>>> from rlvitals import Manifest, Monitor
>>> mon = Monitor(Manifest(trainer="mine", group_size=4), window=200)
>>> for step in range(1, 101):
...     mon.feed_scalars(step, {"loss": 0.1, "grad_norm": 0.3})
...     second = [1.0, 0.0, 1.0, 0.0] if step < 50 else [0.0] * 4
...     mon.feed_groups(step, [1.0] * 4 + second, [0] * 4 + [1] * 4)
>>> check = mon.check()
>>> [(f.id, f.onset_step) for f in check.new if f.id == "DEGENERATE_GROUPS"]
[('DEGENERATE_GROUPS', 50)]
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvitals.recording.run import GroupTable, Manifest, Run, RunBuilder

__all__ = ["DEFAULT_MONITOR_WINDOW", "Monitor", "MonitorCheck"]

DEFAULT_MONITOR_WINDOW = 200
"""Steps the monitor keeps and diagnoses. Long enough for the detectors' own windows (the
doctor judges runs of at least ~30 steps; ACR windows are 25 steps)."""


@dataclass
class MonitorCheck:
    """Result of one :meth:`Monitor.check`.

    Attributes:
        step: the last step fed when the check ran.
        findings: every finding over the window, worst first.
        new: the findings whose detector ID was silent at the previous check.
    """

    step: int | None
    findings: list[Any] = field(default_factory=list)
    new: list[Any] = field(default_factory=list)


class Monitor:
    """Sliding-window doctor over a live run (see the module docstring).

    Args:
        manifest: what is known about the run (trainer, group size, reward range).
        window: steps kept and diagnosed (the most recent ones).
        config: passed to :func:`rlvitals.doctor.diagnose` (detector knobs).
    """

    def __init__(
        self,
        manifest: Manifest | None = None,
        *,
        window: int = DEFAULT_MONITOR_WINDOW,
        config: Any = None,
    ):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
        self.manifest = manifest or Manifest()
        self.window = window
        self.config = config
        self._scalars: OrderedDict[int, dict[str, float]] = OrderedDict()
        self._groups: OrderedDict[int, list[tuple[np.ndarray, np.ndarray, Any, Any]]] = (
            OrderedDict()
        )
        self._active: set[str] = set()
        self.last_step: int | None = None

    # -- feeding ------------------------------------------------------------------------------

    def feed_scalars(self, step: int, values: dict[str, Any]) -> None:
        """Add one logged row; numbers only (others are ignored). Rows of one step merge."""
        row = self._scalars.setdefault(int(step), {})
        for key, v in values.items():
            x = _number(v)
            if x is not None:
                row[str(key)] = x
        self._advance(int(step))

    def feed_groups(
        self,
        step: int,
        rewards: Any,
        group_ids: Any,
        *,
        prompts: Any = None,
        advantages: Any = None,
    ) -> None:
        """Add one batch of per-group rewards ``(n,)`` with group ids ``(n,)`` at ``step``.

        ``prompts``: one id per distinct group in sorted-id order, or None; ``advantages``
        ``(n,)`` or None. Several batches at one step accumulate.
        """
        r = _host(rewards).astype(np.float64, copy=False).reshape(-1)
        g = _host(group_ids).reshape(-1)
        if r.shape != g.shape:
            raise ValueError(f"rewards {r.shape} and group_ids {g.shape} differ")
        a = None if advantages is None else _host(advantages).astype(np.float64).reshape(-1)
        self._groups.setdefault(int(step), []).append((r, g, prompts, a))
        self._advance(int(step))

    def _advance(self, step: int) -> None:
        if self.last_step is None or step > self.last_step:
            self.last_step = step
        oldest = self.last_step - self.window + 1
        for store in (self._scalars, self._groups):
            for s in [s for s in store if s < oldest]:
                del store[s]

    # -- reading ------------------------------------------------------------------------------

    @property
    def n_steps(self) -> int:
        """Steps currently held (scalars or groups)."""
        return len(set(self._scalars) | set(self._groups))

    def run(self) -> Run:
        """The window as a :class:`Run` (manifest copied, series and groups of the last steps)."""
        builder = RunBuilder(copy.deepcopy(self.manifest))
        for step in sorted(self._scalars):
            builder.add_row(step, self._scalars[step])
        builder.groups = self._group_table()
        return builder.build()

    def _group_table(self) -> GroupTable | None:
        steps: list[int] = []
        rewards: list[np.ndarray] = []
        advs: list[np.ndarray] = []
        prompts: list[Any] = []
        have_adv = have_prompts = True
        for step in sorted(self._groups):
            for r, g, p, a in self._groups[step]:
                order = np.argsort(g, kind="stable")
                gs = g[order]
                cuts = np.flatnonzero(gs[1:] != gs[:-1]) + 1
                parts = np.split(order, cuts)
                plist = list(p) if p is not None else None
                if plist is None or len(plist) != len(parts):
                    have_prompts = False
                for j, rows in enumerate(parts):
                    steps.append(step)
                    rewards.append(r[rows])
                    prompts.append(plist[j] if have_prompts and plist is not None else None)
                    if a is None:
                        have_adv = False
                    else:
                        advs.append(a[rows])
        if not steps:
            return None
        return GroupTable.from_lists(
            steps,
            rewards,
            prompts=prompts if have_prompts else None,
            advantages=advs if have_adv else None,
        )

    def diagnose(self) -> Any:
        """:func:`rlvitals.doctor.diagnose` over the window; returns its ``Diagnosis``."""
        from rlvitals.doctor import diagnose

        return diagnose(self.run(), self.config)

    def check(self) -> MonitorCheck:
        """Diagnose the window; report which detector IDs fired that were silent last time."""
        diagnosis = self.diagnose()
        findings = list(diagnosis.findings)
        ids = {f.id for f in findings}
        new = [f for f in findings if f.id not in self._active]
        seen: set[str] = set()
        new = [f for f in new if not (f.id in seen or seen.add(f.id))]
        self._active = ids
        return MonitorCheck(step=self.last_step, findings=findings, new=new)


def _host(x: Any) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if type(v).__module__.startswith("torch") and getattr(v, "ndim", 1) == 0:
        return float(v.item())
    return None

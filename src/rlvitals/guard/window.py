"""The monitor's bounded memory: the last W steps as columns, per-group rewards as per-step series.

Per-group rewards are reduced when they arrive: a step's groups become the per-step series the
doctor's vitals derive from a recording's groups, by the same functions
(:func:`~rlvitals.signal.group_stats`, then :func:`rlvitals.vitals.groups.collapse_by_step`,
the body of :func:`~rlvitals.vitals.groups.group_series`, and
:func:`~rlvitals.signal.advantage_stats`): ``acr`` and its split, ``n_groups``, ``group_size``,
``reward_mean``, ``pass_rate``, ``expected_acr``, the mean group reward std and the advantages'
``adv_std`` / ``adv_zero_frac`` (of the advantages given, else of GRPO's recomputed). The window
keeps, per step, only those numbers and the few per-group arrays needed to redo them when the
reward range widens; memory is O(W x groups per step), whatever the run's length.

What is live and cannot be post hoc: a group's expected collapse uses its prompt's pass rate in
the prompt's last :data:`~rlvitals.vitals.groups.NEIGHBOURS` earlier steps (a recording also
looks at later ones); a prompt not seen before takes the step's pass rate.
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlvitals._median import median
from rlvitals.guard.columns import MAX_COLUMNS, Columns
from rlvitals.guard.inputs import number, prompt_list
from rlvitals.recording.metrics import canonical_key
from rlvitals.recording.run import Run
from rlvitals.signal import DEFAULT_TAU, advantage_stats, advantages_from_stats, group_stats
from rlvitals.vitals.evidence import GROUP_SERIES
from rlvitals.vitals.groups import NEIGHBOURS, collapse_by_step

__all__ = ["GROUP_SERIES", "MAX_PROMPTS", "StepWindow", "known_range"]

MAX_PROMPTS = 1 << 16
"""Prompts whose recent pass rates are remembered for expected collapse (least recent dropped)."""

FILL_SERIES = ("adv_std", "adv_zero_frac", "reward_mean", "reward_std")
"""Series the groups supply only when the trainer logged none in the window."""
_GROUP_PREFIX = "\x00groups/"
"""Columns of the group series (a prefix no logged key has)."""


@dataclass
class _StepGroups:
    """One step's scorable groups, reduced: enough to redo the split and pass rates for a new
    range. Its fields are those of :class:`~rlvitals.signal.GroupStats` that
    :func:`~rlvitals.vitals.groups.collapse_by_step` reads, so it reads them as it reads the
    statistics of a recording's groups."""

    mean: Any  # (k,) group mean, scorable groups only
    count: Any  # (k,) scorable rewards per group
    collapsed: Any  # (k,) bool
    size: Any  # (k,) rows per group
    std: Any  # (k,) group reward std
    own: Any  # (k,) the prompt's earlier mean reward, NaN when unknown
    own_count: Any  # (k,) rewards behind ``own``
    reward_mean: float
    adv_std: float
    adv_zero: float
    group_size: float = math.nan  # the mean group size (derived with the series)

    @property
    def scorable(self) -> np.ndarray:
        return np.ones(self.mean.shape[0], dtype=bool)


class StepWindow:
    """The last ``window`` steps of a run (module docstring).

    Args:
        window: steps kept.
        tau: collapse tolerance.
        reward_range: ``(min, max)`` when known (the manifest's); else [0, 1] widened to the
            rewards seen, as the vitals infer it from a recording.
    """

    def __init__(
        self,
        window: int,
        *,
        tau: float = DEFAULT_TAU,
        reward_range: tuple[float, float] | None = None,
    ):
        self.window = window
        self.tau = tau
        self.train = Columns(window)
        self.eval = Columns(window)
        self.known_range = reward_range
        self.seen = (math.inf, -math.inf)
        self.groups: OrderedDict[int, _StepGroups] = OrderedDict()
        self._pending: dict[str, Any] | None = None  # the current step's raw groups
        self._prompts: OrderedDict[Any, deque] = OrderedDict()
        self._keys: dict[str, tuple[str, bool]] = {}
        self._range_used: tuple[float, float] | None = None
        self.unknown: dict[str, None] = {}
        self.rows = 0
        self._manifest_cache: tuple | None = None

    # -- scalars ---------------------------------------------------------------------------------

    def add_scalars(self, step: int, values: dict[str, Any]) -> None:
        """One logged row; numbers only (bools count, others are skipped)."""
        row_t = row_e = None
        for raw, v in values.items():
            x = number(v)
            if x is None:
                continue
            key = self._keys.get(raw)
            if key is None:
                name, is_eval, known = canonical_key(str(raw))
                if not known and len(self.unknown) < MAX_COLUMNS:
                    self.unknown[str(raw)] = None
                key = self._keys[raw] = (name, is_eval)
            name, is_eval = key
            if is_eval:
                if row_e is None:
                    row_e, _ = self.eval.slot(step)
                self.eval.put(row_e, name, x)
            else:
                if row_t is None:
                    row_t = self._train_slot(step)
                self.train.put(row_t, name, x)
        self.rows += 1

    def _train_slot(self, step: int) -> int:
        if self._pending is not None and self._pending["step"] != step:
            self.close_step()
        row, evicted = self.train.slot(step)
        if evicted is not None:
            self.groups.pop(evicted, None)
        groups = self.groups
        if groups and next(reversed(groups)) > step:  # a rewind drops later steps' groups
            for s in [s for s in groups if s > step]:
                del groups[s]
        return row

    # -- groups ---------------------------------------------------------------------------------

    def add_groups(
        self,
        step: int,
        rewards: np.ndarray,
        group_ids: np.ndarray,
        prompts: Any = None,
        advantages: np.ndarray | None = None,
    ) -> None:
        """One batch of a step's groups; several batches of one step are reduced together."""
        pend = self._pending
        if pend is not None and pend["step"] != step:
            self.close_step()
            pend = None
        if pend is None:
            pend = self._pending = {"step": step, "parts": []}
        pend["parts"].append((rewards, group_ids, prompts, advantages))
        pend["row"] = self._train_slot(step)
        self._reduce(pend)

    def close_step(self) -> None:
        """The current step's groups are complete: remember its prompts' pass rates."""
        pend, self._pending = self._pending, None
        if pend is None:
            return
        for key, total, cnt in pend.get("prompt_sums", ()):
            hist = self._prompts.get(key)
            if hist is None:
                hist = self._prompts[key] = deque(maxlen=NEIGHBOURS)
            else:
                self._prompts.move_to_end(key)
            hist.append((total, cnt))
        while len(self._prompts) > MAX_PROMPTS:
            self._prompts.popitem(last=False)

    def _reduce(self, pend: dict[str, Any]) -> None:
        parts = pend["parts"]
        if len(parts) == 1:
            r, g, prompts, adv = parts[0]
            plist = prompt_list(prompts)
        else:
            offset = 0
            rs, gs, advs, plist = [], [], [], []
            for r_i, g_i, p_i, a_i in parts:
                uniq, inv = np.unique(g_i, return_inverse=True)
                rs.append(r_i)
                gs.append(inv.reshape(-1) + offset)
                advs.append(a_i)
                pl = prompt_list(p_i)
                plist = None if plist is None or pl is None else plist + pl
                offset += uniq.shape[0]
            r, g = np.concatenate(rs), np.concatenate(gs)
            adv = None if any(a is None for a in advs) else np.concatenate(advs)
        st = group_stats(r, g, tau=self.tau)
        if not bool(st.scorable.any()):
            return
        finite = r[np.isfinite(r)]
        if finite.size:
            lo, hi = float(finite.min()), float(finite.max())
            self.seen = (min(self.seen[0], lo), max(self.seen[1], hi))
        ok = st.scorable
        count = st.count.astype(np.float64)[ok]
        mean = st.mean.astype(np.float64)[ok]
        if adv is None:
            adv = advantages_from_stats(st, "grpo")
        a_std, a_zero = _advantage_stats(np.asarray(adv), r)
        k = mean.shape[0]
        sg = _StepGroups(
            mean=mean,
            count=count,
            collapsed=np.asarray(st.collapsed)[ok],
            size=np.asarray(st.size, dtype=np.float64)[ok],
            std=np.asarray(st.std, dtype=np.float64)[ok],
            own=np.full(k, math.nan),
            own_count=np.zeros(k),
            reward_mean=float((mean * count).sum() / count.sum()),
            adv_std=a_std,
            adv_zero=a_zero,
        )
        if plist is not None and len(plist) == st.n_groups:
            plist = [plist[i] for i in np.flatnonzero(ok).tolist()]
        else:
            plist = None
        pend["prompt_sums"] = self._own_rates(sg, plist)
        self._store(pend["step"], sg, pend["row"])

    def _own_rates(self, sg: _StepGroups, plist: list | None) -> list[tuple[Any, float, float]]:
        """Fill ``sg.own`` from each group's prompt's earlier steps; returns this step's
        ``(prompt, reward sum, count)`` per group, for :meth:`close_step` to remember."""
        sums: list[tuple[Any, float, float]] = []
        if plist is None or len(plist) != len(sg.mean):
            return sums
        own, own_n, prompts = sg.own, sg.own_count, self._prompts
        for j, key in enumerate(plist):
            if key is None:
                continue
            hist = prompts.get(key)
            if hist:
                tot = sum(h[0] for h in hist)
                n = sum(h[1] for h in hist)
                if n > 0:
                    own[j], own_n[j] = tot / n, n
            sums.append((key, float(sg.mean[j] * sg.count[j]), float(sg.count[j])))
        return sums

    def _store(self, step: int, sg: _StepGroups, row: int) -> None:
        self.groups[step] = sg
        self.groups.move_to_end(step)
        rng = self.reward_range()
        if rng == self._range_used:
            self._write(step, self._derive(sg, *rng), row)
        else:
            self._refresh_range()

    # -- the window as series -------------------------------------------------------------------

    def reward_range(self) -> tuple[float, float]:
        """The range splits and pass rates use: the known one, else [0, 1] widened to the
        rewards seen (what :func:`rlvitals.vitals.rewards.reward_range` infers)."""
        if self.known_range is not None:
            return self.known_range
        lo, hi = self.seen
        if not math.isfinite(lo):
            return 0.0, 1.0
        return min(0.0, lo), max(1.0, hi)

    def _derive(self, sg: _StepGroups, lo: float, hi: float) -> dict[str, float]:
        """The step's group series in the range ``[lo, hi]``: the vitals' own
        :func:`~rlvitals.vitals.groups.collapse_by_step`, each group's expected collapse at its
        prompt's pass rate in its earlier steps (live: no later ones)."""
        own = np.clip((sg.own - lo) / (hi - lo), 0.0, 1.0)  # NaN where unknown
        step_of = np.zeros(sg.mean.shape[0], dtype=np.intp)
        c = collapse_by_step(
            sg, step_of, 1, np.array([sg.reward_mean]), r_min=lo, r_max=hi, tau=self.tau, own=own
        )
        sg.group_size = float(c.group_size[0])
        values = {name: float(getattr(c, name)[0]) for name in GROUP_SERIES}
        values["adv_std"], values["adv_zero_frac"] = sg.adv_std, sg.adv_zero
        values["reward_mean"], values["reward_std"] = sg.reward_mean, float(c.group_std_mean[0])
        return values

    def _write(self, step: int, values: dict[str, float], row: int | None = None) -> None:
        if row is None:
            row = self.train.row_of(step)
            if row is None:
                return
        put = self.train.put
        for name, x in values.items():
            put(row, _GROUP_PREFIX + name, x, force=True)

    def _refresh_range(self) -> None:
        rng = self.reward_range()
        if rng == self._range_used:
            return
        self._range_used = rng
        for step, sg in self.groups.items():
            self._write(step, self._derive(sg, *rng))

    def tables(self) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, dict[str, np.ndarray]]:
        """``(steps, series, eval_steps, eval_series)`` of the window, group series merged in."""
        self._refresh_range()
        steps, cols = self.train.table()
        series = {k: v for k, v in cols.items() if not k.startswith(_GROUP_PREFIX)}
        if self.groups:
            for name in GROUP_SERIES:
                series[name] = cols[_GROUP_PREFIX + name]
            for name in FILL_SERIES:
                have = series.get(name)
                if have is None or not np.isfinite(have).any():
                    series[name] = cols[_GROUP_PREFIX + name]
        esteps, eseries = self.eval.table()
        return steps, series, esteps, eseries

    def run(self, manifest: Any) -> Run:
        """The window as the :class:`Run` the doctor reads, ``manifest``'s gaps (reward range,
        G) filled from its groups."""
        steps, series, esteps, eseries = self.tables()
        return Run(
            manifest=self.manifest_for(manifest),
            steps=steps,
            series=series,
            eval_steps=esteps,
            eval_series=eseries,
            unknown_keys=list(self.unknown),
        )

    def manifest_for(self, m: Any) -> Any:
        """``m`` with what the window's groups know (reward range, G) where it says nothing;
        one copy per distinct filling, reused while ``m`` is the same object."""
        fill: dict[str, Any] = {}
        if self.groups:
            if m.reward_min is None or m.reward_max is None:
                fill["reward_min"], fill["reward_max"] = self.reward_range()
            if m.group_size is None:
                fill["group_size"] = self.typical_group_size()
        key = tuple(fill.items())
        hit = self._manifest_cache
        if hit is None or hit[0] is not m or hit[1] != key:
            hit = self._manifest_cache = (
                m,
                key,
                dataclasses.replace(m, config=dict(m.config), **fill),
            )
        return hit[2]

    @property
    def n_steps(self) -> int:
        return self.train.n

    def typical_group_size(self) -> int | None:
        """The median group size of the window's steps with groups, or None."""
        if not self.groups:
            return None
        return round(float(median([sg.group_size for sg in self.groups.values()])))


def known_range(manifest: Any) -> tuple[float, float] | None:
    """The manifest's reward range when it gives a usable one (finite, max > min)."""
    lo, hi = manifest.reward_min, manifest.reward_max
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        return None
    return float(lo), float(hi)


def _advantage_stats(adv: np.ndarray, rewards: np.ndarray) -> tuple[float, float]:
    """:func:`~rlvitals.signal.advantage_stats` of one step, NaN advantages (and those of NaN
    rewards) left out as :func:`~rlvitals.signal.advantage_stats_by` (what the vitals use)
    leaves them out. Not ``advantage_stats_by`` itself: its weighted bincounts cost ~0.12 ms
    more at 512 x 16 (benchmarks/RESULTS.md, Live guard), for the same numbers to ~1e-12."""
    keep = ~np.isnan(rewards)
    if adv.dtype.kind == "f":
        keep &= ~np.isnan(adv)
    if not keep.all():
        if not keep.any():
            return math.nan, math.nan
        adv = adv[keep]
    return advantage_stats(adv)

"""``Run``: the one in-memory form of a training run that every importer produces.

Columnar and numpy-backed: per-step scalar series share one sorted step index (NaN where a step
did not log a key); eval series have their own index; per-group rewards, when the source has them,
live in a :class:`GroupTable` (CSR layout: one flat rewards array plus offsets).

Build a ``Run`` row by row with :class:`RunBuilder`; it maps raw keys to canonical names
(:mod:`rlvitals.recording.metrics`), keeps unknown keys under their raw names, splits eval keys
off, and merges rows that share a step (later values win).

One module, about 600 lines: the run's types and :class:`RunBuilder`, the one way importers
make them, change together (a field of the run is filled by the builder, in the same place).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import struct
import typing
from array import array
from dataclasses import field
from typing import Any

import numpy as np

from rlvitals._record import record
from rlvitals.errors import InputError
from rlvitals.recording import memory as _memory
from rlvitals.recording.metrics import canonical_key, dialect_of

__all__ = ["Event", "GroupTable", "Manifest", "Run", "RunBuilder"]

SCHEMA_VERSION = 1
_CHECK_EVERY_VALUES = 1 << 20
_CHECK_EVERY_KEYS = 1 << 14
_BYTES_PER_VALUE = 18
"""A value held by :class:`RunBuilder`: a row index and a float64, arrays over-allocate a bit."""
_BYTES_PER_KEY = 700
"""A distinct raw key: its cache entry, canonical name, column arrays and dict slots."""


@record
class Manifest:
    """What is known about a run besides its series.

    Attributes:
        source: path the run was read from.
        format: importer that read it (``trl_state``, ``verl_console``, ``recording``, ...).
        trainer: ``trl``, ``verl``, ``openrlhf``, ``rlvitals`` (the lab), or None.
        group_size: completions per prompt (G), when known.
        scale_rewards: TRL's ``scale_rewards``: ``group``, ``batch`` or ``none``.
        reward_min, reward_max: reward range; None = unknown (vitals assume [0, 1] for binary).
        estimator: advantage estimator in rlvitals names (``grpo``, ``dr_grpo``, ``avspo``, ...;
            :mod:`rlvitals.vocabulary`), or the trainer's own name when the vocabulary lacks it.
        adv_scale: what the advantages are divided by (:class:`rlvitals.vocabulary.Scale`:
            ``group_std``, ``batch_std``, ``none``, ``virtual``), when known.
        kl_coef: KL coefficient (beta); 0 means no KL term.
        filters_zero_var: True when the trainer drops zero-variance groups before the update
            (DAPO dynamic sampling, veRL ``filter_groups``, ...): its logged batch looks clean.
        logging_steps: training steps between logged rows, when known.
        step_key: where the step numbers came from (``global_step``, ``train/global_step``,
            ``rollout/step``, ``'global_step/max_steps'``, ``line count x logging_steps``, ...).
        trainer_version: the trainer's version when the source states it (``trl 0.19.1``).
        reward_std_kind: what the logged ``reward_std`` is: ``group_mean`` (mean of per-group
            stds), ``batch`` (std of the whole batch), or None when unknown.
        config: anything else the source said about its configuration, raw.
    """

    source: str | None = None
    format: str | None = None
    trainer: str | None = None
    group_size: int | None = None
    scale_rewards: str | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    estimator: str | None = None
    adv_scale: str | None = None
    kl_coef: float | None = None
    filters_zero_var: bool | None = None
    logging_steps: int | None = None
    step_key: str | None = None
    trainer_version: str | None = None
    reward_std_kind: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    schema: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @staticmethod
    def check_field(key: str, value: Any) -> Any:
        """``value`` as the type field ``key`` holds (:data:`MANIFEST_FIELDS`), or None; raises
        TypeError naming the field and the value otherwise. ``config`` and unknown keys are
        returned as they are."""
        kind = MANIFEST_FIELDS.get(key)
        if value is None or kind is None:
            return value
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError(f"manifest field {key} must be true or false, got {value!r:.60}")
            return value
        if kind is str:
            if not isinstance(value, str):
                raise TypeError(f"manifest field {key} must be a string, got {value!r:.60}")
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"manifest field {key} must be a number, got {value!r:.60}")
        if kind is int:
            if not isinstance(value, numbers.Integral):
                raise TypeError(f"manifest field {key} must be an integer, got {value!r:.60}")
            return int(value)
        return int(value) if isinstance(value, numbers.Integral) else float(value)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Manifest:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        extra = {k: v for k, v in d.items() if k not in cls.__dataclass_fields__}
        m = cls(**known)
        if extra:
            m.config = {**extra, **m.config}
        return m


MANIFEST_FIELDS: dict[str, type] = {
    name: (typing.get_args(hint) or (hint,))[0]  # ``str | None`` holds a str
    for name, hint in typing.get_type_hints(Manifest).items()
    if name != "config"
}
"""The type each :class:`Manifest` field holds (besides ``config``, a dict), for the recording's
writer and reader alike: read from the field annotations, the one declaration."""


@record
class Event:
    """Something that happened at a step: an alert, a halt, dropped data, a note."""

    step: int | None
    kind: str
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@record
class GroupTable:
    """Per-group rewards of many steps, in CSR layout.

    Attributes:
        step: ``(k,)`` int64 step of each group.
        offsets: ``(k + 1,)`` int64; group ``i`` owns rows ``offsets[i]:offsets[i+1]``.
        rewards: ``(m,)`` float64, NaN = unscorable.
        prompt: ``(k,)`` object array of prompt ids/hashes, or None.
        lengths: ``(m,)`` float64 completion lengths, or None.
        advantages: ``(m,)`` float64 advantages the trainer used, or None.
    """

    step: np.ndarray
    offsets: np.ndarray
    rewards: np.ndarray
    prompt: np.ndarray | None = None
    lengths: np.ndarray | None = None
    advantages: np.ndarray | None = None

    def __post_init__(self) -> None:
        k = self.step.shape[0]
        if self.offsets.shape != (k + 1,):
            raise ValueError(f"offsets must have shape ({k + 1},), got {self.offsets.shape}")
        if int(self.offsets[-1]) != self.rewards.shape[0]:
            raise ValueError("offsets[-1] must equal the number of rewards")

    @property
    def n_groups(self) -> int:
        return int(self.step.shape[0])

    def sizes(self) -> np.ndarray:
        """``(k,)`` rows per group."""
        return np.diff(self.offsets)

    def row_group(self) -> np.ndarray:
        """``(m,)`` group position of every reward row."""
        return np.repeat(np.arange(self.n_groups), self.sizes())

    def row_step(self) -> np.ndarray:
        """``(m,)`` step of every reward row."""
        return np.repeat(self.step, self.sizes())

    def unique_steps(self) -> np.ndarray:
        return np.unique(self.step)

    @classmethod
    def from_lists(
        cls,
        steps: list[int],
        rewards: list[Any],
        prompts: list[Any] | None = None,
        lengths: list[Any] | None = None,
        advantages: list[Any] | None = None,
    ) -> GroupTable:
        """Build from one entry per group (each ``rewards[i]`` a sequence), sorted by step."""
        sizes = np.fromiter((len(r) for r in rewards), dtype=np.int64, count=len(rewards))
        order = np.argsort(np.asarray(steps, dtype=np.int64), kind="stable")

        def flat(rows: list[Any] | None) -> np.ndarray | None:
            if rows is None:
                return None
            parts = [np.asarray(rows[i], dtype=np.float64).reshape(-1) for i in order]
            return np.concatenate(parts) if parts else np.zeros(0)

        sizes = sizes[order]
        offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return cls(
            step=np.asarray(steps, dtype=np.int64)[order],
            offsets=offsets,
            rewards=flat(rewards),
            prompt=None if prompts is None else np.asarray(prompts, dtype=object)[order],
            lengths=flat(lengths),
            advantages=flat(advantages),
        )


@record
class Run:
    """A training run: per-step series, optional per-group rewards, manifest, events.

    Attributes:
        manifest: source, trainer and configuration.
        steps: ``(T,)`` int64 sorted unique training steps that logged anything.
        series: canonical name → ``(T,)`` float64, NaN where that step did not log the key.
        eval_steps, eval_series: the same for evaluation rows (names start with ``eval/``).
        groups: per-group rewards, or None.
        events: alerts, halts, dropped data, notes.
        unknown_keys: raw keys that were kept but not understood.
        warnings: things the reader noticed (torn last line, duplicate steps, ...).
    """

    manifest: Manifest = field(default_factory=Manifest)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    series: dict[str, np.ndarray] = field(default_factory=dict)
    eval_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    eval_series: dict[str, np.ndarray] = field(default_factory=dict)
    groups: GroupTable | None = None
    events: list[Event] = field(default_factory=list)
    unknown_keys: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def n_steps(self) -> int:
        return int(self.steps.shape[0])

    def get(self, name: str) -> np.ndarray | None:
        """The series ``name`` (train or ``eval/...``), or None when absent."""
        if name.startswith("eval/"):
            return self.eval_series.get(name)
        return self.series.get(name)

    def has(self, name: str) -> bool:
        """True when ``name`` exists and has at least one finite value."""
        s = self.get(name)
        return s is not None and bool(np.isfinite(s).any())

    def coverage(self, name: str) -> float:
        """Fraction of the series' steps at which ``name`` is finite."""
        s = self.get(name)
        if s is None or s.size == 0:
            return 0.0
        return float(np.isfinite(s).mean())

    def series_names(self) -> list[str]:
        return sorted(self.series) + sorted(self.eval_series)

    def with_metric_names(self, names: dict[str, str]) -> Run:
        """A copy in which the run's own keys ``names`` maps are read as canonical metrics.

        For keys logged under custom names (``{"my/pass_rate": "reward_mean"}``): the key, as
        listed in :attr:`unknown_keys`, becomes the canonical series; its ``eval/`` twin becomes
        the eval series. Where the canonical series already exists, the mapped key fills only
        its missing steps. A mapped key the run does not hold is noted in :attr:`warnings`.
        Nothing is modified in place.

        >>> b = RunBuilder()
        >>> b.add_row(1, {"my/pass_rate": 0.25, "eval_my/pass_rate": 0.5})
        >>> run = b.build().with_metric_names({"my/pass_rate": "reward_mean"})
        >>> run.series["reward_mean"].tolist(), run.eval_series["eval/reward_mean"].tolist()
        ([0.25], [0.5])
        >>> run.unknown_keys
        []
        """
        series, eval_series = dict(self.series), dict(self.eval_series)
        unknown, warnings = list(self.unknown_keys), list(self.warnings)
        for raw, name in names.items():
            found = False
            for table, key, target in (
                (series, raw, name),
                (eval_series, f"eval/{raw}", f"eval/{name}"),
            ):
                if key == target or key not in table:
                    continue
                found = True
                values = table.pop(key)
                old = table.get(target)
                table[target] = values if old is None else np.where(np.isnan(old), values, old)
            if found:
                unknown = [k for k in unknown if k != raw and canonical_key(k)[0] != f"eval/{raw}"]
            else:
                warnings.append(f"metric name {raw!r} (mapped to {name}) is not in this run")
        return dataclasses.replace(
            self, series=series, eval_series=eval_series, unknown_keys=unknown, warnings=warnings
        )


class RunBuilder:
    """Accumulates rows ``(step, {raw_key: value})`` into a :class:`Run` in bounded memory.

    Values are stored in ``array('d')`` columns (8 bytes each), so a million steps of twenty keys
    fit in well under 1 GB. Non-numeric values are ignored (and counted); ``None`` and the strings
    ``"NaN"``/``"nan"`` become NaN; ``inf`` stays inf.

    >>> b = RunBuilder()
    >>> b.add_row(1, {"train/reward": 0.5, "eval_reward": 0.4, "mystery": 2})
    >>> run = b.build()
    >>> run.series["reward_mean"].tolist(), run.eval_series["eval/reward_mean"].tolist()
    ([0.5], [0.4])
    >>> run.unknown_keys
    ['mystery']
    """

    def __init__(self, manifest: Manifest | None = None, *, ignore: tuple[str, ...] = ()):
        """``ignore``: raw keys that are never series (e.g. ``"step"`` inside each row)."""
        self.manifest = manifest or Manifest()
        self._steps = {False: array("q"), True: array("q")}
        # Per column: sparse (row index, value) arrays from add_row, and dense pieces from
        # add_columns (first row index, values of consecutive rows): 8 bytes a value, not 16.
        self._cols: dict[bool, dict[str, tuple[array, array, list]]] = {False: {}, True: {}}
        self._built = False
        self._key_cache: dict[str, list[Any]] = {}
        self.unknown: dict[str, None] = {}
        self.events: list[Event] = []
        self.warnings: list[str] = []
        self.groups: GroupTable | None = None
        self.skipped_values = 0
        self.dialect: str | None = None
        """A trainer whose keys break the prefix rules (:func:`~rlvitals.recording.metrics.
        dialect_of`); decided from the first row holding a ``val/`` key, unless set."""
        self._dialect_known = False
        self._n_values = 0  # values added so far, for the memory budget (_memory.limit)
        self._next_check = _CHECK_EVERY_VALUES
        for key in ignore:
            self._key_cache[key] = [None, False, None]

    def add_row(self, step: int, values: dict[str, Any]) -> None:
        """Add one logged row. Train and eval keys of the same row go to their own indexes."""
        # The hot path of every importer (a million rows of twenty keys): one cache lookup per
        # key, floats and ints converted inline, the step appended once per index.
        row_t = row_e = -1
        self._n_values += len(values)
        if self._n_values > self._next_check:
            self._check_memory()
        cache = self._key_cache
        for raw, v in values.items():
            entry = cache.get(raw)
            if entry is None:
                if not self._dialect_known and raw[:4].lower() == "val/":
                    self._dialect_known = True
                    self.dialect = self.dialect or dialect_of(values)
                entry = self._learn_key(raw)
            elif entry[0] is None:  # an ignored key
                continue
            t = type(v)
            if t is float:
                x = v
            else:
                x = _to_float(v)
                if x is None:
                    self.skipped_values += 1
                    continue
            col = entry[2]
            if col is None:
                col = entry[2] = self._column(entry[0], entry[1])
            if entry[1]:
                if row_e < 0:
                    row_e = len(self._steps[True])
                    self._steps[True].append(step)
                col[0].append(row_e)
            else:
                if row_t < 0:
                    row_t = len(self._steps[False])
                    self._steps[False].append(step)
                col[0].append(row_t)
            col[1].append(x)

    def add_columns(
        self,
        steps: np.ndarray,
        columns: dict[str, tuple[np.ndarray, np.ndarray]],
        *,
        count: bool = False,
    ) -> None:
        """Add ``len(steps)`` rows at once, column by column (what ``add_row`` per row would do).

        ``steps``: ``(n,)`` int64, one per row. ``columns``: raw key → ``(rows, values)``, the
        increasing positions ``(k,)`` in ``steps`` of the rows that logged the key and their
        ``(k,)`` float64 values. For importers of columnar text (CSV exports). ``count``: count
        the values against the memory budget as ``add_row`` counts its own (for rows that
        ``add_row`` would otherwise have taken).

        >>> b = RunBuilder()
        >>> b.add_columns(np.array([1, 2]), {"reward": (np.array([0, 1]), np.array([0.5, 0.7])),
        ...                                  "eval_reward": (np.array([1]), np.array([0.4]))})
        >>> run = b.build()
        >>> run.steps.tolist(), run.eval_steps.tolist(), run.series["reward_mean"].tolist()
        ([1, 2], [2], [0.5, 0.7])
        """
        steps = np.asarray(steps, dtype=np.int64)
        if count:
            self._n_values += sum(len(rows) for rows, _ in columns.values())
            if self._n_values > self._next_check:
                self._check_memory()
        if not self._dialect_known and any(k[:4].lower() == "val/" for k in columns):
            self._dialect_known = True
            self.dialect = self.dialect or dialect_of(columns)
        todo: dict[bool, list[tuple[list[Any], np.ndarray, np.ndarray]]] = {False: [], True: []}
        for raw, (rows, vals) in columns.items():
            entry = self._key_cache.get(raw) or self._learn_key(raw)
            if entry[0] is None or len(rows) == 0:
                continue
            todo[entry[1]].append((entry, np.asarray(rows, np.int64), vals))
        for is_eval, items in todo.items():
            if not items:
                continue
            logged = np.zeros(len(steps), dtype=bool)
            for _, rows, _ in items:
                logged[rows] = True
            used = np.flatnonzero(logged)
            pos = np.empty(len(steps), dtype=np.int64)
            pos[used] = np.arange(len(self._steps[is_eval]), len(self._steps[is_eval]) + len(used))
            self._steps[is_eval].frombytes(steps[used].tobytes())
            first = len(self._steps[is_eval]) - len(used)
            for entry, rows, vals in items:
                col = entry[2]
                if col is None:
                    col = entry[2] = self._column(entry[0], entry[1])
                if len(rows) == len(used):  # logged in every row: consecutive row indexes
                    col[2].append((first, np.array(vals, dtype=np.float64)))
                else:
                    col[0].frombytes(pos[rows].tobytes())
                    col[1].frombytes(np.asarray(vals, dtype=np.float64).tobytes())

    def add_block(
        self, keys: tuple[str, ...], steps: Any, values: Any, *, min_rows: int = 16
    ) -> None:
        """Rows of one key layout at once: ``steps`` (n,) and ``values``, the rows' numbers one
        row after the other (``array('d')`` or a list of floats, ``n * len(keys)``). Stores
        what ``add_row`` per row would, counted against the memory budget the same way; fewer
        than ``min_rows`` rows go through ``add_row`` (columns cost more for a few rows, e.g.
        two layouts taking turns). For importers that group consecutive rows of one layout."""
        n, k = len(steps), len(keys)
        if n == 0:
            return
        if n < min_rows or k == 0:
            for i, step in enumerate(steps):
                self.add_row(step, dict(zip(keys, values[i * k : (i + 1) * k])))
            return
        if isinstance(values, array):
            flat = np.frombuffer(values, dtype=np.float64)
        else:  # struct reads each float in C: a third of what np.array(list) spends on one
            flat = np.frombuffer(struct.pack(f"{len(values)}d", *values), dtype=np.float64)
        table = flat.reshape(n, k)
        rows = np.arange(n)
        self.add_columns(
            np.asarray(steps, dtype=np.int64),
            {key: (rows, table[:, j]) for j, key in enumerate(keys)},
            count=True,
        )

    def _learn_key(self, raw: str) -> list[Any]:
        """Cache entry ``[canonical name, is_eval, column or None]`` of a raw key."""
        name, is_eval, known = canonical_key(raw, self.dialect)
        if not known:
            self.unknown[raw] = None
        entry: list[Any] = [name, is_eval, self._cols[is_eval].get(name)]
        self._key_cache[raw] = entry
        if len(self._key_cache) % _CHECK_EVERY_KEYS == 0:
            self._check_memory()
        return entry

    def _column(self, name: str, is_eval: bool) -> tuple[array, array, list]:
        col = self._cols[is_eval].get(name)
        if col is None:
            col = (array("q"), array("d"), [])
            self._cols[is_eval][name] = col
        return col

    def add_event(self, event: Event) -> None:
        self.events.append(event)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def build(self, *, release: bool = False) -> Run:
        """The run so far. ``release``: free each column as soon as it is built, so memory
        peaks at the run plus one column rather than twice the values (an importer's last
        step); the builder cannot be used afterwards."""
        if self._built:
            raise RuntimeError("RunBuilder.build(release=True) was called; use a new builder")
        self._built = release
        steps, series = self._finish(False, release)
        esteps, eseries = self._finish(True, release)
        return Run(
            manifest=self.manifest,
            steps=steps,
            series=series,
            eval_steps=esteps,
            eval_series=eseries,
            groups=self.groups,
            events=self.events,
            unknown_keys=list(self.unknown),
            warnings=self.warnings,
        )

    def held_bytes(self) -> int:
        """Bytes this builder holds (columns and keys; an estimate)."""
        steps = sum(len(a) for a in self._steps.values())
        return (
            _BYTES_PER_VALUE * self._n_values
            + 8 * steps
            + _BYTES_PER_KEY * len(self._key_cache)
            + sum(len(k) for k in self._key_cache) * 2
        )

    def _check_memory(self, more: int = 0, what: str = "") -> None:
        """InputError when holding ``more`` bytes besides what is held would pass the budget
        (:mod:`rlvitals.recording.memory`: a small multiple of the input)."""
        self._next_check = self._n_values + _CHECK_EVERY_VALUES
        cap = _memory.limit()
        if cap is None:
            return
        held = self.held_bytes() + more
        if held > cap:
            keys = len(self._key_cache)
            raise InputError(
                self.manifest.source,
                f"memory limit: reading it would hold ~{held >> 20} MiB ({self._n_values} "
                f"values under {keys} distinct keys{what}), more than {_memory.limit_text()}",
            )

    def _finish(self, is_eval: bool, release: bool) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        raw_steps = (
            np.frombuffer(self._steps[is_eval], dtype=np.int64)
            if self._steps[is_eval]
            else np.zeros(0, np.int64)
        )
        steps, inv = np.unique(raw_steps, return_inverse=True)
        n_cols = len(self._cols[is_eval])
        self._check_memory(
            8 * n_cols * steps.shape[0],
            f"; {n_cols} series x {steps.shape[0]} steps as dense columns",
        )
        inv = inv.reshape(-1)
        repeated = steps.shape[0] < raw_steps.shape[0]
        out: dict[str, np.ndarray] = {}
        for name, (rows, vals, pieces) in self._cols[is_eval].items():
            col = np.full(steps.shape[0], np.nan)
            r = np.frombuffer(rows, dtype=np.int64)
            v = np.frombuffer(vals, dtype=np.float64)
            merge = repeated and bool(pieces) and (len(pieces) > 1 or len(r) > 0)
            if merge:
                # Row order is file order, so for a repeated step the later row wins: put the
                # pieces and the sparse values back in row order before assigning.
                r = np.concatenate([r, *(np.arange(a, a + len(p)) for a, p in pieces)])
                v = np.concatenate([v, *(p for _, p in pieces)])
                order = np.argsort(r, kind="stable")
                r, v = r[order], v[order]
            col[inv[r]] = v
            if not merge:
                for first, piece in pieces:
                    col[inv[first : first + len(piece)]] = piece
            del r, v
            if release:
                del rows[:], vals[:], pieces[:]
            out[name] = col
        return steps.astype(np.int64), out


def _to_float(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        try:
            return float(v)
        except OverflowError:  # an int beyond float range (JSON allows them)
            return math.inf if v > 0 else -math.inf
    if v is None:
        return math.nan
    if isinstance(v, str):
        s = v.strip().lower()
        if s in ("nan", "none", "null", ""):
            return math.nan
        try:
            return float(s)
        except ValueError:
            return None
    try:
        return float(v)  # numpy scalars
    except (TypeError, ValueError):
        return None

"""The files of a TRL output directory besides its completions tables: ``trainer_state.json``
(where it is, its JSON, its eval rows) and a readable sibling config holding the GRPO arguments
(``rlvitals.importers._trl_tables`` reads the tables). Both TRL importers import these modules,
never each other.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

from rlvitals._record import record
from rlvitals.errors import InputError
from rlvitals.importers._siblings import find_config, numbered_entries
from rlvitals.importers._source import is_stream, open_input
from rlvitals.importers._steps import as_step
from rlvitals.recording.memory import check_json
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Event, Manifest
from rlvitals.trainers import apply_facts
from rlvitals.trainers import trl as trl_facts

__all__ = [
    "MAX_STATE_BYTES",
    "PHASE_KEY",
    "STATE_NAME",
    "SUMMARY_KEYS",
    "HistoryReader",
    "StateHints",
    "add_log_row",
    "apply_args_file",
    "find_args_file",
    "find_state",
    "is_checkpoint_dir",
    "is_eval_row",
    "phase_fields",
    "read_json",
    "state_hints_near",
]

STATE_NAME = "trainer_state.json"
MAX_STATE_BYTES = 1 << 30
"""A bigger ``trainer_state.json`` is refused rather than parsed into memory (1 GiB)."""
MAX_ARGS_BYTES = 1 << 20
"""Sibling config files larger than this are not read."""
_NOT_METRICS = frozenset({"step", "epoch"})
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
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


def is_checkpoint_dir(path: Path) -> bool:
    """True for a ``checkpoint-N`` folder."""
    return bool(_CHECKPOINT_RE.match(path.name))


def _checkpoints(d: Path) -> list[Path]:
    found = numbered_entries(d, _CHECKPOINT_RE, lambda c: (c / STATE_NAME).is_file())
    return [c for _, c in found]


def find_state(path: Path) -> Path | None:
    """The ``trainer_state.json`` that ``path`` (a file or an output directory) stands for."""
    if is_stream(path) or path.is_file():
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


def read_json(path: Path, limit: int) -> Any:
    """The JSON value of a whole file (compressed or a stream too), at most ``limit`` bytes."""
    with open_input(path) as f:
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise InputError(path, f"file is more than the {limit} bytes this reader accepts")
    if not raw.strip():
        raise InputError(path, "file is empty")
    check_json(path, raw, None)  # a file of [{},{},...] would parse into 25x its size
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", f"byte {e.start}") from None
    del raw
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
    if is_stream(state):  # a stream has no siblings
        return None
    dirs = [state.parent]
    if _CHECKPOINT_RE.match(state.parent.name):
        dirs.append(state.parent.parent)
    found = find_config(
        dirs, MAX_ARGS_BYTES, "num_generations", lambda c: "num_generations" in c, STATE_NAME
    )
    if found is None:
        return None
    return found[0], {k: found[1][k] for k in _ARGS_KEYS if k in found[1]}


def apply_args_file(manifest: Manifest, state: Path) -> dict[str, Any]:
    """The GRPO arguments of the sibling config of ``state`` (:func:`find_args_file`; ``{}``
    when there is none), recorded in ``manifest.config`` (``args``, ``args_source``) and applied:
    group size, scaling, KL coefficient and estimator (the trainer facts of
    :mod:`rlvitals.trainers.trl`)."""
    found = find_args_file(state)
    if found is None:
        return {}
    manifest.config["args"] = found[1]
    manifest.config["args_source"] = str(found[0])
    apply_facts(manifest, trl_facts.facts(found[1]), overwrite=True)
    return found[1]


@record(frozen=True)
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
            step = as_step(row.get("step"))
            if step is not None and is_eval_row(row):
                evals.add(step)
            for k in row:
                m = _REWARD_FN_RE.match(k) if isinstance(k, str) else None
                if m:
                    funcs[m.group(1)] = None
        g = as_step(args.get("num_generations"))
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


SUMMARY_KEYS = frozenset({"train_runtime", "total_flos"})
"""Keys that mark the final summary row ``Trainer.train()`` logs (not a step)."""
SUMMARY_DROP = frozenset(
    {
        "train_runtime",
        "total_flos",
        "train_loss",
        "train_samples_per_second",
        "train_steps_per_second",
    }
)


PHASE_KEY = "phase"
"""The field a curriculum adds to each ``log_history`` row (``phase_*`` fields describe it)."""


def phase_fields(row: dict[str, Any]) -> dict[str, Any] | None:
    """A row's ``phase`` and ``phase_*`` fields (scalars), or None when it has no ``phase``.

    >>> phase_fields({"loss": 0.1, "phase": 1, "phase_task_id": "task_medium", "step": 3})
    {'phase': 1, 'phase_task_id': 'task_medium'}
    """
    if PHASE_KEY not in row:
        return None
    out = {
        k: v
        for k, v in row.items()
        if (k == PHASE_KEY or k.startswith("phase_")) and isinstance(v, (str, int, float))
    }
    return out if PHASE_KEY in out else None


class HistoryReader:
    """Rows of a transformers ``log_history`` (a list dumped as JSON, or printed to the console)
    cut into segments where a new ``Trainer.train()`` starts: after a summary row, or where the
    step goes back (two runs appended back to back). A segment is one run of the file, unless
    the segments are the phases of a curriculum (:meth:`curriculum`, :meth:`join`).

    ``add(step, row)`` files a row; :attr:`segments` holds ``(first, last, rows)`` per segment,
    rows as ``(step, row, kind)`` with kind ``train``, ``eval`` or ``summary``.
    """

    def __init__(self) -> None:
        self.segments: list[list[tuple[int, dict[str, Any], str]]] = [[]]
        self.phases: list[dict[str, Any] | None] = [None]
        """Per segment, the phase fields of its first training row (:func:`phase_fields`)."""
        self._mixed = False  # a segment holds training rows of two phases
        self._last_train: int | None = None
        self._closed = False

    def add(self, step: int, row: dict[str, Any], phase: dict[str, Any] | None = None) -> None:
        """File ``row``; ``phase``: its :func:`phase_fields` (a compact row has lost them)."""
        if SUMMARY_KEYS.intersection(row) or ("train_loss" in row and "loss" not in row):
            self.segments[-1].append((step, row, "summary"))
            self._closed = True
            return
        kind = "eval" if is_eval_row(row) else "train"
        restart = kind == "train" and self._last_train is not None and step < self._last_train
        if (self._closed and kind == "train") or restart:
            self.segments.append([])
            self.phases.append(None)
            self._last_train = None
        self._closed = False
        if kind == "train":
            self._last_train = step
            if phase is not None:
                if self.phases[-1] is None and not any(
                    k == "train" for _, _, k in self.segments[-1]
                ):
                    self.phases[-1] = phase
                elif self.phases[-1] is None or self.phases[-1][PHASE_KEY] != phase[PHASE_KEY]:
                    self._mixed = True
        self.segments[-1].append((step, row, kind))

    def curriculum(self) -> bool:
        """True when the segments are the phases of one curriculum: two or more, every one's
        training rows of one ``phase``, each phase a different one from the phase before."""
        phases = [ph for seg, ph in zip(self.segments, self.phases) if seg]
        if len(phases) < 2 or self._mixed or any(ph is None for ph in phases):
            return False
        values = [ph[PHASE_KEY] for ph in phases if ph is not None]
        return all(a != b for a, b in itertools.pairwise(values))

    def join(self) -> list[dict[str, Any]]:
        """Make the segments one run, its steps continuing: a phase whose steps restart is
        moved past the last step of the phase before. Returns one entry per phase: its
        fields, ``first_step`` and ``last_step`` (as joined) and ``offset`` (added to its own
        steps)."""
        joined: list[tuple[int, dict[str, Any], str]] = []
        info: list[dict[str, Any]] = []
        last: int | None = None
        for seg, ph in zip(self.segments, self.phases):
            if not seg:
                continue
            steps = [s for s, _, k in seg if k == "train"] or [s for s, _, _ in seg]
            offset = 0 if last is None else max(0, last + 1 - min(steps))
            joined.extend((s + offset, row, kind) for s, row, kind in seg)
            last = max(steps) + offset
            info.append(
                {
                    **(ph or {}),
                    "first_step": min(steps) + offset,
                    "last_step": last,
                    "offset": offset,
                }
            )
        self.segments, self.phases = [joined], [None]
        return info

    def runs(self) -> list[dict[str, Any]]:
        """One entry per non-empty segment: ``{"name", "first_step", "last_step", "rows"}``."""
        out = []
        for i, seg in enumerate(self.segments, 1):
            steps = [s for s, _, k in seg if k == "train"] or [s for s, _, _ in seg]
            if seg:
                out.append(
                    {
                        "name": str(i),
                        "first_step": min(steps),
                        "last_step": max(steps),
                        "rows": len(seg),
                    }
                )
        return out

    def fill(self, builder: Any, segment: int) -> None:
        """Add the rows of segment ``segment`` (0-based) to ``builder``; the summary row goes to
        ``manifest.config["summary"]`` and an event, never a step."""
        for step, row, kind in self.segments[segment]:
            add_log_row(builder, step, row, kind)


def add_log_row(builder: Any, step: int, row: dict[str, Any], kind: str) -> None:
    """Add one ``log_history`` row of ``kind`` (``train``, ``eval`` or ``summary``) to
    ``builder``: an eval row without its ``epoch`` (an eval step is never a gap in the training
    series); the summary row to ``manifest.config["summary"]`` and a ``summary`` event, never a
    step, only its other metrics (if any) on its step."""
    if kind == "summary":
        summary = {k: v for k, v in row.items() if isinstance(v, (int, float, str))}
        builder.manifest.config["summary"] = summary
        builder.add_event(Event(step, "summary", "end-of-training summary row", summary))
        rest = {k: v for k, v in row.items() if k not in SUMMARY_DROP and k not in _NOT_METRICS}
        if rest:
            builder.add_row(step, rest)
    elif kind == "eval":
        builder.add_row(step, {k: v for k, v in row.items() if k not in _NOT_METRICS})
    else:
        builder.add_row(step, {k: v for k, v in row.items() if k != "step"})


def choose_segment(path: Path, reader: HistoryReader, run: str | None, builder: Any) -> int:
    """The 0-based segment ``run`` names (1-based), or the last one with a warning naming the
    others when there are several; InputError for a name that is not a segment."""
    runs = reader.runs()
    if not runs:
        raise InputError(path, "no log rows with a step found")
    names = [r["name"] for r in runs]
    listed = ", ".join(f"{r['name']} (steps {r['first_step']}-{r['last_step']})" for r in runs)
    listing = [{**r, "read": False} for r in runs]
    if run is None:
        idx = len(runs) - 1
        if len(runs) > 1:
            builder.warn(
                f"{path}: {len(runs)} runs back to back in one log (the steps restart): read the "
                f"last, {runs[idx]['name']}; runs: {listed}; choose one with --run N"
            )
    elif run in names:
        idx = names.index(run)
    else:
        raise InputError(path, f"no run {run!r} in this log (runs: {listed})")
    listing[idx]["read"] = True
    from rlvitals.importers import note_runs

    note_runs(builder, listing)
    nonempty = [i for i, seg in enumerate(reader.segments) if seg]
    return nonempty[idx]

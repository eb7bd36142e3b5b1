"""A bare TRL / transformers ``log_history``: ``json.dump(trainer.state.log_history, f)``.

The list ``Trainer.log`` builds (``transformers/trainer.py`` 5.24.0: ``output = {**logs,
"step": self.state.global_step}; self.state.log_history.append(output)``), dumped by the user's
own ``json.dump`` — on one line or indented, keys in insertion order, ``NaN`` bare. It is not a
``trainer_state.json`` (an object holding ``"log_history"``: :mod:`~rlvitals.importers.trl_state`).

- **Step**: each row's ``step`` (the optimizer step, ``state.global_step``); never ``epoch``.
- Rows whose metric keys are all ``eval_*`` are eval rows; the summary row (``train_runtime``,
  ``total_flos``, ``train_loss``) is not a step (``manifest.config["summary"]``).
- **Several runs in one file**: a new ``Trainer.train()`` appended to the same list, or two
  lists dumped back to back, shows as steps that restart (or a row after the summary row). Each
  is a run of its own, listed in a ``runs`` event: the last is read, with a warning
  naming the others, unless ``run="N"`` (``--run N``) chooses one. Never merged, except:
- **A curriculum**: when every such run's rows carry a ``phase`` field, one phase per run and
  each a different phase from the one before, they are the phases of one model's training
  (a trainer per phase, continuing from the last): they are joined into one run, the steps of a
  phase that restarts moved past the phase before, a ``phase`` event where each starts,
  ``manifest.config["phases"]`` and a warning saying so. ``split_phases=True``
  (``--split-phases``) reads them as separate runs instead.
- Read streaming (:func:`rlvitals.importers._lines.iter_json_array`), each row held compactly
  until the runs are told apart (:mod:`rlvitals.importers._rows`): memory is bounded by the
  series kept, not by the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._lines import iter_json_array
from rlvitals.importers._rows import Row, RowStore, add_rows
from rlvitals.importers._steps import as_step
from rlvitals.importers._trl_files import (
    PHASE_KEY,
    SUMMARY_KEYS,
    HistoryReader,
    add_log_row,
    choose_segment,
    phase_fields,
)
from rlvitals.recording.run import Event, Manifest, Run, RunBuilder

__all__ = ["load_trl_log_history"]

CONF = 0.9
_HEAD = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*\[\s*(?:\{|\])")
_STEP = re.compile(rb'"step"\s*:\s*-?[0-9]')
_TRL_KEY = re.compile(
    rb'"(?:loss|reward|eval_loss|train_runtime|frac_reward_zero_std|grad_norm)"\s*:'
)


def _sniff(path: Path, head: bytes) -> float:
    if not head or not _HEAD.match(head):
        return 0.0
    return CONF if _STEP.search(head) and _TRL_KEY.search(head) else 0.0


def load_trl_log_history(
    path: Path,
    progress: Progress | None = None,
    *,
    run: str | None = None,
    split_phases: bool = False,
) -> Run:
    """Read a dumped ``log_history`` list into a ``Run`` (module docstring).

    Args:
        path: the JSON file (compressed, or a stream, too).
        progress: ``progress(done_bytes, total_bytes)``.
        run: which run of the file to read when it holds several (``"1"``, ``"2"``, ...);
            default: the last.
        split_phases: read the phases of a curriculum as separate runs (default: joined).

    Raises:
        InputError: not a JSON array of objects, invalid JSON, or no row with a step.
    """
    reader = HistoryReader()
    store = RowStore()
    bad = 0
    arrays = 0
    for array, i, row in iter_json_array(path, progress):
        if type(row) is not dict:
            raise InputError(path, "log entry is not an object", f"item {i}")
        if array != arrays:
            arrays = array
            reader.segments.append([])  # a second json.dump: a run of its own
        step = as_step(row.get("step"))
        if step is None:
            bad += 1
            continue
        phase = phase_fields(row)
        if phase is not None:  # its text fields name the phase: not values skipped
            row = {k: v for k, v in row.items() if k == PHASE_KEY or k not in phase}
        if SUMMARY_KEYS.intersection(row) or "train_loss" in row:
            reader.add(step, row)  # rare: kept whole (its text goes to the manifest)
        else:
            reader.add(step, store.row(row), phase)  # compact: memory follows the series kept
    builder = RunBuilder(Manifest(source=str(path), trainer="trl", step_key="step"))
    if not split_phases and reader.curriculum():
        _join_phases(path, reader, builder)
    seg = choose_segment(path, reader, run, builder)
    builder.skipped_values += sum(getattr(r, "skipped", 0) for _, r, _ in reader.segments[seg])
    _fill(reader.segments[seg], builder)
    if bad:
        builder.warn(f"{path}: {bad} entries without an integer 'step' were skipped")
    warn_skipped(builder, path)
    return builder.build()


def _join_phases(path: Path, reader: HistoryReader, builder: RunBuilder) -> None:
    """One run of a curriculum's phases (module docstring), said in the manifest, events and
    a warning."""
    phases = reader.join()
    builder.manifest.config["phases"] = phases
    builder.manifest.step_key = "step (curriculum phases joined, steps continuing)"
    for ph in phases:
        fields = {k: v for k, v in ph.items() if k not in ("first_step", "last_step", "offset")}
        label = ", ".join(f"{k} {v}" for k, v in fields.items())
        builder.add_event(Event(ph["first_step"], "phase", f"curriculum {label} starts", ph))
    moved = "; ".join(
        f"phase {ph[PHASE_KEY]}: steps {ph['first_step'] - ph['offset']}-"
        f"{ph['last_step'] - ph['offset']} read as {ph['first_step']}-{ph['last_step']}"
        for ph in phases
        if ph["offset"]
    )
    builder.warn(
        f"{path}: {len(phases)} curriculum phases (a 'phase' field, one per trainer run) joined "
        f"into one run, steps continuing ({moved or 'no step moved'}); --split-phases reads "
        "them as separate runs"
    )


_DROP = {"train": frozenset({"step"}), "eval": frozenset({"step", "epoch"})}
"""What ``HistoryReader.fill`` leaves out of a train / eval row."""


def _fill(rows: list[tuple[int, Any, str]], builder: RunBuilder) -> None:
    """``HistoryReader.fill`` of one segment, column by column for its compact rows: runs of
    them go to the builder at once (:func:`~rlvitals.importers._rows.add_rows`), the few rows
    kept whole (the summary row) one by one (:func:`~rlvitals.importers._trl_files.add_log_row`),
    in file order."""
    batch: list[tuple[int, Row, frozenset[str]]] = []
    for step, row, kind in rows:
        if isinstance(row, Row) and kind in _DROP:
            batch.append((step, row, _DROP[kind]))
            continue
        add_rows(builder, batch)
        batch = []
        add_log_row(builder, step, row, kind)
    add_rows(builder, batch)


register(
    Importer(
        name="trl_log_history",
        description="bare TRL log_history list (json.dump(trainer.state.log_history))",
        sniff=_sniff,
        load=load_trl_log_history,
        multi_run=True,
        phases=True,
        precheck=Precheck(starts=b"[", marks=(b'"step"',)),
        files=(".json",),
    )
)

"""prime-rl ``metrics.jsonl``: the orchestrator's (and trainer's) FileMonitor rows.

The writer (PrimeIntellect-ai/prime-rl): ``src/prime_rl/utils/monitor/file.py`` @ a28a9a4c
(``FileMonitor.log``) and ``src/prime_rl/monitors/file/monitor.py`` @ 048a6e23
(``log_metrics``): ``json.dumps({"step": step, "time": time.time(), **sanitized})`` per line,
plus ``"producer"`` when set; non-finite values are dropped (a missing key is not 0). The path
is ``<output_dir>/metrics.jsonl`` (v1) or ``<output_dir>/monitors/file/<path>`` (v2)::

    {"step": 12, "time": 1767225600.1, "reward/all/mean": 0.41, "solve_none/all": 0.125,
     "solve_all/all": 0.25, "effective_batch_size/all": 0.625, "producer": "orchestrator"}

- **Step**: ``step``, the orchestrator's step (0-based in older versions); rows with
  ``"step": null`` are time-keyed (inference metrics) and skipped, never given a step.
  ``progress/ckpt_step`` (the policy version the rollouts came from) is not the step.
- **Collapse evidence**: the trainer's own solve splits, by version ``solve_none/all`` and
  ``solve_all/all`` (``orchestrator/metrics.py`` ``MetricsBuilder``), ``batch/solve_none``
  (older ``orchestrator.py``), ``reward/solve_none`` (oldest); ``solved_*`` accepted too.
  They are shares of problems whose G rewards are all 0 / all the maximum: ``acr_solve_none``
  and ``acr_solve_all``, and the ACR for binary rewards.
- prime-rl drops zero-advantage rollouts by default (``filters_zero_var``): its trained batch
  has no collapsed group, and the solve splits above are the pre-filter picture.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._lines import iter_json_lines
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import prime_rl as prime_facts

__all__ = ["load_prime_rl", "read_metric_rows"]

CONF = 0.9
_HEAD = re.compile(rb'\A\s*\{"step": (?:-?[0-9]+|null), "time": [0-9]')
_MARKS = (
    b"solve_none",
    b"solve_all",
    b"solved_",
    b"effective_batch_size",
    b"progress/",
    b'"producer"',
)
_NOT_METRICS = ("step", "time", "producer")


def _sniff(path: Path, head: bytes) -> float:
    if not head or not _HEAD.match(head):
        return 0.0
    return CONF if any(m in head for m in _MARKS) else 0.5


def read_metric_rows(builder: RunBuilder, path: Path, progress: Progress | None = None) -> int:
    """Add the rows of a FileMonitor ``metrics.jsonl`` to ``builder``; returns how many rows had
    a step (shared with :mod:`rlvitals.importers.prime_rl_traces`)."""
    n = untimed = 0
    producers: dict[str, None] = {}
    for lineno, obj in iter_json_lines(path, builder.warnings, progress, objects=True):
        where = f"line {lineno}"
        step = obj.get("step")
        if step is None:
            untimed += 1
            continue
        if isinstance(step, bool) or not isinstance(step, int) or not -(2**63) <= step < 2**63:
            raise InputError(
                path, f"'step' must be an integer or null, got {str(step)[:30]!r}", where
            )
        if isinstance(obj.get("producer"), str):
            producers[obj["producer"]] = None
        builder.add_row(step, {k: v for k, v in obj.items() if k not in _NOT_METRICS})
        n += 1
    if untimed:
        builder.warn(f'{path}: {untimed} rows with "step": null (time-keyed metrics) were skipped')
    if producers:
        builder.manifest.config["producers"] = list(producers)
    warn_skipped(builder, path)
    return n


def load_prime_rl(path: Path, progress: Progress | None = None) -> Run:
    """Read a prime-rl FileMonitor ``metrics.jsonl`` into a ``Run`` (module docstring)."""
    builder = RunBuilder(Manifest(source=str(path), trainer="prime_rl", step_key="step"))
    if read_metric_rows(builder, path, progress) == 0:
        raise InputError(path, "no prime-rl metric rows with a step found")
    apply_facts(builder.manifest, prime_facts.facts({"rollouts_per_example": None}))
    builder.manifest.group_size = None
    return builder.build()


register(
    Importer(
        name="prime_rl",
        description='prime-rl metrics.jsonl ({"step": N, "time": ..., ...} FileMonitor rows)',
        sniff=_sniff,
        load=load_prime_rl,
        precheck=Precheck(starts=b"{[", marks=(b'"time": ',), within=256),
        files=(".jsonl",),
    )
)

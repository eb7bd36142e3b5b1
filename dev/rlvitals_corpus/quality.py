"""Score the doctor on a labelled corpus: recall, false alarms, onset error.

Definitions (per detector family):

- a label is **found** when a finding with its ID, at warn or above (or at the detector's own
  severity), has an onset within ``MATCH_LOGGED`` logged steps (or 3x the label's tolerance,
  whichever is larger) of the labelled onset; **recall** = found / labels.
- **onset error** of a found label = |reported onset - labelled onset| / log_every, in logged
  steps; the bar is on its median.
- a **false alarm** is a healthy run with any finding of the family at warn or above; the
  **false-alarm rate** = such runs / healthy runs.
- a **wrong diagnosis** is a failure run where a forbidden ID fired.

Runs are written to disk in their format and read back through :func:`rlvitals.importers.load`
when that format's importer is registered (``via_files=True``); otherwise built in memory.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.detectors import DETECTORS, Severity, load_all
from rlvitals_corpus import LabelledRun, generate, to_run

__all__ = ["MATCH_LOGGED", "QualityReport", "RunResult", "evaluate", "run_one"]

MATCH_LOGGED = 10.0
"""A finding further than this many logged steps from the labelled onset is another event."""


@dataclass
class RunResult:
    """How the doctor did on one labelled run."""

    name: str
    scenario: str
    view: str
    fmt: str
    healthy: bool
    log_every: int
    labels: list[tuple[str, int | None, int | None]]
    found: dict[str, float | None]  # label id -> onset error (logged steps), None = missed
    end_error: dict[str, float | None]
    false_alarms: list[str]
    forbidden: list[str]
    findings: list[tuple[str, str, int | None, int | None]]
    seconds: float
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class QualityReport:
    results: list[RunResult]
    family: str

    @property
    def labels(self) -> int:
        return sum(len(r.labels) for r in self.results)

    @property
    def recall(self) -> float:
        n = self.labels
        hits = sum(1 for r in self.results for e in r.found.values() if e is not None)
        return hits / n if n else math.nan

    @property
    def false_alarm_rate(self) -> float:
        h = [r for r in self.results if r.healthy]
        return sum(1 for r in h if r.false_alarms) / len(h) if h else math.nan

    @property
    def false_alarm_rate_all(self) -> float:
        """Healthy runs with any finding at warn or above, of any family."""
        h = [r for r in self.results if r.healthy]
        bad = [r for r in h if any(sev in ("warn", "critical") for _, sev, _, _ in r.findings)]
        return len(bad) / len(h) if h else math.nan

    def recall_by_id(self) -> dict[str, tuple[int, float]]:
        """Detector ID → (labels, recall)."""
        out: dict[str, list[int]] = {}
        for r in self.results:
            for det_id, e in r.found.items():
                a = out.setdefault(det_id, [0, 0])
                a[0] += 1
                a[1] += e is not None
        return {k: (v[0], v[1] / v[0]) for k, v in sorted(out.items())}

    @property
    def onset_errors(self) -> list[float]:
        return [e for r in self.results for e in r.found.values() if e is not None]

    @property
    def median_onset_error(self) -> float:
        e = self.onset_errors
        return float(np.median(e)) if e else math.nan

    @property
    def wrong_diagnosis_rate(self) -> float:
        f = [r for r in self.results if not r.healthy]
        return sum(1 for r in f if r.forbidden) / len(f) if f else math.nan

    def misses(self) -> list[RunResult]:
        return [r for r in self.results if any(e is None for e in r.found.values())]

    def alarms(self) -> list[RunResult]:
        return [r for r in self.results if r.healthy and r.false_alarms]

    def by(self, key: str) -> dict[str, tuple[int, float]]:
        """Recall per ``scenario`` / ``view`` / ``fmt``: key → (labels, recall)."""
        out: dict[str, list[int]] = {}
        for r in self.results:
            for e in r.found.values():
                a = out.setdefault(getattr(r, key), [0, 0])
                a[0] += 1
                a[1] += e is not None
        return {k: (v[0], v[1] / v[0]) for k, v in sorted(out.items())}

    def summary(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "runs": len(self.results),
            "healthy_runs": sum(r.healthy for r in self.results),
            "labels": self.labels,
            "recall": _r(self.recall),
            "false_alarm_rate": _r(self.false_alarm_rate),
            "median_onset_error_logged_steps": _r(self.median_onset_error),
            "p90_onset_error_logged_steps": _r(
                float(np.percentile(self.onset_errors, 90)) if self.onset_errors else math.nan
            ),
            "wrong_diagnosis_rate": _r(self.wrong_diagnosis_rate),
            "false_alarm_rate_any_family": _r(self.false_alarm_rate_all),
            "seconds": round(sum(r.seconds for r in self.results), 2),
        }


def _r(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 4)


def _family_ids(family: str | None) -> set[str]:
    load_all()
    return {i for i in DETECTORS.names() if family is None or DETECTORS.get(i).family == family}


def _importable(fmt: str) -> bool:
    from rlvitals.importers import IMPORTERS, _ensure_loaded

    _ensure_loaded()
    return fmt in IMPORTERS


def run_one(
    lr: LabelledRun,
    *,
    fmt: str | None = None,
    via_files: bool = True,
    tmpdir: str | Path | None = None,
    family: str | None = "collapse",
    config: Any = None,
) -> RunResult:
    """Diagnose one labelled run and score it."""
    from rlvitals.doctor import diagnose

    fmt = fmt or lr.formats[0]
    t0 = time.perf_counter()
    if via_files and _importable(fmt):
        from rlvitals.importers import load
        from rlvitals_corpus.writers import write

        with tempfile.TemporaryDirectory(dir=tmpdir) as d:
            run = load(write(lr, fmt, d), fmt)
    else:
        fmt = "memory"
        run = to_run(lr)
    diag = diagnose(run, config)
    secs = time.perf_counter() - t0
    ids = _family_ids(family)
    k = max(1, lr.log_every)
    found: dict[str, float | None] = {}
    ends: dict[str, float | None] = {}
    for lab in lr.expect:
        best = None
        best_end = None
        tol = max(MATCH_LOGGED, 3.0 * lab.tolerance)
        for f in diag.findings:
            if f.id != lab.id:
                continue
            if Severity(f.severity).rank < DETECTORS.get(f.id).severity.rank:
                continue
            if lab.onset is None or f.onset_step is None:
                err = 0.0
            else:
                err = abs(f.onset_step - lab.onset) / k
            if err <= tol and (best is None or err < best):
                best = err
                if lab.end is not None and f.end_step is not None:
                    best_end = abs(f.end_step - lab.end) / k
                else:
                    best_end = None
        found[lab.id] = best
        ends[lab.id] = best_end
    warn = Severity.WARN.rank
    alarms = sorted(
        {f.id for f in diag.findings if f.id in ids and Severity(f.severity).rank >= warn}
    )
    false_alarms = alarms if lr.healthy else []
    forbidden = sorted({f.id for f in diag.findings if f.id in lr.forbid})
    return RunResult(
        name=lr.name,
        scenario=lr.scenario,
        view=lr.view,
        fmt=fmt,
        healthy=lr.healthy,
        log_every=k,
        labels=[(lab.id, lab.onset, lab.end) for lab in lr.expect],
        found=found,
        end_error=ends,
        false_alarms=false_alarms,
        forbidden=forbidden,
        findings=[
            (f.id, Severity(f.severity).value, f.onset_step, f.end_step) for f in diag.findings
        ],
        seconds=secs,
        errors=dict(diag.errors),
    )


def evaluate(
    specs: Iterable[tuple[str, dict[str, Any]]],
    *,
    via_files: bool = True,
    family: str | None = "collapse",
    config: Any = None,
    tmpdir: str | Path | None = None,
    alternate_formats: bool = True,
) -> QualityReport:
    """Generate every ``(scenario, params)`` in ``specs``, diagnose it, and score the lot.

    With ``alternate_formats``, runs that several formats can express cycle through them.
    """
    results = []
    for i, (name, params) in enumerate(specs):
        params = dict(params)
        seed = params.pop("seed", i)
        lr = generate(name, seed=seed, **params)
        fmt = lr.formats[i % len(lr.formats)] if alternate_formats else lr.formats[0]
        results.append(
            run_one(lr, fmt=fmt, via_files=via_files, tmpdir=tmpdir, family=family, config=config)
        )
    return QualityReport(results, family or "all")

"""The doctor: run the detector catalogue over a run and return sorted findings.

>>> from rlvitals.recording import RunBuilder
>>> b = RunBuilder()
>>> for s in range(1, 101):
...     b.add_row(s, {"reward": 0.5, "frac_reward_zero_std": 0.2 if s < 60 else 1.0})
>>> d = diagnose(b.build())
>>> [(f.id, f.onset_step) for f in d.findings if f.id == "DEGENERATE_GROUPS"]
[('DEGENERATE_GROUPS', 60)]
>>> d.fails("warn")
True
"""

from __future__ import annotations

import dataclasses
import math
import os
import traceback
from collections.abc import Callable
from dataclasses import field
from typing import Any

import numpy as np

from rlvitals._array import quiet_numerics
from rlvitals._record import record
from rlvitals.detectors import DETECTORS, Detector, Finding, Severity, catalogue, load_all
from rlvitals.doctor.differential import condition_severity, differential
from rlvitals.doctor.incidents import Incident, _families, group_findings
from rlvitals.errors import InputError
from rlvitals.recording.run import Run
from rlvitals.signal import DEFAULT_TAU, DEFAULT_WINDOW
from rlvitals.vitals import MIN_JUDGE_STEPS, Vitals, compute_vitals

__all__ = [
    "FAIL_ON_CHOICES",
    "JSON_SCHEMA",
    "Diagnosis",
    "DoctorConfig",
    "Prepared",
    "check_understood",
    "diagnose",
    "diagnose_path",
    "prepare",
    "select_detectors",
]

JSON_SCHEMA = 2
"""Version of the JSON contract written by :meth:`Diagnosis.to_dict`."""

FAIL_ON_CHOICES = ("info", "warn", "critical", "never")


@record
class DoctorConfig:
    """What the doctor runs and how.

    Attributes:
        select: detector IDs to run (None = all). ``"ALL"`` and family names
            (``"collapse"``, ...) are accepted too.
        ignore: detector IDs (or families) to skip.
        knobs: detector ID → knob overrides, e.g. ``{"ADV_COLLAPSE": {"collapse_below": 0.05}}``.
        fail_on: lowest severity that makes :meth:`Diagnosis.fails` true (or ``never``).
        disabled: detector IDs switched off by the config file (``enabled = false``).
        tau: collapse tolerance for the vitals (DESIGN.md 3.1).
        window: W for windowed ACR and volatility.
        metrics: the run's own key → canonical metric, for keys logged under custom names
            (applied with :meth:`Run.with_metric_names` before the vitals).
        group_size: completions per prompt (G), for a run whose log does not say it; when
            set it overrides what the log says (``--group-size``, ``group-size`` in the config).
        group_size_source: where ``group_size`` came from, for the report (the flag or the
            config file; default: the config file, else "--group-size").
        reward_range: ``(min, max)`` reward, for saturation and solve_all/solve_none when the
            run does not say it.
        allow_unjudged: when False (default), a run the collapse family could not judge
            makes :meth:`Diagnosis.fails` true: "not judged" is never a green pass.
        source: the config file this came from, when any (for error messages).
    """

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    knobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    fail_on: str = "warn"
    disabled: list[str] = field(default_factory=list)
    tau: float = DEFAULT_TAU
    window: int = DEFAULT_WINDOW
    metrics: dict[str, str] = field(default_factory=dict)
    group_size: int | None = None
    group_size_source: str | None = None
    reward_range: tuple[float, float] | None = None
    allow_unjudged: bool = False
    source: str | None = None

    def validate(self) -> None:
        """Raise ValueError naming the bad entry (unknown IDs, knobs, fail_on, G, range)."""
        if self.fail_on not in FAIL_ON_CHOICES:
            raise ValueError(f"fail_on {self.fail_on!r} is not one of {', '.join(FAIL_ON_CHOICES)}")
        select_detectors(self)
        for det_id, overrides in self.knobs.items():
            cls = _lookup(det_id)
            cls.with_knobs(cls.Knobs(), overrides)
        g = self.group_size
        if g is not None and (isinstance(g, bool) or not isinstance(g, int) or g < 1):
            raise ValueError(f"group_size must be an integer >= 1, got {g!r}")
        if self.reward_range is not None:
            lo, hi = self.reward_range
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise ValueError(
                    f"reward_range must be two finite numbers MIN < MAX, got {self.reward_range!r}"
                )


@record
class Diagnosis:
    """What the doctor found in one run.

    Attributes:
        run: the run.
        vitals: its vitals.
        findings: sorted by severity (critical first), then onset step (None last), then ID.
        skipped: detector ID → why it could not judge: what it would need ("needs ...: not
            logged" / "... too few points"), for detectors the run gave nothing to judge.
        errors: detector ID → error text, for detectors that crashed (a bug; the others ran).
        detectors: IDs that ran.
        incidents: the findings grouped by shared cause and time, root cause first
            (:mod:`rlvitals.doctor.incidents`); every finding is in exactly one.
        conditions: the differential diagnosis (:mod:`rlvitals.doctor.differential`): the causes
            from the closed vocabulary, primary first; one ``HEALTHY`` call for a run with
            nothing wrong, none for a run that was not judged.
        allow_unjudged: the config's opt-out: a run not judged does not fail.
    """

    run: Run
    vitals: Vitals
    findings: list[Finding]
    skipped: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    detectors: list[str] = field(default_factory=list)
    incidents: list[Incident] = field(default_factory=list)
    allow_unjudged: bool = False
    conditions: list[Any] = field(default_factory=list)

    def not_judged(self) -> str | None:
        """Why the run could not be judged, or None when it was.

        Not judged: the collapse family was selected and none of its detectors could judge
        (no evidence, or too few points), or no selected detector could judge anything. A
        report of such a run says so at the top; it is never a green "no findings".
        """
        if not self.detectors:
            return "no detector was selected"
        fam = _families()
        collapse = [d for d in self.detectors if fam.get(d) == "collapse"]
        if collapse:  # findings of other families do not judge the learning signal
            if any(fam.get(f.id) == "collapse" for f in self.findings):
                return None
            if all(d in self.skipped for d in collapse):
                if self.vitals.too_short and self.vitals.n_steps:
                    return (
                        f"the run spans {self.vitals.span_steps} training step(s): too short to "
                        f"judge a collapse ({MIN_JUDGE_STEPS}+ needed)"
                    )
                return "the collapse family could not judge this run: " + _reasons(
                    {d: self.skipped[d] for d in collapse}
                )
            if self.vitals.evidence == "loss_grad_zero":
                return (
                    "the collapse family could only rule out a total collapse (loss and "
                    "grad_norm never both exactly 0): the run logs no reward, ACR or advantage "
                    "metric"
                )
            return None
        if not self.findings and all(d in self.skipped for d in self.detectors):
            return "no selected detector could judge this run: " + _reasons(self.skipped)
        return None

    def worst(self) -> Severity | None:
        """The highest severity among the findings and the conditions named (a condition other
        than HEALTHY is at least ``warn``, SMALL_GROUPS ``info``), or None when there is none."""
        levels = [Severity(f.severity) for f in self.findings]
        levels += [Severity(condition_severity(c.id)) for c in self.conditions if c.id != "HEALTHY"]
        if not levels:
            return None
        return max(levels, key=lambda s: s.rank)

    def fails(self, fail_on: str) -> bool:
        """True when a finding is at or above ``fail_on``, or the run was not judged (unless
        :attr:`allow_unjudged`). ``never`` never fails."""
        if fail_on == "never":
            return False
        if not self.allow_unjudged and self.not_judged() is not None:
            return True
        bar = Severity.parse(fail_on).rank
        worst = self.worst()
        return worst is not None and worst.rank >= bar

    def by_id(self, det_id: str) -> list[Finding]:
        return [f for f in self.findings if f.id == det_id]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract (schema 1): ``{"schema", "run", "vitals", "findings", ...}``."""
        m = self.run.manifest
        v = self.vitals
        run = {
            "source": m.source,
            "format": m.format,
            "trainer": m.trainer,
            "steps": v.n_steps,
            "first_step": int(v.steps[0]) if v.steps.size else None,
            "last_step": int(v.steps[-1]) if v.steps.size else None,
            "group_size": v.group_size,
            "has_groups": self.run.groups is not None,
            "series": sorted(self.run.series),
            "eval_series": sorted(self.run.eval_series),
            "unknown_keys": list(self.run.unknown_keys),
            "warnings": list(self.run.warnings),
        }
        worst = self.worst()
        index = {id(f): i for i, f in enumerate(self.findings)}
        return {
            "schema": JSON_SCHEMA,
            "run": run,
            "vitals": v.summary(),
            "not_judged": self.not_judged(),
            "conditions": [c.to_dict() for c in self.conditions],
            "incidents": [i.to_dict(index) for i in self.incidents],
            "findings": [f.to_dict() for f in self.findings],
            "worst": worst.value if worst else None,
            "detectors": list(self.detectors),
            "skipped": dict(self.skipped),
            "errors": dict(self.errors),
        }


def _reasons(skipped: dict[str, str]) -> str:
    """``"needs X: not logged (ADV_COLLAPSE, ...); ..."``: each distinct reason once."""
    by_reason: dict[str, list[str]] = {}
    for det_id, why in skipped.items():
        by_reason.setdefault(why, []).append(det_id)
    return "; ".join(f"{why} ({', '.join(ids)})" for why, ids in by_reason.items())


def _lookup(det_id: str) -> type[Detector]:
    load_all()
    try:
        return DETECTORS.get(det_id)
    except KeyError as e:
        raise ValueError(str(e.args[0])) from None


def _expand(names: list[str], what: str) -> set[str]:
    load_all()
    ids = set(DETECTORS.names())
    families = {DETECTORS.get(i).family for i in ids}
    out: set[str] = set()
    for n in names:
        if n == "ALL":
            out |= ids
        elif n in ids:
            out.add(n)
        elif n.lower() in families:
            out |= {i for i in ids if DETECTORS.get(i).family == n.lower()}
        else:
            valid = ", ".join(sorted(ids))
            raise ValueError(f"unknown detector {n!r} in {what}; valid: ALL, {valid}")
    return out


def select_detectors(config: DoctorConfig) -> list[type[Detector]]:
    """The detector classes ``config`` asks for, in catalogue order."""
    classes = catalogue()
    chosen = {c.id for c in classes} if config.select is None else _expand(config.select, "select")
    chosen -= _expand(list(config.ignore), "ignore")
    chosen -= _expand(list(config.disabled), "disabled")
    return [c for c in classes if c.id in chosen]


def _in_dependency_order(classes: list[type[Detector]]) -> list[type[Detector]]:
    """``classes`` with every detector they ``require`` (selected or not) placed before them."""
    out: list[type[Detector]] = []
    seen: set[str] = set()

    def visit(cls: type[Detector], chain: tuple[str, ...]) -> None:
        if cls.id in seen:
            return
        if cls.id in chain:
            raise ValueError(f"detectors require each other: {' -> '.join((*chain, cls.id))}")
        for dep in cls.requires:
            visit(_lookup(dep), (*chain, cls.id))
        seen.add(cls.id)
        out.append(cls)

    for cls in classes:
        visit(cls, ())
    return out


def _sort_key(f: Finding) -> tuple:
    onset = f.onset_step if f.onset_step is not None else 2**62
    return (-Severity(f.severity).rank, onset, f.id)


def diagnose(
    run: Run,
    config: DoctorConfig | None = None,
    *,
    prepared: Prepared | None = None,
    explain: bool = True,
) -> Diagnosis:
    """Compute the vitals of ``run`` and run every selected detector over them.

    A detector that raises is recorded in ``Diagnosis.errors`` (the others still run) unless
    the environment variable ``RLVITALS_STRICT`` is set, in which case the error propagates.

    ``prepared``: :func:`prepare` of ``config``, for a caller that diagnoses many runs with one
    config (the live monitor); ``explain=False`` leaves ``Diagnosis.skipped`` empty (why each
    silent detector could not judge the run: the reports' text, not the findings).
    """
    config = config or DoctorConfig()
    if prepared is None or prepared.config is not config:
        prepared = prepare(config)
    if config.metrics:
        run = run.with_metric_names(config.metrics)
    run = _with_facts(run, config)
    with quiet_numerics():  # NaN and inf are judged on purpose: no warning, even under -W error
        return _diagnose(run, config, prepared, explain)


class Prepared:
    """What :func:`diagnose` derives from a config before it reads a run: the selected
    detector classes, every class to run in dependency order, and the knobs of each."""

    __slots__ = ("classes", "config", "knobs", "order")

    def __init__(self, config: DoctorConfig):
        self.config = config
        self.classes = select_detectors(config)
        self.order = _in_dependency_order(self.classes)
        # knobs built once; a detector class with its own __init__ gets the overrides each run
        self.knobs = {
            cls.id: cls(**config.knobs.get(cls.id, {})).knobs
            for cls in self.order
            if cls.__init__ is Detector.__init__
        }


def prepare(config: DoctorConfig | None = None) -> Prepared:
    """The detector selection and knobs of ``config``, checked once (unknown IDs and knob names
    raise here); hand it to :func:`diagnose` as ``prepared``."""
    return Prepared(config or DoctorConfig())


def _diagnose(run: Run, config: DoctorConfig, prepared: Prepared, explain: bool) -> Diagnosis:
    classes = prepared.classes
    vitals = compute_vitals(run, tau=config.tau, window=config.window)
    findings: list[Finding] = []
    skipped: dict[str, str] = {}
    errors: dict[str, str] = {}
    strict = bool(os.environ.get("RLVITALS_STRICT"))
    selected = {c.id for c in classes}
    results: dict[str, list[Finding]] = {}
    knobs = prepared.knobs
    for cls in prepared.order:
        det = cls(knobs[cls.id]) if cls.id in knobs else cls(**config.knobs.get(cls.id, {}))
        try:
            # found= only for detectors that read others: a user's check(vitals) still works
            found = det.check(vitals, results) if cls.requires else det.check(vitals)
        except Exception as e:  # a detector bug must not hide the other findings
            if strict:
                raise
            tb = traceback.extract_tb(e.__traceback__)[-1]
            errors[cls.id] = f"{type(e).__name__}: {e} ({tb.filename}:{tb.lineno})"
            found = []
        results[cls.id] = found
        if cls.id not in selected or cls.id in errors:
            continue  # run only because a selected detector reads it
        findings.extend(found)
        if not found and explain:
            need = _why_not_judged(det, vitals)
            if need:
                skipped[cls.id] = need
    findings.sort(key=_sort_key)
    dx = Diagnosis(
        run=run,
        vitals=vitals,
        findings=findings,
        skipped=skipped,
        errors=errors,
        detectors=[c.id for c in classes],
        incidents=group_findings(findings, vitals),
        allow_unjudged=config.allow_unjudged,
    )
    try:
        dx.conditions = differential(dx)
    except Exception as e:  # the signs stand even when the cause cannot be named
        if strict:
            raise
        tb = traceback.extract_tb(e.__traceback__)[-1]
        errors["DIFFERENTIAL"] = f"{type(e).__name__}: {e} ({tb.filename}:{tb.lineno})"
    return dx


def _why_not_judged(det: Detector, vitals: Vitals) -> str | None:
    """What ``det`` (silent) would have needed, or None when it judged the run and found
    nothing. A collapse detector on a run too short to judge did not judge it."""
    need = det.needs(vitals)
    if need:
        return need
    if det.family == "collapse" and vitals.too_short and vitals.n_steps:
        return (
            f"too few points: the run spans {vitals.span_steps} training step(s), a collapse "
            f"is judged from {MIN_JUDGE_STEPS}"
        )
    return None


def _with_facts(run: Run, config: DoctorConfig) -> Run:
    """``run`` with the group size and reward range of ``config`` in its manifest."""
    changes: dict[str, Any] = {}
    if config.group_size is not None:
        changes["group_size"] = config.group_size
        where = config.group_size_source or config.source or "--group-size"
        changes["config"] = {**run.manifest.config, "group_size_source": where}
    if config.reward_range is not None:
        changes["reward_min"], changes["reward_max"] = map(float, config.reward_range)
    if not changes:
        return run
    return dataclasses.replace(run, manifest=dataclasses.replace(run.manifest, **changes))


def check_understood(run: Run, path: str | os.PathLike | None = None) -> None:
    """Raise :class:`~rlvitals.InputError` when no metric of ``run`` was understood.

    A run whose rows hold only keys rlvitals does not know (custom names, or values that are
    not numbers) has nothing any detector could judge; a clean report would read as a healthy
    run. The error names the keys that were not understood and how to map them.
    """
    if run.groups is not None and run.groups.n_groups:
        return
    unknown = set(run.unknown_keys)
    for name, series in (*run.series.items(), *run.eval_series.items()):
        if name not in unknown and np.isfinite(series).any():
            return
    detail = ""
    if run.unknown_keys:
        shown = ", ".join(run.unknown_keys[:6])
        if len(run.unknown_keys) > 6:
            shown += f" and {len(run.unknown_keys) - 6} more"
        detail = f"; keys not understood: {shown}"
    for warning in run.warnings[:1]:  # e.g. "... 3 non-numeric values ignored"
        detail += "; " + warning.removeprefix(f"{path}: ")
    raise InputError(
        path,
        f"no metric rlvitals knows in {run.n_steps} step row(s){detail} "
        "(map a custom key with --metric KEY=NAME; names: the metrics page)",
    )


def diagnose_path(
    path: str | os.PathLike,
    fmt: str | None = None,
    config: DoctorConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    require_known: bool = True,
    run: str | None = None,
    lenient: bool = False,
    split_phases: bool = False,
) -> Diagnosis:
    """Load ``path`` with the importers (format sniffed unless ``fmt``) and diagnose it.

    ``run`` chooses one run of a store that holds several (MLflow, a wandb/ folder, trackio,
    appended logs; ``rlvitals inspect`` lists them). With ``require_known`` (default) a file in
    which no metric was understood is refused (:func:`check_understood`) after the metric names
    of ``config`` are applied. ``lenient`` skips damaged records instead of refusing the input
    (:func:`rlvitals.importers.load`); each skip is in the run's warnings. ``split_phases``
    reads a curriculum's phases as separate runs (by default one run, steps continuing).
    """
    from rlvitals.importers import load

    run_ = load(path, fmt, progress, run=run, lenient=lenient, split_phases=split_phases)
    d = diagnose(run_, config)
    if require_known:
        check_understood(d.run, path)
    return d

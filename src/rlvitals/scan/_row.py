"""One row of a scan: what ``rlvitals scan`` says about one run, and the task that makes it.

:func:`scan_one` is the unit of work every engine runs (in-process, a process pool, a Ray
task): it reads and diagnoses one run with the library's own verbs (:func:`rlvitals.doctor.
diagnose_path`) and returns a :class:`ScanRow`, small and picklable. A run that cannot be read
is a row with its read error, never an exception: the scan goes on.

>>> from rlvitals.recording import RunBuilder
>>> from rlvitals.doctor import diagnose
>>> b = RunBuilder()
>>> for s in range(1, 121):
...     b.add_row(s, {"reward": s / 200, "frac_reward_zero_std": 0.2})
>>> b.add_row(100, {"eval/accuracy": 0.31}); b.add_row(120, {"eval/accuracy": 0.42})
>>> row = row_from_diagnosis(diagnose(b.build()), Job(0, 0, "run.jsonl", "jsonl"))
>>> row.acr_100, row.acr_100_from, row.eval_key, row.eval_final, row.eval_step, row.reward_final
(0.2, 'measured', 'eval/accuracy', 0.42, 120, 0.5775)
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from rlvitals.errors import InputError

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis, DoctorConfig

__all__ = [
    "FINAL_WINDOW",
    "Job",
    "ScanRow",
    "choose_eval_key",
    "row_from_diagnosis",
    "run_identity",
    "scan_one",
]

FINAL_WINDOW = 10
"""The final train reward is the mean of the last this many logged values (one value is noise)."""
IDENTITY_MIN_STEPS = 5
"""A run with fewer logged train rewards gets no identity (too little to tell runs apart)."""
IDENTITY_DIGITS = 4
"""Rewards are compared to this many significant digits (formats round differently)."""

_EVAL_TIERS = (
    re.compile(r"acc|pass@|pass_at|exact_match|correct|solve|success|win_rate", re.I),
    re.compile(r"score", re.I),
    re.compile(r"reward", re.I),
)
"""Eval keys in order of preference for "the final metric": accuracy-like first (what the paper
regresses on ACR_100), then scores, then rewards."""
_EVAL_NOT = re.compile(
    r"loss|runtime|per_second|length|entropy|(^|/)kl|time|(^|/)lr|learning_rate|std|min\b|max\b"
    r"|clip|grad|tokens|epoch|_steps",
    re.I,
)
"""Eval keys that are never "the final metric" (costs, spreads and bookkeeping)."""


@dataclass(frozen=True)
class Job:
    """One run to read: ``path`` in format ``fmt``; ``run`` selects one run of a store.

    Attributes:
        target: index of the discovered target (a file, folder or store) it belongs to.
        position: its place in the target's list of runs (0 for a single-run target).
        path: the file or folder to read.
        fmt: the importer that claimed it.
        run: the run to read from a store (its id, else its name), or None.
        name: the run's display name within its store, or None.
        probe: read the store's default run and report the store's list of runs (for stores
            whose importer cannot list them without reading one).
        config: the doctor's configuration.
        eval_key: the eval series to report as the final metric (None: chosen per run).
    """

    target: int
    position: int
    path: str
    fmt: str | None
    run: str | None = None
    name: str | None = None
    probe: bool = False
    config: DoctorConfig | None = None
    eval_key: str | None = None


@dataclass
class ScanRow:
    """What a scan says about one run (every field JSON-ready; None = not known / not logged).

    Attributes:
        path: the file or folder the run was found as; ``run``: its name within a store.
        run_id: what selects it in the store (``--run``), or None.
        format, source, trainer, step_key: the importer, the file actually read, the trainer,
            and where the step numbers came from (the step axis).
        steps, first_step, last_step: logged training steps.
        group_size: completions per prompt (G); ``evidence``: the collapse evidence tier.
        acr_100, acr_mean, acr_last: ACR over the first 100 steps, over the run, and the
            windowed ACR at the end (DESIGN.md 3.2).
        acr_100_from: ``measured`` (from the run's ACR), ``estimate`` (no ACR was logged:
            the doctor's expected ACR from the mean reward and G, as for veRL console logs), or
            None (neither).
        reward_range: ``[min, max]`` of the reward the vitals used (the run's scale).
        wasted: mean share of completions whose advantage was zero (wasted rollouts).
        reward_final: mean train reward over the last :data:`FINAL_WINDOW` logged values.
        eval_key, eval_final, eval_step: the final eval metric, which key, at which step.
        worst: the highest severity found; ``findings``: how many; ``severities``: per severity.
        finding_ids: the detectors that fired, sorted.
        incident, incident_root, incident_severity, incident_onset: the worst incident (its
            title, root-cause detector, severity and onset step).
        condition, condition_onset: the primary condition the doctor names (its ID from
            :mod:`rlvitals.conditions`, ``HEALTHY`` for nothing wrong) and its onset step.
        not_judged: why the collapse family could not judge the run, or None.
        error: why the run could not be read, or None (then the numbers are None).
        identity: a digest of the run's steps and train reward (None when it logged fewer
            than :data:`IDENTITY_MIN_STEPS` rewards): one run found in two formats has one.
        merged: the other places this run was found (``"path (format)"``), one row for all.
        rel: ``path`` relative to the scan's root (set by the scan; the tables show it).
        report: where ``--reports`` wrote the run's own report (a link from the page), or None.
    """

    path: str
    run: str | None = None
    run_id: str | None = None
    format: str | None = None
    source: str | None = None
    trainer: str | None = None
    step_key: str | None = None
    steps: int | None = None
    first_step: int | None = None
    last_step: int | None = None
    group_size: int | None = None
    evidence: str | None = None
    acr_100: float | None = None
    acr_mean: float | None = None
    acr_last: float | None = None
    acr_100_from: str | None = None
    reward_range: list | None = None
    wasted: float | None = None
    reward_final: float | None = None
    eval_key: str | None = None
    eval_final: float | None = None
    eval_step: int | None = None
    worst: str | None = None
    findings: int = 0
    severities: dict[str, int] = field(default_factory=dict)
    finding_ids: list[str] = field(default_factory=list)
    incident: str | None = None
    incident_root: str | None = None
    incident_severity: str | None = None
    incident_onset: int | None = None
    condition: str | None = None
    condition_onset: int | None = None
    not_judged: str | None = None
    error: str | None = None
    identity: str | None = None
    merged: list = field(default_factory=list)
    rel: str | None = None
    report: str | None = None

    @property
    def label(self) -> str:
        """``path`` (relative to the scan's root when known) and, for a run of a store,
        ``[run]``."""
        path = self.rel or self.path
        return f"{path} [{self.run}]" if self.run else path

    @property
    def status(self) -> str:
        """``error``, ``not judged``, the worst severity, or ``ok``."""
        if self.error:
            return "error"
        if self.not_judged:
            return "not judged"
        return self.worst or "ok"

    def fails(self, fail_on: str, allow_unjudged: bool = False) -> bool:
        """As :meth:`rlvitals.doctor.Diagnosis.fails`: a finding at or above ``fail_on``, or
        (unless ``allow_unjudged``) a run not judged or not read. ``never`` never fails."""
        from rlvitals.detectors import Severity

        if fail_on == "never":
            return False
        if (self.error or self.not_judged) and not allow_unjudged:
            return True
        bar = Severity.parse(fail_on).rank
        if self.condition not in (None, "HEALTHY"):  # a named cause fails like the doctor's
            from rlvitals.doctor.differential import condition_severity

            if Severity(condition_severity(self.condition)).rank >= bar:
                return True
        return any(Severity(s).rank >= bar for s, n in self.severities.items() if n)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ScanRow:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def from_cache(cls, d: Any) -> ScanRow:
        """:meth:`from_dict` for a row read back from the scan cache, checked field by field:
        ValueError for anything :meth:`to_dict` could not have written (a damaged row, or a
        foreign one planted in the cache), so the caller treats it as a miss."""
        if not isinstance(d, dict) or set(d) != {f.name for f in fields(cls)}:
            raise ValueError("not a scan row")
        for name, (kinds, optional) in _cache_kinds().items():
            v = d[name]
            if (v is None and not optional) or (
                v is not None and (isinstance(v, bool) or not isinstance(v, kinds))
            ):
                raise ValueError(f"bad {name}")
        sev = d["severities"]
        if not all(k in _SEVERITIES and isinstance(n, int) for k, n in sev.items()):
            raise ValueError("bad severities")
        for name in ("finding_ids", "merged"):
            if not all(isinstance(x, str) for x in d[name]):
                raise ValueError(f"bad {name}")
        rr = d["reward_range"]
        if rr is not None and (
            len(rr) != 2
            or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in rr)
        ):
            raise ValueError("bad reward_range")
        for name in ("worst", "incident_severity"):
            if d[name] is not None and d[name] not in _SEVERITIES:
                raise ValueError(f"bad {name}")
        return cls(**d)


_SEVERITIES = frozenset({"info", "warn", "critical"})
_KIND_OF = {"str": (str,), "int": (int,), "float": (int, float), "dict": (dict,), "list": (list,)}


def _cache_kinds() -> dict[str, tuple[tuple[type, ...], bool]]:
    """Field -> (the types its value may have, whether None is allowed), from the annotations."""
    out = {}
    for f in fields(ScanRow):
        t = str(f.type)
        # a field of another kind (added later) is not checked beyond being there
        out[f.name] = (_KIND_OF.get(re.match(r"\w+", t).group(), (object,)), "None" in t)
    return out


def _r(x: Any, digits: int = 6) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, digits) if math.isfinite(x) else None


def _last_finite(steps: np.ndarray, values: np.ndarray) -> tuple[float | None, int | None]:
    ok = np.flatnonzero(np.isfinite(values))
    if not ok.size:
        return None, None
    i = int(ok[-1])
    return float(values[i]), int(steps[i])


def choose_eval_key(eval_series: dict[str, np.ndarray]) -> str | None:
    """The eval series that stands for "the final metric": accuracy-like keys first, then
    scores, then rewards (never a loss, a length or a time); ties by name. None when the run
    has no such series.

    >>> nan = float("nan")
    >>> choose_eval_key({"eval/loss": np.ones(2), "eval/reward_mean": np.ones(2),
    ...                  "eval/math/acc": np.array([nan, 0.4])})
    'eval/math/acc'
    >>> choose_eval_key({"eval/loss": np.ones(2)}) is None
    True
    """
    for tier in _EVAL_TIERS:
        hits = sorted(
            k
            for k, v in eval_series.items()
            if tier.search(k.removeprefix("eval/"))
            and not _EVAL_NOT.search(k.removeprefix("eval/"))
            and np.isfinite(v).any()
        )
        if hits:
            return hits[0]
    return None


def run_identity(steps: np.ndarray, reward: np.ndarray | None) -> str | None:
    """A digest of the steps that logged a train reward and the rewards (to
    :data:`IDENTITY_DIGITS` significant digits): the same run read from two formats has the same
    one, two runs almost never do. None below :data:`IDENTITY_MIN_STEPS` rewards.

    >>> s = np.arange(1, 9); r = np.linspace(0.1, 0.8, 8)
    >>> run_identity(s, r) == run_identity(s, r.astype(np.float32)), run_identity(s[:3], r[:3])
    (True, None)
    """
    if reward is None:
        return None
    ok = np.isfinite(reward)
    if int(ok.sum()) < IDENTITY_MIN_STEPS:
        return None
    values = [float(f"{x:.{IDENTITY_DIGITS}g}") for x in np.asarray(reward, np.float64)[ok]]
    blob = repr((np.asarray(steps)[ok].astype(np.int64).tolist(), values))
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _acr_100(v, summary: dict) -> tuple[float | None, str | None]:
    """ACR_100 measured, else the doctor's estimate (expected ACR from the mean reward and G)."""
    if summary.get("acr_100") is not None:
        return summary["acr_100"], "measured"
    expected = v.series.get("expected_acr")
    if v.expected_acr_from == "estimate" and expected is not None:
        from rlvitals.signal import acr_100

        est = acr_100(expected, v.steps)
        if math.isfinite(est):
            return float(est), "estimate"
    return None, None


def row_from_diagnosis(d: Diagnosis, job: Job) -> ScanRow:
    """The row of a diagnosed run (see :class:`ScanRow`)."""
    run, v = d.run, d.vitals
    m = run.manifest
    summary = v.summary()
    acr100, acr100_from = _acr_100(v, summary)
    reward = run.series.get("reward_mean")
    reward_final = None
    if reward is not None:
        finite = reward[np.isfinite(reward)]
        if finite.size:
            reward_final = float(np.mean(finite[-FINAL_WINDOW:]))
    key = job.eval_key if job.eval_key is not None else choose_eval_key(run.eval_series)
    eval_final = eval_step = None
    if key is not None and key in run.eval_series:
        eval_final, eval_step = _last_finite(run.eval_steps, run.eval_series[key])
    elif key is not None and key in run.series:  # --eval-key may name a train series too
        eval_final, eval_step = _last_finite(run.steps, run.series[key])
    if eval_final is None and job.eval_key is None:
        key = None
    severities = dict(Counter(getattr(f.severity, "value", f.severity) for f in d.findings))
    worst = d.worst()
    inc = d.incidents[0] if d.incidents else None
    return ScanRow(
        path=job.path,
        run=job.name,
        run_id=job.run,
        format=m.format,
        source=m.source,
        trainer=m.trainer,
        step_key=m.step_key,
        steps=v.n_steps,
        first_step=summary.get("first_step"),
        last_step=summary.get("last_step"),
        group_size=v.group_size,
        evidence=v.evidence,
        acr_100=_r(acr100),
        acr_100_from=acr100_from,
        reward_range=[_r(v.reward_min), _r(v.reward_max)],
        acr_mean=_r(summary.get("acr_mean")),
        acr_last=_r(summary.get("acr_windowed_last")),
        wasted=_r(summary.get("wasted_frac_mean")),
        reward_final=_r(reward_final),
        eval_key=key,
        eval_final=_r(eval_final),
        eval_step=eval_step,
        worst=worst.value if worst else None,
        findings=len(d.findings),
        severities=severities,
        finding_ids=sorted({f.id for f in d.findings}),
        incident=inc.title if inc else None,
        incident_root=inc.root if inc else None,
        incident_severity=getattr(inc.severity, "value", inc.severity) if inc else None,
        incident_onset=inc.onset_step if inc else None,
        condition=d.conditions[0].id if d.conditions else None,
        condition_onset=d.conditions[0].onset_step if d.conditions else None,
        not_judged=d.not_judged(),
        identity=run_identity(run.steps, reward),
    )


def error_row(job: Job, error: str) -> ScanRow:
    """The row of a run that could not be read."""
    return ScanRow(path=job.path, run=job.name, run_id=job.run, format=job.fmt, error=error)


def scan_one(job: Job) -> tuple[ScanRow, list[dict] | None]:
    """Read and diagnose the run ``job`` names: ``(row, runs)``.

    ``runs`` is the store's list of runs when ``job.probe`` (``[]`` for a single run), else
    None. Bad input is a row with its error (the file and the problem, one line); so is an
    unexpected exception (a bug, named with its type): the scan never stops on one run.
    """
    from rlvitals.doctor import diagnose_path
    from rlvitals.importers import runs_of

    try:
        d = diagnose_path(job.path, job.fmt, job.config, run=job.run)
    except InputError as e:
        return error_row(job, _one_line(str(e))), None
    except MemoryError:
        return error_row(job, f"{job.path}: out of memory reading it"), None
    except RecursionError:
        return error_row(job, f"{job.path}: input nested too deeply to read"), None
    except Exception as e:  # a bug in a reader or detector: said, and the scan goes on
        return error_row(job, f"{job.path}: internal error: {type(e).__name__}: {e}"), None
    listing = None
    if job.probe:
        listing = [dict(r) for r in runs_of(d.run)] if len(runs_of(d.run)) > 1 else []
        read = next((r for r in listing if r.get("read")), None)
        if read is not None:
            position, name = listing.index(read), str(read.get("name"))
            job = replace(job, position=position, run=_selector(read), name=name, probe=False)
    return row_from_diagnosis(d, job), listing


def _selector(entry: dict) -> str:
    """What ``load(path, run=...)`` takes for a listed run: its id, else its name."""
    return str(entry.get("id") or entry.get("name"))


def _one_line(text: str) -> str:
    return " ".join(text.split())

"""Two runs side by side: what differs in their configuration, since which step their vitals
part ways, and which incidents one has and the other not.

**Configuration.** The manifest facts (trainer, G, scale_rewards, estimator, KL, reward range,
...) and the source's raw configuration, flattened to dotted keys (``args.learning_rate``);
keys that name the run rather than configure it (:data:`NOT_CONFIG`: output folders, run names,
the source path) are left out. A key one run has and the other not is a difference too.

**Divergence.** For each series of :data:`SERIES` both runs log, on the steps both logged: each
run's values smoothed by a trailing median over :data:`SMOOTH` points (a blip of a few steps
moves no median). The tolerance is the larger of :data:`SHARE` of the series' range (5th to
95th percentile over both runs) and :data:`NOISE_Z` times the noise of the smoothed
difference (each run's point-to-point noise, from the median absolute first difference). The
series diverges at the first step of :data:`SUSTAIN` consecutive common points whose smoothed
values differ by more than the tolerance, moved back over the steps just before it whose raw
values already differ by more than the tolerance (the smoothing lags a step change); the runs
diverge at the earliest such step over the series.

**Incidents.** An incident of one run is matched with an incident of the other that has the
same root cause or shares a detector; the unmatched ones are present in one run only.

>>> from rlvitals.recording import RunBuilder
>>> from rlvitals.doctor import diagnose
>>> def run(onset):
...     b = RunBuilder()
...     for s in range(1, 201):
...         b.add_row(s, {"reward": 0.5, "frac_reward_zero_std": 0.9 if s >= onset else 0.1})
...     return diagnose(b.build())
>>> c = compare(run(400), run(120))
>>> c.first.series, c.first.step, [i["root"] for i in c.only_b]
('acr', 120, ['DEGENERATE_GROUPS'])
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis, DoctorConfig

__all__ = [
    "FORMATS",
    "NOISE_Z",
    "NOT_CONFIG",
    "SERIES",
    "SHARE",
    "SMOOTH",
    "SUSTAIN",
    "Comparison",
    "ConfigSections",
    "Divergence",
    "compare",
    "compare_paths",
    "config_differences",
    "config_sections",
    "divergence",
    "render_compare",
]

SERIES = ("acr", "reward_mean", "adv_std", "entropy", "kl", "length_mean", "grad_norm")
"""The vitals compared for divergence, most telling first."""
SMOOTH = 10
"""Trailing median over this many common logged points before comparing."""
SHARE = 0.1
"""Tolerance: at least this share of the series' range (5th-95th percentile of both runs)."""
NOISE_Z = 4.0
"""... and at least this many times the noise of the smoothed difference."""
_MAD_SIGMA = 1.4826
"""Median absolute deviation → standard deviation, for normal noise."""
_MEDIAN_EFFICIENCY = 1.25
"""The noise of a median of n points is about this times that of their mean."""
SUSTAIN = 5
"""Consecutive common points beyond the tolerance that make a divergence."""
NOT_CONFIG = frozenset(
    {
        "source",
        "format",
        "output_dir",
        "logging_dir",
        "run_name",
        "run",
        "args_source",
        "summary",
        "experiment",
        "group_size_source",
        "hub_model_id",
        "config_source",
        "entrypoint",
        # trainer_state.json bookkeeping: where the run got to, not how it was set up
        "global_step",
        "epoch",
        "total_flos",
        "num_input_tokens_seen",
        "best_metric",
        "best_global_step",
        "best_model_checkpoint",
        "is_local_process_zero",
        "is_world_process_zero",
        "is_hyper_param_search",
        "stateful_callbacks",
        "trial_name",
        "trial_params",
    }
)
"""Keys (at any depth) that name, locate or date a run rather than configure it."""
_MANIFEST_FACTS = (
    "trainer",
    "trainer_version",
    "group_size",
    "scale_rewards",
    "estimator",
    "adv_scale",
    "kl_coef",
    "reward_min",
    "reward_max",
    "filters_zero_var",
    "logging_steps",
    "step_key",
    "reward_std_kind",
)
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Divergence:
    """Where one series of the two runs parts ways.

    Attributes:
        series: the vitals name.
        step: first step of the divergence, or None (never, or not comparable: ``why``).
        a, b: each run's value at that step; ``tolerance``: the difference allowed.
        points: steps both runs logged the series at.
        why: why there is no step ("within tolerance", "not logged by A", ...).
    """

    series: str
    step: int | None
    a: float | None = None
    b: float | None = None
    tolerance: float | None = None
    points: int = 0
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Comparison:
    """Two diagnosed runs compared (see the module docstring).

    Attributes:
        a, b: the diagnoses; ``labels``: how each is named (its source).
        config: ``(key, value in A, value in B)`` for every key that differs (None = absent).
        divergences: one per series of :data:`SERIES`; ``first``: the earliest, or None.
        only_a, only_b: incidents (their JSON form) present in one run only.
        both: ``(incident of A, incident of B)`` matched pairs.
    """

    a: Diagnosis
    b: Diagnosis
    labels: tuple[str, str]
    config: list[tuple[str, Any, Any]] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    first: Divergence | None = None
    only_a: list[dict] = field(default_factory=list)
    only_b: list[dict] = field(default_factory=list)
    both: list[tuple[dict, dict]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        from rlvitals.report.json_report import strict

        def side(d: Diagnosis, label: str) -> dict[str, Any]:
            full = d.to_dict()
            keys = ("run", "vitals", "worst", "not_judged", "conditions", "incidents")
            return {"label": label, **{k: full[k] for k in keys}}

        return strict(
            {
                "schema": 1,
                "a": side(self.a, self.labels[0]),
                "b": side(self.b, self.labels[1]),
                "config": [{"key": k, "a": x, "b": y} for k, x, y in self.config],
                "first_divergence": self.first.to_dict() if self.first else None,
                "divergences": [d.to_dict() for d in self.divergences],
                "only_a": self.only_a,
                "only_b": self.only_b,
                "both": [{"a": x, "b": y} for x, y in self.both],
            }
        )


def _flatten(obj: Any, prefix: str, out: dict[str, Any], depth: int = 0) -> None:
    if isinstance(obj, dict) and depth < _MAX_DEPTH:
        for k, v in obj.items():
            if str(k) in NOT_CONFIG:
                continue
            _flatten(v, f"{prefix}{k}.", out, depth + 1)
        return
    key = prefix[:-1]
    if isinstance(obj, (list, tuple, dict)):
        obj = json.dumps(obj, sort_keys=True, default=str)
    out[key] = obj


def _config_of(d: Diagnosis) -> dict[str, Any]:
    m = d.run.manifest
    raw: dict[str, Any] = {}
    _flatten(m.config, "", raw)
    facts = {k: getattr(m, k) for k in _MANIFEST_FACTS}
    return {**{k: v for k, v in raw.items() if k not in facts}, **facts}


def config_differences(a: Diagnosis, b: Diagnosis) -> list[tuple[str, Any, Any]]:
    """``(key, A's value, B's value)`` for every configuration key that differs (module
    docstring), manifest facts first, then the raw configuration by key."""
    ca, cb = _config_of(a), _config_of(b)
    keys = [*_MANIFEST_FACTS, *sorted((set(ca) | set(cb)) - set(_MANIFEST_FACTS))]
    return [(k, ca.get(k), cb.get(k)) for k in keys if ca.get(k) != cb.get(k)]


def _smooth(x: np.ndarray, w: int) -> np.ndarray:
    """Trailing median over ``w`` points (fewer at the start)."""
    if x.size >= w:
        win = np.lib.stride_tricks.sliding_window_view(x, w)
        tail = np.median(win, axis=1)
    else:
        tail = np.zeros(0)
    head = [float(np.median(x[: i + 1])) for i in range(min(w - 1, x.size))]
    return np.r_[head, tail]


def _noise(x: np.ndarray) -> float:
    """Point-to-point noise of ``x`` (robust to trends and steps: first differences' MAD)."""
    if x.size < 3:
        return 0.0
    d = np.diff(x)
    return _MAD_SIGMA * float(np.median(np.abs(d - np.median(d)))) / np.sqrt(2.0)


def divergence(a: Diagnosis, b: Diagnosis, name: str) -> Divergence:
    """Where series ``name`` of the two runs diverges (module docstring)."""
    sa, sb = a.vitals.series.get(name), b.vitals.series.get(name)
    missing = [lab for lab, s in (("A", sa), ("B", sb)) if s is None or not np.isfinite(s).any()]
    if missing:
        return Divergence(name, None, why=f"not logged by {' and '.join(missing)}")
    ta, tb = a.vitals.steps[np.isfinite(sa)], b.vitals.steps[np.isfinite(sb)]
    common, ia, ib = np.intersect1d(ta, tb, assume_unique=True, return_indices=True)
    if common.size < SUSTAIN:
        return Divergence(name, None, points=int(common.size), why="too few common steps")
    xa = sa[np.isfinite(sa)][ia]
    xb = sb[np.isfinite(sb)][ib]
    lo, hi = np.percentile(np.r_[xa, xb], [5, 95])
    noise = np.hypot(_noise(xa), _noise(xb)) * _MEDIAN_EFFICIENCY / np.sqrt(SMOOTH)
    tol = max(SHARE * float(hi - lo), NOISE_Z * float(noise))
    ma, mb = _smooth(xa, SMOOTH), _smooth(xb, SMOOTH)
    over = np.abs(ma - mb) > max(tol, 1e-12)
    run = np.convolve(over.astype(int), np.ones(SUSTAIN, dtype=int), mode="valid")
    hits = np.flatnonzero(run == SUSTAIN)
    if not hits.size:
        return Divergence(
            name, None, tolerance=tol, points=int(common.size), why="within tolerance"
        )
    i = int(hits[0])
    raw = np.abs(xa - xb) > max(tol, 1e-12)
    while i > 0 and raw[i - 1]:  # the smoothing lags: back to where the raw values parted
        i -= 1
    return Divergence(name, int(common[i]), float(xa[i]), float(xb[i]), tol, int(common.size))


def _matches(x: dict, y: dict) -> bool:
    return x["root"] == y["root"] or bool(set(x["detectors"]) & set(y["detectors"]))


def _incidents(d: Diagnosis) -> list[dict]:
    return [inc.to_dict() for inc in d.incidents]


def compare(a: Diagnosis, b: Diagnosis, labels: tuple[str, str] | None = None) -> Comparison:
    """Compare two diagnosed runs (module docstring)."""
    labels = labels or (str(a.run.manifest.source or "A"), str(b.run.manifest.source or "B"))
    divs = [divergence(a, b, s) for s in SERIES]
    timed = [d for d in divs if d.step is not None]
    first = min(timed, key=lambda d: (d.step, SERIES.index(d.series))) if timed else None
    ia, ib = _incidents(a), _incidents(b)
    both, only_a, used = [], [], set()
    for x in ia:
        k = next((k for k, y in enumerate(ib) if k not in used and _matches(x, y)), None)
        if k is None:
            only_a.append(x)
        else:
            used.add(k)
            both.append((x, ib[k]))
    only_b = [y for k, y in enumerate(ib) if k not in used]
    return Comparison(a, b, labels, config_differences(a, b), divs, first, only_a, only_b, both)


def compare_paths(
    a: str | os.PathLike,
    b: str | os.PathLike,
    *,
    run_a: str | None = None,
    run_b: str | None = None,
    fmt: str | None = None,
    config: DoctorConfig | None = None,
) -> Comparison:
    """Load and diagnose two runs (:func:`rlvitals.doctor.diagnose_path`), then compare them;
    ``run_a`` / ``run_b`` choose a run of a store holding several."""
    from rlvitals.doctor import diagnose_path

    da = diagnose_path(a, fmt, config, run=run_a)
    db = diagnose_path(b, fmt, config, run=run_b)
    la = f"{os.fspath(a)} [{run_a}]" if run_a else os.fspath(a)
    lb = f"{os.fspath(b)} [{run_b}]" if run_b else os.fspath(b)
    return compare(da, db, (la, lb))


from rlvitals.compare._config import ConfigSections, config_sections  # noqa: E402
from rlvitals.compare._render import FORMATS, render_compare  # noqa: E402  (after Comparison)

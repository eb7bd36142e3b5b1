"""Labelled scenarios for the non-collapse detector families, on the corpus simulator.

``other_failure`` takes a healthy simulated run (random G, N, difficulty, reward kind) and injects
one failure of one detector at an onset of the requested kind (early, middle, late, transient),
seen through a trainer view and a logging interval like every other corpus run. The failure
shapes follow :mod:`rlvitals_corpus.families` (the detectors' own bad runs), randomised.

>>> from rlvitals_corpus import generate
>>> lr = generate("other_failure", seed=3, detector="KL_BLOWUP", onset_kind="middle")
>>> [lab.id for lab in lr.expect], lr.family
(['KL_BLOWUP'], 'kl')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from rlvitals_corpus import SUITES, Label, LabelledRun, scenario
from rlvitals_corpus.scenarios import _base_spec, _steps_for, build, onset_at
from rlvitals_corpus.sim import Sim, simulate

__all__ = ["ALLOW", "FAMILY", "INJECT", "other_suite"]

FAMILY = {
    "ENTROPY_COLLAPSE": "entropy",
    "KL_BLOWUP": "kl",
    "LENGTH_EXPLOSION": "length",
    "TRUNCATION": "length",
    "CLIP_SATURATION": "clip",
    "GRAD_NONFINITE": "gradient",
    "GRAD_SPIKE": "gradient",
    "ZERO_GRAD_STEPS": "gradient",
    "REWARD_HACKING": "reward",
    "THROUGHPUT_ROT": "throughput",
}
"""Detector ID → its family."""

ALLOW = {
    "LENGTH_EXPLOSION": {"TRUNCATION", "THROUGHPUT_ROT"},
    "ZERO_GRAD_STEPS": {"ADV_COLLAPSE"},
    "GRAD_NONFINITE": {"ADV_COLLAPSE"},
    "ENTROPY_COLLAPSE": {"SATURATION"},
}
"""IDs that may fire beside the injected one (they describe the same events)."""

VIEWS = {
    "TRUNCATION": ("trl", "verl"),
    "REWARD_HACKING": ("trl", "full", "verl"),
}
"""Views that carry the detector's series (default: trl, full, verl)."""

TOLERANCE = {"REWARD_HACKING": 1.0}
"""Onset tolerance in logged points where it is not the default 3 (eval points for hacking)."""

STEP_TIME = 60.0
TOKENS_PER_STEP = 512 * 300.0


def _window(T: int, onset: int, end: int | None) -> np.ndarray:
    """``(T,)`` bool: steps onset..end (inclusive; to the end when ``end`` is None)."""
    t = np.arange(1, T + 1)
    return (t >= onset) & (t <= (end if end is not None else T))


def _entropy(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    w = _window(T, onset, end)
    early = float(np.median(m["entropy"][:5]))
    m["entropy"] = np.where(
        w, early * rng.uniform(0.01, 0.05) * rng.lognormal(0, 0.1, T), m["entropy"]
    )
    r = m["reward_mean"]
    m["reward_mean"] = np.where(w, r[onset - 1] + rng.normal(0, 0.005, T), r)


def _kl(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    t = np.arange(1, T + 1)
    base = m.get("kl")
    if base is None:
        base = 0.02 * (t / T) * rng.lognormal(0, 0.2, T) + 1e-4
    level = max(float(np.median(base[max(0, onset - 20) : onset])), 0.02)
    boost = np.minimum(np.exp(np.clip(t - onset + 1, 0, 10)), rng.uniform(15, 60))
    m["kl"] = np.where(_window(T, onset, end), level * boost * rng.lognormal(0, 0.1, T), base)


def _length(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    w = _window(T, onset, end)
    f = rng.uniform(2.0, 3.0)
    m["length_mean"] = np.where(w, m["length_mean"] * f, m["length_mean"])
    m["truncation_frac"] = np.where(
        w, np.clip(m["truncation_frac"] + 0.3 * (f - 1), 0, 1), m["truncation_frac"]
    )


def _truncation(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    frac = np.clip(rng.normal(rng.uniform(0.2, 0.45), 0.03, T), 0, 1)
    m["truncation_frac"] = np.where(_window(T, onset, end), frac, m["truncation_frac"])


def _clip(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    frac = np.clip(rng.normal(rng.uniform(0.3, 0.5), 0.04, T), 0, 1)
    m["clip_frac"] = np.where(_window(T, onset, end), frac, m["clip_frac"])


def _nonfinite(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    w = _window(T, onset, end)
    m["grad_norm"] = np.where(w, np.nan, m["grad_norm"])
    m["loss"] = np.where(w, np.nan, m["loss"])
    m["grad_norm"][onset - 1] = np.inf


def _spike(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    last = end if end is not None else T
    hits = np.unique(np.r_[onset, rng.integers(onset, last + 1, size=3)])
    g = m["grad_norm"].copy()
    # x k: a trainer that averages over its logging interval still shows a severe spike
    level = np.maximum(g[hits - 1], np.median(g))  # a spike even on a step with ~0 gradient
    g[hits - 1] = level * rng.uniform(150, 400, size=hits.size) * sim.extra.get("log_every", 1)
    m["grad_norm"] = g


def _zero(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    m, T = sim.metrics, sim.steps.shape[0]
    t = np.arange(1, T + 1)
    # every step, or every 2nd/3rd when each step is logged (averaged logs would hide those)
    every = 1 if sim.extra.get("log_every", 1) > 1 else int(rng.integers(1, 4))
    hit = _window(T, onset, end) & ((t - onset) % every == 0)
    m["grad_norm"] = np.where(hit, 0.0, m["grad_norm"])
    m["loss"] = np.where(hit, 0.0, m["loss"])


def _throughput(sim: Sim, rng: np.random.Generator, onset: int, end: int | None) -> None:
    sim.extra["slowdown"] = (onset, end, float(rng.uniform(1.8, 3.0)))


INJECT: dict[str, Callable[[Sim, np.random.Generator, int, int | None], None]] = {
    "ENTROPY_COLLAPSE": _entropy,
    "KL_BLOWUP": _kl,
    "LENGTH_EXPLOSION": _length,
    "TRUNCATION": _truncation,
    "CLIP_SATURATION": _clip,
    "GRAD_NONFINITE": _nonfinite,
    "GRAD_SPIKE": _spike,
    "ZERO_GRAD_STEPS": _zero,
    "REWARD_HACKING": lambda *a: None,
    "THROUGHPUT_ROT": _throughput,
}
"""Detector ID → ``(sim, rng, onset, end)`` that writes the failure into ``sim.metrics``."""


def _add_timing(lr: LabelledRun, sim: Sim, rng: np.random.Generator) -> None:
    """Step time and tokens/s columns (not part of the simulator's views), slowed if asked."""
    steps = lr.steps
    n = steps.shape[0]
    step_time = STEP_TIME * rng.lognormal(0, 0.04, n)
    step_time[0] *= 3.0  # warm-up
    slow = sim.extra.get("slowdown")
    if slow is not None:
        onset, end, f = slow
        w = (steps >= onset) & (steps <= (end if end is not None else steps[-1] + 1))
        step_time = np.where(w, step_time * f, step_time)
    lr.columns["step_time"] = step_time
    lr.columns["throughput"] = TOKENS_PER_STEP / step_time


def _hack_eval(lr: LabelledRun, onset: int, rng: np.random.Generator) -> None:
    """Training reward keeps rising after ``onset`` while the evaluation falls."""
    T = int(lr.params.get("steps", lr.steps[-1]))
    for key in ("reward", "reward_mean", "critic/score/mean"):
        if key in lr.columns:
            r = lr.columns[key]
            after = lr.steps >= onset
            lr.columns[key] = np.where(after, r + 0.3 * (lr.steps - onset) / max(T - onset, 1), r)
    es = lr.eval_steps
    start = float(rng.uniform(0.3, 0.5))
    peak = start + float(rng.uniform(0.1, 0.2))
    rise = start + (peak - start) * es / onset
    fall = peak - rng.uniform(0.15, 0.3) * (es - onset) / max(T - onset, 1)
    lr.eval_columns["eval_reward"] = np.where(es > onset, fall, rise) + rng.normal(
        0, 0.005, es.size
    )


@scenario("other_failure")
def other_failure(
    rng: np.random.Generator,
    detector: str = "KL_BLOWUP",
    onset_kind: str = "middle",
    view: str = "trl",
    log_every: int = 1,
    nan_rows: float = 0.0,
) -> LabelledRun:
    """A healthy simulated run with one failure of ``detector`` injected at ``onset_kind``."""
    if detector not in INJECT:
        raise ValueError(f"unknown detector {detector!r}; valid: {', '.join(sorted(INJECT))}")
    k = log_every
    T = _steps_for(rng, k)
    # a steady prompt set: the injected failure is the only thing going on
    spec = _base_spec(
        rng,
        T,
        kl_coef=float(rng.choice([0.0, 0.04])),
        kl_growth=0.05,
        skill0=rng.uniform(-0.5, 0.5),
        skill1=rng.uniform(0.2, 1.0),
    )
    sim = simulate(spec, rng)
    eval_every = 0
    if detector == "REWARD_HACKING":
        eval_every = int(rng.choice([10, 20]))
        onset = int(rng.uniform(0.4, 0.6) * T) // eval_every * eval_every
        end = None
    else:
        onset, end = onset_at(onset_kind, T, k, rng)
    sim.extra["log_every"] = k
    INJECT[detector](sim, rng, onset, end)
    tol = TOLERANCE.get(detector, 3.0) * (eval_every / k if eval_every else 1.0)
    lr = build(
        sim,
        name=f"other-{detector.lower()}-{onset_kind}-{view}-k{k}",
        scenario_name="other_failure",
        view=view,
        log_every=k,
        expect=[Label(detector, onset, end, tolerance=tol)],
        allow=ALLOW.get(detector, set()),
        nan_rows=nan_rows,
        eval_every=eval_every,
        rng=rng,
        family=FAMILY[detector],
    )
    lr.params = {"steps": T}
    _add_timing(lr, sim, rng)
    if detector == "REWARD_HACKING":
        _hack_eval(lr, onset, rng)
        # the corpus CSV writer writes no evaluation rows
        lr.formats = tuple(f for f in lr.formats if f != "csv") or ("jsonl",)
    return lr


def other_suite(size: str = "ci", seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """``[(scenario, params), ...]``: every detector of the other families at every onset kind,
    through its views and logging intervals; ``ci`` is a small random subset."""
    rng = np.random.default_rng(seed)
    full = size == "full"
    out: list[tuple[str, dict[str, Any]]] = []
    n = seed * 100_000
    for det in INJECT:
        kinds = ("middle",) if det == "REWARD_HACKING" else ("early", "middle", "late", "transient")
        for kind in kinds:
            for view in VIEWS.get(det, ("trl", "full", "verl")):
                if not full and rng.random() < 0.6:
                    continue
                k = int(rng.choice([1, 1, 1, 5, 10]))
                n += 1
                out.append(
                    (
                        "other_failure",
                        {
                            "seed": n,
                            "detector": det,
                            "onset_kind": kind,
                            "view": view,
                            "log_every": k,
                            "nan_rows": float(rng.choice([0.0, 0.02])),
                        },
                    )
                )
    return out


# --------------------------------------------------------------------------------------------
# Suites per family


def _family_suite(family: str) -> Callable[[str, int], list[tuple[str, dict[str, Any]]]]:
    def make(size: str = "ci", seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
        return [s for s in other_suite(size, seed) if FAMILY[s[1]["detector"]] == family]

    make.__doc__ = f"The ``{family}`` family's failures from :func:`other_suite`."
    return make


for _family in sorted(set(FAMILY.values())):
    SUITES.add(_family, _family_suite(_family))

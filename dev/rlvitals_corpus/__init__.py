"""A labelled corpus of synthetic runs: runs whose failures (and their onsets) are known.

Development only: it lives in ``dev/`` beside the tests, outside the package that ships, and
its writers import tracker libraries (tensorboardX, wandb, mlflow) the product never needs.
Tests, benchmarks, the quality bar and the docs generator share it.

A *scenario* is a function ``(rng, **params) -> LabelledRun`` registered under a name with
:func:`scenario`; the families of detectors each add theirs (the collapse family's live in
:mod:`rlvitals_corpus.scenarios`, the others' in :mod:`rlvitals_corpus.other`).
A :class:`LabelledRun` holds per-step columns under trainer key names, optional per-group
rewards, events, the manifest facts, and its labels: which detector IDs must fire and since
when. Every detector's own ``bad`` and ``good`` run is in one registry,
:data:`rlvitals_corpus.fixtures.PAIRS`.

Writers (:mod:`rlvitals_corpus.writers`) put a labelled run on disk in a real input format
(TRL ``trainer_state.json``, generic JSONL / CSV, per-group JSONL, veRL console and file-logger
lines, OpenRLHF console, TensorBoard, the rlvitals recording, W&B, MLflow), so the quality bar
reads it back through the importers like a user's file.

>>> lr = generate("collapse_identical", seed=1, onset_kind="middle", view="zero_std_frac")
>>> [(lab.id, lab.onset) for lab in lr.expect]  # doctest: +ELLIPSIS
[('DEGENERATE_GROUPS', ...)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvitals.recording.run import Event, GroupTable, Manifest, Run, RunBuilder
from rlvitals.registry import Plugins, Registry

__all__ = [
    "SCENARIOS",
    "SUITES",
    "Label",
    "LabelledRun",
    "generate",
    "scenario",
    "suite",
    "to_run",
]


@dataclass(frozen=True)
class Label:
    """A failure a detector must report.

    Attributes:
        id: detector ID that must fire.
        onset: training step the failure began (None: no onset is checked).
        end: last step of a failure that cleared (None: ongoing or not checked).
        tolerance: allowed onset error in logged steps (gradual failures get more).
    """

    id: str
    onset: int | None = None
    end: int | None = None
    tolerance: float = 3.0


@dataclass
class LabelledRun:
    """A synthetic run and what is wrong with it.

    Attributes:
        name: unique name (scenario, parameters, seed).
        scenario: the scenario that made it; ``family``: its detector family.
        steps: ``(n,)`` logged training steps.
        columns: trainer key → ``(n,)`` float (NaN = not logged on that row).
        groups: per-group rewards (all training steps), or None.
        eval_steps, eval_columns: evaluation rows (keys like ``eval_reward``).
        events: events of the run (alerts, halts, the recorder's ``dropped`` reports).
        manifest: facts a real source would carry (group size, scale_rewards, ...).
        expect: labels that must fire; ``allow``: other IDs that may fire at warn or above
            without being a false alarm (``"*"`` allows any).
        forbid: IDs whose firing is a wrong diagnosis (e.g. DEGENERATE_GROUPS on a plumbing bug).
        healthy: True for runs where nothing at warn or above may fire.
        view: which evidence the run carries (``full``, ``groups``, ``zero_std_frac``, ...).
        formats: writer names that can express this run, preferred first.
        log_every: training steps between logged rows.
        params: the scenario parameters, for reports.
    """

    name: str
    scenario: str
    family: str
    steps: np.ndarray
    columns: dict[str, np.ndarray]
    groups: GroupTable | None = None
    eval_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    eval_columns: dict[str, np.ndarray] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)
    expect: list[Label] = field(default_factory=list)
    allow: set[str] = field(default_factory=set)
    forbid: set[str] = field(default_factory=set)
    healthy: bool = False
    view: str = "full"
    formats: tuple[str, ...] = ("jsonl",)
    log_every: int = 1
    params: dict[str, Any] = field(default_factory=dict)


Scenario = Callable[..., LabelledRun]
SCENARIOS: Registry[Scenario] = Registry("scenario")
Spec = tuple[str, dict[str, Any]]
"""``(scenario name, params)``; params may hold ``seed``."""
SUITES: Registry[Callable[[str, int], list[Spec]]] = Registry("suite")
"""Family name → ``(size, seed) -> [(scenario, params), ...]`` ("ci" or "full" size)."""
_MODULES: tuple[str, ...] = ("scenarios", "other")
"""Modules under ``rlvitals_corpus`` whose import registers scenarios and suites: the collapse
family's, then the other families'."""


def scenario(name: str) -> Callable[[Scenario], Scenario]:
    """Register a scenario function ``(rng, **params) -> LabelledRun`` under ``name``."""
    return SCENARIOS.register(name)


_ensure_loaded = Plugins(__name__, _MODULES).load


def suite(size: str = "ci", seed: int = 0, families: list[str] | None = None) -> list[Spec]:
    """The specs of every registered suite (or of ``families``), concatenated."""
    _ensure_loaded()
    names = SUITES.names() if families is None else families
    out: list[Spec] = []
    for n in names:
        out.extend(SUITES.get(n)(size, seed))
    return out


def generate(name: str, seed: int = 0, **params: Any) -> LabelledRun:
    """Make one labelled run of scenario ``name`` with ``np.random.default_rng(seed)``."""
    _ensure_loaded()
    fn = SCENARIOS.get(name)
    lr = fn(np.random.default_rng(seed), **params)
    lr.name = f"{lr.name}-s{seed}"
    lr.params = {"seed": seed, **params, **lr.params}
    return lr


def to_run(lr: LabelledRun) -> Run:
    """Build the :class:`Run` directly (no file), as an importer of the columns would."""
    m = lr.manifest
    b = RunBuilder(
        Manifest(
            source=lr.name,
            format="corpus",
            trainer=m.get("trainer"),
            group_size=m.get("group_size"),
            scale_rewards=m.get("scale_rewards"),
            reward_min=m.get("reward_min"),
            reward_max=m.get("reward_max"),
            estimator=m.get("estimator"),
            kl_coef=m.get("kl_coef"),
            logging_steps=lr.log_every,
        )
    )
    cols = list(lr.columns.items())
    for i, s in enumerate(lr.steps.tolist()):
        b.add_row(int(s), {k: float(v[i]) for k, v in cols})
    ecols = list(lr.eval_columns.items())
    for i, s in enumerate(lr.eval_steps.tolist()):
        b.add_row(int(s), {k: float(v[i]) for k, v in ecols})
    for e in lr.events:
        b.add_event(e)
    b.groups = lr.groups
    return b.build()

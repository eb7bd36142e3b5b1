"""The presets of the lab's experiments: small dataclass instances, one per experiment and size.

``smoke`` runs in seconds (the tests), ``quick`` in under 3 minutes on 2 cores, ``full`` in under
45 minutes on 2 uncontended cores (docs/lab.md has the measured times). The compare and ablate
presets train the mixed level LM (:data:`rlvitals.lab.tasks.MIXED_MIXTURE`, issue 26): the
paper's regime, GRPO's ACR near 0.4 with groups collapsing on both sides (about 0.2 all-right,
0.25 all-wrong on the tiny ``sum`` policy). ``quick-l5`` and ``full-l5`` train level L5 (base
pass rate 5%), the earlier default: nearly every collapsed group there is all-wrong, so it tests
only the negative half of a mitigation ("push failures down").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlvitals.lab.tasks import MIXED_LEVEL
from rlvitals.lab.train import PRESETS, Args

__all__ = [
    "ABLATE",
    "COMPARE",
    "EXPERIMENTS",
    "PAPER",
    "PREDICT",
    "VARIANTS",
    "AblatePreset",
    "ComparePreset",
    "PredictPreset",
    "Variant",
]


@dataclass(frozen=True)
class PredictPreset:
    """A grid of short GRPO runs.

    Attributes:
        levels, group_sizes, temperatures, seeds: the grid (every combination runs).
        steps: optimizer steps per run; ACR_100 is the mean ACR of the first 100 (all of them
            when fewer), the final accuracy is measured after the last.
        run: every other setting (its ``budget`` is replaced by ``steps`` x prompts x G).
        budget: predict-v2 (issue 26.4): every run generates this many completions whatever
            its G (``steps`` is then ignored: a run takes ``budget / (prompts x G)`` steps), so
            the budget does not grow with G; None = v1.
        early: predict-v2: the early ACR is the mean ACR of the steps within this share of the
            budget (0.2: the first ~20% of the run) instead of the first 100 steps.
    """

    levels: tuple[int, ...]
    group_sizes: tuple[int, ...]
    temperatures: tuple[float, ...]
    seeds: tuple[int, ...]
    steps: int
    run: Args
    budget: int | None = None
    early: float | None = None


@dataclass(frozen=True)
class ComparePreset:
    """Methods at an equal budget of generated completions.

    Attributes:
        level: the level (the mixed level LM by default: collapse on both sides).
        methods: lab method names (:data:`rlvitals.lab.train.METHODS`); ``grpo`` is the
            reference of the paired tests.
        seeds: every method runs every seed (paired).
        run: every other setting, the budget included.
        reference: the arm every other is tested against (``grpo``; ``pg_grpo`` for the
            controls and ablations of posterior-guided GRPO).
    """

    level: int
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    run: Args
    reference: str = "grpo"


@dataclass(frozen=True)
class Variant:
    """One arm of the ablation.

    Attributes:
        name: short name (run names start with it).
        axis: ``reference``, ``virtual``, ``threshold`` or ``alpha``.
        label: what it is, for the tables.
        method: a lab method or estimator name.
        config: its estimator config.
        axes: every axis this arm belongs to (the paper's default is on all three).
    """

    name: str
    axis: str
    label: str
    method: str
    config: dict[str, Any] = field(default_factory=dict)
    axes: tuple[str, ...] = ()


@dataclass(frozen=True)
class AblatePreset:
    """AVSPO's design choices, each against the paper's default.

    Attributes:
        level, seeds, run: as in :class:`ComparePreset`.
        variants: the arms (the first AVSPO arm is the paper's default).
    """

    level: int
    seeds: tuple[int, ...]
    variants: tuple[Variant, ...]
    run: Args


_STUDY_METHODS = (
    "grpo",
    "dr_grpo",
    "avspo",
    "avspo_released",
    "zero_var_filter",
    "dapo",
    "history_baseline",
    "pg_grpo",
    "pg_grpo_select",
    "pg_grpo_baseline",
)  # the pre-registered study's ten arms, with PG-GRPO's two halves
_ALL_METHODS = tuple(m for m in _STUDY_METHODS if m not in ("pg_grpo_select", "pg_grpo_baseline"))
_CONTROL_METHODS = (
    "pg_grpo",
    "pg_grpo_select",
    "pg_grpo_baseline",
    "pg_grpo_iw",
    "ctl_random_sign",
    "ctl_shuffled_keys",
    "ctl_random_select",
)  # amendment 1 of the pre-registration: PG-GRPO's ablations and negative controls
_PAPER_LEVEL = MIXED_LEVEL
_NEGATIVE_LEVEL = 5

VARIANTS: tuple[Variant, ...] = (
    Variant("grpo", "reference", "GRPO (no virtual samples)", "grpo"),
    Variant(
        "avspo",
        "default",
        "AVSPO as in the paper: stratified, adaptive threshold, alpha 0.5",
        "avspo",
        axes=("virtual", "threshold", "alpha"),
    ),
    Variant(
        "uniform",
        "virtual",
        "uniform-random virtual rewards",
        "lab_avspo_virtual",
        {"virtual": "uniform"},
    ),
    Variant(
        "fixed",
        "virtual",
        "fixed 0.5 r_max virtual rewards",
        "lab_avspo_virtual",
        {"virtual": "fixed"},
    ),
    Variant("tau0.3", "threshold", "fixed threshold 0.3", "avspo", {"tau_adapt0": 0.3, "eta": 0.0}),
    Variant("tau0.5", "threshold", "fixed threshold 0.5", "avspo", {"tau_adapt0": 0.5, "eta": 0.0}),
    Variant("tau0.7", "threshold", "fixed threshold 0.7", "avspo", {"tau_adapt0": 0.7, "eta": 0.0}),
    Variant("alpha0.3", "alpha", "alpha 0.3", "avspo", {"alpha": 0.3}),
    Variant("alpha0.7", "alpha", "alpha 0.7", "avspo", {"alpha": 0.7}),
    Variant("alpha1.0", "alpha", "alpha 1.0", "avspo", {"alpha": 1.0}),
)
"""The ablation's arms."""

PAPER: dict[str, Any] = {
    "predict": {"r": -0.785, "r2": 0.617, "intercept": 51.4, "slope": -29.6},
    "compare": {
        "acr_reduction": [0.58, 0.63],
        "accuracy_gain_points": [4.0, 6.0],
        "examples": "ACR 0.45 -> 0.18 (Qwen2.5-0.5B), 0.40 -> 0.15 (Qwen2.5-Math-1.5B)",
        "setting": "Qwen2.5 0.5B-14B, MATH level-3 training set, G = 8, T = 1.0, 500 steps, "
        "single runs",
    },
    "ablate": {
        "virtual": "stratified beats uniform-random, fixed 0.5 r_max and exponential",
        "threshold": "adaptive beats fixed 0.3, 0.5 and 0.7",
        "alpha": "0.5 beats 0.3, 0.7 and 1.0",
    },
}
"""The paper's numbers (DESIGN.md 3.5), printed beside ours."""

_SMOKE_RUN = PRESETS["smoke"]
_RUN = Args()

PREDICT: dict[str, PredictPreset] = {
    "smoke": PredictPreset((2, 5, 6), (4,), (1.0,), (0,), 4, _SMOKE_RUN),
    "quick": PredictPreset((1, 3, 5), (4, 8), (1.0,), (0,), 40, dataclasses.replace(_RUN, evals=1)),
    "full": PredictPreset(
        tuple(range(7)),
        (4, 8, 16),
        (0.7, 1.0, 1.3),
        (0, 1),
        150,
        dataclasses.replace(_RUN, evals=3),
    ),
    # predict-v2 (issue 26.4): one common all-sizes evaluation set for every run, the same
    # budget of completions whatever G, the early ACR over the first 20% of the budget
    "v2-smoke": PredictPreset(
        (5, MIXED_LEVEL),
        (4, 8),
        (1.0,),
        (0,),
        4,
        dataclasses.replace(_SMOKE_RUN, eval_set="common"),
        budget=256,
        early=0.2,
    ),
    "v2-quick": PredictPreset(
        (1, 3, 5),
        (4, 8),
        (1.0,),
        (0,),
        0,
        dataclasses.replace(_RUN, evals=1, eval_prompts=64, eval_set="common"),
        budget=64 * 40,
        early=0.2,
    ),
    "v2": PredictPreset(
        (*range(7), MIXED_LEVEL),
        (4, 8, 16),
        (0.7, 1.0, 1.3),
        (0, 1),
        0,
        dataclasses.replace(_RUN, evals=2, eval_set="common"),
        budget=64 * 150,
        early=0.2,
    ),
}
_TEST_SEEDS = tuple(range(100, 116))
"""The pre-registered test seeds (docs/lab/preregistration.md); development used 0-99."""
_COMPARE_QUICK_RUN = dataclasses.replace(_RUN, budget=64 * 40, evals=2, eval_prompts=64)
_COMPARE_FULL_RUN = dataclasses.replace(_RUN, evals=6)
COMPARE: dict[str, ComparePreset] = {
    "smoke": ComparePreset(
        _PAPER_LEVEL, ("grpo", "avspo", "dapo", "history_baseline", "pg_grpo"), (0, 1), _SMOKE_RUN
    ),
    "quick": ComparePreset(_PAPER_LEVEL, _ALL_METHODS, (0, 1), _COMPARE_QUICK_RUN),
    "pilot": ComparePreset(_PAPER_LEVEL, _ALL_METHODS, _TEST_SEEDS[:8], _COMPARE_QUICK_RUN),
    "full": ComparePreset(_PAPER_LEVEL, _STUDY_METHODS, _TEST_SEEDS, _COMPARE_FULL_RUN),
    "quick-l5": ComparePreset(_NEGATIVE_LEVEL, _ALL_METHODS, (0, 1), _COMPARE_QUICK_RUN),
    "full-l5": ComparePreset(_NEGATIVE_LEVEL, _ALL_METHODS, tuple(range(8)), _COMPARE_FULL_RUN),
    "controls-smoke": ComparePreset(
        _PAPER_LEVEL, _CONTROL_METHODS, (0,), _SMOKE_RUN, reference="pg_grpo"
    ),
    "controls-quick": ComparePreset(
        _PAPER_LEVEL, _CONTROL_METHODS, (0, 1), _COMPARE_QUICK_RUN, reference="pg_grpo"
    ),
    "controls": ComparePreset(
        _PAPER_LEVEL, _CONTROL_METHODS, _TEST_SEEDS, _COMPARE_FULL_RUN, reference="pg_grpo"
    ),
}
_ABLATE_QUICK_RUN = dataclasses.replace(_RUN, budget=64 * 30, evals=1, eval_prompts=64)
_ABLATE_FULL_RUN = dataclasses.replace(_RUN, evals=3)
ABLATE: dict[str, AblatePreset] = {
    "smoke": AblatePreset(
        _PAPER_LEVEL,
        (0,),
        tuple(v for v in VARIANTS if v.name in ("avspo", "uniform", "tau0.3")),
        _SMOKE_RUN,
    ),
    "quick": AblatePreset(_PAPER_LEVEL, (0,), VARIANTS, _ABLATE_QUICK_RUN),
    "full": AblatePreset(_PAPER_LEVEL, tuple(range(6)), VARIANTS, _ABLATE_FULL_RUN),
    "quick-l5": AblatePreset(_NEGATIVE_LEVEL, (0,), VARIANTS, _ABLATE_QUICK_RUN),
    "full-l5": AblatePreset(_NEGATIVE_LEVEL, tuple(range(6)), VARIANTS, _ABLATE_FULL_RUN),
}
EXPERIMENTS = {"predict": PREDICT, "compare": COMPARE, "ablate": ABLATE}

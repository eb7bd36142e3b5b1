"""Fixed Diagnoses for the report tests: hand-built runs and hand-written findings, so the
snapshots change only when a renderer (or the JSON contract) does, never with detector tuning.
The incidents are computed from the findings (:func:`rlvitals.doctor.incidents.group_findings`), as
the doctor does."""

from __future__ import annotations

import numpy as np

from rlvitals.detectors import Finding, Severity
from rlvitals.doctor import Diagnosis
from rlvitals.doctor.incidents import group_findings
from rlvitals.recording.run import GroupTable, Manifest, RunBuilder
from rlvitals.vitals import compute_vitals

STEPS = 120
SPIKES = (30, 75, 101)
"""Steps of the fixed run's gradient spikes (one finding, three marked points)."""


def fixed_diagnosis(
    source: str = "runs/demo/trainer_state.json", odd_name: str | None = None
) -> Diagnosis:
    """A 120-step run whose advantages collapse at step 60 and whose entropy collapses at 80.

    ``odd_name`` adds a series and a finding that carry that string (for escaping tests).
    """
    b = RunBuilder(
        Manifest(
            source=source,
            format="trl_state",
            trainer="trl",
            group_size=8,
            kl_coef=0.0,
            reward_min=0.0,
            reward_max=1.0,
            estimator="grpo",
        )
    )
    for s in range(1, STEPS + 1):
        collapsed = s >= 60
        row = {
            "reward": 0.3 + 0.4 * s / STEPS,
            "frac_reward_zero_std": 0.9 if collapsed else 0.1 + 0.05 * np.sin(s),
            "entropy": 0.02 if s >= 80 else 0.8 - 0.004 * s,
            "grad_norm": 3.1 if s in SPIKES else 0.3 + 0.05 * np.cos(s),
            "loss": 0.01,
        }
        if odd_name:
            row[odd_name] = float(s)
        b.add_row(s, row)
        if s % 20 == 0:
            b.add_row(
                s,
                {
                    "eval_reward": 0.25 + 0.3 * s / STEPS,
                    "val-core/gsm8k/reward/mean@1": 0.2 + 0.35 * s / STEPS,
                },
            )
    run = b.build()
    vitals = compute_vitals(run)
    findings = [
        Finding(
            id="DEGENERATE_GROUPS",
            severity=Severity.WARN,
            message="ACR 0.90 >= 0.75 for 61 steps since step 60 (before: 0.10)",
            onset_step=60,
            end_step=None,
            confidence=0.9,
            evidence="zero_std_frac",
            metrics={"acr": 0.9, "threshold": 0.75, "steps": 61},
            series=["acr", "zero_std_frac"],
            thresholds={"acr": 0.75},
            actions=[
                "filter zero-variance groups and resample (DAPO dynamic sampling)",
                "keep collapsed groups teaching with AVSPO",
            ],
        ),
        Finding(
            id="ENTROPY_COLLAPSE",
            severity=Severity.WARN,
            message="entropy 0.02 < 0.0788 (0.1 of early 0.788) for 41 logged points since "
            "step 80; reward gain 0.04 <= 0.05 (plateau)",
            onset_step=80,
            end_step=None,
            confidence=0.85,
            evidence="entropy,reward_mean",
            metrics={"entropy_early": 0.788, "entropy_threshold": 0.0788, "reward_gain": 0.04},
            series=["entropy", "reward_mean"],
            thresholds={"entropy": 0.0788},
            actions=["raise the sampling temperature a little"],
        ),
        Finding(
            id="GRAD_SPIKE",
            severity=Severity.INFO,
            message="3 grad_norm spike(s) above 10x the recent median; largest 3.1 = 10.3x "
            "at step 30",
            onset_step=SPIKES[0],
            end_step=SPIKES[-1],
            confidence=0.7,
            evidence="grad_norm",
            metrics={"spikes": 3, "grad_norm_threshold": 3.0, "flag": True, "none": None},
            series=["grad_norm"],
            thresholds={"grad_norm": 3.0},
            actions=["keep gradient clipping on"],
            marks=list(SPIKES),
        ),
    ]
    if odd_name:
        findings.append(
            Finding(
                id="ODD_" + "NAME",
                severity=Severity.CRITICAL,
                message=f"series {odd_name} is odd",
                onset_step=None,
                evidence=odd_name,
                metrics={odd_name: 1.0},
                series=[odd_name],
                actions=[f"rename {odd_name}"],
            )
        )
    return Diagnosis(
        run=run,
        vitals=vitals,
        findings=findings,
        skipped={
            "KL_BLOWUP": "needs kl: not logged",
            "LENGTH_EXPLOSION": "needs length_mean: not logged",
            "CLIP_SATURATION": "needs clip_frac: too few points (3 logged, 20+ needed)",
        },
        errors={},
        detectors=[
            "DEGENERATE_GROUPS",
            "ENTROPY_COLLAPSE",
            "GRAD_SPIKE",
            "KL_BLOWUP",
            "LENGTH_EXPLOSION",
            "CLIP_SATURATION",
        ],
        incidents=group_findings(findings, vitals),
    )


def unjudged_diagnosis(steps: int = 5) -> Diagnosis:
    """A run too short for the collapse family: the doctor's own "not judged" answer."""
    from rlvitals.doctor import DoctorConfig, diagnose

    b = RunBuilder(Manifest(source="runs/short/log.jsonl", group_size=8))
    for s in range(1, steps + 1):
        b.add_row(s, {"reward": 0.5, "frac_reward_zero_std": 0.2, "entropy": 0.5})
    return diagnose(b.build(), DoctorConfig())


PROMPTS = 24
"""Prompts of the plots run; each step draws 8 of them."""


def plots_diagnosis(steps: int = STEPS, prompts: int = PROMPTS) -> Diagnosis:
    """A run with everything the HTML plots draw: per-group rewards with prompt ids (the heat
    map, the ACR split), an AVSPO ``acr_residual``, train reward with two evaluation series
    (TRL's ``eval_reward`` and veRL's ``val-core/...``) and a GRAD_SPIKE finding with marks."""
    rng = np.random.default_rng(7)
    g = 8
    difficulty = np.linspace(0.05, 0.95, prompts)
    b = RunBuilder(
        Manifest(
            source="runs/plots/rec",
            format="recording",
            trainer="rlvitals",
            group_size=g,
            reward_min=0.0,
            reward_max=1.0,
            estimator="avspo",
        )
    )
    gsteps, grewards, gprompts = [], [], []
    for s in range(1, steps + 1):
        drawn = rng.choice(prompts, size=8, replace=False)
        for p in drawn:
            rate = min(1.0, difficulty[p] + 0.4 * s / steps)
            gsteps.append(s)
            grewards.append((rng.random(g) < rate).astype(float).tolist())
            gprompts.append(f"prompt-{p:03d}")
        b.add_row(
            s,
            {
                "grad_norm": 4.0 if s in SPIKES else 0.3 + 0.05 * np.cos(s),
                "entropy": 0.8 - 0.004 * s,
                "acr_residual": 0.05 + 0.05 * np.sin(s),
            },
        )
        if s % 10 == 0:
            b.add_row(
                s,
                {
                    "eval_reward": 0.3 + 0.3 * s / steps,
                    "val-core/gsm8k/reward/mean@1": 0.2 + 0.35 * s / steps,
                    "eval_runtime": 12.0,
                },
            )
    b.groups = GroupTable.from_lists(gsteps, grewards, prompts=gprompts)
    run = b.build()
    vitals = compute_vitals(run)
    findings = [
        Finding(
            id="GRAD_SPIKE",
            severity=Severity.WARN,
            message="3 grad_norm spike(s) above 10x the recent median",
            onset_step=SPIKES[0],
            end_step=SPIKES[-1],
            evidence="grad_norm",
            series=["grad_norm"],
            thresholds={"grad_norm": 3.0},
            marks=list(SPIKES),
        ),
        Finding(
            id="DEGENERATE_GROUPS",
            severity=Severity.INFO,
            message="ACR 0.5 >= 0.4 since step 90",
            onset_step=90,
            evidence="groups",
            series=["acr", "acr_solve_all"],
            thresholds={"acr": 0.4},
        ),
    ]
    return Diagnosis(
        run=run,
        vitals=vitals,
        findings=findings,
        detectors=["GRAD_SPIKE", "DEGENERATE_GROUPS"],
        incidents=group_findings(findings, vitals),
    )

"""Hand-written runs for the non-collapse detector families: for every detector a ``bad`` run
that must fire at :data:`ONSET` (its true onset) and a ``good`` run that must stay silent.

Every run starts from one healthy GRPO-like run (:func:`healthy_rows`) and changes one thing;
each detector has a ``<name>_bad`` and a ``<name>_good`` function ``(seed) -> (train_rows,
eval_rows)``. Series use TRL's key names, so the runs go through the same alias table as real
logs. :mod:`rlvitals_corpus.fixtures` registers them as the detectors' pairs.

>>> train, evals = kl_bad(seed=0)
>>> run = build_run(train, evals, "kl_blowup_bad")
>>> run.n_steps, run.eval_steps[:3].tolist(), bool(train[ONSET + 10]["kl"] > 10 * train[ONSET - 1]["kl"])
(300, [20, 40, 60], True)
"""

from __future__ import annotations

import numpy as np

from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["EVAL_EVERY", "ONSET", "STEPS", "Rows", "build_run", "healthy_rows"]

STEPS = 300
"""Length of every scenario run."""
ONSET = 180
"""Default onset step of the failure in the bad runs."""
EVAL_EVERY = 20
"""Steps between evaluation rows."""

Rows = dict[int, dict[str, float]]


def healthy_rows(seed: int, steps: int = STEPS) -> tuple[Rows, Rows]:
    """A healthy run's ``(train_rows, eval_rows)``: step → {TRL key: value}.

    Reward rises from ~0.3 to ~0.7, entropy eases from 0.8 to 0.5 (-38%), KL grows smoothly to
    ~0.08, completions lengthen slowly (300 → 360 tokens of a 1,024 limit), gradient norms are
    log-normal noise around 0.3, a step takes ~60 s with a slow first step and periodic
    checkpoint stalls, and evaluation follows the training reward.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(1, steps + 1)
    frac = t / steps
    trend = 0.3 + 0.4 * (1 - np.exp(-3 * frac)) / (1 - np.exp(-3))
    reward = trend + rng.normal(0, 0.03, steps)
    entropy = (0.8 - 0.3 * frac) * np.exp(rng.normal(0, 0.03, steps))
    kl = 0.08 * frac**1.2 * np.exp(rng.normal(0, 0.1, steps)) + 1e-4
    length = (300 + 60 * frac) * np.exp(rng.normal(0, 0.03, steps))
    grad = 0.3 * np.exp(rng.normal(0, 0.35, steps))
    step_time = 60 * np.exp(rng.normal(0, 0.04, steps))
    step_time[0] *= 3.0  # compilation / cache warm-up
    step_time[49::50] *= 1.8  # checkpoint every 50 steps
    tokens = 512 * length
    train: Rows = {}
    for i, s in enumerate(t.tolist()):
        train[s] = {
            "reward": float(np.clip(reward[i], 0, 1)),
            "reward_std": 0.35,
            "frac_reward_zero_std": 0.2,
            "entropy": float(entropy[i]),
            "kl": float(kl[i]),
            "grad_norm": float(grad[i]),
            "loss": float(rng.normal(0, 0.01) + 0.04 * kl[i]),
            "completions/mean_length": float(length[i]),
            "completions/max_length": 1024.0,
            "completions/clipped_ratio": float(np.clip(rng.normal(0.01, 0.005), 0, 1)),
            "clip_ratio/region_mean": float(np.clip(rng.normal(0.02, 0.005), 0, 1)),
            "step_time": float(step_time[i]),
            "throughput": float(tokens[i] / step_time[i]),
            "learning_rate": 1e-6,
        }
    evals: Rows = {}
    for s in range(EVAL_EVERY, steps + 1, EVAL_EVERY):
        evals[s] = {"eval_reward": float(np.clip(0.9 * trend[s - 1] + rng.normal(0, 0.01), 0, 1))}
    return train, evals


def build_run(train: Rows, evals: Rows, name: str, kl_coef: float = 0.04) -> Run:
    """A :class:`Run` from rows (what an importer would produce from a TRL log)."""
    b = RunBuilder(
        Manifest(
            source=f"synthetic:{name}",
            format="synthetic",
            trainer="trl",
            group_size=8,
            kl_coef=kl_coef,
            reward_min=0.0,
            reward_max=1.0,
        )
    )
    for s in sorted(set(train) | set(evals)):
        row = dict(train.get(s, {}))
        row.update(evals.get(s, {}))
        b.add_row(s, row)
    return b.build()


def _set(train: Rows, key: str, first: int, values: np.ndarray) -> None:
    for j, v in enumerate(values.tolist()):
        if first + j in train:
            train[first + j][key] = float(v)


def _ramp(n: int, a: float, b: float, over: int) -> np.ndarray:
    """``n`` values going from a to b over ``over`` points, then staying at b."""
    x = np.minimum(np.arange(1, n + 1) / max(1, over), 1.0)
    return a + (b - a) * x


# ---------------------------------------------------------------------------------------------
# Entropy collapse: entropy falls to ~3% of its early level from step ONSET and reward plateaus.


def entropy_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 1)
    n = STEPS - ONSET + 1
    drop = 0.025 * np.exp(rng.normal(0, 0.1, n))
    _set(train, "entropy", ONSET, drop)
    r0 = train[ONSET]["reward"]
    _set(train, "reward", ONSET, r0 + rng.normal(0, 0.01, n))
    return train, evals


def entropy_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Entropy falls 70% over the run while reward keeps rising: spent, not collapsed."""
    train, evals = healthy_rows(seed)
    for s, row in train.items():
        row["entropy"] *= 1 - 0.55 * s / STEPS
    return train, evals


# KL blow-up: KL multiplies ~30x within ten steps from ONSET, and settles back at step 220.


def kl_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 2)
    n = 40
    boost = np.minimum(np.exp(np.arange(1, n + 1)), 30.0) * np.exp(rng.normal(0, 0.1, n))
    for j in range(n):
        train[ONSET + j]["kl"] *= boost[j]
    return train, evals


def kl_good(seed: int = 0) -> tuple[Rows, Rows]:
    """KL grows steadily to ~0.6 with multiplicative noise: drift, not a blow-up."""
    train, evals = healthy_rows(seed)
    for s, row in train.items():
        row["kl"] = row["kl"] * 7.5 * (0.2 + s / STEPS)
    return train, evals


# Length explosion: mean length jumps from ~340 to ~900 tokens from ONSET.


def length_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 3)
    n = STEPS - ONSET + 1
    _set(
        train,
        "completions/mean_length",
        ONSET,
        _ramp(n, 600, 900, 3) * np.exp(rng.normal(0, 0.03, n)),
    )
    _set(train, "completions/clipped_ratio", ONSET, np.clip(_ramp(n, 0.3, 0.5, 3), 0, 1))
    return train, evals


def length_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Length doubles over the run, steadily (the policy learns to reason longer)."""
    train, evals = healthy_rows(seed)
    for s, row in train.items():
        row["completions/mean_length"] *= 1 + s / STEPS
    return train, evals


# Truncation: 25-35% of completions hit the limit from ONSET to 240, then it clears.


def trunc_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 4)
    n = 60
    _set(train, "completions/clipped_ratio", ONSET, np.clip(rng.normal(0.3, 0.03, n), 0, 1))
    return train, evals


def trunc_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Truncation noisy around 3% with single-step bursts to 20%."""
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 5)
    for s, row in train.items():
        row["completions/clipped_ratio"] = float(np.clip(rng.normal(0.03, 0.01), 0, 1))
        if s % 37 == 0:
            row["completions/clipped_ratio"] = 0.2
    return train, evals


# Clip saturation: ~35% of tokens clipped from ONSET.


def clip_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 6)
    n = STEPS - ONSET + 1
    _set(train, "clip_ratio/region_mean", ONSET, np.clip(rng.normal(0.35, 0.04, n), 0, 1))
    return train, evals


def clip_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Several PPO epochs per batch: clipping around 8-12%, normal for reused rollouts."""
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 7)
    for row in train.values():
        row["clip_ratio/region_mean"] = float(np.clip(rng.normal(0.1, 0.015), 0, 1))
    return train, evals


# Gradient: inf at ONSET, then grad_norm and loss go NaN for the rest of the run.


def nonfinite_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    train[ONSET]["grad_norm"] = float("inf")
    for s in range(ONSET + 1, STEPS + 1):
        train[s]["grad_norm"] = float("nan")
        train[s]["loss"] = float("nan")
    return train, evals


def nonfinite_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Scattered NaN rows (a flaky logger): isolated missing values, never a block."""
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 8)
    for s in rng.choice(np.arange(1, STEPS + 1), size=STEPS // 10, replace=False).tolist():
        train[s]["grad_norm"] = float("nan")
        train[s]["loss"] = float("nan")
    return train, evals


# Gradient spikes at ONSET, ONSET + 30 and ONSET + 60; the middle one is above the severe ratio


def spike_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    for j, mult in ((0, 40.0), (30, 400.0), (60, 25.0)):
        train[ONSET + j]["grad_norm"] *= mult
    return train, evals


def spike_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Noisy, heavy-ish tailed gradient norms (log-normal, sigma 0.5) and a slow drift."""
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 9)
    for s, row in train.items():
        row["grad_norm"] = float(0.3 * (1 + s / STEPS) * np.exp(rng.normal(0, 0.5)))
    return train, evals


# Zero-gradient steps: from ONSET every third step has grad_norm and loss exactly 0.


def zero_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    for s in range(ONSET, STEPS + 1, 3):
        train[s]["grad_norm"] = 0.0
        train[s]["loss"] = 0.0
    return train, evals


def zero_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Loss crosses zero now and then (GRPO loss is centred) but never with a zero gradient."""
    train, evals = healthy_rows(seed)
    for s in range(10, STEPS + 1, 25):
        train[s]["loss"] = 0.0
    return train, evals


# Reward hacking: eval peaks at ONSET and falls while the training reward keeps rising.


def hack_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 10)
    for s, row in train.items():
        if s >= ONSET:
            row["reward"] = float(min(1.0, row["reward"] + 0.25 * (s - ONSET) / (STEPS - ONSET)))
    peak = evals[ONSET]["eval_reward"]
    for s, row in evals.items():
        if s > ONSET:
            row["eval_reward"] = float(
                peak - 0.15 * (s - ONSET) / (STEPS - ONSET) + rng.normal(0, 0.005)
            )
    return train, evals


def hack_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Evaluation tracks the training reward, with evaluation noise."""
    train, evals = healthy_rows(seed)
    rng = np.random.default_rng(seed + 11)
    for row in evals.values():
        row["eval_reward"] += float(rng.normal(0, 0.01))
    return train, evals


# Throughput rot: from ONSET each step takes twice as long for the same tokens.


def rot_bad(seed: int = 0) -> tuple[Rows, Rows]:
    train, evals = healthy_rows(seed)
    for s, row in train.items():
        if s >= ONSET:
            row["step_time"] *= 2.0
            row["throughput"] /= 2.0
    return train, evals


def rot_good(seed: int = 0) -> tuple[Rows, Rows]:
    """Step time grows 1.8x because completions grow 1.8x; tokens per second stay level."""
    train, evals = healthy_rows(seed)
    for s, row in train.items():
        f = 1 + 0.8 * max(0, s - 100) / (STEPS - 100)
        row["completions/mean_length"] *= f
        row["step_time"] *= f
    return train, evals

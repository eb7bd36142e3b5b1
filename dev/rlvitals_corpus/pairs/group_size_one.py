"""The test runs of GROUP_SIZE_ONE: veRL console rows of a small-batch GRPO run.

Shaped like a real public veRL log (two prompts a step, no configuration printed): the rows
carry ``critic/score/*``, ``critic/advantages/*`` and ``critic/rewards/*`` and no group size.

``bad``: G = 1 (``rollout.n=1``). veRL's GRPO gives a lone completion mean 0 and std 1, so the
advantage extremes are the reward extremes on every step. ``good``: the same run with G = 4, its
advantages ±1.5 around group baselines, not equal to the rewards.
"""

from __future__ import annotations

import numpy as np

from rlvitals_corpus import Label, LabelledRun
from rlvitals_corpus.fixtures import Pair, register

STEPS = 120
PROMPTS = 2
"""Prompts a step (a small batch, as in the real run)."""


def _run(kind: str, seed: int | None) -> LabelledRun:
    seed = 0 if seed is None else seed
    rng = np.random.default_rng(seed + 31)
    g = 1 if kind == "bad" else 4
    steps = np.arange(1, STEPS + 1, dtype=np.int64)
    cols: dict[str, list[float]] = {
        k: []
        for k in (
            "critic/score/mean",
            "critic/score/max",
            "critic/score/min",
            "critic/rewards/mean",
            "critic/advantages/mean",
            "critic/advantages/max",
            "critic/advantages/min",
            "actor/entropy",
            "actor/grad_norm",
            "actor/pg_loss",
            "response_length/mean",
        )
    }
    for s in steps.tolist():
        p = 0.2 + 0.5 * s / STEPS
        r = (rng.random((PROMPTS, g)) < p).astype(float)
        if g == 1:
            adv = r / (1.0 + 1e-6)  # mean 0, std 1 for a group of one: the raw reward
        else:
            mean, std = r.mean(1, keepdims=True), r.std(1, ddof=1, keepdims=True)
            adv = (r - mean) / (std + 1e-6)
        cols["critic/score/mean"].append(float(r.mean()))
        cols["critic/score/max"].append(float(r.max()))
        cols["critic/score/min"].append(float(r.min()))
        cols["critic/rewards/mean"].append(float(r.mean()))
        cols["critic/advantages/mean"].append(float(adv.mean()))
        cols["critic/advantages/max"].append(float(adv.max()))
        cols["critic/advantages/min"].append(float(adv.min()))
        cols["actor/entropy"].append(float(0.6 * np.exp(rng.normal(0, 0.03))))
        cols["actor/grad_norm"].append(float(0.3 * np.exp(rng.normal(0, 0.3))))
        cols["actor/pg_loss"].append(float(rng.normal(0, 0.02)))
        cols["response_length/mean"].append(float(300 * np.exp(rng.normal(0, 0.03))))
    bad = kind == "bad"
    return LabelledRun(
        name=f"group_size_one_{kind}-s{seed}",
        scenario="pairs.group_size_one",
        family="setup",
        steps=steps,
        columns={k: np.asarray(v) for k, v in cols.items()},
        manifest={"trainer": "verl", "estimator": "grpo"},
        expect=[Label("GROUP_SIZE_ONE")] if bad else [],
        allow={"*"} if bad else set(),
        healthy=not bad,
        view="verl",
        formats=("jsonl",),
        params={"seed": seed, "group_size": g},
    )


register(
    Pair(
        "GROUP_SIZE_ONE",
        lambda seed=None: _run("bad", seed),
        lambda seed=None: _run("good", seed),
        about="one completion per prompt under GRPO (veRL: the raw reward is the advantage)",
    )
)

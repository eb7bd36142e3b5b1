"""Regenerate the bundled example runs in src/rlvitals/examples (deterministic).

python scripts/make_examples.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "rlvitals" / "examples"
sys.path.insert(0, str(ROOT / "dev"))  # rlvitals_corpus: development only, not in the wheel


def collapse_groups(path: Path, steps: int = 120, groups: int = 8, g: int = 8) -> None:
    """A GRPO run whose groups go homogeneous from step 60: ACR climbs from ~0.2 to ~0.9."""
    rng = np.random.default_rng(20261130)
    with open(path, "w") as f:
        for step in range(1, steps + 1):
            for j in range(groups):
                p = rng.beta(2, 2)
                if step >= 60 and rng.random() < 0.85:
                    p = float(rng.random() < 0.6)  # identical completions: all right or all wrong
                r = (rng.random(g) < p).astype(int).tolist()
                f.write(json.dumps({"step": step, "group": j, "rewards": r}) + "\n")


def length_explosion(path: Path, steps: int = 200, onset: int = 120) -> None:
    """A TRL-style per-step JSONL log whose completions jump from ~330 to ~850 tokens at step 120:
    truncation follows, the reward drops (LENGTH_EXPLOSION, TRUNCATION)."""
    from rlvitals_corpus.families import healthy_rows

    train, evals = healthy_rows(20261201, steps=steps)
    rng = np.random.default_rng(20261202)
    keep = (
        "reward",
        "reward_std",
        "frac_reward_zero_std",
        "entropy",
        "kl",
        "grad_norm",
        "loss",
        "completions/mean_length",
        "completions/max_length",
        "completions/clipped_ratio",
        "step_time",
    )
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            row = {k: train[s][k] for k in keep}
            if s >= onset:
                row["completions/mean_length"] *= 2.5 * float(np.exp(rng.normal(0, 0.03)))
                row["completions/clipped_ratio"] = float(np.clip(rng.normal(0.35, 0.03), 0, 1))
                row["reward"] -= 0.08
                row["step_time"] *= 2.2
            row.update(evals.get(s, {}))
            f.write(
                json.dumps({"step": s, **{k: float(f"{v:.4g}") for k, v in row.items()}}) + "\n"
            )


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    collapse_groups(OUT / "collapse_groups.jsonl")
    length_explosion(OUT / "length_explosion.jsonl")
    print(f"wrote examples to {OUT}")

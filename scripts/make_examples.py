"""Regenerate the bundled example runs in src/rlvitals/examples (deterministic).

    python scripts/make_examples.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "src" / "rlvitals" / "examples"


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


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    collapse_groups(OUT / "collapse_groups.jsonl")
    print(f"wrote examples to {OUT}")

"""Which logged key is the trainer's optimizer step, in trackers that also count their own.

W&B's ``_step`` counts ``wandb.log`` calls; TRL, OpenRLHF, slime and open-instruct log their own
step beside it. In order of preference (the first a row holds wins):

- ``train/global_step`` (TRL / transformers' W&B and trackio callbacks), ``trainer/global_step``
  (SkyRL), ``training/global_step`` (veRL);
- ``rollout/step`` (slime: its ``rollout/*`` metrics and their collapse counts live on it);
- ``training_step`` (open-instruct, whose ``global_step`` and ``_step`` count *samples*);
- ``global_step``.

``train/step`` (slime's train axis) is not one of them: such a row joins the rollout step
logged before it.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SIDE_AXES", "TRAINER_STEP_KEYS", "pick_step"]

TRAINER_STEP_KEYS = (
    "train/global_step",
    "trainer/global_step",
    "training/global_step",
    "rollout/step",
    "training_step",
    "global_step",
)
SIDE_AXES = ("train/step", "eval/step")
"""slime's other axes: a row holding one joins the last trainer step."""
_RANK = {k: i for i, k in enumerate(TRAINER_STEP_KEYS)}


def as_step(v: Any) -> int | None:
    """An integral number within int64 (ints, integral floats), else None."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
        return None
    i = int(v)
    return i if -(2**63) <= i < 2**63 else None


def pick_step(keys_values: dict[str, Any]) -> tuple[str | None, int | None]:
    """``(key, step)`` of the preferred trainer step key the row holds, or ``(None, None)``.

    >>> pick_step({"global_step": 640, "training_step": 5, "loss": 1.0})
    ('training_step', 5)
    """
    best = None
    for k in keys_values:
        r = _RANK.get(k)
        if (
            r is not None
            and (best is None or r < _RANK[best])
            and as_step(keys_values[k]) is not None
        ):
            best = k
    if best is None:
        return None, None
    return best, as_step(keys_values[best])

"""A reward range that holds a test's rewards, for estimators that refuse rewards outside it."""

from __future__ import annotations

import numpy as np

from rlvitals.estimators import get_estimator


def covering(method: str, rewards, config: dict) -> dict:
    """``config`` with ``r_min``/``r_max`` widened to hold ``rewards`` when ``method`` is ranged
    (equivalence tests compare code paths, not the range check); a bound that already holds
    them is kept as given (its type too)."""
    if not get_estimator(method).ranged:
        return config
    lo, hi = float(np.nanmin(rewards)), float(np.nanmax(rewards))
    out = dict(config)
    if lo < out.get("r_min", 0.0):
        out["r_min"] = lo
    if hi > out.get("r_max", 1.0):
        out["r_max"] = hi
    return out

"""What the doctor names on a zoo run, per writer, and how often that is the injected cause.

Each zoo run is read through every writer a user may have (:data:`WRITERS`): the rlvitals
recording, TRL's ``trainer_state.json``, TRL's printed console log and the TensorBoard events.
:func:`judge_run` diagnoses one and returns the conditions the doctor names (primary first);
:func:`score` compares them with the runs' ``truth.json``.

Scores, per split (development / held-out) and writer:

- *primary accuracy*: the share of conditions whose runs all get the injected condition as the
  primary one (a condition counts once, whatever its number of seeds; the healthy controls are
  one condition);
- *recall*: the share of injected (non-healthy) runs whose condition is named anywhere;
- *false on healthy*: healthy-control runs with a primary condition other than ``HEALTHY``.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

__all__ = ["WRITERS", "judge_run", "score"]

WRITERS: dict[str, str] = {
    "recording": "rlvitals",
    "trainer_state": "trainer_state.json",
    "console": "console.log",
    "tensorboard": "tensorboard",
}
"""Writer name -> the path it leaves inside a zoo run folder."""


def judge_run(run_dir: str | os.PathLike, writer: str = "recording") -> dict[str, Any]:
    """The doctor on one writer of a zoo run.

    Returns ``{"primary": ID, "conditions": [IDs, primary first], "named": text}``; on a read
    error ``primary`` is ``"UNREADABLE"`` and ``named`` the error, for a run the doctor could
    not judge ``"NOT_JUDGED"`` and why.
    """
    from rlvitals.doctor import DoctorConfig, diagnose_path
    from rlvitals.errors import RlvitalsError

    path = Path(run_dir) / WRITERS[writer]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            dx = diagnose_path(path, config=DoctorConfig(allow_unjudged=True))
    except (RlvitalsError, OSError, ValueError) as err:
        return {"primary": "UNREADABLE", "conditions": [], "named": str(err)}
    if not dx.conditions:  # the doctor names conditions for every run it judged
        return {"primary": "NOT_JUDGED", "conditions": [], "named": str(dx.not_judged())}
    ids = [c.id for c in dx.conditions]
    since = dx.conditions[0].onset_step
    named = ids[0] if since is None else f"{ids[0]} (since step {since})"
    return {"primary": ids[0], "conditions": ids, "named": named}


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of judged runs.

    Args:
        rows: one per (run, writer): ``condition``, ``split``, ``writer``, ``primary``,
            ``conditions``.

    Returns ``{(split, writer): {"primary_accuracy", "recall", "false_on_healthy",
    "conditions", "runs"}}`` as a dict keyed ``"split/writer"``.
    """
    out: dict[str, Any] = {}
    keys = sorted({(r["split"], r["writer"]) for r in rows})
    for split, writer in keys:
        mine = [r for r in rows if r["split"] == split and r["writer"] == writer]
        by_condition: dict[str, list[bool]] = {}
        for r in mine:
            by_condition.setdefault(r["condition"], []).append(r["primary"] == r["condition"])
        right = sum(all(v) for v in by_condition.values())
        injected = [r for r in mine if r["condition"] != "HEALTHY"]
        recalled = sum(r["condition"] in r["conditions"] for r in injected)
        healthy = [r for r in mine if r["condition"] == "HEALTHY"]
        out[f"{split}/{writer}"] = {
            "primary_accuracy": right / len(by_condition) if by_condition else float("nan"),
            "conditions_right": right,
            "conditions": len(by_condition),
            "recall": recalled / len(injected) if injected else float("nan"),
            "false_on_healthy": sum(r["primary"] != "HEALTHY" for r in healthy),
            "healthy_runs": len(healthy),
            "runs": len(mine),
        }
    return out

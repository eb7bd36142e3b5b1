"""rlvitals: vital signs for GRPO / RLVR training runs.

Measure the learning signal (the Advantage Collapse Rate and friends), diagnose what went wrong
and since which step, and mitigate advantage collapse inside real trainers.

The verbs, each one call::

    run = rlvitals.load("train.log")            # any log a trainer writes, or a recording
    diagnosis = rlvitals.diagnose(run)           # vitals + the detector catalogue
    print(rlvitals.render(diagnosis, "md"))      # text, json, md, html
    adv, metrics, state = rlvitals.estimate("avspo", rewards, group_ids, state=state)
    with rlvitals.Recorder("runs/exp1") as rec: ...          # record a run of your own
    mon = rlvitals.Monitor(window=200)                        # watch one live

Every name is imported on first use, so ``import rlvitals`` costs next to nothing and the
log-diagnosis path never loads what it does not need (torch, the HTML renderer, ...).
"""

from __future__ import annotations

from rlvitals._version import __version__ as __version__
from rlvitals.errors import InputError as InputError
from rlvitals.errors import MissingExtraError as MissingExtraError
from rlvitals.errors import RlvitalsError as RlvitalsError
from rlvitals.registry import lazy_exports

_LAZY: dict[str, str] = {
    # the verbs
    "load": "rlvitals.importers",
    "diagnose": "rlvitals.doctor",
    "diagnose_path": "rlvitals.doctor",
    "render": "rlvitals.report",
    "describe": "rlvitals.doctor.inspection",
    "estimate": "rlvitals.estimators",
    "Recorder": "rlvitals.recording.writer",
    "Monitor": "rlvitals.guard.monitor",
    "load_config": "rlvitals.doctor.config",
    "compute_vitals": "rlvitals.vitals",
    # the types they return
    "Diagnosis": "rlvitals.doctor",
    "DoctorConfig": "rlvitals.doctor",
    "Event": "rlvitals.recording.run",
    "GroupTable": "rlvitals.recording.run",
    "Manifest": "rlvitals.recording.run",
    "Run": "rlvitals.recording.run",
    "RunBuilder": "rlvitals.recording.run",
    "Vitals": "rlvitals.vitals",
    # the measures (rlvitals.signal)
    "CollapseSplit": "rlvitals.signal",
    "GroupStats": "rlvitals.signal",
    "acr_100": "rlvitals.signal",
    "acr_volatility": "rlvitals.signal",
    "advantage_stats": "rlvitals.signal",
    "advantages": "rlvitals.signal",
    "advantages_from_stats": "rlvitals.signal",
    "collapse_mask": "rlvitals.signal",
    "collapse_rate": "rlvitals.signal",
    "collapse_split": "rlvitals.signal",
    "cumulative_acr": "rlvitals.signal",
    "excess_collapse": "rlvitals.signal",
    "expected_acr": "rlvitals.signal",
    "expected_collapse": "rlvitals.signal",
    "group_stats": "rlvitals.signal",
    "stall_spans": "rlvitals.signal",
    "windowed_acr": "rlvitals.signal",
}

__all__ = sorted([*_LAZY, "InputError", "MissingExtraError", "RlvitalsError", "__version__"])
"""Every public name: the lazily imported ones and those imported above (the redundant ``as``
marks them as re-exported)."""

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)

"""Every corpus writer's output is read back right: labelled runs written in each input format
(by the real producer library where there is one: tensorboardX, wandb, mlflow, the rlvitals
recorder), loaded through content sniffing, and diagnosed like a user's file.

For each format in :data:`rlvitals_corpus.writers.WRITERS`: a healthy run (with eval rows where
the format carries them) raises nothing at warn or above; a transient collapse, a late collapse
and (where the format can express it) one failure of another family fire their labelled IDs
with onsets within 3 logged steps (the label's own tolerance where it is larger: reward hacking
is judged on evaluation points).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlvitals.detectors import DETECTORS, Severity, load_all
from rlvitals.doctor import diagnose
from rlvitals.importers import load, sniff
from rlvitals_corpus import LabelledRun, generate
from rlvitals_corpus.writers import WRITERS, write

ONSET_LOGGED = 3.0
STEPS = 200

VIEW = {
    "trl_state": "trl",
    "tensorboard": "trl",
    "wandb": "trl",
    "mlflow": "trl",
    "jsonl": "full",
    "csv": "full",
    "openrlhf_console": "full",
    "groups_jsonl": "groups",
    "recording": "groups",
    "verl_console": "verl",
    "verl_file": "verl",
}
"""Format → the view its collapse runs are seen through."""

OTHER = {
    "trl_state": ("REWARD_HACKING", "trl"),
    "tensorboard": ("GRAD_SPIKE", "trl"),
    "wandb": ("REWARD_HACKING", "trl"),
    "mlflow": ("TRUNCATION", "trl"),
    "jsonl": ("KL_BLOWUP", "full"),
    "csv": ("CLIP_SATURATION", "full"),
    "openrlhf_console": ("ZERO_GRAD_STEPS", "full"),
    "recording": ("GRAD_NONFINITE", "full"),
    "verl_console": ("LENGTH_EXPLOSION", "verl"),
    "verl_file": ("ENTROPY_COLLAPSE", "verl"),
}
"""Format → (another family's failure, view); groups_jsonl only carries group rewards."""

CASES = ("healthy", "transient", "late", "other")


def _spec(fmt: str, case: str) -> tuple[str, dict[str, Any]] | None:
    view = VIEW[fmt]
    if case == "healthy":
        return "healthy", {
            "seed": 101,
            "shape": "learning",
            "view": view,
            "steps": STEPS,
            "eval_every": 25,
        }
    if case == "transient":
        return "collapse_identical", {
            "seed": 102,
            "onset_kind": "transient",
            "view": view,
            "steps": STEPS,
        }
    if case == "late":
        return "collapse_floor", {"seed": 103, "onset_kind": "late", "view": view, "steps": STEPS}
    if fmt not in OTHER:
        return None
    det, oview = OTHER[fmt]
    return "other_failure", {"seed": 104, "detector": det, "onset_kind": "middle", "view": oview}


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    """``(fmt, case) -> (labelled run, importer name, diagnosis)``, each written once."""
    tmp = tmp_path_factory.mktemp("formats")
    cache: dict[tuple[str, str], tuple[LabelledRun, str, Any]] = {}
    with pytest.MonkeyPatch.context() as mp:
        # wandb and mlflow write their state under HOME; keep it in the temporary folder
        mp.setenv("HOME", str(tmp / "home"))
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DIR", str(tmp / "wandb"))
        mp.setenv("WANDB_SILENT", "true")
        os.makedirs(tmp / "home", exist_ok=True)

        def get(fmt: str, case: str) -> tuple[LabelledRun, str, Any]:
            key = (fmt, case)
            if key not in cache:
                spec = _spec(fmt, case)
                assert spec is not None
                name, params = spec
                params = dict(params)
                lr = generate(name, seed=params.pop("seed"), **params)
                path = write(lr, fmt, Path(tmp) / f"{fmt}-{case}")
                cache[key] = (lr, sniff(path).name, diagnose(load(path)))
            return cache[key]

        yield get


def test_every_writer_is_covered():
    assert set(VIEW) == set(WRITERS)


PARAMS = [(f, c) for f in VIEW for c in CASES if _spec(f, c) is not None]


@pytest.mark.parametrize(("fmt", "case"), PARAMS, ids=[f"{f}-{c}" for f, c in PARAMS])
def test_format_reads_back_and_diagnoses(diagnosed, fmt, case):
    lr, sniffed, diag = diagnosed(fmt, case)
    assert sniffed == fmt
    findings = [(f.id, Severity(f.severity).value, f.onset_step, f.end_step) for f in diag.findings]
    assert not diag.errors, diag.errors
    warn = Severity.WARN.rank
    if lr.healthy:
        loud = [f for f in findings if Severity(f[1]).rank >= warn]
        assert not loud, (lr.name, loud)
        return
    load_all()
    assert lr.expect, lr.name
    k = max(1, lr.log_every)
    for lab in lr.expect:
        need = DETECTORS.get(lab.id).severity.rank
        errs = [
            abs(f.onset_step - lab.onset) / k
            for f in diag.findings
            if f.id == lab.id and Severity(f.severity).rank >= need and f.onset_step is not None
        ]
        assert errs, (lr.name, lab, findings)
        assert min(errs) <= max(ONSET_LOGGED, lab.tolerance), (lr.name, lab, findings)
    forbidden = sorted({f.id for f in diag.findings if f.id in lr.forbid})
    assert not forbidden, (lr.name, forbidden)

"""The detector scaffolder (scripts/new_detector.py): its output passes the suite as generated.

In a copy of the repository: scaffold detectors on three series the healthy runs log at very
different scales and shapes (loss: near zero, both signs; step_time: ~60 s with checkpoint
spikes; kl: growing from 1e-4), then run the tests
that judge every detector of the catalogue: its pair fires and stays silent, its page is in
sync and names every knob, the doctor runs it, the CLI lists and explains it, and the import
graph has no cycle. CONTRIBUTING.md's "Add a detector" steps are these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COPY = ("src", "dev", "tests", "docs", "scripts", "pyproject.toml", "mkdocs.yml", "README.md")
SUITE = (
    "tests/test_fixtures.py",
    "tests/test_docs.py",
    "tests/test_collapse_detectors.py::test_detector_is_its_own_docs_page",
    "tests/test_other_detectors.py",
    "tests/test_quality.py",
    "tests/test_cli.py",
    "tests/test_config.py",
    "tests/test_imports.py",
    "tests/test_doctor.py",
)


def _copy(dst: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "site")
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=ignore)
        else:
            shutil.copy(src, dst / name)


@pytest.mark.slow
def test_scaffolded_detectors_pass_the_suite(tmp_path):
    repo = tmp_path / "repo"
    _copy(repo)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo / "src"), str(repo / "dev")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for det_id, series in (
        ("LOSS_JUMP", "loss"),
        ("STEP_TIME_JUMP", "step_time"),
        ("KL_SHIFT", "kl"),
    ):
        out = subprocess.run(
            [
                sys.executable,
                "scripts/new_detector.py",
                det_id,
                "--series",
                series,
                "--family",
                "demo",
            ],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout + out.stderr
    assert (repo / "src/rlvitals/detectors/loss_jump.py").is_file()
    assert (repo / "docs/detectors/LOSS_JUMP.md").is_file()
    assert (repo / "dev/rlvitals_corpus/pairs/step_time_jump.py").is_file()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *SUITE],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    listed = subprocess.run(
        [sys.executable, "-m", "rlvitals", "detectors", "--family", "demo"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "LOSS_JUMP" in listed.stdout and "STEP_TIME_JUMP" in listed.stdout


def test_scaffolder_refuses_bad_input(tmp_path, capsys):
    spec_path = ROOT / "scripts" / "new_detector.py"
    for argv, why in (
        (["loss_jump", "--series", "loss"], "SCREAMING_SNAKE"),
        (["ADV_COLLAPSE", "--series", "loss"], "already a detector"),
        (["NEW_ONE", "--series", "no_such_metric"], "canonical metric"),
    ):
        out = subprocess.run(
            [sys.executable, str(spec_path), *argv, "--root", str(ROOT), "--dry-run"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2 and why in out.stderr, (argv, out.stderr)

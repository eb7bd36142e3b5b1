"""The scaffolders (scripts/new_detector.py, scripts/new_importer.py): their output passes the
suite as generated.

In a copy of the repository: scaffold detectors on three series the healthy runs log at very
different scales and shapes (loss: near zero, both signs; step_time: ~60 s with checkpoint
spikes; kl: growing from 1e-4), then run the tests
that judge every detector of the catalogue: its pair fires and stays silent, its page is in
sync and names every knob, the doctor runs it, the CLI lists and explains it, and the import
graph has no cycle. CONTRIBUTING.md's "Add a detector" steps are these.

The importer scaffolder likewise, for two formats: the tests that judge every format (a docs
row, a catalogue equal to the declarations, a fixture in the scan tree read with its step
axis, a pre-check that passes whatever its sniffer takes, the same report from a pipe, gzip and
the path, ``rlvitals inspect``) and the importer's own test pass, and the generated files are
lint-clean. CONTRIBUTING.md's "Add an importer" steps start there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COPY = (
    "src",
    "dev",
    "tests",
    "docs",
    "scripts",
    "benchmarks",
    "pyproject.toml",
    "mkdocs.yml",
    "README.md",
)
SUITE = (
    "tests/test_fixtures.py",
    "tests/test_detector_knobs.py::test_every_built_in_detector_is_checked",
    "tests/test_detector_knobs.py::test_knob_constants_say_what_they_were_calibrated_on",
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


IMPORTER_SUITE = (
    "tests/test_declarations.py",
    "tests/test_imports.py::test_no_import_cycle_in_src",
    "tests/test_scan.py::test_every_format_and_every_store_run_is_listed_once",
    "tests/test_scan.py::test_every_declared_format_has_a_fixture_and_its_precheck_passes_what_its_sniffer_takes",
)


@pytest.mark.slow
def test_scaffolded_importers_pass_the_suite(tmp_path):
    repo = tmp_path / "repo"
    _copy(repo)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(repo / "src"), str(repo / "dev")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    made = []
    for name, prefix in (("acme_console", "acme"), ("zeta_log", "zeta/train")):
        out = subprocess.run(
            [sys.executable, "scripts/new_importer.py", name, "--prefix", prefix],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        made += [f"src/rlvitals/importers/{name}.py", f"tests/test_import_{name}.py"]
        assert (repo / "tests/importer_fixtures" / name / "expected.json").is_file()
        assert f"| `{name}` |" in (repo / "docs/importers.md").read_text()
    ruff = Path(sys.executable).with_name("ruff")
    for argv in (["check"], ["format", "--check"]):
        lint = subprocess.run(
            [str(ruff), *argv, *made], cwd=repo, capture_output=True, text=True, timeout=120
        )
        assert lint.returncode == 0, lint.stdout + lint.stderr
    pytest_ = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"]
    for argv in (
        [*IMPORTER_SUITE, *made[1::2], "--doctest-modules", *made[0::2]],
        ["tests/test_import_streams.py", "-k", "acme_console or zeta_log"],
    ):
        run = subprocess.run(
            [*pytest_, *argv], cwd=repo, env=env, capture_output=True, text=True, timeout=900
        )
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        assert " passed" in run.stdout and " skipped" not in run.stdout, run.stdout[-2000:]


def test_importer_scaffolder_refuses_bad_input():
    script = ROOT / "scripts" / "new_importer.py"
    for argv, why in (
        (["AcmeLog", "--prefix", "acme"], "lower_snake"),
        (["trl_state", "--prefix", "acme"], "already a format"),
        (["acme_log", "--prefix", "two words"], "--prefix"),
        (["acme_log", "--prefix", "acme", "--writer", "a | b"], "--writer"),
    ):
        out = subprocess.run(
            [sys.executable, str(script), *argv, "--root", str(ROOT), "--dry-run"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2 and why in out.stderr, (argv, out.stderr)

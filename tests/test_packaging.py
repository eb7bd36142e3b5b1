"""The product ships alone: the wheel holds no corpus, and importing any module of the installed
package imports no development-only package (tracker libraries, test tools, the corpus)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEV_ONLY = (
    "wandb",
    "mlflow",
    "tensorboardX",
    "tensorboard",
    "hypothesis",
    "pytest",
    "_pytest",
    "rlvitals_corpus",
)
"""Top-level packages the product must never import: the corpus writers' trackers, the test
tools and the corpus itself."""

EXTRAS = ("rlvitals.integrations.trl", "rlvitals.integrations.verl")
"""Adapters whose extras (TRL, veRL) import trackers of their own; not walked."""


def test_the_wheel_holds_no_corpus(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    # a copy: a build in the checkout would reuse its build/ folder, stale files and all
    shutil.copytree(
        ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    out = tmp_path / "wheel"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(project),
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        "building the wheel needs setuptools>=77 in this environment (pip install -e '.[dev]'):"
        f"\n{proc.stderr[-3000:]}"
    )
    (wheel,) = out.glob("rlvitals-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "rlvitals/__init__.py" in names and "rlvitals/examples/collapse_groups.jsonl" in names
    assert [n for n in names if "corpus" in n] == []
    assert {n.split("/")[0] for n in names} == {
        "rlvitals",
        wheel.name.split("-py")[0] + ".dist-info",
    }


_WALK = textwrap.dedent("""
    import importlib, json, pkgutil, sys
    import rlvitals

    dev_only, extras = set(sys.argv[1].split(",")), set(sys.argv[2].split(","))
    walked, culprits = [], {}
    # pkgutil.walk_packages would import every package to look inside, the extras' too
    todo = [(rlvitals.__path__, "rlvitals.")]
    while todo:
        path, prefix = todo.pop()
        for m in pkgutil.iter_modules(path, prefix):
            if m.name.endswith(".__main__") or m.name in extras:
                continue
            before = set(sys.modules)
            try:
                mod = importlib.import_module(m.name)
            except ImportError as e:  # a module behind an extra that is not installed
                if "pip install" not in str(e):
                    raise
                continue
            walked.append(m.name)
            new = sorted({n.split(".")[0] for n in set(sys.modules) - before} & dev_only)
            if new:
                culprits[m.name] = new
            if m.ispkg:
                todo.append((mod.__path__, m.name + "."))
    print(json.dumps({"walked": walked, "culprits": culprits,
                      "loaded": sorted({n.split(".")[0] for n in sys.modules} & dev_only)}))
""")


def test_no_module_imports_a_development_only_package(tmp_path):
    # -I: no PYTHONPATH, no current directory on sys.path (dev/ and tests/ stay out of reach)
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _WALK, ",".join(DEV_ONLY), ",".join(EXTRAS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert {
        "rlvitals.doctor",
        "rlvitals.report.pages",
        "rlvitals.importers.wandb",
        "rlvitals.importers.mlflow",
        "rlvitals.importers.tensorboard",
    } <= set(got["walked"])
    assert got["culprits"] == {} and got["loaded"] == [], got["culprits"]

"""Install as documented (docs/install.md): rlvitals is on no package index.

The wheel is built with the command the page gives, installed with an extra into a fresh
virtual environment (base dependencies from the index, no torch), and its console script runs
the doctor. No doc, error or advice line may tell a user to install ``rlvitals`` from an index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rlvitals import __version__

ROOT = Path(__file__).resolve().parents[1]

INDEX_INSTALL = re.compile(
    r"""(?:\bpip3?|\bpipx|\buv\s+pip|\buv\s+tool|\bpython3?\s+-m\s+pip)\s+install\s+"""
    r"""(?P<args>[^`\n;&|)]*)|\buv\s+add\s+(?P<uv>[^`\n;&|)]*)"""
)
"""A ``pip install ...`` (or pipx, uv) command and its arguments, up to the end of the command."""
REQUIREMENT = re.compile(r"""rlvitals(\[[^\]]*\])?(\s*[<>=!~]=?\s*[\w.*]+)?""")
"""The requirement ``rlvitals``, with extras or a version: a name an index would be asked for."""
TAKES_VALUE = {
    "-e", "--editable", "-r", "--requirement", "-c", "--constraint", "-i", "--index-url",
    "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root", "-w",
    "--python", "--src", "--platform", "--python-version", "--implementation", "--abi",
}  # fmt: skip
"""pip options followed by a value that is not a requirement."""
PROSE = re.compile(
    r"#.*|.*[,:.]|[\u2014-]|in|from|or|and|then|there|when|if|with|to|the|an?|on|for|is|as|into"
)
"""A token that ends the command in running text: a comment, a word ending a clause, a dash,
a short word of prose."""

KNOWN_ELSEWHERE = {
    ("src/rlvitals/importers/wandb_history.py", "(``pip install 'rlvitals[parquet]'``)"),
    ("src/rlvitals/importers/_trl_tables.py", "(``pip install 'rlvitals[parquet]'``)"),
    ("src/rlvitals/importers/trl_completions.py", "(``pip install 'rlvitals[parquet]'``)"),
}
"""Docstrings in modules another change was editing when this test was written (issue 25):
tolerated, but each must still be there, so an entry goes once its line is fixed. Add nothing."""


def requirements(args: str) -> list[str]:
    """The requirements a ``pip install`` names, from its arguments up to where prose begins.

    >>> requirements("-U 'rlvitals[trl]>=0.1' numpy  # the latest")
    ['rlvitals[trl]>=0.1', 'numpy']
    >>> requirements("-e '.[trl]' numpy in an rlvitals checkout")
    ['numpy']
    """
    out: list[str] = []
    tokens = iter(args.split())
    for raw in tokens:
        tok = raw.strip("'\"")
        if tok in TAKES_VALUE:  # -e's value is a path or a URL, never a name for an index
            next(tokens, None)
        elif tok.startswith("-") and len(tok) > 1:
            continue
        elif PROSE.fullmatch(tok) and not REQUIREMENT.fullmatch(tok) and tok != ".":
            break
        else:
            out.append(tok)
    return out


def index_installs(text: str) -> list[str]:
    """The commands in ``text`` that install ``rlvitals`` from an index (a direct reference,
    ``rlvitals[trl] @ git+https://...``, is not from an index).

    >>> index_installs("pip install rlvitals && pip install -U 'rlvitals[trl]>=0.1'")
    ['pip install rlvitals ', "pip install -U 'rlvitals[trl]>=0.1'"]
    >>> index_installs("pip install -e '.[trl]'; pip install 'rlvitals[trl] @ git+https://x/y'")
    []
    """
    found = []
    for m in INDEX_INSTALL.finditer(text):
        reqs = requirements(m.group("args") or m.group("uv") or "")
        for i, req in enumerate(reqs):
            direct = i + 1 < len(reqs) and reqs[i + 1].startswith("@")
            if REQUIREMENT.fullmatch(req) and not direct:
                found.append(m.group(0))
                break
    return found


def _documents() -> list[Path]:
    return [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "src").rglob("*.py")),
    ]


def test_no_document_installs_rlvitals_from_an_index():
    offenders, seen = [], set()
    for path in _documents():
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not index_installs(line):
                continue
            known = {k for k in KNOWN_ELSEWHERE if k[0] == rel and k[1] in line}
            if known:
                seen |= known
            else:
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, (
        "rlvitals is on no package index; point to docs/install.md or the checkout form "
        "(pip install -e '.[extra]'):\n" + "\n".join(offenders)
    )
    assert seen == KNOWN_ELSEWHERE, (
        f"fixed since, remove from KNOWN_ELSEWHERE: {KNOWN_ELSEWHERE - seen}"
    )


def _run(cmd: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_built_wheel_installs_into_a_fresh_venv_and_runs_the_doctor(tmp_path):
    # a copy of the project: a build in the checkout would write build/ and *.egg-info there
    project = tmp_path / "rlvitals"
    project.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(
        ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    pip = [sys.executable, "-m", "pip"]
    # docs/install.md: pip wheel . --no-deps -w dist
    proc = _run([*pip, "wheel", ".", "--no-deps", "-q", "-w", "dist"], project)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (wheel,) = (project / "dist").glob("rlvitals-*.whl")

    venv = tmp_path / "venv"
    proc = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    python, script = venv / "bin" / "python", venv / "bin" / "rlvitals"
    # docs/install.md: pip install "$(ls dist/rlvitals-*.whl)[extra]"; this venv's pip is ours
    proc = _run([*pip, "--python", str(python), "install", "-q", f"{wheel}[zstd]"], tmp_path, 300)
    assert proc.returncode == 0, proc.stderr[-3000:]

    proc = _run(
        [str(python), "-c", "import rlvitals, zstandard; print(rlvitals.__file__)"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert Path(proc.stdout.strip()).is_relative_to(venv), "imported the checkout, not the wheel"
    proc = _run([str(python), "-c", "import torch"], tmp_path)
    assert proc.returncode != 0, "the base install pulled torch"

    proc = _run([str(script), "--version"], tmp_path)
    assert proc.stdout.strip() == f"rlvitals {__version__}"
    proc = _run([str(script), "doctor", "--example", "collapse", "--fail-on", "never"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "format groups_jsonl" in proc.stdout and "since step 60" in proc.stdout
    # a missing extra says how to install it, from a checkout and the install page
    proc = _run([str(script), "mcp"], tmp_path)
    assert proc.returncode == 2
    assert "pip install -e '.[mcp]' in an rlvitals checkout (docs/install.md)" in proc.stderr

"""The import graph: no cycle among rlvitals' modules (lazy imports inside functions count),
and lazy by construction (sniffing a file
imports only the importers that could claim it; a JSON report loads neither rich nor the HTML
renderer; ``import rlvitals`` loads no numpy)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "rlvitals"


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """rlvitals modules ``path`` imports, anywhere in it (module level or inside functions:
    a lazy import is still a dependency), except under ``if TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    name = _module_name(path)
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("rlvitals"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if not base.startswith("rlvitals"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in modules else base)
    out.discard(name)
    return out


def test_no_import_cycle_in_src():
    files = sorted(PKG.rglob("*.py"))
    modules = {_module_name(p) for p in files}
    graph = {_module_name(p): _imports(p, modules) for p in files}
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for dep in sorted(graph.get(m, ())):
            if state.get(dep) == 1:
                cycle = [*stack[stack.index(dep) :], dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep in graph and not state.get(dep):
                dfs(dep)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if not state.get(m):
            dfs(m)


PROBE = """
import json, sys
{code}
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("rlvitals", "rich", "numpy", "torch")))))
"""


def _loaded(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-I", "-c", PROBE.format(code=code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_rlvitals_is_cheap():
    loaded = _loaded("import rlvitals")
    assert not {m for m in loaded if m.startswith(("numpy", "rich", "torch"))}, loaded
    assert "rlvitals.doctor" not in loaded and "rlvitals.importers" not in loaded


def test_sniffing_a_jsonl_imports_only_what_could_claim_it(tmp_path):
    p = tmp_path / "run.jsonl"
    p.write_text('{"step": 1, "reward": 0.5}\n')
    loaded = _loaded(f"import rlvitals.importers as i; assert i.sniff({str(p)!r}).name == 'jsonl'")
    for never in (
        "tensorboard",
        "wandb",
        "mlflow",
        "verl_console",
        "openrlhf",
        "_protobuf",
        "_crc32c",
        "trl_completions",
    ):
        assert f"rlvitals.importers.{never}" not in loaded, never


def test_a_json_report_loads_neither_rich_nor_the_html_renderer(tmp_path):
    p = tmp_path / "run.jsonl"
    p.write_text("".join(f'{{"step": {s}, "reward": 0.5}}\n' for s in range(1, 40)))
    loaded = _loaded(
        f"from rlvitals.cli import main; assert main(['doctor', {str(p)!r}, '--format', 'json', "
        f"'-o', {str(tmp_path / 'r.json')!r}, '--fail-on', 'never']) == 0"
    )
    assert not {m for m in loaded if m.startswith("rich")}, sorted(loaded)
    assert "rlvitals.report.html_page" not in loaded and "rlvitals.report.text" not in loaded
    assert "torch" not in loaded

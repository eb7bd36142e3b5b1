"""Every detector knob's default is a named constant whose docstring says what it was
calibrated on (issue 23.5): the zoo's development runs, the real logs, the synthetic corpus, or
"not calibrated" with the reason. ``benchmarks/calibration.py`` measures the numbers they quote.

The rule is checked on the detectors' source (the constant's docstring is the string literal
right below its assignment), so it holds for every detector a contributor adds.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
import textwrap
from pathlib import Path

import pytest

from rlvitals.detectors import catalogue

SOURCES = ("zoo dev", "real logs", "corpus")
"""Names of the calibration sets a knob's docstring may cite (benchmarks/calibration.py)."""
NOT_CALIBRATED = "not calibrated"


def _module_docstrings(tree: ast.Module) -> dict[str, str | None]:
    """Module-level ``NAME = ...`` → the string literal right below it (None without one)."""
    out: dict[str, str | None] = {}
    body = tree.body
    for i, node in enumerate(body):
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or not isinstance(target, ast.Name):
            continue
        nxt = body[i + 1] if i + 1 < len(body) else None
        doc = None
        if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant):
            doc = nxt.value.value if isinstance(nxt.value.value, str) else None
        out[target.id] = doc
    return out


def _imports(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Module-level ``from X import NAME [as ALIAS]`` → ``(X, NAME)`` by the name it is bound to."""
    return {
        (a.asname or a.name): (node.module, a.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for a in node.names
    }


def knob_problems(source: str, resolve=None) -> list[str]:
    """Problems with the knob constants of the detector module ``source``: a ``Knobs`` field
    whose default is not a named constant, a constant without a docstring, or one whose
    docstring names no calibration set and does not say it is not calibrated (or claims a
    calibration without a number). ``resolve(module, name)`` returns the docstring of a
    constant imported from another module (``None`` when it has none)."""
    tree = ast.parse(source)
    docs = _module_docstrings(tree)
    imported = _imports(tree)
    problems = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == "Knobs"):
            continue
        for field in node.body:
            if not isinstance(field, ast.AnnAssign) or field.value is None:
                continue
            name = field.target.id
            if not isinstance(field.value, ast.Name):
                problems.append(
                    f"{name}: default {ast.unparse(field.value)} is not a named constant"
                )
                continue
            const = field.value.id
            if const in docs:
                doc = docs[const]
            elif const in imported and resolve is not None:
                doc = resolve(*imported[const])
            else:
                problems.append(f"{name}: default {const} is not a module constant")
                continue
            problems += [f"{name} ({const}): {p}" for p in _doc_problems(doc)]
    return problems


def _doc_problems(doc: str | None) -> list[str]:
    if not doc:
        return ["no docstring below the constant"]
    text = " ".join(doc.split()).lower()
    if NOT_CALIBRATED in text:
        return []
    if not any(s in text for s in SOURCES):
        return [
            f"docstring names no calibration source ({', '.join(SOURCES)}) nor says 'not calibrated'"
        ]
    if not re.search(r"\d", text):
        return ["docstring claims a calibration but quotes no measured number"]
    return []


def _resolve(module: str, name: str) -> str | None:
    """The docstring of constant ``name`` of ``module``, following one re-export (a package
    ``__init__`` with ``from .series import NAME``)."""
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    docs = _module_docstrings(tree)
    if name in docs:
        return docs[name]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            base = importlib.util.resolve_name("." * node.level + (node.module or ""), module)
            src = inspect.getsource(importlib.import_module(base))
            return _module_docstrings(ast.parse(src)).get(name)
    return None


BUILT_IN = [c for c in catalogue() if c.__module__.startswith("rlvitals.detectors.")]


def test_every_built_in_detector_is_checked():
    """Each module of the detectors package that registers a detector is in the catalogue."""
    import rlvitals.detectors as pkg

    folder = Path(pkg.__file__).parent
    registering = {
        f"rlvitals.detectors.{p.stem}"
        for p in folder.glob("*.py")
        if "\n@register\n" in p.read_text()
    }
    assert registering and {c.__module__ for c in BUILT_IN} == registering
    assert sum(len(c.knob_names()) for c in BUILT_IN) >= 100


@pytest.mark.parametrize("cls", BUILT_IN, ids=lambda c: c.id)
def test_knob_constants_say_what_they_were_calibrated_on(cls):
    source = inspect.getsource(inspect.getmodule(cls))
    assert knob_problems(source, _resolve) == []


GOOD = '''
from rlvitals.detectors.base import Detector

RATIO = 0.25
"""Share of the early level. Calibrated on the real logs: collapses fall to 19% and 6%."""
SUSTAIN = 5
"""Consecutive points. Not calibrated: a design choice."""


class D(Detector):
    class Knobs:
        ratio: float = RATIO
        sustain: int = SUSTAIN
'''


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (("RATIO = 0.25\n", "RATIO = 0.25\nEXTRA = 1\n"), "no docstring"),
        (("Calibrated on the real logs", "Chosen by feel"), "names no calibration source"),
        (("collapses fall to 19% and 6%", "collapses fall further"), "quotes no measured number"),
        (("ratio: float = RATIO", "ratio: float = 0.25"), "not a named constant"),
        (("sustain: int = SUSTAIN", "sustain: int = MISSING"), "not a module constant"),
    ],
)
def test_the_check_catches_an_undocumented_knob(edit, problem):
    assert knob_problems(textwrap.dedent(GOOD)) == []
    bad = GOOD.replace(*edit)
    assert bad != GOOD
    found = knob_problems(bad)
    assert len(found) == 1 and problem in found[0], found


def test_an_imported_constant_is_judged_where_it_is_defined():
    """ACR_STALL's stall_acr comes from rlvitals.signal: its docstring there is the one read."""
    src = GOOD.replace("RATIO = 0.25\n", "from rlvitals.signal import STALL_ACR as RATIO\n")
    src = src.replace(
        '"""Share of the early level. Calibrated on the real logs: collapses fall to 19% and 6%."""\n',
        "",
    )
    assert knob_problems(src, lambda m, n: None) == [
        "ratio (RATIO): no docstring below the constant"
    ]
    assert knob_problems(src, lambda m, n: "Calibrated on the zoo dev runs: 8/8.") == []
    assert "zoo dev" in _resolve("rlvitals.signal", "STALL_ACR")


def _calibration():
    """benchmarks/calibration.py, the script that measures the numbers the docstrings quote."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"
    spec = importlib.util.spec_from_file_location("calibration", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(entropy_share: float):
    """300 steps: entropy falling from 0.34 to ``entropy_share`` of it, reward flat at 0.97."""
    import numpy as np

    from rlvitals.recording.run import RunBuilder

    b = RunBuilder()
    for s in range(1, 301):
        e = 0.34 * (entropy_share + (1 - entropy_share) * np.exp(-s / 25))
        b.add_row(s, {"entropy": float(e), "reward_mean": 0.97})
    return b.build()


def test_the_calibration_sweep_counts_where_a_gate_changes_a_finding():
    cal = _calibration()
    items = [
        {"set": "real", "name": "collapse", "run": _run(0.18), "conditions": {"ENTROPY_COLLAPSE"}},
        {"set": "real", "name": "healthy", "run": _run(0.6), "conditions": {"HEALTHY"}},
        {"set": "real", "name": "other", "run": _run(0.6), "conditions": {"KL_BLOWUP"}},
    ]
    for it in items:
        it.update({"not": set(), "labels": set(), "healthy": it["conditions"] == {"HEALTHY"}})
        cal._prepare(it)
    knob = cal.sweep(items, ["ENTROPY_COLLAPSE"])["ENTROPY_COLLAPSE"]["collapse_ratio"]
    rows = dict(knob["rows"])
    assert knob["default"] == 0.25 and list(rows) == [0.0625, 0.125, 0.1875, 0.25, 0.375, 0.5, 1.0]
    # the fall to ~18% fires at 0.25, not at 0.125; the run at 60% only once the gate passes it
    assert rows[0.25] == {"real sign": [1, 1], "real healthy": [0, 1]}
    assert rows[0.125]["real sign"] == [0, 1]
    assert rows[0.5]["real healthy"] == [0, 1] and rows[1.0]["real healthy"] == [1, 1]
    # a run of a condition the detector is no sign of is left out of the counts
    assert all(set(c) == {"real sign", "real healthy"} for c in rows.values())

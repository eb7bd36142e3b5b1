"""Renderers: snapshots of text / Markdown / JSON on a fixed Diagnosis, the JSON contract, escaping.

Regenerate the snapshots after an intended change with
``RLVITALS_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/test_report.py`` and review the diff.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from rlvitals.report import RENDERERS, RenderOptions, ReportFormat, formats, render, suffix_format

SNAPSHOTS = Path(__file__).with_name("snapshots")
ODD = "<script>alert(1)</script>"


def _fixture():
    spec = importlib.util.spec_from_file_location(
        "rlvitals_tests_report_fixture", Path(__file__).with_name("_report_fixture.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FIX = _fixture()


@pytest.fixture(scope="module")
def diagnosis():
    return FIX.fixed_diagnosis()


@pytest.fixture(scope="module")
def odd():
    return FIX.fixed_diagnosis(source=f"runs/{ODD}/[bold]x[/bold]/log.jsonl", odd_name=ODD)


def _check_snapshot(name: str, got: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("RLVITALS_UPDATE_SNAPSHOTS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got, encoding="utf-8")
    want = path.read_text(encoding="utf-8")
    if got != want:
        diff = "".join(
            difflib.unified_diff(
                want.splitlines(True), got.splitlines(True), "snapshot", "rendered"
            )
        )
        pytest.fail(f"{name} differs from its snapshot:\n{diff}")


@pytest.mark.parametrize(
    ("fmt", "snap"), [("text", "report.txt"), ("md", "report.md"), ("json", "report.json")]
)
def test_snapshot(diagnosis, fmt, snap):
    _check_snapshot(snap, render(diagnosis, fmt, RenderOptions(width=100)))


def test_registry_shape():
    assert {r.name for r in formats()} == {f.value for f in ReportFormat}
    with pytest.raises(KeyError, match="valid: html, json, md, text"):
        render(None, "pdf")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered"):
        from rlvitals.report import register

        register(RENDERERS.get("md"))
    assert suffix_format("out/report.HTML") == "html"
    assert suffix_format("summary.md") == "md"
    assert suffix_format("report.pdf") is None


def test_json_is_the_schema_1_contract(diagnosis):
    d = json.loads(render(diagnosis, "json"))
    assert d["schema"] == 1
    assert set(d) >= {"schema", "run", "vitals", "findings"}
    assert d["vitals"]["evidence"] in {
        "groups",
        "zero_std_frac",
        "advantages",
        "reward_std",
        "loss_grad_zero",
        "none",
    }
    for key in ("acr_mean", "acr_100"):
        assert d["vitals"][key] is None or isinstance(d["vitals"][key], float)
    want = {
        "id": str,
        "severity": str,
        "confidence": float,
        "evidence": str,
        "message": str,
        "metrics": dict,
        "actions": list,
    }
    assert len(d["findings"]) == 3
    for f in d["findings"]:
        for key, typ in want.items():
            assert isinstance(f[key], typ), key
        assert f["severity"] in {"info", "warn", "critical"}
        for key in ("onset_step", "end_step"):
            assert f[key] is None or isinstance(f[key], int)
        assert all(isinstance(a, str) for a in f["actions"])
    assert d["findings"][2]["end_step"] == 30 and d["findings"][0]["end_step"] is None


def test_json_is_strict_even_with_nan(diagnosis):
    diagnosis.findings[0].metrics["nan"] = float("nan")
    try:
        text = render(diagnosis, "json")
    finally:
        del diagnosis.findings[0].metrics["nan"]
    assert json.loads(text)["findings"][0]["metrics"]["nan"] is None
    assert "NaN" not in text


def test_text_is_plain_without_colour_and_coloured_with(diagnosis):
    plain = render(diagnosis, "text")
    assert "\x1b[" not in plain
    coloured = render(diagnosis, "text", RenderOptions(color=True, width=100))
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured).split() == plain.split()


def test_text_has_table_evidence_and_try_lines(diagnosis):
    out = render(diagnosis, "text")
    lines = out.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("───"))
    table = lines[rule + 1 : lines.index("", rule)]
    ids = [ln.split()[1] for ln in table if ln.startswith(("WARN", "INFO", "CRITICAL"))]
    assert ids == ["DEGENERATE_GROUPS", "ENTROPY_COLLAPSE", "GRAD_SPIKE"]
    assert "ongoing" in table[0] and table[-2].split()[2:4] == ["30", "30"]
    assert out.count("try: ") == 4
    assert "evidence zero_std_frac" in out and "not judged (1, " in out and "KL_BLOWUP" in out


def test_markdown_fits_a_step_summary(diagnosis):
    out = render(diagnosis, "md")
    assert out.startswith("## ")
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert len(rows) == 1 + 3 and all(ln.count(" | ") >= 4 for ln in rows)
    assert len(out.encode()) < 1024 * 1024  # GitHub's step summary limit


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_strings_from_the_input_are_escaped(odd, fmt):
    out = render(odd, fmt, RenderOptions(width=200))
    if fmt == "json":
        d = json.loads(out)
        assert d["run"]["source"] == f"runs/{ODD}/[bold]x[/bold]/log.jsonl"
        assert ODD in d["run"]["unknown_keys"]
        return
    if fmt == "text":  # rich markup in the input is printed, not interpreted
        assert "[bold]x[/bold]" in out and ODD in out
        return
    assert "<script" not in out.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out

"""Docs cannot drift from code: the generated pages match the detectors and the metric table,
every page names only knobs that exist, and the mkdocs site builds in strict mode."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from rlvitals.detectors import Detector, Severity, catalogue
from rlvitals.recording.metrics import CANONICAL
from rlvitals.report.pages import detector_page, knob_docs, page_problems

ROOT = Path(__file__).resolve().parents[1]


def _gen_docs():
    spec = importlib.util.spec_from_file_location(
        "rlvitals_gen_docs", ROOT / "scripts" / "gen_docs.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GEN = _gen_docs()


def test_generated_pages_are_up_to_date(capsys):
    code = GEN.main(["--check"])
    err = capsys.readouterr().err
    assert code == 0, f"docs drifted from code (run python scripts/gen_docs.py):\n{err}"


def test_check_fails_on_a_stale_page_and_a_missing_knob(tmp_path, capsys):
    docs = tmp_path / "docs"
    assert GEN.main(["--docs", str(docs)]) == 0
    capsys.readouterr()
    assert GEN.main(["--check", "--docs", str(docs)]) == 0
    page = docs / "detectors" / "KL_BLOWUP.md"
    page.write_text(page.read_text().replace("jump_ratio", "jump_factor"))
    assert GEN.main(["--check", "--docs", str(docs)]) == 1
    assert "KL_BLOWUP.md: out of date" in capsys.readouterr().err
    (docs / "detectors" / "OLD_DETECTOR.md").write_text("# OLD\n\n" + GEN.GENERATED + "\n")
    GEN.main(["--check", "--docs", str(docs)])
    assert "OLD_DETECTOR.md: page of a detector that no longer exists" in capsys.readouterr().err


def test_a_page_naming_a_knob_that_does_not_exist_is_a_problem():
    class Fake(Detector):
        """Fake: checks nothing.

        ## What is happening
        Nothing.
        ## What it looks like in the recording
        Nothing.
        ## How the detector decides
        Compares with :knob:`limit` and :knob:`no_such_knob`.
        ## What to try
        Nothing.
        """

        id = "FAKE"
        severity = Severity.INFO

        @dataclasses.dataclass(frozen=True)
        class Knobs:
            #: The limit.
            limit: float = 1.0
            undocumented: int = 3

    problems = page_problems(Fake)
    assert any(
        "'no_such_knob', which does not exist; valid: limit, undocumented" in p for p in problems
    )
    assert any("'undocumented' is not documented" in p for p in problems)
    assert "[`limit`](#knobs)" in detector_page(Fake)


def test_every_detector_page_is_complete():
    for cls in catalogue():
        assert page_problems(cls) == [], cls.id
        page = detector_page(cls)
        for f in dataclasses.fields(cls.Knobs):
            assert f"| `{f.name}` |" in page, (cls.id, f.name)
            assert knob_docs(cls)[f.name], (cls.id, f.name)


def test_metrics_page_lists_every_canonical_key_and_alias():
    text = (ROOT / "docs" / "metrics.md").read_text()
    for m in CANONICAL.values():
        assert f"| `{m.name}` |" in text
        for alias in m.aliases:
            assert f"`{alias}`" in text, alias


def _mkdocs() -> str:
    exe = Path(sys.executable).with_name("mkdocs")
    found = str(exe) if exe.exists() else shutil.which("mkdocs")
    assert found, "mkdocs is required for the docs test: pip install 'rlvitals[docs]'"
    return found


def test_mkdocs_builds_strict(tmp_path):
    proc = subprocess.run(
        [_mkdocs(), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "site" / "detectors" / "ENTROPY_COLLAPSE" / "index.html").exists()

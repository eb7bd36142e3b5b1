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
    with pytest.raises(KeyError, match="valid: github, html, json, md, text"):
        render(None, "pdf")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already registered"):
        from rlvitals.report import register

        register(RENDERERS.get("md"))
    assert suffix_format("out/report.HTML") == "html"
    assert suffix_format("summary.md") == "md"
    assert suffix_format("report.pdf") is None


def test_json_is_the_schema_1_contract(diagnosis):
    d = json.loads(render(diagnosis, "json"))
    assert d["schema"] == 2
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
        assert all(isinstance(m, int) for m in f["marks"])
    assert d["findings"][2]["end_step"] == 101 and d["findings"][0]["end_step"] is None
    assert d["findings"][2]["marks"] == [30, 75, 101]
    assert d["not_judged"] is None
    # incidents: every finding in exactly one, by its index; the root first
    assert [sorted(i["findings"]) for i in d["incidents"]] == [[0, 1], [2]]
    for inc in d["incidents"]:
        assert d["findings"][inc["findings"][0]]["id"] == inc["root"] == inc["detectors"][0]
        assert inc["severity"] in {"info", "warn", "critical"}
        assert isinstance(inc["title"], str) and isinstance(inc["cause"], str)
        assert all(isinstance(a, str) for a in inc["actions"])


def test_json_keys_are_documented():
    """Every top-level key, incident key and finding key of the JSON is on its docs page."""
    page = (Path(__file__).parents[1] / "docs" / "report-json.md").read_text(encoding="utf-8")
    d = json.loads(render(FIX.fixed_diagnosis(), "json"))
    keys = list(d) + [f"findings[].{k}" for k in d["findings"][0]]
    keys += [f"incidents[].{k}" for k in d["incidents"][0]]
    missing = [k for k in keys if f"`{k}`" not in page]
    assert not missing, f"docs/report-json.md does not document {missing}"


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
    assert "ongoing" in table[0] and table[-2].split()[2:4] == ["30", "101"]
    assert out.count("try: ") == 4 + 4  # the incidents' first actions, then every finding's
    assert "evidence zero_std_frac" in out and "not judged (3):" in out and "KL_BLOWUP" in out
    assert "INFO GRAD_SPIKE  at steps 30, 75, 101 ·" in out  # three spikes, not one episode


def test_markdown_fits_a_step_summary(diagnosis):
    out = render(diagnosis, "md")
    assert out.startswith("## ")
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert len(rows) == 1 + 3 and all(len(re.findall(r"(?<!\\)\|", ln)) == 6 for ln in rows)
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
    # no script from the input: the HTML page holds exactly one, its own (rlvitals.report.web)
    assert out.lower().count("<script") == (1 if fmt == "html" else 0)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


# --- incidents lead, findings beneath (issue 10 item 10) ------------------------------------


@pytest.fixture(scope="module")
def collapse():
    """The bundled collapse example: one collapse that fires five detectors."""
    from rlvitals.doctor import diagnose_path
    from rlvitals.examples import example_path

    d = diagnose_path(example_path("collapse"))
    assert len(d.findings) >= 5 and len(d.incidents) == 1
    return d


def _plain(out: str, fmt: str) -> str:
    """What a reader of ``out`` sees: HTML without tags, Markdown without its escapes."""
    import html as h

    if fmt == "html":
        return h.unescape(re.sub(r"<[^>]+>", " ", out))
    if fmt == "md":
        return h.unescape(re.sub(r"\\([\\`*_\[\]|~$#])", r"\1", out)).replace("`", "")
    return out


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_one_collapse_reads_as_one_incident_at_the_top(collapse, fmt):
    out = render(collapse, fmt, RenderOptions(width=100))
    plain = _plain(out, fmt)
    inc = collapse.incidents[0]
    n = len(collapse.findings)
    assert f"{n} warnings in 1 incident" in plain
    # the primary condition leads, in one sentence, before the incident
    primary = collapse.conditions[0]
    assert plain.index(f"({primary.id})") < plain.index(inc.title)
    # the incident (its title, cause, root and detectors) comes before the findings
    at_title = plain.index(inc.title)
    table = plain.index("Findings", at_title)
    first_finding = min(plain.index(f.message[:40], table) for f in collapse.findings)
    assert at_title < plain.index(inc.cause[:40]) < first_finding
    assert plain.count(inc.title) == 1
    head = plain[at_title:first_finding]
    assert all(det in head for det in inc.ids), "every member detector is named"
    assert inc.actions[0][:40] in " ".join(head.split())
    # ... and every finding is still complete beneath: its message and all of its actions
    tail = " ".join(plain[first_finding:].split())
    for f in collapse.findings:
        assert " ".join(f.message.split())[:60] in tail
        assert all(" ".join(a.split())[:50] in tail for a in f.actions)


def test_incident_lists_only_its_first_actions(collapse):
    from rlvitals.report.common import INCIDENT_ACTIONS

    out = render(collapse, "text", RenderOptions(width=400))
    head = out[out.index("Incidents") : out.index("Findings")]
    assert head.count("try: ") == INCIDENT_ACTIONS
    assert f"(+{len(collapse.incidents[0].actions) - INCIDENT_ACTIONS} more" in head


# --- not judged is not green (issue 10 item 8) ---------------------------------------------


@pytest.fixture(scope="module")
def unjudged():
    d = FIX.unjudged_diagnosis()
    assert d.not_judged() and not d.findings
    return d


def test_not_judged_leads_every_format(unjudged):
    why = unjudged.not_judged()
    text = render(unjudged, "text", RenderOptions(width=400))
    assert text.splitlines()[3] == f"not judged: {why}"
    assert "no findings" not in text
    md = render(unjudged, "md")
    assert md.startswith("## ⚪ rlvitals doctor: not judged\n") and "✅" not in md
    assert "no findings" not in md and "<details open>" in md
    assert md.index("**Not judged:**") < md.index("<details open>")
    html = render(unjudged, "html")
    assert '<span class="verdict unjudged">not judged</span>' in html
    assert "no findings" not in html and 'class="verdict ok"' not in html
    assert html.index("Not judged:") < html.index("Vital signs")
    assert json.loads(render(unjudged, "json"))["not_judged"] == why


def test_a_judged_clean_run_is_green():
    from rlvitals.doctor import Diagnosis

    d = FIX.fixed_diagnosis()
    clean = Diagnosis(run=d.run, vitals=d.vitals, findings=[], detectors=["GRAD_SPIKE"])
    assert clean.not_judged() is None
    assert 'class="verdict ok">no findings<' in render(clean, "html")
    assert render(clean, "md").startswith("## ✅ rlvitals doctor: no findings")


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_skipped_detectors_are_grouped_by_why(unjudged, fmt):
    out = render(unjudged, fmt, RenderOptions(width=400))
    plain = _plain(out, fmt).replace("**", "")
    at = {c: plain.find(c + ":") if fmt == "text" else plain.find(c) for c in _classes()}
    at = {c: i for c, i in at.items() if i >= 0}
    assert list(at) == ["not logged", "too few points", "run too short"]
    assert sorted(at.values()) == list(at.values())
    short = plain[at["run too short"] :]
    for det_id, why in unjudged.skipped.items():
        assert det_id in plain
        assert " ".join(why.split())[:30] in " ".join(plain.split())
        if why.startswith("too few points: the run spans"):
            assert det_id in short


def _classes():
    from rlvitals.report.common import SKIP_CLASSES

    return SKIP_CLASSES


def test_skip_classes_match_the_reasons_detectors_give():
    """The grouping reads the doctor's words; if they change, this fails, not the report."""
    from rlvitals.detectors.kit import needs
    from rlvitals.doctor import diagnose
    from rlvitals.recording import RunBuilder
    from rlvitals.report.common import skip_class
    from rlvitals.vitals import compute_vitals

    b = RunBuilder()
    for s in range(1, 4):
        b.add_row(s, {"entropy": 0.5, "reward": 0.5, "frac_reward_zero_std": 0.2})
    v = compute_vitals(b.build())
    assert skip_class(needs(v, ["kl"], 20)) == "not logged"
    assert skip_class(needs(v, ["entropy"], 20)) == "too few points"
    short = diagnose(b.build()).skipped
    assert skip_class(short["DEGENERATE_GROUPS"]) == "run too short"
    assert {skip_class(w) for w in short.values()} <= {
        "not logged",
        "too few points",
        "run too short",
    }


# --- every string from the input is safe (issue 11 item 8) ----------------------------------

HOSTILE = "a\x1b]0;pwned\x07\x1b[2J\x9b1m\r\nFAKE | `tick` <b>x</b> $m$ \u202egnp\u200b"
"""OSC (retitle), CSI (clear screen), a C1 CSI, a carriage return and line break, a pipe, a
backtick, HTML, math and a bidi override with a zero-width space."""
_UNSAFE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def hostile():
    """Every string that comes from the input carries :data:`HOSTILE`."""
    import dataclasses

    from rlvitals.doctor import Diagnosis
    from rlvitals.recording.run import Manifest, RunBuilder
    from rlvitals.vitals import compute_vitals

    base = FIX.fixed_diagnosis(odd_name=HOSTILE)
    m = dataclasses.replace(
        base.run.manifest,
        source=f"runs/{HOSTILE}/log",
        trainer=HOSTILE,
        estimator=HOSTILE,
        format=HOSTILE,
    )
    b = RunBuilder(Manifest())
    b.warn(f"warning {HOSTILE}")
    run = dataclasses.replace(base.run, manifest=m, warnings=[f"warning {HOSTILE}"])
    vitals = compute_vitals(run)
    vitals.notes.append(f"note {HOSTILE}")
    return Diagnosis(
        run=run,
        vitals=vitals,
        findings=base.findings,
        skipped={"KL_BLOWUP": f"needs {HOSTILE}: not logged"},
        errors={"ODD_NAME": f"ValueError: {HOSTILE}"},
        detectors=base.detectors,
        incidents=base.incidents,
    )


def test_text_report_is_safe_for_a_terminal(hostile):
    out = render(hostile, "text", RenderOptions(width=400))
    assert not _UNSAFE.search(out), repr(_UNSAFE.search(out))
    assert not any(ln.startswith("FAKE") for ln in out.splitlines()), "a line break got through"
    shown = "a\\x1b]0;pwned\\x07\\x1b[2J\\x9b1m\\r\\nFAKE | `tick` <b>x</b> $m$ \\u202egnp\\u200b"
    where = {
        "source": f"runs/{shown}/log",
        "trainer": f"trainer {shown}",
        "estimator": f"estimator {shown}",
        "warning": f"note: warning {shown}",
        "note": f"note: note {shown}",
        "skipped": f"needs {shown}: not logged",
        "error": f"detector error: ODD_NAME: ValueError: {shown}",
        "message": f"series {shown} is odd",
        "metric key": f"{shown} 1",
        "action": f"try: rename {shown}",
    }
    flat = " ".join(out.split())
    for what, text in where.items():
        assert " ".join(text.split()) in flat, what
    coloured = render(hostile, "text", RenderOptions(color=True, width=400))
    # the only escape sequences are rich's own colours
    assert not _UNSAFE.search(re.sub(r"\x1b\[[0-9;]*m", "", coloured))


def test_markdown_report_escapes_every_input_string(hostile):
    out = render(hostile, "md")
    assert not _UNSAFE.search(out), repr(_UNSAFE.search(out))
    assert "<b>" not in out and "&lt;b&gt;x&lt;/b&gt;" in out
    assert "`tick`" not in out and "\\`tick\\`" in out
    assert "$m$" not in out and "\\$m\\$" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert rows and all(len(re.findall(r"(?<!\\)\|", ln)) == 6 for ln in rows)
    for line in out.splitlines():  # no heading, list or quote from the input
        assert not line.startswith("FAKE")
    for what in ("**Run:**", "trainer", "warning", "note", "needs", "ValueError", "rename"):
        assert any(what in ln and "pwned" in ln for ln in out.splitlines()), what


def test_html_report_escapes_every_input_string(hostile):
    out = render(hostile, "html")
    assert "<b>x</b>" not in out and out.count("&lt;b&gt;x&lt;/b&gt;") >= 8


def test_markdown_lines_from_the_input_start_no_block():
    from rlvitals.detectors import Finding, Severity
    from rlvitals.doctor import Diagnosis
    from rlvitals.doctor.incidents import group_findings

    base = FIX.fixed_diagnosis()
    f = Finding("ODD_NAME", Severity.WARN, "# 1. > not a heading", onset_step=5)
    d = Diagnosis(
        run=base.run,
        vitals=base.vitals,
        findings=[f],
        detectors=["ODD_NAME"],
        incidents=group_findings([f], base.vitals, families={}),
    )
    out = render(d, "md")
    assert d.incidents[0].cause == f.message
    assert not any(ln.startswith(("# 1.", "> not a")) for ln in out.splitlines())
    assert out.count("\\# 1. &gt; not a heading") == 2  # the incident's cause, the finding

"""Every HTML page in a real headless Chromium (issue 25 item 7): the doctor's report, scan's page
and compare's page, each loaded at 1400 and at 390 CSS pixels (a phone), with no console error,
no refused script, no request leaving the file, and nothing clipped at phone width (wide tables
scroll inside their own box). Then what the page's script does, tried with real mouse events:
hover values, a dragged zoom, the log scale, and sorting scan's table by a column."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_format_producers as F

from rlvitals.cli import main
from rlvitals.report import render

ROOT = Path(__file__).resolve().parent
WIDTHS = (1400, 390)
LABEL_DY = 3
"""A y tick's label sits this many pixels below its grid line (svg.py, page.js)."""


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


B = _load("rlvitals_tests_browser", "_browser.py")
FIX = _load("rlvitals_tests_report_fixture_pages", "_report_fixture.py")


def _trl_run(folder: Path, onset: int | None, lr: float, seed: int, evals: dict) -> Path:
    """A TRL output folder whose ACR jumps at ``onset`` and whose evaluations are ``evals``
    (key -> final value, logged at step 200)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    hist = []
    for s in range(1, 201):
        dead = onset is not None and s >= onset
        hist.append(
            {
                "step": s,
                "reward": float(0.4 + s / 1000 + rng.normal(0, 0.01)),
                "reward_std": 0.02 if dead else float(0.3 + rng.normal(0, 0.01)),
                "frac_reward_zero_std": 0.95 if dead else float(0.1 + rng.normal(0, 0.01)),
                "entropy": float(0.5 + rng.normal(0, 0.01)),
            }
        )
    if evals:
        hist.append({"step": 200, **{f"eval_{k}": v for k, v in evals.items()}})
    state = {"log_history": hist, "global_step": 200, "max_steps": 200, "logging_steps": 1}
    (folder / "trainer_state.json").write_text(json.dumps(state))
    args = {"num_generations": 8, "learning_rate": lr, "beta": 0.0, "logging_dir": str(folder)}
    (folder / "training_args.json").write_text(json.dumps(args))
    return folder


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The three pages, written by the CLI as a user would (scan with --reports)."""
    d = tmp_path_factory.mktemp("pages")
    doctor = d / "doctor.html"
    doctor.write_text(render(FIX.plots_diagnosis(), "html"), encoding="utf-8")
    # long words where a phone must wrap them: a deep path, a metric listing sixty steps
    long = d / "doctor_long.html"
    odd = FIX.fixed_diagnosis(
        source="runs/" + "very_long_folder_name_" * 8 + "/log.jsonl",
        odd_name=",".join(str(s) for s in range(100, 160)),
    )
    long.write_text(render(odd, "html"), encoding="utf-8")
    sweep = d / "sweep"
    for i in range(4):
        evals = {"DigitalLearningGmbH/MATH-lighteval/reward/mean@1": 0.3 + i / 20}  # a long key
        _trl_run(sweep / f"lr{i}", 100 + 20 * i if i % 2 else None, 1e-6 * (i + 1), i, evals)
    (sweep / ("long-name-" * 6)).mkdir()
    F.write_generic(sweep / ("long-name-" * 6) / "metrics.jsonl", F.simulate(40))
    scan_page = d / "out" / "scan.html"
    scan_page.parent.mkdir()
    rc = main(
        [
            "scan",
            str(sweep),
            "-o",
            str(scan_page),
            "--reports",
            str(d / "out" / "reports"),
            "--no-cache",
            "--no-progress",
            "--fail-on",
            "never",
            "-j",
            "1",
        ]
    )
    assert rc == 0
    a = _trl_run(d / "a", None, 1e-6, 0, {"gsm8k_accuracy": 0.61, "math_accuracy": 0.3})
    b = _trl_run(d / "b", 120, 3e-6, 1, {"gsm8k_accuracy": 0.55})
    compare = d / "compare.html"
    assert main(["compare", str(a), str(b), "-o", str(compare)]) == 0
    return {"doctor": doctor, "doctor_long": long, "scan": scan_page, "compare": compare}


@pytest.fixture(scope="module")
def browser():
    with B.Browser() as br:
        yield br


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["doctor", "doctor_long", "scan", "compare"])
def test_each_page_loads_clean_at_desktop_and_phone_width(pages, browser, which, width):
    tab = browser.open(pages[which], width)
    assert tab.errors == [], f"{which} at {width}px logged {tab.errors}"
    assert tab.requests == [], f"{which} at {width}px requested {tab.requests}"
    # the script ran (plots set up, or the table made sortable)
    ran = tab.eval(
        "document.querySelectorAll('svg .ctl').length + "
        "document.querySelectorAll('table.sortable th[role=button]').length"
    )
    assert ran > 0
    box = tab.eval(B.OVERFLOW_JS % width)
    assert box["clipped"] == [] and box["scroll"] <= box["vw"], f"{which} at {width}px: {box}"


def test_the_checks_can_fail(browser, tmp_path):
    """A remote image, a script the policy refuses, and a page wider than a phone are caught."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><meta name='viewport' content='width=device-width, "
        "initial-scale=1'>"
        "<meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'; style-src 'unsafe-inline'; img-src http:\"></head><body>"
        '<img src="http://127.0.0.1:9/x.png"><script>1</script>'
        '<div style="width:1200px">wide</div></body></html>',  # wider than a phone's 980
        encoding="utf-8",
    )
    tab = browser.open(page, 390)
    assert tab.requests == ["http://127.0.0.1:9/x.png"]
    assert any("Content Security Policy" in e for e in tab.errors)
    assert tab.eval(B.OVERFLOW_JS % 390)["clipped"]


def _centre(tab, selector: str) -> tuple[float, float, float, float]:
    r = tab.eval(
        f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
        "window.scrollTo(0, window.scrollY + r.top - 100);"
        f"const q = document.querySelector({selector!r}).getBoundingClientRect();"
        "return [q.left, q.top, q.width, q.height]; })()"
    )
    return tuple(r)


def test_hover_shows_the_values_and_a_drag_zooms(pages, browser):
    tab = browser.open(pages["doctor"], 1400)
    sel = 'svg.plot[aria-label="reward (train) and evaluation"]'
    frame = [float(x) for x in tab.eval(f"document.querySelector({sel!r}).dataset.frame").split()]
    left, top, w, _ = _centre(tab, sel)
    svg_w = tab.eval(f"document.querySelector({sel!r}).viewBox.baseVal.width")
    k = w / svg_w  # CSS pixels per SVG unit
    x = left + (frame[0] + frame[2] / 2) * k
    y = top + (frame[1] + frame[3] / 2) * k
    tab.mouse("mouseMoved", x, y)
    tip = tab.eval(
        "(() => { const t = document.querySelector('.plot-tip');"
        "return t && !t.hidden ? t.textContent : null; })()"
    )
    assert tip and tip.startswith("step ") and "reward_mean (train): " in tip
    # the value shown is the series' value at that step
    step = int(float(tip.split("\n")[0].split()[1]))
    d = FIX.plots_diagnosis()
    want = d.vitals.series["reward_mean"][d.vitals.steps.tolist().index(step)]
    shown = float(re.search(r"reward_mean \(train\): (\S+)", tip).group(1))
    assert shown == pytest.approx(want, rel=1e-4)
    # drag across the middle third: the x axis now starts and ends inside the old range
    ticks = f"[...document.querySelectorAll({sel + ' .xtick'!r})].map(t => +t.textContent)"
    before = tab.eval(ticks)
    x0 = left + (frame[0] + frame[2] / 3) * k
    x1 = left + (frame[0] + 2 * frame[2] / 3) * k
    tab.mouse("mousePressed", x0, y)
    tab.mouse("mouseMoved", x1, y)
    tab.mouse("mouseReleased", x1, y)
    after = tab.eval(ticks)
    assert after != before and min(after) > min(before) and max(after) < max(before)
    # a double click resets
    tab.mouse("mousePressed", x, y, clickCount=2)
    tab.mouse("mouseReleased", x, y, clickCount=2)
    assert tab.eval(ticks) == before
    assert tab.errors == []


def test_log_scale_on_a_positive_series(pages, browser):
    tab = browser.open(pages["doctor"], 1400)
    i = tab.eval(
        "[...document.querySelectorAll('svg.plot[data-frame]')].findIndex(s => "
        "[...s.querySelectorAll('.ctl')].some(c => c.textContent === 'log y'))"
    )
    assert i >= 0, "no plot offers a log scale"
    svg = f"document.querySelectorAll('svg.plot[data-frame]')[{i}]"
    tab.eval(
        f"[...{svg}.querySelectorAll('.ctl')].find(c => c.textContent === 'log y')"
        ".dispatchEvent(new MouseEvent('click'))"
    )
    ticks = tab.eval(
        f"[...{svg}.querySelectorAll('.ytick')].map(t => [+t.textContent, +t.getAttribute('y')])"
    )
    assert len(ticks) >= 2, ticks
    # on a log axis, pixels per decade are the same between any two ticks
    per = [(y0 - y1) / np.log10(v1 / v0) for (v0, y0), (v1, y1) in itertools.pairwise(ticks)]
    assert max(per) - min(per) < 1.0 and min(per) > 0, ticks
    # and the line is redrawn on it: each point where the ticks say its value lies
    (v0, y0), (v1, y1) = ((v, y - LABEL_DY) for v, y in (ticks[0], ticks[-1]))
    line = tab.eval(
        f"(() => {{ const p = {svg}.querySelector('polyline[data-series]');"
        "return [p.dataset.y, p.getAttribute('points')]; })()"
    )
    values = [float(v) for v in line[0].split()]
    drawn = [float(pt.split(",")[1]) for pt in line[1].split()]
    want = [y0 + (np.log10(v) - np.log10(v0)) * (y1 - y0) / np.log10(v1 / v0) for v in values]
    assert np.allclose(drawn, want, atol=0.15)
    assert tab.errors == []


def test_scan_table_sorts_and_links_each_run_to_its_report(pages, browser):
    tab = browser.open(pages["scan"], 1400)
    heads = tab.eval("[...document.querySelectorAll('table.runs th')].map(t => t.textContent)")
    assert "condition" in heads  # the primary condition is a column
    col = heads.index("ACR_100")
    cells = (
        f"[...document.querySelectorAll('table.runs tbody tr')].map(r => r.cells[{col}].dataset.v)"
    )
    tab.eval(f"document.querySelectorAll('table.runs th')[{col}].click()")
    up = [float(v) for v in tab.eval(cells) if v]
    assert up == sorted(up) and len(up) >= 4
    tab.eval(f"document.querySelectorAll('table.runs th')[{col}].click()")
    down = [float(v) for v in tab.eval(cells) if v]
    assert down == sorted(up, reverse=True)
    links = tab.eval(
        "[...document.querySelectorAll('table.runs a')].map(a => a.getAttribute('href'))"
    )
    assert len(links) == 5
    for href in links:
        report = pages["scan"].parent / href
        assert report.is_file() and "rlvitals doctor" in report.read_text(encoding="utf-8")
    # paths are relative to the scan root
    runs = tab.eval("[...document.querySelectorAll('table.runs td.run')].map(t => t.textContent)")
    assert all(not r.startswith("/") for r in runs) and any(r.startswith("lr0") for r in runs)
    assert tab.errors == []


def test_compare_draws_the_runs_in_two_colours(pages, browser):
    tab = browser.open(pages["compare"], 1400)
    strokes = tab.eval(
        "[...document.querySelector('svg.plot').querySelectorAll('polyline.series')]"
        ".map(p => getComputedStyle(p).stroke)"
    )
    assert len(strokes) == 2 and strokes[0] != strokes[1]
    names = tab.eval(
        "[...document.querySelectorAll('p.src b')].map(b => getComputedStyle(b).color)"
    )
    assert names == ["rgb(37, 99, 235)", "rgb(234, 88, 12)"]  # A blue, B orange, as the lines


def test_the_docs_screenshots_can_be_taken_again(capsys):
    """scripts/page_screenshots.py renders every page and shoots it (into a temporary folder)."""
    shots = _load("rlvitals_page_screenshots", "../scripts/page_screenshots.py")
    assert shots.main(["--check"]) == 0
    out = capsys.readouterr().out
    assert out.count(" KB") == len(shots.SHOTS)
    docs = "".join(f.read_text(encoding="utf-8") for f in (ROOT.parent / "docs").glob("*.md"))
    for name, width, _ in shots.SHOTS:
        png = ROOT.parent / "docs" / "img" / f"{name}-{width}.png"
        assert png.is_file() and png.stat().st_size < 150_000
        assert f"(img/{png.name})" in docs  # shown on a docs page


@pytest.mark.parametrize("big", [1e308, 1e-308])
def test_extreme_values_hover_and_zoom_without_an_error(browser, tmp_path, big):
    from rlvitals.doctor import Diagnosis
    from rlvitals.recording.run import RunBuilder
    from rlvitals.vitals import compute_vitals

    b = RunBuilder()
    for s in range(1, 61):
        b.add_row(s, {"reward": big * (1 if s % 2 else -1), "entropy": big * s})
    run = b.build()
    page = tmp_path / "edge.html"
    with np.errstate(all="ignore"):  # the vitals' own overflow at 1e308 is not under test here
        vitals = compute_vitals(run)
    page.write_text(render(Diagnosis(run=run, vitals=vitals, findings=[]), "html"))
    tab = browser.open(page, 1400)
    sel = "svg.plot[data-frame]"
    left, top, w, h = _centre(tab, sel)
    y = top + h / 2
    for x in (left + w * 0.3, left + w * 0.6):
        tab.mouse("mouseMoved", x, y)
    tab.mouse("mousePressed", left + w * 0.3, y)
    tab.mouse("mouseMoved", left + w * 0.6, y)
    tab.mouse("mouseReleased", left + w * 0.6, y)
    tab.mouse("mouseMoved", left + w * 0.5, y)
    tab.eval(
        "document.querySelectorAll('svg .ctl').forEach(c => c.dispatchEvent(new MouseEvent('click')))"
    )
    assert tab.errors == [] and tab.requests == []

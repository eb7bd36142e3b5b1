"""The HTML report in a real browser: headless Chromium (Debian ``chromium``) renders it to a PNG
that must not be blank; the browser's own network log must show no request from the page and
its console no error. Then the plots: evaluations over the train reward, the ACR by kind with
the expected ACR, the residual ACR, marked spikes, the prompt x step heat map."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rlvitals.report import render
from rlvitals.report.web import SCRIPT

WINDOW = (1200, 1600)
CHROMIUM_TIMEOUT_S = 60
MIN_STD = 10.0
"""Pixel standard deviation (0-255 grey levels) below which a screenshot counts as blank."""
MIN_COLOURS = 50

_REMOTE = re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", re.I)
_CSS_REMOTE = re.compile(r"""(?:url\(|@import)\s*["']?\s*(?:https?:)?//""", re.I)


def _fixture():
    spec = importlib.util.spec_from_file_location(
        "rlvitals_tests_report_fixture_html", Path(__file__).with_name("_report_fixture.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FIX = _fixture()


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian 'chromium' is required (apt-get install -y chromium)"
    return exe


def _screenshot(html_path: Path, png: Path, profile: Path) -> tuple[list[str], list[str]]:
    """Render ``html_path`` to ``png``; returns the URLs the page requested (from Chromium's
    net log: requests whose network isolation key is the page's ``file://`` site) and the
    console messages it logged (script errors, refused loads)."""
    netlog = png.with_suffix(".netlog.json")
    cmd = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        f"--log-net-log={netlog}",
        f"--screenshot={png}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        html_path.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert png.exists(), (
        f"chromium wrote no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    )
    log = json.loads(netlog.read_text(encoding="utf-8"))
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    requests = [
        e["params"]["url"]
        for e in log["events"]
        if e["type"] == start
        and "file://" in str(e["params"].get("network_isolation_key", ""))
        and not str(e["params"].get("url", "")).startswith(("file:", "data:"))
    ]
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return requests, console


def test_the_browser_checks_can_fail(tmp_path):
    """A page with a remote image and a failing script is caught by both checks."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">'
        '<script>throw new Error("boom")</script><p>x</p></body></html>',
        encoding="utf-8",
    )
    requests, console = _screenshot(page, tmp_path / "bad.png", tmp_path / "profile")
    assert requests == ["http://example.invalid/x.png"]
    assert any("boom" in ln for ln in console)


@pytest.mark.parametrize("which", ["fixed", "plots", "unjudged"])
def test_html_renders_in_headless_chromium(tmp_path, which):
    d = {
        "fixed": FIX.fixed_diagnosis,
        "plots": FIX.plots_diagnosis,
        "unjudged": FIX.unjudged_diagnosis,
    }[which]()
    page = tmp_path / "report.html"
    page.write_text(render(d, "html"), encoding="utf-8")
    png = tmp_path / "report.png"
    requests, console = _screenshot(page, png, tmp_path / "profile")
    assert requests == [], f"the page requested {requests}"
    assert console == [], f"the console logged {console}"
    img = Image.open(png).convert("RGB")
    assert img.size == WINDOW
    px = np.asarray(img, dtype=np.float64)
    assert px.std() > MIN_STD, "screenshot is blank"
    colours = np.unique(px.reshape(-1, 3)[::7], axis=0).shape[0]
    assert colours > MIN_COLOURS, f"screenshot has only {colours} colours"
    # the severity colours of the badges and plot markers made it to the screen; a run not
    # judged shows no green badge
    warn_orange = np.all(np.abs(px - np.array([0xD9, 0x77, 0x06])) < 12, axis=-1)
    green = np.all(np.abs(px - np.array([0x2E, 0x7D, 0x32])) < 12, axis=-1)
    if which == "unjudged":
        assert green.sum() < 20
    else:
        assert warn_orange.sum() > 200


@pytest.mark.parametrize("which", ["fixed_diagnosis", "plots_diagnosis"])
def test_html_is_self_contained(which):
    html = render(getattr(FIX, which)(), "html")
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert not _REMOTE.search(html) and not _CSS_REMOTE.search(html)
    # one script, ours, allowed by its hash in the policy (no other script can run)
    assert html.lower().count("<script") == 1 and f"<script>{SCRIPT}</script>" in html
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html and "unsafe-eval" not in html
    assert "<link" not in html.lower()
    assert "<img" not in html.lower() and "<iframe" not in html.lower()
    assert not re.search(r"https?://", html)
    # one plot per key series of each finding, plus the overview
    assert html.count("<svg") >= 5
    assert html.count('class="onset"') >= 3 and 'class="thr"' in html


def test_html_escapes_the_input_and_still_renders(tmp_path):
    odd = "<script>alert(1)</script>"
    d = FIX.fixed_diagnosis(source=f"runs/{odd}/log.jsonl", odd_name=odd)
    html = render(d, "html")
    assert html.lower().count("<script") == 1  # ours only
    assert html.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3
    assert not _REMOTE.search(html)


@pytest.mark.parametrize("n", [20_000])
def test_html_stays_small_on_long_runs(n):
    """Plots reduce long series: a 20,000-step run gives a page of a few hundred KB at most."""
    from rlvitals.doctor import Diagnosis
    from rlvitals.recording.run import RunBuilder
    from rlvitals.vitals import compute_vitals

    b = RunBuilder()
    rng = np.random.default_rng(0)
    for s in range(1, n + 1):
        b.add_row(
            s,
            {
                "reward": float(rng.random()),
                "entropy": float(rng.random()),
                "grad_norm": float(rng.random()),
            },
        )
    run = b.build()
    d = Diagnosis(run=run, vitals=compute_vitals(run), findings=[])
    assert len(render(d, "html")) < 400_000


# --- the plots (issue 11 item 3) ------------------------------------------------------------


@pytest.fixture(scope="module")
def plots():
    d = FIX.plots_diagnosis()
    return d, render(d, "html")


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", html, flags=re.S)


def _svg_titled(html: str, title: str) -> str:
    found = [s for s in _svgs(html) if f'aria-label="{title}"' in s]
    assert found, f"no plot titled {title!r}"
    return found[0]


def _points(polyline: str) -> list[tuple[float, float]]:
    pts = re.search(r'points="([^"]+)"', polyline).group(1).split()
    return [tuple(map(float, p.split(","))) for p in pts]


def test_evaluations_are_overlaid_on_the_train_reward_by_step(plots):
    d, html = plots
    svg = _svg_titled(html, "reward (train) and evaluation")
    legend = re.findall(r'class="legend">([^<]+)<', svg)
    assert legend == ["reward_mean (train)", "eval/gsm8k/reward/mean@1", "eval/reward_mean"]
    assert "eval/runtime" not in svg  # not a score: not on the reward axis
    lines = re.findall(r"<polyline[^>]*>.*?</polyline>", svg)
    train = next(p for p in lines if "reward_mean (train)" in p)
    evals = [p for p in lines if "<title>eval/" in p]
    assert len(evals) == 2
    steps = d.vitals.steps.tolist()
    for p in evals:  # the eval point of step 10 is drawn at the train point of step 10
        first_eval_step = int(d.vitals.eval_steps[0])
        assert _points(p)[0][0] == _points(train)[steps.index(first_eval_step)][0]


def test_the_acr_is_stacked_by_kind_with_the_expected_acr(plots):
    d, html = plots
    svg = _svg_titled(html, "ACR: share of collapsed groups, by kind")
    areas = re.findall(r'<polygon [^>]*class="area"><title>([^<]+)<', svg)
    assert areas == [
        "solved by all (too easy)",
        "failed by all (too hard)",
        "flat (partial credit agrees)",
    ]
    assert d.vitals.expected_acr_from == "per-prompt"
    assert re.search(r'class="series dash"><title>expected ACR</title>', svg)
    # a run with no per-group rewards: its expected ACR is an estimate, and says so
    fixed = FIX.fixed_diagnosis()
    assert fixed.vitals.expected_acr_from == "estimate"
    other = _svg_titled(render(fixed, "html"), "ACR: share of collapsed groups")
    assert "<title>expected ACR (estimate)</title>" in other


def test_the_residual_acr_is_drawn_beside_the_raw_acr(plots):
    _, html = plots
    svg = _svg_titled(html, "ACR raw vs residual (after the estimator)")
    assert re.findall(r'class="legend">([^<]+)<', svg) == ["raw ACR", "residual ACR"]
    assert "ACR raw vs residual" not in render(FIX.fixed_diagnosis(), "html")


def test_marks_are_points_not_an_episode(plots):
    """GRAD_SPIKE's three spikes are three points on grad_norm, not a span from 30 to 101."""
    d, html = plots
    spikes = [s for s in _svgs(html) if 'aria-label="grad_norm"' in s]
    assert len(spikes) == 2  # its card and the overview
    for svg in spikes:
        marks = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="4"[^>]*class="mark">', svg)
        assert len(marks) == len(FIX.SPIKES)
        assert "GRAD_SPIKE: steps 30-101</title></rect>" not in svg  # no shaded episode
        assert 'class="onset"' not in svg
        line = _points(re.search(r"<polyline[^>]*>", svg).group(0))
        for (cx, cy), step in zip(marks, FIX.SPIKES):
            assert (float(cx), float(cy)) == line[d.vitals.steps.tolist().index(step)]
    assert "at steps 30, 75, 101" in html


def test_the_prompt_heat_map(plots):
    from rlvitals.report._plots import HEAT_COLUMNS, HEAT_ROWS

    _, html = plots
    svg = _svg_titled(html, "pass rate per prompt and step")
    labels = re.findall(r'class="hlabel">([^<]+)<', svg)
    assert len(labels) == FIX.PROMPTS <= HEAT_ROWS
    # the fixture records prompt text as the prompt: rows are labelled with it
    assert "rows are prompt ids" not in html
    assert sorted(labels) == [f"prompt-{p:03d}" for p in range(FIX.PROMPTS)]
    assert len(re.findall(r"<path ", svg)) <= 9  # one path per colour
    # easy prompts (high index in the fixture) on top, hard ones at the bottom
    assert labels.index("prompt-023") < labels.index("prompt-000")
    assert "<figcaption>24 of 24 prompts" in unescape(html)
    cells = re.findall(r"M[\d.]+ [\d.]+h", svg)
    assert len(cells) <= FIX.PROMPTS * min(HEAT_COLUMNS, FIX.STEPS)


def test_prompt_pass_rates_are_the_mean_reward_per_prompt_and_bin():
    from rlvitals.recording.run import GroupTable
    from rlvitals.report._plots import prompt_pass_rates

    d = FIX.plots_diagnosis(steps=4, prompts=8)
    d.run.groups = GroupTable.from_lists(
        [1, 1, 2, 3, 3, 4],
        [[1, 1], [0, 1], [0, 0], [1, 0], [1, 1], [0, 0]],
        prompts=["a", "b", "a", "b", "c", "a"],
    )
    rows, columns, values, recurring = prompt_pass_rates(d.vitals, max_columns=2)
    assert recurring == 2 and rows == ["b", "a"]  # "c" is seen once: no row
    assert columns == [(1, 2), (3, 4)]
    assert values.tolist() == [[0.5, 0.5], [0.5, 0.0]]


def test_no_heat_map_without_prompt_ids_or_recurring_prompts():
    from rlvitals.recording.run import GroupTable
    from rlvitals.report._plots import prompt_heat_map

    d = FIX.plots_diagnosis(steps=4, prompts=8)
    d.run.groups = GroupTable.from_lists([1, 2], [[1, 0], [1, 1]])
    assert prompt_heat_map(d.vitals) is None
    d.run.groups = GroupTable.from_lists([1, 2], [[1, 0], [1, 1]], prompts=["a", "b"])
    assert prompt_heat_map(d.vitals) is None
    assert "pass rate per prompt" not in render(FIX.fixed_diagnosis(), "html")


def test_html_stays_small_with_many_prompts_and_steps():
    """The heat map is capped (rows, binned columns, one path per colour): 400 prompts over
    2,000 steps still give a page of a few hundred KB."""
    from rlvitals.report._plots import HEAT_COLUMNS, HEAT_ROWS

    d = FIX.plots_diagnosis(steps=2000, prompts=400)
    html = render(d, "html")
    svg = _svg_titled(html, "pass rate per prompt and step")
    assert len(re.findall(r'class="hlabel"', svg)) == HEAT_ROWS
    assert len(re.findall(r'class="xtick"', svg)) <= 3
    cells = re.findall(r"M[\d.]+ [\d.]+h", svg)
    assert len(cells) <= HEAT_ROWS * HEAT_COLUMNS
    assert len(html) < 500_000


def test_heat_map_rows_are_prompt_text_when_recorded_else_short_ids():
    from rlvitals.recording.run import GroupTable
    from rlvitals.report._plots import prompt_heat_map

    d = FIX.plots_diagnosis(steps=4, prompts=8)
    long = "Natalia sold clips to 48 of her friends in April, and then half as many in May."
    d.run.groups = GroupTable.from_lists(
        [1, 2, 1, 2], [[1, 0], [1, 1], [0, 0], [1, 0]], prompts=[long, long, "2+2?", "2+2?"]
    )
    fig = prompt_heat_map(d.vitals)
    labels = re.findall(r'class="hlabel">([^<]+)<title>([^<]+)</title>', fig.svg)
    assert [unescape(a) for a, _ in labels] == [long[:35] + "…", "2+2?"]
    assert unescape(labels[0][1]) == long  # the whole text in the tooltip
    assert "no prompt text" not in fig.caption
    h = "0123456789abcdef"
    d.run.groups = GroupTable.from_lists(
        [1, 2, 1, 2],
        [[1, 0], [1, 1], [0, 0], [1, 0]],
        prompts=[h, h, "blake2b:" + h, "blake2b:" + h],
    )
    fig = prompt_heat_map(d.vitals)
    labels = re.findall(r'class="hlabel">([^<]+)<title>([^<]+)</title>', fig.svg)
    assert [a for a, _ in labels] == ["#01234567", "#01234567"]
    assert all("text was not recorded" in t for _, t in labels)
    assert "rows are prompt ids (the run recorded no prompt text)" in fig.caption

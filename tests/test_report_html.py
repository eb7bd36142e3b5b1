"""The HTML report in a real browser: headless Chromium (Debian ``chromium``) renders it to a PNG
that must not be blank, and the page must load nothing from the network."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rlvitals.report import render

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


def _screenshot(html_path: Path, png: Path, profile: Path) -> None:
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
        f"--screenshot={png}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        html_path.resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert png.exists(), (
        f"chromium wrote no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    )


def test_html_renders_in_headless_chromium(tmp_path):
    page = tmp_path / "report.html"
    page.write_text(render(FIX.fixed_diagnosis(), "html"), encoding="utf-8")
    png = tmp_path / "report.png"
    _screenshot(page, png, tmp_path / "profile")
    img = Image.open(png).convert("RGB")
    assert img.size == WINDOW
    px = np.asarray(img, dtype=np.float64)
    assert px.std() > MIN_STD, "screenshot is blank"
    colours = np.unique(px.reshape(-1, 3)[::7], axis=0).shape[0]
    assert colours > MIN_COLOURS, f"screenshot has only {colours} colours"
    # the severity colours of the badges and plot markers made it to the screen
    warn_orange = np.all(np.abs(px - np.array([0xD9, 0x77, 0x06])) < 12, axis=-1)
    assert warn_orange.sum() > 200


def test_html_is_self_contained():
    html = render(FIX.fixed_diagnosis(), "html")
    assert not _REMOTE.search(html) and not _CSS_REMOTE.search(html)
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert "<img" not in html.lower() and "<iframe" not in html.lower()
    assert not re.search(r"https?://", html)
    # one plot per key series of each finding, plus the overview
    assert html.count("<svg") >= 5
    assert html.count('class="onset"') >= 3 and 'class="thr"' in html


def test_html_escapes_the_input_and_still_renders(tmp_path):
    odd = "<script>alert(1)</script>"
    d = FIX.fixed_diagnosis(source=f"runs/{odd}/log.jsonl", odd_name=odd)
    html = render(d, "html")
    assert "<script" not in html.lower()
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

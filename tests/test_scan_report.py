"""The scan's statistics (ACR_100 against the final metric) and its outputs: the numbers against
numpy's own, the final metric's key, and the HTML page rendered by headless Chromium (no
request, no console error, the scatter's points and lines on screen)."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from rlvitals.scan import PAPER, choose_eval_key, correlate, render_scan, scan

ROOT = Path(__file__).resolve().parent


def _browser():
    spec = importlib.util.spec_from_file_location(
        "rlvitals_tests_report_html_for_scan", ROOT / "test_report_html.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_sweep(folder: Path, n: int = 12, seed: int = 0) -> list[tuple[float, float]]:
    """``n`` JSONL runs of 150 steps whose early ACR and final eval accuracy follow the paper's
    line plus noise (every other run collapses after step 100); returns each run's (ACR_100,
    accuracy) as written."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    truth = []
    for i in range(n):
        level = 0.05 + 0.8 * i / max(n - 1, 1)
        acr = np.clip(level + rng.normal(0, 0.02, 150), 0, 1).round(4)
        if i % 2:  # every other run collapses after its first 100 steps: a warning
            acr[100:] = 0.98
        acc = (PAPER["intercept"] + PAPER["slope"] * acr[:100].mean() + rng.normal(0, 2)) / 100
        with open(folder / f"run{i:02d}.jsonl", "w") as f:
            for s in range(1, 151):
                row = {
                    "step": s,
                    "reward": 0.3 + s / 1000 - level / 5,
                    "frac_reward_zero_std": acr[s - 1],
                }
                f.write(json.dumps(row) + "\n")
            f.write(json.dumps({"step": 150, "eval_accuracy": round(acc, 4)}) + "\n")
        truth.append((float(acr[:100].mean()), round(acc, 4)))
    return truth


def test_correlation_matches_numpy_and_its_interval_holds_it():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 0.9, 40)
    y = 0.5 - 0.3 * x + rng.normal(0, 0.05, 40)
    c = correlate(x, y)
    assert c.n == 40
    assert c.r == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    slope, intercept = np.polyfit(x, y, 1)
    assert (c.slope, c.intercept) == (pytest.approx(slope), pytest.approx(intercept))
    assert c.r2 == pytest.approx(c.r**2)
    assert c.r_low < c.r < c.r_high < 0
    assert correlate(x, y) == c  # the same runs always give the same interval
    assert c.paper_scale == 0.01 and c.paper_y(0.5) == pytest.approx(0.514 - 0.148)
    assert correlate(x, y * 100).paper_scale == 1.0
    # an interval that can fail: shuffled pairs are not correlated
    d = correlate(x, rng.permutation(y))
    assert d.r_low < 0 < d.r_high


@pytest.mark.parametrize(
    ("x", "y"), [([0.1, 0.2], [1.0, 2.0]), ([0.3, 0.3, 0.3], [1.0, 2.0, 3.0]), ([], [])]
)
def test_no_correlation_from_too_few_or_flat_points(x, y):
    assert correlate(x, y) is None


def test_the_final_metric_is_an_accuracy_before_a_reward_and_never_a_loss():
    ones = np.ones(3)
    assert choose_eval_key({"eval/reward_mean": ones, "eval/math/pass@1": ones}) == (
        "eval/math/pass@1"
    )
    assert choose_eval_key({"eval/reward_mean": ones, "eval/test_score/gsm8k": ones}) == (
        "eval/test_score/gsm8k"
    )
    assert choose_eval_key({"eval/loss": ones, "eval/reward_std": ones}) is None
    assert choose_eval_key({"eval/accuracy": np.full(3, np.nan)}) is None


def test_a_sweep_recovers_the_slope_it_was_written_with(tmp_path):
    truth = write_sweep(tmp_path / "sweep")
    result = scan([tmp_path / "sweep"], jobs=2, cache=False)
    rows = sorted(result.rows, key=lambda r: r.path)
    assert [r.eval_key for r in rows] == ["eval/accuracy"] * len(truth)
    assert [r.eval_final for r in rows] == [t[1] for t in truth]
    assert [r.acr_100 for r in rows] == pytest.approx([t[0] for t in truth], abs=1e-5)
    c = result.correlation()
    assert c.against == "eval" and c.y_label == "eval/accuracy" and c.n == len(truth)
    assert c.r < -0.9 and c.slope == pytest.approx(-0.296, abs=0.05)
    assert result.correlation("reward").y_label == "final train reward"
    doc = json.loads(render_scan(result, "json"))
    assert doc["correlation"]["paper"]["r"] == PAPER["r"]
    assert math.isclose(doc["correlation"]["r"], c.r)
    assert "r = -0.9" in render_scan(result, "text") or "r = -1.0" in render_scan(result, "text")


def test_the_scan_page_renders_in_headless_chromium(tmp_path):
    B = _browser()
    write_sweep(tmp_path / "sweep")
    odd = tmp_path / "sweep" / "<script>alert(1)"
    odd.mkdir()
    (odd / "broken.jsonl").write_text('{"step": 1, "reward": 0.5}\n{"step": 2, "rew')
    result = scan([tmp_path / "sweep"], jobs=2, cache=False)
    html = render_scan(result, "html")
    assert html.lower().count("<script") == 1 and "default-src 'none'" in html  # ours only
    assert not B._REMOTE.search(html) and not B._CSS_REMOTE.search(html)
    assert html.count("<circle") == 12 and 'class="ols"' in html and 'class="paper"' in html
    page = tmp_path / "scan.html"
    page.write_text(html, encoding="utf-8")
    png = tmp_path / "scan.png"
    requests, console = B._screenshot(page, png, tmp_path / "profile")
    assert requests == [] and console == [], (requests, console)
    px = np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)
    assert px.std() > B.MIN_STD
    # the paper's purple dashed line and the severity colours of the points are on screen
    purple = np.all(np.abs(px - np.array([0x93, 0x33, 0xEA])) < 16, axis=-1)
    assert purple.sum() > 100
    coloured = np.all(np.abs(px - np.array([0xD9, 0x77, 0x06])) < 16, axis=-1) | np.all(
        np.abs(px - np.array([0x1D, 0x6F, 0xB8])) < 16, axis=-1
    )
    assert coloured.sum() > 100

"""Every renderer draws any float (issue 11 item 3): axis ticks on values one ulp apart, plots of
inf, -inf, NaN, ±1e308, subnormals, -0.0, constant series, one point or none, and a hypothesis
fuzz of runs and findings through text, Markdown, JSON and HTML with a deadline."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.detectors import Finding, Severity
from rlvitals.doctor import Diagnosis
from rlvitals.doctor.incidents import group_findings
from rlvitals.recording.run import GroupTable, Manifest, RunBuilder
from rlvitals.report import RenderOptions, render
from rlvitals.report._heatmap import heat_map
from rlvitals.report.svg import Layer, Marker, axis_range, nice_ticks, plot
from rlvitals.vitals import compute_vitals

FORMATS = ("text", "md", "json", "html")
RENDER_SECONDS = 20
"""A render that takes longer than this hangs (the nice_ticks loop grew ~50 MB/s forever)."""
EDGE = (
    math.inf,
    -math.inf,
    math.nan,
    1e308,
    -1e308,
    sys.float_info.max,
    -sys.float_info.max,
    5e-324,
    -5e-324,
    -0.0,
    0.0,
    1.0,
    4500.0,
    math.nextafter(4500.0, math.inf),
    1e5,
    math.nextafter(1e5, math.inf),
    1e-310,
)


@contextmanager
def _time_limit(seconds: float):
    """Fail (instead of hanging) when the body runs longer than ``seconds`` (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(*_):
        raise TimeoutError(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# --- nice_ticks and axis_range --------------------------------------------------------------


def test_nice_ticks_ends_on_values_one_ulp_apart():
    """Regression: ``t += step`` never advanced when the step was below the ulp of 4500, and
    the tick list grew without end. Run in a subprocess so a regression fails, not hangs."""
    code = (
        "import math\n"
        "from rlvitals.report.svg import nice_ticks\n"
        "for lo in (4500.0, 1e5, 1e12, -7e9):\n"
        "    t = nice_ticks(lo, math.nextafter(lo, math.inf))\n"
        "    assert 1 <= len(t) <= 11, t\n"
        "print('ok')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=RENDER_SECONDS
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


@pytest.mark.parametrize("lo", EDGE)
@pytest.mark.parametrize("hi", EDGE)
def test_nice_ticks_is_bounded_for_any_two_floats(lo, hi):
    with _time_limit(5):
        ticks = nice_ticks(lo, hi)
    assert len(ticks) <= 2 * 4 + 3
    assert all(math.isfinite(t) for t in ticks)
    assert ticks == sorted(ticks)


@pytest.mark.parametrize("lo", EDGE)
@pytest.mark.parametrize("hi", EDGE)
def test_axis_range_is_finite_and_wide_enough(lo, hi):
    a, b = axis_range(lo, hi)
    assert math.isfinite(a) and math.isfinite(b) and b > a
    assert b * 0.5 - a * 0.5 > 0  # what the plots divide by
    if math.isfinite(lo) and math.isfinite(hi):
        assert a <= min(lo, hi) and b >= max(lo, hi)


# --- plots of edge values ------------------------------------------------------------------

SERIES = {
    "inf": [math.inf, 1.0, math.inf],
    "-inf": [-math.inf, -math.inf],
    "nan": [math.nan, math.nan],
    "1e308": [1e308, -1e308, 1e308],
    "max": [sys.float_info.max, -sys.float_info.max],
    "subnormal": [5e-324, 0.0, -5e-324],
    "subnormal-inf": [5e-324, math.inf],
    "neg-zero": [-0.0, 0.0, -0.0],
    "constant": [0.7] * 6,
    "constant-big": [1e300] * 4,
    "one": [3.0],
    "empty": [],
    "ulp-4500": [4500.0, math.nextafter(4500.0, math.inf)],
    "ulp-1e5": [1e5, math.nextafter(1e5, math.inf), 1e5],
}


def _svg_numbers_finite(svg: str) -> bool:
    import re

    geometry = r"""\b(?:x|y|x1|x2|y1|y2|cx|cy|r|width|height|points|d)="[^"]*(?:nan|inf)"""
    return not re.search(geometry, svg, re.I)


@pytest.mark.parametrize("name", list(SERIES))
@pytest.mark.parametrize("threshold", [None, math.inf, math.nan, 1e308, 5e-324, 0.5])
def test_plot_draws_any_values(name, threshold):
    values = np.array(SERIES[name], dtype=np.float64)
    steps = np.arange(1, values.size + 1)
    marker = Marker(
        onset=1,
        end=None,
        severity="warn",
        label="X",
        thresholds=[] if threshold is None else [threshold],
        marks=(1, 2, 10**15),
    )
    with _time_limit(RENDER_SECONDS):
        svg = plot(name, [Layer(name, steps, values)], [marker])
        stacked = plot(
            name,
            [
                Layer("line", steps, values),
                Layer("a", steps, values, style="area"),
                Layer("b", steps, np.abs(values), style="area"),
                Layer("d", steps, values * 0.5, style="dash"),
            ],
            [marker],
            y_include=(0.0, 1.0),
        )
    for s in (svg, stacked):
        assert _svg_numbers_finite(s), s[:400]
        assert s == "" or (s.startswith("<svg") and s.endswith("</svg>"))
    assert (svg == "") == (not np.isfinite(values).any())


@pytest.mark.parametrize("steps", [[0], [5, 5], [10**18, 10**18 + 1], [-3, 7]])
def test_plot_draws_any_steps(steps):
    x = np.array(steps, dtype=np.int64)
    svg = plot("s", [Layer("s", x, np.linspace(0, 1, x.size))], [Marker(0, None, "info", "m")])
    assert svg.startswith("<svg") and _svg_numbers_finite(svg)


def test_heat_map_draws_any_values():
    v = np.array([[math.nan, 0.0, 1.0], [math.inf, -math.inf, 5e-324], [1e308, -0.0, 0.5]])
    svg = heat_map("h", ["a", "b", "<c>"], [(1, 1), (2, 3), (4, 9)], v)
    assert svg.startswith("<svg") and _svg_numbers_finite(svg) and "&lt;c&gt;" in svg
    assert heat_map("h", [], [], np.zeros((0, 0))) == ""


# --- the whole report, every format ---------------------------------------------------------


def _diagnosis(rows: dict[int, dict[str, float]], findings, groups=None, **manifest) -> Diagnosis:
    b = RunBuilder(Manifest(group_size=8, **manifest))
    for s, row in rows.items():
        b.add_row(s, row)
    b.groups = groups
    run = b.build()
    vitals = compute_vitals(run)
    return Diagnosis(
        run=run,
        vitals=vitals,
        findings=findings,
        detectors=[f.id for f in findings] or ["GRAD_SPIKE"],
        skipped={} if findings else {"GRAD_SPIKE": "needs grad_norm: not logged"},
        incidents=group_findings(findings, vitals),
    )


def _render_all(d: Diagnosis) -> None:
    for fmt in FORMATS:
        with _time_limit(RENDER_SECONDS):
            out = render(d, fmt, RenderOptions(width=120))
        assert isinstance(out, str) and out.endswith("\n")
        if fmt == "json":
            json.loads(out)
        if fmt == "html":
            assert out.count("<svg") == out.count("</svg>")


KEYS = ("reward", "entropy", "grad_norm", "frac_reward_zero_std", "kl", "acr_residual")


@pytest.mark.parametrize("name", list(SERIES))
def test_every_renderer_draws_edge_series(name):
    values = SERIES[name]
    rows = {s + 1: {k: v for k in KEYS} for s, v in enumerate(values)}
    for s in list(rows)[::2]:
        rows[s]["eval_reward"] = values[s - 1]
    f = Finding(
        "GRAD_SPIKE",
        Severity.WARN,
        f"spikes in {name}",
        onset_step=1,
        end_step=len(values) or None,
        confidence=float(values[0]) if values else math.nan,
        series=["grad_norm", "reward_mean", "eval/reward_mean", "acr"],
        thresholds={"grad_norm": values[0] if values else math.inf, "acr": math.nan},
        metrics={"v": values[0] if values else None},
        marks=[1, 2],
    )
    _render_all(_diagnosis(rows, [f]))
    _render_all(_diagnosis(rows, []))


_floats = st.one_of(st.sampled_from(EDGE), st.floats(allow_nan=True, allow_infinity=True))
_steps = st.integers(min_value=-5, max_value=2**40)


@st.composite
def _findings(draw, names):
    out = []
    for _ in range(draw(st.integers(0, 4))):
        onset = draw(st.one_of(st.none(), _steps))
        out.append(
            Finding(
                draw(st.sampled_from(["GRAD_SPIKE", "DEGENERATE_GROUPS", "ENTROPY_COLLAPSE"])),
                draw(st.sampled_from(list(Severity))),
                "m",
                onset_step=onset,
                end_step=draw(st.one_of(st.none(), _steps)) if onset is not None else None,
                confidence=draw(_floats),
                series=draw(st.lists(st.sampled_from(names), max_size=3)),
                thresholds=draw(st.dictionaries(st.sampled_from(names), _floats, max_size=2)),
                metrics=draw(st.dictionaries(st.sampled_from(["a", "b"]), _floats, max_size=2)),
                marks=draw(st.lists(_steps, max_size=4)),
            )
        )
    return out


@st.composite
def _runs(draw):
    n = draw(st.integers(0, 40))
    keys = draw(
        st.lists(
            st.sampled_from((*KEYS, "eval_reward", "val-core/x/acc/mean@1")),
            max_size=5,
            unique=True,
        )
    )
    rows = {}
    for s in range(1, n + 1):
        rows[s] = {k: draw(_floats) for k in keys if draw(st.booleans())}
    groups = None
    if n and draw(st.booleans()):
        k = draw(st.integers(1, 3 * n))
        rewards = [
            draw(
                st.lists(
                    st.one_of(
                        st.sampled_from([0.0, 1.0, math.nan, 1e308, 5e-324]), st.floats(-10, 10)
                    ),
                    min_size=1,
                    max_size=4,
                )
            )
            for _ in range(k)
        ]
        steps = [draw(st.integers(1, n)) for _ in range(k)]
        prompts = [draw(st.sampled_from(["p0", "p1", "p2", 3, None])) for _ in range(k)]
        groups = GroupTable.from_lists(steps, rewards, prompts=prompts)
    names = ["reward_mean", "grad_norm", "acr", "eval/reward_mean", "entropy", "acr_residual"]
    return rows, draw(_findings(names)), groups


@settings(
    max_examples=40,
    deadline=timedelta(seconds=RENDER_SECONDS),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(_runs())
def test_every_renderer_survives_any_values(case):
    rows, findings, groups = case
    with np.errstate(all="ignore"):
        d = _diagnosis(rows, findings, groups)
    _render_all(d)

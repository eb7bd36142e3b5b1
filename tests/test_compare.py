"""``rlvitals compare A B``: configuration differences, the first step where the vitals part
ways, the incidents one run has and the other not; text, JSON, Markdown and an HTML page that
renders in headless Chromium."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_format_producers as F

from rlvitals.cli import main
from rlvitals.compare import compare_paths, divergence, render_compare
from rlvitals.doctor import diagnose
from rlvitals.recording import RunBuilder

ROOT = Path(__file__).resolve().parent


def _trl_run(folder: Path, onset: int | None, lr: float, g: int = 8, seed: int = 0) -> Path:
    """A TRL output folder: ``trainer_state.json`` whose ACR jumps to 0.95 at ``onset`` (None:
    never), and a ``training_args.json``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    history = []
    for s in range(1, 201):
        dead = onset is not None and s >= onset
        history.append(
            {
                "step": s,
                "reward": float(0.4 + s / 1000 + rng.normal(0, 0.01)),
                "reward_std": 0.02 if dead else float(0.3 + rng.normal(0, 0.01)),
                "frac_reward_zero_std": 0.95 if dead else float(0.1 + rng.normal(0, 0.01)),
                "entropy": float(0.5 + rng.normal(0, 0.01)),
            }
        )
    state = {"log_history": history, "global_step": 200, "max_steps": 200, "logging_steps": 1}
    (folder / "trainer_state.json").write_text(json.dumps(state, indent=2))
    args = {"num_generations": g, "learning_rate": lr, "beta": 0.0, "output_dir": str(folder)}
    (folder / "training_args.json").write_text(json.dumps(args))
    return folder


@pytest.fixture
def pair(tmp_path):
    return _trl_run(tmp_path / "base", None, 1e-6), _trl_run(tmp_path / "hot", 120, 3e-6, seed=1)


def test_config_divergence_and_incidents(pair):
    c = compare_paths(*pair)
    keys = {k: (a, b) for k, a, b in c.config}
    assert keys["args.learning_rate"] == (1e-6, 3e-6)
    assert "args.output_dir" not in keys and "args.num_generations" not in keys
    assert c.first.series == "acr" and c.first.step == 120
    assert c.first.a < 0.2 < 0.9 < c.first.b
    by = {d.series: d for d in c.divergences}
    assert by["entropy"].step is None and by["entropy"].why == "within tolerance"
    assert by["kl"].why == "not logged by A and B"
    assert c.only_a == [] and c.both == []
    assert {"DEGENERATE_GROUPS"} <= {d for i in c.only_b for d in i["detectors"]}
    assert all(i["onset_step"] >= 115 for i in c.only_b if i["onset_step"] is not None)
    # swapped, the incidents move to the other side
    d = compare_paths(pair[1], pair[0])
    assert d.only_b == [] and [i["root"] for i in d.only_a] == [i["root"] for i in c.only_b]


def test_the_same_run_twice_has_no_difference(pair):
    c = compare_paths(pair[0], pair[0])
    assert c.config == [] and c.first is None and c.only_a == c.only_b == []
    assert "no divergence" in render_compare(c, "text")


def _constant(values: dict[int, float]) -> object:
    b = RunBuilder()
    for s in range(1, 101):
        b.add_row(s, {"reward": 0.5, "frac_reward_zero_std": values.get(s, 0.2)})
    return diagnose(b.build())


def test_a_blip_shorter_than_the_sustain_is_no_divergence():
    a = _constant({})
    blip = _constant({50: 0.9, 51: 0.9})
    assert divergence(a, blip, "acr").step is None
    shift = _constant({s: 0.6 for s in range(70, 101)})
    assert divergence(a, shift, "acr").step == 70


def test_renderers_say_the_same(pair):
    c = compare_paths(*pair)
    text = render_compare(c, "text")
    assert (
        "acr from step 120" in text and "[optimisation] args.learning_rate: 1e-06 | 3e-06" in text
    )
    md = render_compare(c, "md")
    assert "acr from step 120" in md and "| ACR\\_100 |" in md
    doc = json.loads(render_compare(c, "json"))
    assert doc["first_divergence"]["step"] == 120 and doc["config"][0]["key"]
    html = render_compare(c, "html")
    assert "default-src 'none'" in html and html.lower().count("<script") == 1  # ours only
    assert html.count("<svg") >= 3


def test_compare_page_renders_in_headless_chromium(pair, tmp_path):
    spec = importlib.util.spec_from_file_location(
        "rlvitals_tests_report_html_for_compare", ROOT / "test_report_html.py"
    )
    B = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(B)
    page = tmp_path / "compare.html"
    assert main(["compare", str(pair[0]), str(pair[1]), "-o", str(page)]) == 0
    png = tmp_path / "compare.png"
    requests, console = B._screenshot(page, png, tmp_path / "profile")
    assert requests == [] and console == []
    from PIL import Image

    px = np.asarray(Image.open(png).convert("RGB"), dtype=np.float64)
    assert px.std() > B.MIN_STD
    dashed_b = np.all(np.abs(px - np.array([0x25, 0x63, 0xEB])) < 16, axis=-1)  # B's colour
    assert dashed_b.sum() > 50


def test_compare_cli_runs_of_one_store_and_bad_input(tmp_path, capsys):
    log = F.write_log_history(tmp_path / "history.json", [F.simulate(40), F.simulate(50, seed=1)])
    assert main(["compare", str(log), str(log), "--run-a", "1", "--run-b", "2"]) == 0
    out = capsys.readouterr().out
    assert f"A  {log} [1]" in out and f"B  {log} [2]" in out
    assert main(["compare", str(log), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert "nope: no such file or directory" in err and len(err.strip().splitlines()) == 1
    assert main(["compare", str(log), str(log), "-o", str(log)]) == 2
    assert "the output would replace it" in capsys.readouterr().err
    assert json.loads(log.read_text())  # untouched

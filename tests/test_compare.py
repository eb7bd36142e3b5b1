"""``rlvitals compare A B``: configuration differences, the first step where the vitals part
ways, the incidents one run has and the other not; text, JSON, Markdown and an HTML page that
renders in headless Chromium."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_format_producers as F

from rlvitals.cli import main
from rlvitals.compare import compare, compare_paths, config_sections, divergence, render_compare
from rlvitals.compare._render import rows
from rlvitals.doctor import diagnose
from rlvitals.recording import Manifest, RunBuilder

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


def _evals(folder: Path, evals: dict[str, float], extra: dict) -> Path:
    """A TRL run (no collapse) whose last log row holds ``evals`` and whose training args
    add ``extra``."""
    _trl_run(folder, None, 1e-6)
    state = json.loads((folder / "trainer_state.json").read_text())
    state["log_history"].append({"step": 200, **{f"eval_{k}": v for k, v in evals.items()}})
    (folder / "trainer_state.json").write_text(json.dumps(state))
    args = json.loads((folder / "training_args.json").read_text())
    (folder / "training_args.json").write_text(json.dumps({**args, **extra}))
    return folder


def test_eval_rows_match_by_key_never_math_against_gsm8k(tmp_path):
    a = _evals(tmp_path / "a", {"math_accuracy": 0.31, "gsm8k_accuracy": 0.62}, {})
    b = _evals(tmp_path / "b", {"gsm8k_accuracy": 0.55}, {})
    table = {k: (x, y) for k, x, y in rows(compare_paths(a, b))}
    assert table["final eval/gsm8k_accuracy"] == ("0.62", "0.55")
    assert table["eval only in A"] == ("eval/math_accuracy", "-")
    assert not any("math" in k and "gsm8k" in k for k in table)
    c = compare_paths(b, _evals(tmp_path / "c", {"math_accuracy": 0.4}, {}))
    table = {k: (x, y) for k, x, y in rows(c)}
    assert table["final eval"] == ("no score key in common", "no score key in common")
    assert table["eval only in A"][0] == "eval/gsm8k_accuracy"
    assert table["eval only in B"][1] == "eval/math_accuracy"


def _configured(config: dict) -> object:
    b = RunBuilder(Manifest(config=config))
    for s in range(1, 61):
        b.add_row(s, {"reward": 0.5, "frac_reward_zero_std": 0.2})
    return diagnose(b.build())


def test_config_differences_are_ranked_and_absent_keys_folded():
    """A veRL-sized config against a TRL one: the few keys both have, in sections (algorithm,
    data, optimisation first); the many keys only one has, one line per side."""
    a = {
        "trainer": {"bf16": True},
        "algorithm": {"adv_estimator": "grpo"},
        "data": {"max_prompt_length": 256},
        "optim": {"lr": 1e-6},
    }
    b = {
        "trainer": {"bf16": False},
        "algorithm": {"adv_estimator": "rloo"},
        "data": {"max_prompt_length": 512},
        "optim": {"lr": 3e-6},
        **{f"worker.opt_{i}": i for i in range(40)},
    }
    c = compare(_configured(a), _configured(b))
    cs = config_sections(c.config)
    assert [name for name, _ in cs.sections] == ["algorithm", "data", "optimisation", "other"]
    by = {name: [k for k, _, _ in rows_] for name, rows_ in cs.sections}
    assert by == {
        "algorithm": ["algorithm.adv_estimator"],
        "data": ["data.max_prompt_length"],
        "optimisation": ["optim.lr"],
        "other": ["trainer.bf16"],
    }
    assert len(cs.only_b) == 40 and cs.only_a == []
    text = render_compare(c, "text")
    body = text.split("configuration differences", 1)[1]
    assert "(absent)" not in body and "(4 changed; A | B)" in body
    assert body.index("[algorithm]") < body.index("[data]") < body.index("[optimisation]")
    (only,) = [ln for ln in body.splitlines() if "only in B" in ln]
    assert "only in B (40 keys)" in only and "and 28 more" in only
    html = render_compare(c, "html")
    assert html.count('<tr class="sec">') == 4 and "(absent)" not in html
    assert "only in B (40 keys)" in html
    # the JSON keeps every difference, absent ones as null
    doc = json.loads(render_compare(c, "json"))
    assert len(doc["config"]) == 44


def test_the_two_runs_have_two_colours(pair):
    from rlvitals.compare._render import COLOUR_A, COLOUR_B

    html = render_compare(compare_paths(*pair), "html")
    plots = re.findall(r"<svg class=\"plot\".*?</svg>", html, flags=re.S)
    assert plots
    for svg in plots:
        strokes = re.findall(r'<polyline [^>]*stroke="(#[0-9a-f]+)"', svg)
        assert strokes == [COLOUR_A, COLOUR_B]


def test_acr_100_is_the_estimate_for_runs_that_log_no_acr(tmp_path):
    a = F.write_verl_console(tmp_path / "a.log", F.simulate(120))
    b = F.write_verl_console(tmp_path / "b.log", F.simulate(120, seed=3))
    table = {k: (x, y) for k, x, y in rows(compare_paths(a, b))}
    x, y = table["ACR_100 (≈ estimate)"]
    assert x.startswith("≈") and y.startswith("≈") and "ACR_100" not in table

"""The command line: every command has help ending with an example; doctor, detectors, explain."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rlvitals.cli import COMMANDS, build_parser, main
from rlvitals_corpus.families import healthy_rows
from rlvitals_corpus.fixtures import PAIRS


def _subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


def test_every_command_has_help_ending_with_an_example():
    subs = _subparsers()
    assert set(COMMANDS) <= set(subs)
    for name in COMMANDS:
        text = subs[name].format_help()
        assert subs[name].description, name
        tail = text.rstrip().splitlines()
        examples = [
            ln
            for ln in tail
            if ln.strip().startswith(f"rlvitals {name}") or f"example: rlvitals {name}" in ln
        ]
        assert examples, f"'rlvitals {name} --help' has no example"
        assert "example" in "\n".join(tail[-12:]).lower(), f"{name}: help must end with examples"


@pytest.mark.parametrize("name", ["doctor", "detectors", "explain"])
def test_help_exits_zero(name, capsys):
    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0
    assert "example" in capsys.readouterr().out


def _jsonl(tmp_path: Path, train: dict, evals: dict, name: str) -> Path:
    path = tmp_path / f"{name}.jsonl"
    with open(path, "w") as f:
        for s in sorted(train):
            f.write(json.dumps({"step": s, **train[s], **evals.get(s, {})}) + "\n")
    return path


@pytest.fixture(scope="module")
def healthy_file(tmp_path_factory) -> Path:
    train, evals = healthy_rows(0)
    return _jsonl(tmp_path_factory.mktemp("runs"), train, evals, "healthy")


@pytest.fixture(scope="module")
def length_file(tmp_path_factory) -> Path:
    """The LENGTH_EXPLOSION bad run written as a generic JSONL log."""
    run = PAIRS["LENGTH_EXPLOSION"].bad_run(seed=0)
    path = tmp_path_factory.mktemp("runs") / "length.jsonl"
    keys = {
        "length_mean": "completions/mean_length",
        "truncation_frac": "completions/clipped_ratio",
        "length_max": "completions/max_length",
        "reward_mean": "reward",
    }
    with open(path, "w") as f:
        for i, s in enumerate(run.steps.tolist()):
            row = {keys.get(k, k): float(v[i]) for k, v in run.series.items() if v[i] == v[i]}
            f.write(json.dumps({"step": s, **row}) + "\n")
    return path


def test_doctor_example_collapse_reports_and_exits_1(capsys):
    assert main(["doctor", "--example", "collapse"]) == 1
    out = capsys.readouterr().out
    assert "DEGENERATE_GROUPS" in out and "try:" in out and "since step" in out
    assert "\x1b[" not in out  # not a terminal: plain text


def test_doctor_healthy_run_exits_0(healthy_file, capsys):
    assert main(["doctor", str(healthy_file)]) == 0
    assert "no findings" in capsys.readouterr().out


def test_doctor_fail_on(length_file, capsys):
    assert main(["doctor", str(length_file)]) == 1
    assert main(["doctor", str(length_file), "--fail-on", "critical"]) == 0
    assert main(["doctor", str(length_file), "--fail-on", "never"]) == 0
    assert main(["doctor", str(length_file), "--fail-on", "info"]) == 1
    capsys.readouterr()


def test_doctor_select_and_ignore(length_file, capsys):
    main(["doctor", str(length_file), "--format", "json", "--select", "TRUNCATION"])
    d = json.loads(capsys.readouterr().out)
    assert d["detectors"] == ["TRUNCATION"] and {f["id"] for f in d["findings"]} == {"TRUNCATION"}
    assert main(["doctor", str(length_file), "--ignore", "LENGTH_EXPLOSION,TRUNCATION"]) == 0
    capsys.readouterr()
    main(["doctor", str(length_file), "--format", "json", "--ignore", "length"])  # a family
    d = json.loads(capsys.readouterr().out)
    assert not {"LENGTH_EXPLOSION", "TRUNCATION"} & set(d["detectors"])


def test_doctor_formats_and_output_file(length_file, tmp_path, capsys):
    for fmt in ("json", "md", "html", "text"):
        assert main(["doctor", str(length_file), "--format", fmt, "--fail-on", "never"]) == 0
        out = capsys.readouterr().out
        assert "LENGTH_EXPLOSION" in out
    main(["doctor", str(length_file), "--output-format", "json"])  # the synonym
    assert json.loads(capsys.readouterr().out)["schema"] == 2
    html = tmp_path / "report.html"
    assert main(["doctor", str(length_file), "-o", str(html)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and f"wrote {html}" in captured.err
    assert html.read_text().startswith("<!DOCTYPE html>")  # format from the suffix


def test_doctor_input_format_is_forced(length_file, capsys):
    assert main(["doctor", str(length_file), "--input-format", "jsonl", "--fail-on", "never"]) == 0
    assert main(["doctor", str(length_file), "--input-format", "nonsense"]) == 2
    assert "unknown format 'nonsense'" in capsys.readouterr().err


def test_doctor_config_file_sets_knobs_and_fail_on(length_file, tmp_path, capsys):
    cfg = tmp_path / "rlvitals.toml"
    cfg.write_text('fail_on = "critical"\n\n[detectors.LENGTH_EXPLOSION]\njump_ratio = 5.0\n')
    assert main(["doctor", str(length_file), "--config", str(cfg), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert "LENGTH_EXPLOSION" not in {f["id"] for f in d["findings"]}
    assert "TRUNCATION" in {f["id"] for f in d["findings"]}
    cfg.write_text("[detectors.LENGTH_EXPLOSION]\njump_rate = 5.0\n")
    assert main(["doctor", str(length_file), "--config", str(cfg)]) == 2
    assert "jump_ratio" in capsys.readouterr().err  # the valid knobs are listed


@pytest.mark.parametrize(
    "argv",
    [
        ["doctor", "/no/such/run.jsonl"],
        ["doctor", "--example", "nope"],
        ["doctor", "--example", "collapse", "--select", "NOPE"],
        ["doctor", "--example", "collapse", "--format", "pdf"],
        ["doctor"],
    ],
)
def test_doctor_bad_input_or_usage_exits_2(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse usage errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.strip()


def test_doctor_on_a_garbage_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "garbage.jsonl"
    bad.write_bytes(b"\x00\x01\x02 not a log \xff\n" * 10)
    assert main(["doctor", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(bad) in err


@pytest.mark.parametrize(
    "rows, says",
    [
        (
            '{"step": 1, "my/custom_reward": 0.5}\n{"step": 2, "my/custom_reward": 0.7}\n',
            "keys not understood: my/custom_reward",
        ),
        ('{"step": 1, "loss": "n/a"}\n', "non-numeric"),
        ('{"step": 1}\n{"step": 2}\n', "0 step row(s)"),
    ],
)
def test_doctor_refuses_a_file_with_no_known_metric(tmp_path, capsys, rows, says):
    # "no findings" would read as a healthy run; nothing was judged, so it is bad input.
    path = tmp_path / "custom.jsonl"
    path.write_text(rows)
    assert main(["doctor", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "no metric rlvitals knows" in err
    assert says in err
    # One known metric is enough to diagnose (and what the detectors cannot judge is listed).
    path.write_text('{"step": 1, "loss": 0.5}\n')
    assert main(["doctor", str(path), "--fail-on", "never"]) == 0
    assert "not judged" in capsys.readouterr().out


def test_doctor_metric_flag_maps_custom_keys(tmp_path, capsys):
    path = tmp_path / "custom.jsonl"
    path.write_text(
        "".join(f'{{"step": {i}, "my/zero": {0.1 if i <= 40 else 0.95}}}\n' for i in range(1, 81))
    )
    assert main(["doctor", str(path)]) == 2
    assert "--metric KEY=NAME" in capsys.readouterr().err
    assert (
        main(["doctor", str(path), "--metric", "my/zero=frac_reward_zero_std", "--format", "json"])
        == 1
    )
    d = json.loads(capsys.readouterr().out)
    assert [f["onset_step"] for f in d["findings"] if f["id"] == "DEGENERATE_GROUPS"] == [41]
    for bad, says in (
        (["--metric", "my/zero"], "KEY=NAME"),
        (["--metric", "my/zero=nope"], "no such metric"),
    ):
        assert main(["doctor", str(path), *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and len(err.splitlines()) == 1


def test_detectors_lists_the_catalogue(capsys):
    from rlvitals.detectors import catalogue

    assert main(["detectors"]) == 0
    out = capsys.readouterr().out
    for cls in catalogue():
        line = next(ln for ln in out.splitlines() if ln.startswith(cls.id + " "))
        assert cls.severity.value in line and cls.family in line
    assert main(["detectors", "--json", "--family", "gradient"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["id"] for r in rows} == {"GRAD_NONFINITE", "GRAD_SPIKE", "ZERO_GRAD_STEPS"}
    assert rows[0]["knobs"] and rows[0]["summary"]
    assert main(["detectors", "--family", "nope"]) == 2


def test_explain_prints_the_page(capsys):
    assert main(["explain", "entropy_collapse"]) == 0
    out = capsys.readouterr().out
    for section in (
        "What is happening",
        "What it looks like in the recording",
        "How the detector decides",
        "What to try",
        "Knobs",
    ):
        assert f"## {section}" in out
    assert "`collapse_ratio`" in out and ":knob:" not in out


def test_explain_unknown_id_lists_valid_ones(capsys):
    assert main(["explain", "NOT_A_DETECTOR"]) == 2
    err = capsys.readouterr().err
    assert (
        "detectors:" in err
        and "ADV_COLLAPSE" in err
        and "conditions:" in err
        and "RUNAWAY_LENGTH" in err
    )


def test_the_installed_entry_point_runs_the_readme_command():
    proc = subprocess.run(
        [sys.executable, "-m", "rlvitals", "doctor", "--example", "collapse"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "DEGENERATE_GROUPS" in proc.stdout and proc.stderr == ""


def test_doctor_example_length_reports_the_explosion(capsys):
    assert main(["doctor", "--example", "length", "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    found = {f["id"]: f for f in d["findings"]}
    assert found["LENGTH_EXPLOSION"]["onset_step"] == 120
    assert found["TRUNCATION"]["onset_step"] == 120

"""``rlvitals inspect`` and the stderr progress bar."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import rlvitals_tests_trl_producer as P  # loaded by conftest.py

from rlvitals import progress as _progress
from rlvitals.cli import main
from rlvitals.importers import load
from rlvitals.progress import ProgressBar, progress_enabled


@pytest.fixture(scope="session")
def grpo_run() -> Path:
    return P.shared_grpo_run()


@pytest.fixture
def jsonl(tmp_path) -> Path:
    p = tmp_path / "log.jsonl"
    rows = [{"step": s, "reward": s / 10, "kl": 0.1, "mystery": 1} for s in range(1, 6)]
    rows.append({"step": 5, "eval_reward": 0.7})
    p.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 6, "rew')
    return p


def test_help_ends_with_an_example_and_explains_format_flags(capsys):
    with pytest.raises(SystemExit) as e:
        main(["inspect", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1].startswith("example: rlvitals inspect ")
    assert "--json" in out and "--output-format" in out and "INPUT format" in out


def test_text_output_on_real_trl_run(grpo_run, capsys):
    assert main(["inspect", str(grpo_run)]) == 0
    out = capsys.readouterr().out
    assert "format         trl_state" in out
    assert "trainer        trl" in out
    assert "steps          3 (first 2, last 6), logged every 2 steps" in out
    assert "group data     yes: " in out and "group sizes 4" in out
    assert "eval series (" in out and "eval/reward_mean" in out
    assert "reward_mean" in out and "100.0%" in out
    assert "unknown keys (" in out and "eval_runtime" in out
    assert "warnings (" in out and "eval completions" in out


def test_json_output_matches_the_run(jsonl, capsys):
    assert main(["inspect", str(jsonl), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    run = load(jsonl)
    assert info["format"] == "jsonl" and info["source"] == str(jsonl)
    assert info["steps"] == {"count": 5, "first": 1, "last": 5}
    assert info["series"]["reward_mean"] == 1.0
    assert info["eval_steps"]["count"] == 1 and "eval/reward_mean" in info["eval_series"]
    assert info["groups"] == {"present": False}
    assert info["unknown_keys"] == run.unknown_keys == ["mystery"]
    assert len(info["warnings"]) == 1 and "torn last line" in info["warnings"][0]
    assert main(["inspect", str(jsonl), "--output-format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == info


def test_json_output_with_groups(grpo_run, capsys):
    assert main(["inspect", str(grpo_run / "completions"), "--json"]) == 0
    g = json.loads(capsys.readouterr().out)["groups"]
    assert g["present"] and g["group_sizes"] == [4] and g["advantages"]
    assert g["groups"] * 4 == g["completions"]


def test_format_forces_the_input_format(jsonl, capsys):
    assert main(["inspect", str(jsonl), "--format", "csv"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(jsonl) in err
    assert main(["inspect", str(jsonl), "--format", "nope"]) == 2
    assert "unknown format 'nope'" in capsys.readouterr().err


_DIR, _MISSING = object(), object()


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("empty.jsonl", b"", "file is empty"),
        ("", _DIR, "directory holds no run"),
        ("x.bin", b"\x00\x01garbage\xff" * 10, "unknown format"),
        ("missing.jsonl", _MISSING, "no such file"),
        ("bad.jsonl", b'{"step": 1}\n{"step": [}\n', "line 2: invalid JSON"),
    ],
)
def test_bad_inputs_exit_2_with_one_plain_line(tmp_path, capsys, name, content, needle):
    d = tmp_path / "in"
    d.mkdir()
    path = d / name if name else d
    if isinstance(content, bytes):
        path.write_bytes(content)
    assert main(["inspect", str(path)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and needle in cap.err and str(path) in cap.err
    assert "Traceback" not in cap.err


def test_real_process_bad_file_no_traceback(tmp_path):
    bad = tmp_path / "trainer_state.json"
    bad.write_text('{"log_history": [{"step": 1,')
    res = subprocess.run(
        [sys.executable, "-m", "rlvitals", "inspect", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and str(bad) in res.stderr
    assert "Traceback" not in res.stderr


# ----------------------------------------------------------------------------- progress


def test_progress_bar_only_when_enabled_and_slow():
    quiet = io.StringIO()
    with ProgressBar("x", force=False, stream=quiet, show_after=0) as bar:
        bar(1, 10)
    assert not bar.shown and quiet.getvalue() == ""
    fast = io.StringIO()
    with ProgressBar("x", force=True, stream=fast, show_after=60) as bar:
        bar(1, 10)
    assert not bar.shown and fast.getvalue() == ""
    slow = io.StringIO()
    with ProgressBar("run.jsonl", force=True, stream=slow, show_after=0) as bar:
        bar(5, 10)
    assert bar.shown and "run.jsonl" in slow.getvalue()


def test_progress_enabled_rules(monkeypatch):
    monkeypatch.delenv(_progress.ENV_VAR, raising=False)
    assert progress_enabled(None, io.StringIO()) is False  # not a terminal
    monkeypatch.setenv(_progress.ENV_VAR, "1")
    assert progress_enabled(None, io.StringIO()) is True
    assert progress_enabled(False, io.StringIO()) is False
    monkeypatch.setenv(_progress.ENV_VAR, "0")
    assert progress_enabled(None, io.StringIO()) is False


def test_inspect_draws_progress_on_stderr_when_forced(tmp_path, monkeypatch, capsys):
    p = tmp_path / "big.jsonl"
    p.write_text("".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in range(50_000)))
    monkeypatch.setattr(_progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr("rlvitals.importers._lines._PROGRESS_EVERY", 1 << 16)
    assert main(["inspect", str(p), "--progress", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["steps"]["count"] == 50_000  # stdout stays clean JSON
    assert "reading" in cap.err
    assert main(["inspect", str(p), "--json"]) == 0  # stderr is not a terminal here
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("fmt", ["trl_state", "trl_completions", "jsonl", "csv", "groups_jsonl"])
def test_forced_format_on_empty_file_or_directory_says_so(tmp_path, capsys, fmt):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert main(["inspect", str(empty), "--format", fmt]) == 2
    assert capsys.readouterr().err == f"rlvitals: error: {empty}: file is empty\n"
    d = tmp_path / "dir"
    d.mkdir()
    assert main(["inspect", str(d), "--format", fmt]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlvitals: error: {d}: ") and err.count("\n") == 1
    assert "Errno" not in err

"""``-o`` never writes into an input (issue 21, item 1): not by path, symlink or hard link, not
into an input folder; every output is written whole through a rename."""

from __future__ import annotations

import json
import os

import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.cli import main
from rlvitals.cli._output import refuse_input_target, write_replacing
from rlvitals.errors import InputError


def _log(path, steps=60):
    rows = [{"step": s, "reward": 0.5, "frac_reward_zero_std": 0.1} for s in range(1, steps)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _trl_dir(path):
    path.mkdir()
    F.write_trl_state(path / "trainer_state.json", F.simulate(40))
    return path


@pytest.mark.parametrize("command", ["doctor", "scan", "compare"])
def test_a_hard_link_to_the_input_is_refused_and_the_input_kept(tmp_path, capsys, command):
    log = _log(tmp_path / "a.jsonl")
    before = log.read_bytes()
    link = tmp_path / "r.json"
    os.link(log, link)  # ln a.jsonl r.json: another name of the same file
    other = _log(tmp_path / "b.jsonl")
    argv = {
        "doctor": ["doctor", str(log), "-o", str(link), "--fail-on", "never"],
        "scan": ["scan", str(log), "-o", str(link), "--no-cache", "--no-progress"],
        "compare": ["compare", str(log), str(other), "-o", str(link)],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the same file" in err and len(err.strip().splitlines()) == 1, err
    assert log.read_bytes() == before and link.read_bytes() == before


@pytest.mark.parametrize("command", ["doctor", "compare"])
def test_a_file_inside_an_input_folder_is_refused(tmp_path, capsys, command):
    run = _trl_dir(tmp_path / "run")
    state = run / "trainer_state.json"
    before = state.read_bytes()
    argv = {
        "doctor": ["doctor", str(run), "-o", str(state), "--format", "json"],
        "compare": ["compare", str(run), str(run), "-o", str(state), "--format", "json"],
    }[command]
    assert main(argv) == 2
    assert "inside the input folder" in capsys.readouterr().err
    assert state.read_bytes() == before


def test_a_symlink_to_the_input_is_refused(tmp_path, capsys):
    log = _log(tmp_path / "a.jsonl")
    before = log.read_bytes()
    (tmp_path / "r.json").symlink_to(log)
    assert main(["doctor", str(log), "-o", str(tmp_path / "r.json")]) == 2
    assert "the same file" in capsys.readouterr().err and log.read_bytes() == before


def test_the_report_replaces_a_link_instead_of_writing_through_it(tmp_path):
    """A hard link made to a third file is replaced, not written through: the rename swaps the
    directory entry, so the other name keeps its bytes (what the check cannot see is safe)."""
    keep = tmp_path / "keep.txt"
    keep.write_text("precious\n")
    out = tmp_path / "report.md"
    os.link(keep, out)
    write_replacing(out, "# report\n")
    assert keep.read_text() == "precious\n" and out.read_text() == "# report\n"
    assert os.stat(keep).st_ino != os.stat(out).st_ino
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_write_replacing_keeps_the_mode_and_fails_in_one_line(tmp_path):
    out = tmp_path / "r.txt"
    out.write_text("old")
    out.chmod(0o640)
    write_replacing(out, "new")
    assert out.read_text() == "new" and (out.stat().st_mode & 0o777) == 0o640
    with pytest.raises(InputError, match="cannot write"):
        write_replacing(tmp_path / "no" / "such" / "r.txt", "x")
    with pytest.raises(InputError, match="names a folder"):
        write_replacing(tmp_path, "x")


def test_stdin_and_unrelated_outputs_pass(tmp_path):
    log = _log(tmp_path / "a.jsonl")
    refuse_input_target(tmp_path / "report.html", ["-", log])
    refuse_input_target(tmp_path / "report.html", [tmp_path / "missing.jsonl"])
    assert main(["doctor", str(log), "-o", str(tmp_path / "r.json"), "--fail-on", "never"]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["schema"]

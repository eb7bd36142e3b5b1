"""What scan's page says (issue 25 item 7): paths relative to the scan root, one row per run
found in two formats in one folder, ACR_100 estimated for runs that log no ACR (and marked),
the correlation only over judged runs with a measured ACR_100 on one scale (the others named
with why), the primary condition as a column, and ``--reports DIR`` writing each run's report
and linking it. The page in a browser: tests/test_pages.py."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import numpy as np
import pytest
import rlvitals_tests_format_producers as F

from rlvitals.cli import main
from rlvitals.doctor import diagnose_path
from rlvitals.scan import ScanRow, correlate, correlate_rows, render_scan, scan
from rlvitals.scan._merge import scan_root
from rlvitals.signal import acr_100

FLAGS = ["--no-cache", "--no-progress", "--fail-on", "never", "-j", "1"]


def _at(path: Path) -> Path:
    """``path``, its folder made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_paths_are_relative_to_the_scan_root(tmp_path):
    F.write_generic(_at(tmp_path / "sweep" / "a" / "m.jsonl"), F.simulate(40))
    F.write_generic(_at(tmp_path / "sweep" / "b" / "m.jsonl"), F.simulate(40, seed=1))
    result = scan([tmp_path / "sweep"], jobs=1, cache=False)
    assert result.root == str(tmp_path / "sweep")
    assert [r.label for r in result.rows] == ["a/m.jsonl", "b/m.jsonl"]
    assert all(r.path.startswith(str(tmp_path)) for r in result.rows)  # JSON keeps the path
    text = render_scan(result, "text")
    assert (
        f"paths are relative to {tmp_path / 'sweep'}" in text
        and str(tmp_path) + "/" not in (text.split("\n\n")[0])
    )
    one = scan([tmp_path / "sweep" / "a" / "m.jsonl"], jobs=1, cache=False)
    assert [r.label for r in one.rows] == ["m.jsonl"]
    assert scan_root([str(tmp_path / "sweep" / "*" / "m.jsonl")]) == str(tmp_path / "sweep")


def test_one_run_in_two_formats_in_one_folder_is_one_row(tmp_path):
    run = F.simulate(60)
    both = tmp_path / "both"
    both.mkdir()
    F.write_prime_rl(_at(both / "metrics.jsonl"), run)
    F.write_slime(_at(both / "train.log"), run)
    # the same data in two folders, and two copies in one format: listed, each
    F.write_prime_rl(_at(tmp_path / "elsewhere" / "metrics.jsonl"), run)
    F.write_generic(_at(tmp_path / "copies" / "a.jsonl"), run)
    F.write_generic(_at(tmp_path / "copies" / "b.jsonl"), run)
    result = scan([tmp_path], jobs=1, cache=False)
    labels = [r.label for r in result.rows]
    assert len(labels) == 4 and result.merged == 1, labels  # five places, four runs
    (row,) = [r for r in result.rows if r.merged]
    assert row.label.startswith("both/") and row.merged[0].startswith("both/")
    formats = {row.format, row.merged[0].rsplit("(", 1)[1].rstrip(")")}
    assert formats == {"prime_rl", "slime_console"}
    assert any("same run found in another format" in n for n in result.notes)
    text = render_scan(result, "text")
    assert "prime_rl+slime_console" in text or "slime_console+prime_rl" in text
    assert "also as both/" in text


def test_a_different_run_in_the_same_folder_is_not_merged(tmp_path):
    F.write_prime_rl(_at(tmp_path / "metrics.jsonl"), F.simulate(60))
    F.write_slime(_at(tmp_path / "train.log"), F.simulate(60, seed=7))
    result = scan([tmp_path], jobs=1, cache=False)
    assert len(result.rows) == 2 and result.merged == 0
    assert result.rows[0].identity != result.rows[1].identity


def test_acr_100_is_the_doctors_estimate_when_no_acr_is_logged(tmp_path):
    log = F.write_verl_console(_at(tmp_path / "verl.log"), F.simulate(120))
    (row,) = scan([tmp_path], jobs=1, cache=False).rows
    v = diagnose_path(log).vitals
    assert v.acr_100 is None and v.expected_acr_from == "estimate"  # no measured ACR
    assert row.acr_100_from == "estimate"
    assert row.acr_100 == pytest.approx(acr_100(v.series["expected_acr"], v.steps), abs=1e-6)
    result = scan([tmp_path], jobs=1, cache=False)
    assert f"≈{row.acr_100:.3f}" in render_scan(result, "text")
    html = render_scan(result, "html")
    assert "estimate from the mean reward and G" in unescape(html)
    measured = F.write_generic(_at(tmp_path / "m" / "m.jsonl"), F.simulate(40))
    (m,) = scan([measured], jobs=1, cache=False).rows
    assert m.acr_100_from == "measured"


def _row(name, acr, final, *, judged=True, estimate=False, scale=(0.0, 1.0), key="eval/acc"):
    return ScanRow(
        path=name,
        acr_100=acr,
        acr_100_from="estimate" if estimate else "measured",
        reward_final=final,
        eval_final=final,
        eval_key=key,
        reward_range=list(scale),
        not_judged=None if judged else "too short",
    )


def test_the_correlation_keeps_judged_measured_runs_of_one_scale_and_names_the_rest():
    rng = np.random.default_rng(0)
    good = [
        _row(f"r{i}", x, 0.5 - 0.3 * x + rng.normal(0, 0.01))
        for i, x in enumerate(np.linspace(0.1, 0.8, 6))
    ]
    bad = [
        _row("short", 0.9, 0.9, judged=False),
        _row("verl", 0.5, 0.1, estimate=True),
        _row("wide", 0.2, 4.0, scale=(-2.0, 3.0)),
    ]
    c = correlate_rows(good + bad, "reward")
    ref = correlate([r.acr_100 for r in good], [r.reward_final for r in good])
    assert c.n == 6 and c.r == pytest.approx(ref.r) and c.slope == pytest.approx(ref.slope)
    assert c.scale == "[0, 1]"
    why = dict(c.left_out)
    assert why["short"] == "not judged"
    assert "estimated" in why["verl"]
    assert why["wide"] == "rewards within ±10, not [0, 1] like the others"
    assert [d["run"] for d in c.to_dict()["left_out"]] == ["short", "verl", "wide"]
    # with all of them, the line would differ: the filter matters
    everything = correlate([r.acr_100 for r in good + bad], [r.reward_final for r in good + bad])
    assert everything.r != pytest.approx(c.r)


def test_the_eval_correlation_uses_one_eval_key_never_two():
    rows = [
        _row(f"g{i}", x, 0.8 - 0.4 * x, key="eval/gsm8k/acc")
        for i, x in enumerate([0.1, 0.3, 0.5, 0.7])
    ]
    rows += [_row("m0", 0.2, 0.3, key="eval/math/acc"), _row("m1", 0.6, 0.1, key="eval/math/acc")]
    c = correlate_rows(rows, "auto")
    assert c.against == "eval" and c.y_label == "eval/gsm8k/acc" and c.n == 4
    assert dict(c.left_out)["m0"] == "eval key eval/math/acc, not eval/gsm8k/acc like the others"


def _sweep(folder: Path) -> None:
    for i in range(4):
        F.write_generic(_at(folder / f"run{i}" / "m.jsonl"), F.simulate(50, seed=i))


def test_reports_are_written_and_linked(tmp_path):
    _sweep(tmp_path / "sweep")
    page = tmp_path / "site" / "scan.html"
    page.parent.mkdir()
    rc = main(
        ["scan", str(tmp_path / "sweep"), "-o", str(page), "--reports", str(tmp_path / "r"), *FLAGS]
    )
    assert rc == 0
    html = page.read_text(encoding="utf-8")
    links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', html)
    assert [text for _, text in links] == [f"run{i}/m.jsonl" for i in range(4)]
    for href, _ in links:
        assert href.startswith("../r/")
        report = (page.parent / href).resolve()
        assert "rlvitals doctor" in report.read_text(encoding="utf-8")
    # the primary condition is a column, filled per run
    assert "<th>condition</th>" in html
    doc = json.loads(render_scan(scan([tmp_path / "sweep"], jobs=1, cache=False), "json"))
    assert all(r["condition"] for r in doc["runs"])


def test_reports_into_a_file_is_a_one_line_error(tmp_path, capsys):
    _sweep(tmp_path / "sweep")
    (tmp_path / "taken").write_text("x")
    rc = main(["scan", str(tmp_path / "sweep"), "--reports", str(tmp_path / "taken"), *FLAGS])
    err = capsys.readouterr().err
    assert rc == 2 and "--reports: not a folder" in err and "Traceback" not in err
    assert (tmp_path / "taken").read_text() == "x"

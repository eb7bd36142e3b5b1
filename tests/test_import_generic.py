"""Generic JSONL and CSV importers (and the per-group JSONL importer's sniffing).

Files are written by their ordinary producers: ``json.dumps`` per line (what a training loop's
logger does), ``pandas.DataFrame.to_csv`` and ``csv.DictWriter``.
"""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest

from rlvitals import InputError
from rlvitals.importers import load, sniff


def _jsonl(path, rows, *, torn: str | None = None, newline: str = "\n"):
    with open(path, "w", encoding="utf-8", newline="") as f:
        for r in rows:
            f.write(json.dumps(r) + newline)
        if torn is not None:
            f.write(torn)
    return path


def _rows(n=10):
    return [
        {"step": s, "reward": s / 10, "train/loss": 1 / s, "kl": 0.01 * s, "custom": s * 2}
        for s in range(1, n + 1)
    ]


# -------------------------------------------------------------------------------- JSONL


def test_jsonl_steps_series_and_unknown_keys(tmp_path):
    rows = _rows()
    run = load(_jsonl(tmp_path / "log.jsonl", rows))
    assert run.manifest.format == "jsonl"
    assert run.steps.tolist() == [r["step"] for r in rows]
    np.testing.assert_allclose(run.series["reward_mean"], [r["reward"] for r in rows])
    np.testing.assert_allclose(run.series["loss"], [r["train/loss"] for r in rows])
    assert run.unknown_keys == ["custom"] and "step" not in run.series


@pytest.mark.parametrize("key", ["global_step", "_step", "iteration", "iter", "Step"])
def test_jsonl_other_step_keys(tmp_path, key):
    rows = [{key: 10 * i, "reward": i} for i in range(1, 4)]
    run = load(_jsonl(tmp_path / "log.jsonl", rows))
    assert run.steps.tolist() == [10, 20, 30] and key not in run.series


def test_jsonl_without_step_uses_line_numbers(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text('{"reward": 0.1}\n\n{"reward": 0.2}\n')
    run = load(p)
    assert run.steps.tolist() == [1, 3]
    assert any("line numbers" in w for w in run.warnings)


def test_jsonl_nested_dicts_flatten_with_slash(tmp_path):
    rows = [
        {
            "step": 1,
            "actor": {"entropy": 0.5, "kl": {"mean": 0.1}},
            "critic": {"score": {"mean": 0.7}},
        }
    ]
    run = load(_jsonl(tmp_path / "log.jsonl", rows), "jsonl")
    assert run.series["entropy"].tolist() == [0.5]
    assert run.series["reward_mean"].tolist() == [0.7]  # critic/score/mean
    assert run.series["actor/kl/mean"].tolist() == [0.1]


def test_jsonl_nan_null_and_strings(tmp_path):
    p = tmp_path / "log.jsonl"
    p.write_text('{"step": 1, "reward": NaN, "kl": null, "note": "hello", "lr": "1e-3"}\n')
    run = load(p)
    assert math.isnan(run.series["reward_mean"][0]) and math.isnan(run.series["kl"][0])
    assert run.series["learning_rate"][0] == pytest.approx(1e-3)
    assert "note" not in run.series
    assert any("non-numeric" in w for w in run.warnings)


def test_jsonl_eval_keys_are_eval_series(tmp_path):
    rows = [{"step": 1, "reward": 0.1}, {"step": 2, "eval_reward": 0.3}, {"step": 2, "reward": 0.2}]
    run = load(_jsonl(tmp_path / "log.jsonl", rows))
    assert run.steps.tolist() == [1, 2] and run.eval_steps.tolist() == [2]
    assert run.eval_series["eval/reward_mean"].tolist() == [0.3]


def test_jsonl_torn_last_line_is_a_warning(tmp_path):
    p = _jsonl(tmp_path / "log.jsonl", _rows(3), torn='{"step": 4, "rew')
    run = load(p)
    assert run.steps.tolist() == [1, 2, 3]
    assert any("torn last line" in w for w in run.warnings)


def test_jsonl_crlf_and_bom(tmp_path):
    p = tmp_path / "log.jsonl"
    body = "".join(json.dumps(r) + "\r\n" for r in _rows(3))
    p.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert sniff(p).name == "jsonl"
    assert load(p).steps.tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("text", "needle", "where"),
    [
        ('{"step": 1}\n[1, 2]\n', "expected a JSON object", "line 2"),
        ('{"step": 1}\n{"step": "x"}\n', "not an integer step", "line 2"),
        ('{"step": 1}\n{"step": 1.5}\n', "not an integer step", "line 2"),
        ('{"step": 1, "a": 1}\n{bad json}\n{"step": 3}\n', "invalid JSON", "line 2"),
    ],
)
def test_jsonl_bad_lines_name_the_line(tmp_path, text, needle, where):
    p = tmp_path / "log.jsonl"
    p.write_text(text)
    with pytest.raises(InputError) as ei:
        load(p, "jsonl")
    assert str(ei.value).startswith(f"{p}:{where}: ") and needle in str(ei.value)


def test_jsonl_repeated_step_later_row_wins(tmp_path):
    rows = [{"step": 1, "reward": 0.1}, {"step": 1, "reward": 0.9}]
    run = load(_jsonl(tmp_path / "log.jsonl", rows))
    assert run.series["reward_mean"].tolist() == [0.9]


# ---------------------------------------------------------------------------------- CSV


def test_csv_from_pandas(tmp_path):
    df = pd.DataFrame(
        {
            "step": [1, 2, 3],
            "reward": [0.1, np.nan, 0.3],
            "kl": [0.1, 0.2, 0.3],
            "run": ["a", "a", "a"],
        }
    )
    p = tmp_path / "metrics.csv"
    df.to_csv(p, index=False)
    assert sniff(p).name == "csv"
    run = load(p)
    assert run.steps.tolist() == [1, 2, 3]
    assert math.isnan(run.series["reward_mean"][1])  # pandas writes NaN as an empty cell
    np.testing.assert_allclose(run.series["kl"], df["kl"])
    assert "run" not in run.series


def test_csv_empty_cells_are_missing_and_tsv(tmp_path):
    df = pd.DataFrame({"global_step": [5, 10], "reward": [0.5, None], "eval_reward": [None, 0.4]})
    p = tmp_path / "metrics.tsv"
    df.to_csv(p, sep="\t", index=False)
    assert sniff(p).name == "csv"
    run = load(p)
    # Step 10 logged no training value, so it is an eval step only.
    assert run.steps.tolist() == [5] and run.eval_steps.tolist() == [10]
    assert run.series["reward_mean"].tolist() == [0.5]


def test_csv_dictwriter_wandb_style_step(tmp_path):
    p = tmp_path / "export.csv"
    with open(p, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["Step", "train/reward", "train/kl"])
        w.writeheader()
        for s in (100, 200):
            w.writerow({"Step": s, "train/reward": s / 1000, "train/kl": ""})
    run = load(p)
    assert run.steps.tolist() == [100, 200]
    assert run.series["reward_mean"].tolist() == [0.1, 0.2]
    assert "kl" not in run.series


def test_csv_without_step_column_uses_line_numbers(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("reward,kl\n0.1,0.2\n0.3,0.4\n")
    run = load(p)
    assert run.steps.tolist() == [2, 3]
    assert any("line numbers" in w for w in run.warnings)


def test_csv_torn_last_row_and_bad_row(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("step,reward,kl\n1,0.1,0.2\n2,0.3")
    run = load(p)
    assert run.steps.tolist() == [1] and any("torn" in w for w in run.warnings)
    p.write_text("step,reward,kl\n1,0.1,0.2\n2,0.3\n3,0.1,0.1\n")
    with pytest.raises(InputError, match=r"m\.csv:line 3: 2 cells, but the header has 3"):
        load(p, "csv")


def test_csv_not_utf8_names_the_line(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes(b"step,reward\n1,0.1\n2,\xff\xfe\n")
    with pytest.raises(InputError, match=r"line 3 byte \d+: not UTF-8"):
        load(p, "csv")


# ---------------------------------------------------------------------------- sniffing


def test_each_shape_sniffs_to_its_format(tmp_path):
    generic = _jsonl(tmp_path / "a.jsonl", _rows(3))
    groups = _jsonl(tmp_path / "b.jsonl", [{"step": 1, "group": 0, "rewards": [0, 1, 1, 0]}])
    verl_file = _jsonl(tmp_path / "c.jsonl", [{"step": 1, "data": {"critic/score/mean": 0.5}}])
    csv_path = tmp_path / "d.jsonl"  # content, not the name, decides
    csv_path.write_text("step,reward\n1,0.5\n")
    assert sniff(generic).name == "jsonl"
    assert sniff(groups).name == "groups_jsonl"
    assert sniff(verl_file).name == "verl_file"
    assert sniff(csv_path).name == "csv"


def test_console_text_is_not_csv(tmp_path):
    p = tmp_path / "out.log"
    p.write_text("Global step 1: {'reward': 0.5, 'kl': 0.1}\nGlobal step 2: {'reward': 0.6}\n")
    assert sniff(p).name != "csv"
    q = tmp_path / "notes.txt"
    q.write_text("hello world, this is prose\nand more prose, with commas\n")
    with pytest.raises(InputError, match="unknown format"):
        sniff(q)


def test_groups_jsonl_overflowing_step_is_an_input_error(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_text('{"step": 99999999999999999999999, "group": 0, "rewards": [1, 0]}\n')
    with pytest.raises(InputError, match="line 1"):
        load(p, "groups_jsonl")

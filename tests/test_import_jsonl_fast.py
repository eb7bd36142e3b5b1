"""The JSONL importer's fast paths read what the general path reads.

Two of them: orjson parses the lines (``RLVITALS_JSON=stdlib`` turns it off; what orjson refuses
goes to ``json``), and rows with the keys of the row before, numbers only, go to the builder as
columns (``generic._Block``). Each is compared with the path it replaces on files that mix
every kind of row those paths treat differently.
"""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from rlvitals.errors import InputError
from rlvitals.importers import _lines, generic
from rlvitals.importers._lines import fast_loads
from rlvitals.importers.generic import load_jsonl
from rlvitals.recording.run import RunBuilder

KEYS = ["reward", "loss", "kl", "eval_reward", "train/grad_norm", "mystery", "entropy"]


def _value(rng: random.Random, clean: bool):
    u = rng.random() if not clean else rng.random() * 0.84
    if u < 0.70:
        return round(rng.gauss(0, 1), 4)
    if u < 0.76:
        return rng.randint(-5, 5)
    if u < 0.80:
        return rng.choice([True, False])
    if u < 0.84:
        return float(rng.choice(["nan", "inf", "-inf"]))
    if u < 0.88:
        return None
    if u < 0.91:
        return rng.choice(["nan", "0.5", "text", ""])
    if u < 0.94:
        return {"inner": rng.random(), "deeper": {"x": 1}}
    if u < 0.96:
        return [1, 2]
    return 10**400 if rng.random() < 0.5 else -(10**30)


def _write(path, rng: random.Random, n: int, repeat: float = 0.05) -> None:
    """Stretches of rows with one key set (a clean stretch: numbers only), as loggers write."""
    lines, step = [], 0
    while len(lines) < n:
        keys = KEYS[:4] if rng.random() < 0.5 else rng.sample(KEYS, rng.randint(1, len(KEYS)))
        clean = rng.random() < 0.7
        for _ in range(rng.choice([1, 2, 5, 15, 16, 40, 150])):
            step = step if rng.random() < repeat else step + 1  # some steps logged twice
            row = {"step": step, **{k: _value(rng, clean) for k in keys}}
            lines.append(json.dumps(row))
    path.write_text("\n".join(lines) + "\n")


def _same(a, b) -> None:
    assert a.steps.tolist() == b.steps.tolist()
    assert a.eval_steps.tolist() == b.eval_steps.tolist()
    for mine, theirs in ((a.series, b.series), (a.eval_series, b.eval_series)):
        assert sorted(mine) == sorted(theirs)
        for k in mine:
            assert np.array_equal(mine[k], theirs[k], equal_nan=True), k
    assert a.unknown_keys == b.unknown_keys
    assert a.warnings == b.warnings


@pytest.mark.parametrize("seed", range(6))
def test_columns_fast_path_matches_row_by_row(tmp_path, monkeypatch, seed):
    path = tmp_path / "run.jsonl"
    _write(path, random.Random(seed), 3000)
    monkeypatch.setattr(generic, "_BLOCK_ROWS", 64)  # many blocks, some cut mid-stretch
    calls = []
    add_columns = RunBuilder.add_columns
    monkeypatch.setattr(
        RunBuilder,
        "add_columns",
        lambda self, *a, **k: calls.append(1) or add_columns(self, *a, **k),
    )
    fast = load_jsonl(path)
    assert len(calls) >= 10  # the fast path did run
    monkeypatch.setattr(generic, "_SMALL_BLOCK", 10**9)  # every block row by row: add_row only
    slow = load_jsonl(path)
    _same(fast, slow)


def test_repeated_steps_later_row_wins_across_blocks(tmp_path, monkeypatch):
    monkeypatch.setattr(generic, "_BLOCK_ROWS", 20)
    lines = [json.dumps({"step": s, "reward": float(s)}) for s in range(1, 41)]
    lines += [json.dumps({"step": 5, "reward": -5.0}), json.dumps({"step": 30, "reward": "x"})]
    lines += [json.dumps({"step": s, "reward": -float(s)}) for s in range(10, 30)]
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    run = load_jsonl(path)
    r = dict(zip(run.steps.tolist(), run.series["reward_mean"].tolist()))
    assert r[5] == -5.0 and r[10] == -10.0 and r[29] == -29.0 and r[30] == 30.0 and r[40] == 40.0


@pytest.mark.skipif(fast_loads() is None, reason="orjson is a dependency; installed in CI")
@pytest.mark.parametrize("seed", range(3))
def test_orjson_reads_what_json_reads(tmp_path, monkeypatch, seed):
    path = tmp_path / "run.jsonl"
    _write(path, random.Random(100 + seed), 2000)
    extra = [
        '{"step": 9001, "reward": NaN, "kl": Infinity, "loss": -Infinity}',
        '{"step": 9002, "reward": 1e400, "kl": -0.0, "loss": 1E-320}',
        '{"step": 9003, "reward": "\\ud800", "k\\u00e9y": 0.25}',
        '{"step": 9004, "reward": 0.1, "reward": 0.2}',
        '{"step": 9005, "reward": 123456789012345678901234567890}',
    ]
    with path.open("a") as f:
        f.write("\n".join(extra) + "\n" + '{"step": 9006, "reward": 0.')  # and a torn last line
    monkeypatch.delenv("RLVITALS_JSON", raising=False)
    monkeypatch.setattr(_lines, "FAST_JSON_BYTES", 0)  # orjson for a file this small too
    calls = []
    loads = _lines.fast_loads()
    monkeypatch.setattr(_lines, "fast_loads", lambda: lambda b: calls.append(1) or loads(b))
    with_orjson = load_jsonl(path)
    assert len(calls) > 2000  # orjson did parse the lines
    monkeypatch.undo()
    monkeypatch.setenv("RLVITALS_JSON", "stdlib")
    assert fast_loads() is None
    with_json = load_jsonl(path)
    _same(with_orjson, with_json)
    assert math.isnan(with_json.series["reward_mean"][-5])


@pytest.mark.parametrize("parser", ["default", "stdlib"])
@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"step": 99999999999999999999, "reward": 1}', "not an integer step"),
        ('{"step": "x", "reward": 1}', "not an integer step"),
        ('{"step": 1, "reward": 1} trailing', "invalid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"step": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "invalid JSON"),
    ],
)
def test_bad_lines_give_the_same_error_under_both_parsers(
    tmp_path, monkeypatch, parser, line, message
):
    monkeypatch.setattr(_lines, "FAST_JSON_BYTES", 0)
    if parser == "stdlib":
        monkeypatch.setenv("RLVITALS_JSON", "stdlib")
    path = tmp_path / "run.jsonl"
    path.write_text('{"step": 0, "reward": 0.5}\n' + line + "\n")
    with pytest.raises(InputError, match=message) as err:
        load_jsonl(path)
    assert "line 2" in str(err.value)


def test_builder_builds_once():
    b = RunBuilder()
    b.add_row(1, {"reward": 1.0})
    assert b.build().series["reward_mean"].tolist() == [1.0]
    b.add_row(2, {"reward": 2.0})
    assert b.build(release=True).series["reward_mean"].tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="release=True"):
        b.build()

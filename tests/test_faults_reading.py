"""Bounded reading of hostile or live inputs (issue 21, items 4, 7 and 8): CSV exports capped per
line like the JSONL path, newline bombs, gzip files with trailing garbage or still being written,
live WAL-mode SQLite stores, files truncated while read."""

from __future__ import annotations

import gzip
import json

import pytest

from rlvitals.errors import InputError
from rlvitals.importers import _csv, _lines, load


def _jsonl(n: int) -> bytes:
    return b"".join(
        json.dumps({"step": i, "reward": (i % 3) / 2, "kl": 0.01}).encode() + b"\n"
        for i in range(n)
    )


def _history_csv(n: int) -> bytes:
    rows = [b"_step,_runtime,train/reward"]
    rows += [f"{i},{i * 1.5},{(i % 3) / 2}".encode() for i in range(n)]
    return b"\n".join(rows) + b"\n"


# --- item 7: bounded memory --------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["wandb_history", "wandb_chart"])
def test_csv_exports_cap_a_line_like_the_jsonl_path(tmp_path, monkeypatch, fmt):
    # /dev/zero forced as a CSV export grew to 11.7 GB in a minute: one line, never ending.
    monkeypatch.setattr(_csv, "MAX_LINE_BYTES", 4096)
    p = tmp_path / "h.csv.gz"
    p.write_bytes(gzip.compress(_history_csv(5) + b"5," + b"9" * 50_000 + b"\n"))
    with pytest.raises(InputError, match=r"line 7: line longer than 4096 characters"):
        load(p, fmt)


def test_csv_cap_reads_lines_under_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_csv, "MAX_LINE_BYTES", 4096)
    p = tmp_path / "h.csv"
    p.write_bytes(_history_csv(40))
    assert len(load(p, "wandb_history").steps) == 40


@pytest.mark.parametrize(
    ("name", "body", "fmt"),
    [("bomb.jsonl.gz", _jsonl(3), None), ("bomb.csv.gz", _history_csv(3), "wandb_history")],
)
def test_a_newline_bomb_ends_at_the_blank_run_budget(tmp_path, monkeypatch, name, body, fmt):
    # 300 MB of newlines (a 0.3 MB gzip) took 66 s as a CSV and 104 s as JSONL.
    monkeypatch.setattr(_lines, "MAX_BLANK_RUN", 1000)
    monkeypatch.setattr(_csv, "MAX_BLANK_RUN", 1000)
    p = tmp_path / name
    p.write_bytes(gzip.compress(body + b"\n" * 5000 + body))
    with pytest.raises(InputError, match="more than 1,000 blank lines in a row"):
        load(p, fmt)


def test_blank_lines_under_the_budget_are_still_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(_lines, "MAX_BLANK_RUN", 1000)
    p = tmp_path / "a.jsonl"
    p.write_bytes(_jsonl(5) + b"\n" * 900 + b"\r\n" * 90)
    assert len(load(p).steps) == 5


def test_gzip_with_trailing_garbage_reads_like_gunzip(tmp_path):
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(gzip.compress(_jsonl(200)) + b"this is not gzip\n")
    before = p.read_bytes()
    r = load(p)
    assert len(r.steps) == 200
    assert any("trailing garbage after the gzip data ignored" in w for w in r.warnings)
    assert p.read_bytes() == before


def test_gzip_still_being_written_keeps_its_complete_lines(tmp_path):
    data = gzip.compress(_jsonl(200))
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(data[: len(data) * 2 // 3])
    r = load(p)
    assert 100 < len(r.steps) < 200
    assert r.steps.tolist() == list(range(len(r.steps)))  # the complete lines, in order
    assert any("gzip data ends early" in w for w in r.warnings)


def test_gzip_corrupt_data_stays_an_error(tmp_path):
    data = bytearray(gzip.compress(_jsonl(200)))
    data[-6] ^= 0xFF  # the CRC: the bytes read are wrong, not merely cut
    p = tmp_path / "a.jsonl.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"cannot decompress|CRC"):
        load(p)

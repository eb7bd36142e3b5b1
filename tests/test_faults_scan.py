"""``rlvitals scan`` never passes silently (issue 21, item 6): unreadable folders, files and
databases are rows that fail the gate; the cache survives damaged rows, planted links and
replaced files, and changes of the code; deep folders and links out of the scanned folder."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from rlvitals.cli import main
from rlvitals.importers import _source
from rlvitals.scan import _cache, discover, scan


def _run(p: Path, reward: float = 0.5, n: int = 30) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w") as f:
        for s in range(n):
            f.write(json.dumps({"step": s, "reward": reward, "loss": 0.125}) + "\n")
    return p


def _scan(paths, tmp_path, **kw):
    return scan([str(p) for p in paths], engine="serial", jobs=1, cache_dir=tmp_path / "c", **kw)


# --- unreadable things are rows -----------------------------------------------------------------
def test_an_unreadable_folder_is_a_row_and_fails_the_gate(tmp_path, monkeypatch, capsys):
    root = tmp_path / "runs"
    _run(root / "a" / "train.jsonl")
    locked = root / "b"
    _run(locked / "train.jsonl")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)  # root reads a chmod 000 folder: simulate it
    res = _scan([root], tmp_path, cache=False)
    bad = [r for r in res.rows if r.error]
    assert [r.path for r in bad] == [str(locked)]
    assert "cannot read this folder: Permission denied" in bad[0].error
    code = main(["scan", str(root), "--no-cache", "-j", "1", "--fail-on", "critical"])
    assert code == 2
    assert "1 could not be read" in capsys.readouterr().out


def test_an_unreadable_file_is_a_row(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    _run(root / "a.jsonl")
    secret = _run(root / "b.jsonl")

    def fake_open(p, *a, **k):
        if os.fspath(p) == str(secret):
            raise PermissionError(13, "Permission denied", os.fspath(p))
        return open(p, *a, **k)

    monkeypatch.setattr(_source, "open", fake_open, raising=False)
    res = _scan([root], tmp_path, cache=False)
    bad = [r for r in res.rows if r.error]
    assert [r.path for r in bad] == [str(secret)]
    assert "Permission denied" in bad[0].error


def test_a_damaged_database_is_a_row_not_a_skip(tmp_path):
    root = tmp_path / "runs"
    _run(root / "a.jsonl")
    (root / "mlflow.db").write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    res = _scan([root], tmp_path, cache=False)
    bad = [r for r in res.rows if r.error]
    assert [Path(r.path).name for r in bad] == ["mlflow.db"]


# --- the cache -----------------------------------------------------------------------------------
def test_damaged_and_foreign_cache_rows_are_misses_that_get_rewritten(tmp_path):
    root = tmp_path / "runs"
    for name in "abc":
        _run(root / f"{name}.jsonl")
    first = _scan([root], tmp_path)
    assert first.read == 3
    con = sqlite3.connect(tmp_path / "c" / "scan.sqlite3")
    keys = [k for (k,) in con.execute("SELECT key FROM entries ORDER BY key")]
    con.execute("UPDATE entries SET value = 'not json{' WHERE key = ?", (keys[0],))
    con.execute("UPDATE entries SET value = ? WHERE key = ?", ('{"path": 3}', keys[1]))
    con.execute("UPDATE entries SET value = ? WHERE key = ?", ("12", keys[2]))
    con.commit()
    con.close()
    second = _scan([root], tmp_path)  # never a traceback, never the cache turned off
    assert [r.error for r in second.rows] == [None, None, None]
    assert second.read == 3 and second.cached == 0
    assert any("damaged or foreign row(s) ignored" in n for n in second.notes)
    assert [r.to_dict() for r in second.rows] == [r.to_dict() for r in first.rows]
    third = _scan([root], tmp_path)  # the rows were rewritten
    assert third.cached == 3 and third.read == 0 and not third.notes


def test_a_file_replaced_with_the_same_size_and_mtime_is_read_again(tmp_path):
    p = _run(tmp_path / "runs" / "a.jsonl", reward=0.25)
    st = os.stat(p)
    assert _scan([p.parent], tmp_path).rows[0].reward_final == 0.25
    new = _run(tmp_path / "other" / "a.jsonl", reward=0.75)
    assert new.stat().st_size == st.st_size
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, p)  # a restore, a rename over it: another inode, the same size and mtime
    again = _scan([p.parent], tmp_path)
    assert again.cached == 0 and again.rows[0].reward_final == 0.75


def test_the_cache_key_holds_the_source_tree(tmp_path, monkeypatch):
    _run(tmp_path / "runs" / "a.jsonl")
    assert _scan([tmp_path / "runs"], tmp_path).read == 1
    assert _scan([tmp_path / "runs"], tmp_path).cached == 1
    version = _cache.source_version()
    assert len(version) == 64 and _cache.source_version() == version
    monkeypatch.setattr(_cache, "_SOURCE", "an edited checkout")  # same __version__
    assert _scan([tmp_path / "runs"], tmp_path).cached == 0


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_the_cache_never_follows_a_planted_link(tmp_path, suffix):
    _run(tmp_path / "runs" / "a.jsonl")
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    cache = tmp_path / "c"
    cache.mkdir()
    os.symlink(victim, cache / f"scan.sqlite3{suffix}")
    res = _scan([tmp_path / "runs"], tmp_path)
    assert res.rows[0].error is None
    assert victim.read_bytes() == b"precious\n"
    assert any("not followed" in n for n in res.notes)


# --- the walk --------------------------------------------------------------------------------
def _deep(root: Path, levels: int) -> Path:
    root.mkdir()
    d = root
    fd = os.open(root, os.O_RDONLY)
    try:  # created relative to a descriptor: a path 1,000 levels deep is never spelled out
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with os.fdopen(
            os.open("train.jsonl", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w"
        ) as f:
            fd = -1
            f.write(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    finally:
        if fd >= 0:
            os.close(fd)
    return d


def _remove_deep(root: Path) -> None:
    """Remove a chain of ``d`` folders level by level (shutil.rmtree recurses: pytest's own
    clean-up of a 1,000-level folder is a RecursionError)."""
    cur, i = root, 0
    while (cur / "d").exists():
        nxt = root.parent / f"removing-{i}"
        os.rename(cur / "d", nxt)  # the rest of the chain, one level below tmp_path
        shutil.rmtree(cur)
        cur, i = nxt, i + 1
    shutil.rmtree(cur)


def test_a_folder_1000_levels_deep_is_a_row_not_a_recursion_error(tmp_path, capsys):
    root = _deep(tmp_path / "deep", 1000)
    try:
        _run(root / "run" / "train.jsonl")
        found = discover([str(root)])
        assert [t.fmt for t in found.targets] == [None, "jsonl"]
        assert "deeper than 64 levels" in found.targets[0].error
        code = main(["scan", str(root), "--no-cache", "-j", "1"])
        assert code == 2 and "1 could not be read" in capsys.readouterr().out
    finally:
        _remove_deep(root)


def test_the_walk_budgets(tmp_path):
    root = tmp_path / "runs"
    for i in range(6):
        _run(root / f"r{i}" / "sub" / "train.jsonl")
    assert len(discover([str(root)], max_depth=2).targets) == 6
    shallow = discover([str(root)], max_depth=1)
    assert all(t.error and "deeper than 1 levels" in t.error for t in shallow.targets)
    stopped = discover([str(root)], max_entries=5)
    assert stopped.targets[-1].error and "stopped after 5 entries" in stopped.targets[-1].error


def test_links_out_of_the_scanned_folder_are_not_followed_unless_asked(tmp_path):
    outside = _run(tmp_path / "elsewhere" / "secret.jsonl")
    root = tmp_path / "runs"
    inside = _run(root / "a.jsonl")
    os.symlink(outside, root / "out.jsonl")
    os.symlink(inside, root / "in.jsonl")  # a link inside the folder: followed (listed once)
    res = _scan([root], tmp_path, cache=False)
    assert [Path(r.path).name for r in res.rows] == ["a.jsonl"]
    assert any("1 file link(s) leading out of the scanned folder" in n for n in res.notes)
    res = _scan([root], tmp_path, cache=False, follow_links=True)
    assert sorted(Path(r.path).name for r in res.rows) == ["a.jsonl", "out.jsonl"]

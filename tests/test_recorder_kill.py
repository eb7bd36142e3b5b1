"""Kill tests: SIGKILL a real writer process at random moments, 50 times, and check that the
recording never loses a committed record, holds at most the one record in flight besides, and
always reads.

A *zygote* process imports numpy and rlvitals once; for each kill it forks a writer child that
appends scalars, groups and events to a recording directory forever, reporting each record on
stdout right after its ``log_*`` call returned (committed). The test SIGKILLs the child after a
random delay, reads the directory and checks it against the committed list. Each directory gets
several kills in a row, so every later writer also resumes after a kill (repairing the torn
tail it may find). Forking from a small single-threaded zygote keeps 50 kills within seconds.
"""

from __future__ import annotations

import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from rlvitals.errors import InputError
from rlvitals.recording import read_recording

KILLS = 50
DIRS = 10
"""KILLS are spread over DIRS directories: each directory sees KILLS // DIRS writers in turn."""
MAX_DELAY_S = 0.08

# Deterministic content of step s, shared by the writer child and the checks here.
DATA = r'''
import numpy as np

BIG_EVERY = 97


def scalars(s):
    return {"loss": s * 0.5, "aux": (s % 7) / 7.0}


def group_shape(s):
    if s % BIG_EVERY == 0:
        return 2000, 16  # a large record now and then, so some kills land inside a write
    return 1 + s % 37, 1 + s % 11


def group_rows(s, j):
    """Reward and length of row j (within step s)."""
    return ((s * 31 + j) % 17 / 16).astype(np.float32), (j % 100).astype(np.int32)


def groups(s):
    k, g = group_shape(s)
    rewards, lengths = group_rows(s, np.arange(k * g))
    ids = np.repeat(np.arange(k), g)
    return rewards, ids, [f"p{s}-{i}" for i in range(k)], lengths
'''

ZYGOTE = (
    DATA
    + r'''
import os, sys
from rlvitals.recording import Manifest, Recorder


def chunked_writes(fd, data, chunk=64):
    """A slow disk: records go out in many small write calls, so kills land inside them."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:chunk]):]


def write_forever(d, step, mode):
    if mode == "chunked":
        import rlvitals.recording._streams as streams

        streams._write_all = chunked_writes
    out = lambda b: os.write(1, b)
    rec = Recorder(d, Manifest(trainer="kill-test"))
    out(b"opened\n")
    while True:
        rec.log_scalars(step, scalars(step))
        out(b"s %d\n" % step)
        r, ids, prompts, lengths = groups(step)
        rec.log_groups(step, r, ids, prompts=prompts, lengths=lengths)
        out(b"g %d\n" % step)
        rec.log_event(step, "tick", "step %d" % step, n=step)
        out(b"e %d\n" % step)
        step += 1


os.write(1, b"zygote ready\n")
for line in sys.stdin:
    d, start, mode = line.split()
    pid = os.fork()
    if pid == 0:
        try:
            write_forever(d, int(start), mode)
        finally:
            os._exit(3)
    os.write(1, b"pid %d\n" % pid)
    os.waitpid(pid, 0)
    os.write(1, b"done\n")
'''
)

ORDER = ("s", "g", "e")


def in_flight(last: tuple[str, int] | None, start: int) -> tuple[str, int]:
    """The record a writer was working on when killed, given the last one it reported."""
    if last is None:
        return ("s", start)
    kind, step = last
    i = ORDER.index(kind)
    return (ORDER[i + 1], step) if i < 2 else ("s", step + 1)


def present_records(run, data) -> set[tuple[str, int]]:
    """Records in ``run``, checking that each one's content is exactly what was written."""
    out: set[tuple[str, int]] = set()
    loss = run.series.get("loss")
    if loss is not None:
        ok = np.isfinite(loss)
        steps = run.steps[ok]
        assert np.array_equal(loss[ok], steps * 0.5)
        assert np.array_equal(run.series["aux"][ok], (steps % 7) / 7.0)
        out |= {("s", int(s)) for s in steps}
    g = run.groups
    if g is not None:
        steps, first_group, n_groups = np.unique(g.step, return_index=True, return_counts=True)
        shapes = [data["group_shape"](int(s)) for s in steps]
        # each step once, with its own number of groups of its own size
        assert n_groups.tolist() == [k for k, _ in shapes]
        sizes = g.sizes()
        for s, f, (k, size) in zip(steps, first_group, shapes):
            assert (sizes[f : f + k] == size).all(), s
        row_step = g.row_step()
        rows_per_step = np.array([k * size for k, size in shapes], dtype=np.int64)
        j = np.arange(row_step.shape[0]) - np.repeat(g.offsets[first_group], rows_per_step)
        want_r, want_len = data["group_rows"](row_step, j)
        assert np.array_equal(g.rewards, want_r.astype(np.float64))
        assert np.array_equal(g.lengths, want_len.astype(np.float64))
        want_prompts = [f"p{s}-{i}" for s, (k, _) in zip(steps, shapes) for i in range(k)]
        assert g.prompt.tolist() == want_prompts
        out |= {("g", int(s)) for s in steps}
    ev_steps = [e.step for e in run.events]
    assert len(ev_steps) == len(set(ev_steps)), "an event was recorded twice"
    for e in run.events:
        assert (e.kind, e.message, e.data) == ("tick", f"step {e.step}", {"n": e.step})
    out |= {("e", s) for s in ev_steps}
    return out


class Zygote:
    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        assert self.next_line(60) == b"zygote ready"

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip(b"\n"))
        self.lines.put(b"EOF")

    def next_line(self, timeout: float = 30) -> bytes:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("zygote stopped answering") from None
        if line == b"EOF":
            raise AssertionError(f"zygote died: {self.proc.stderr.read().decode()[-2000:]}")
        return line

    def run_and_kill(self, d: str, start: int, delay: float, mode: str) -> list[tuple[str, int]]:
        """Fork a writer on ``d`` from step ``start``, SIGKILL it after ``delay``; return the
        records it reported as committed, in order. ``mode="chunked"`` makes every record take
        many small writes (a slow disk), so that kills tear records."""
        self.proc.stdin.write(f"{d} {start} {mode}\n".encode())
        self.proc.stdin.flush()
        reported: list[bytes] = []
        while True:
            line = self.next_line()
            if line.startswith(b"pid "):
                pid = int(line.split()[1])
                break
            reported.append(line)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        while (line := self.next_line()) != b"done":
            reported.append(line)
        committed = []
        for line in reported:
            if line == b"opened":
                continue
            kind, step = line.split()
            committed.append((kind.decode(), int(step)))
        return committed

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


def test_sigkill_at_random_moments_never_loses_a_committed_record(zygote, tmp_path):
    data: dict = {}
    exec(DATA, data)
    rng = random.Random(20260)
    kills_per_dir = KILLS // DIRS
    total_committed = torn_warnings = 0
    for n_dir in range(DIRS):
        d = str(tmp_path / f"rec{n_dir}")
        committed: set[tuple[str, int]] = set()
        allowed: set[tuple[str, int]] = set()  # each kill's record in flight
        seen: set[tuple[str, int]] = set()
        start = 0
        for _ in range(kills_per_dir):
            # now and then kill almost at once: inside the constructor, the manifest, a repair
            delay = rng.uniform(0, 0.002) if rng.random() < 0.15 else rng.uniform(0, MAX_DELAY_S)
            got = zygote.run_and_kill(d, start, delay, "chunked" if n_dir % 2 else "plain")
            committed |= set(got)
            total_committed += len(got)
            allowed.add(in_flight(got[-1] if got else None, start))
            try:
                run = read_recording(d)
            except InputError as e:
                # only acceptable when killed before the first manifest was ever written
                why = str(e)
                assert not committed, e
                assert any(w in why for w in ("manifest", "empty", "no such file")), e
                continue
            torn_warnings += sum("ignored" in w for w in run.warnings)
            present = present_records(run, data)
            assert committed <= present, (
                f"lost committed records: {sorted(committed - present)[:5]}"
            )
            extra = present - committed
            assert extra <= allowed, f"records that were never written: {sorted(extra - allowed)}"
            assert seen <= present, "a record vanished after it had been read"
            seen = present
            start = 1 + max((s for _, s in present), default=-1)
    assert total_committed > 100, "the writers were killed before writing anything"
    print(f"{KILLS} kills, {total_committed} committed records, {torn_warnings} torn tails read")

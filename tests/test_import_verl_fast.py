"""The veRL console importer's fast path reads every line as its general path does.

A step line whose keys, as printed, are those of a line read the general way is split in C and
its row batched (``verl_console._split_fields``, ``_numbers``, ``_Batch``). These tests read
the same logs with the fast path on and off (``_split_fields`` patched to decline every line)
and ask for the same ``Run`` or the same error: random mixtures of the line kinds a real log
holds, and the lines built to fool the split (a missing colon, a key with a colon, ``" - "``
inside a field, padded values).
"""

from __future__ import annotations

import random
import re
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.errors import InputError
from rlvitals.importers import _console_lines, verl_console
from rlvitals.importers._console_lines import ANSI, scan_file, strip_ansi
from rlvitals.recording.run import RunBuilder

RAY = "\x1b[36m(TaskRunner pid=678203)\x1b[0m "
LAYOUTS = [
    ["actor/entropy", "actor/pg_loss", "critic/score/mean", "perf/throughput"],
    ["val-core/openai/gsm8k/reward/mean@1"],
    ["actor/entropy", "val-core/x/reward/mean@1", "timing_s/step"],
    ["training_step", "real_batch_size_ratio", "val/stop_rate"],  # open-instruct's dialect
    ["entropy", "actor/entropy"],  # two raw keys, one series
    [" padded ", "k\u00e9y", "a:b"],  # stripped keys, a key holding a colon
]
VALUES = ["0.302", "-0.000", "nan", "inf", "-inf", "5", "1e-06", "1_000", "\u0661\u0662"]
ODD_VALUES = ["np.float64(0.3)", "True", " 1.5", "\x1c1", "abc", "", "0x10", "9" * 400, "1:2"]
NOISE = [
    "Training Progress:   2%|\u258f         | 2/105 [01:10<59:01, 34.40s/it]",
    "(WorkerDict pid=2101) kwargs: {'n': 1, 'logprobs': 0}",
    "++ python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=5 \\",
    "  algorithm.adv_estimator=grpo",
    "(TaskRunner pid=1) {'actor_rollout_ref': {'rollout': {'n': 4}},",
    "(TaskRunner pid=1)  'algorithm': {'adv_estimator': 'grpo'}}",
    "Warning at step:5 - something odd happened",
    "",
]
FAST = settings(
    max_examples=150,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def outcome(path: Path) -> tuple:
    """Everything a read gives: the series bit for bit, names, warnings, manifest; or the error."""
    try:
        run = verl_console.load_verl_console(path)
    except InputError as e:
        return ("error", str(e))
    tables = [(k, v.tobytes()) for d in (run.series, run.eval_series) for k, v in sorted(d.items())]
    return (
        run.steps.tobytes(),
        run.eval_steps.tobytes(),
        list(run.series),
        list(run.eval_series),
        tables,
        run.unknown_keys,
        run.warnings,
        repr(run.manifest),
    )


def both_ways(path: Path) -> tuple[tuple, tuple]:
    fast = outcome(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verl_console, "_split_fields", lambda seg: None)
        general = outcome(path)
    return fast, general


def pick(draw, odd: float, usual: list[str], unusual: list[str]) -> str:
    """One of ``usual``, or with probability ``odd`` one of ``unusual``."""
    return draw(st.sampled_from(unusual if draw(st.floats(0, 1)) < odd else usual))


@st.composite
def step_line(draw, keys: list[str], odd: float) -> str:
    number = f"{draw(st.floats(-1e3, 1e3)):.3f}"
    vals = [pick(draw, odd, [*VALUES, number, number], ODD_VALUES) for _ in keys]
    step = pick(draw, odd, [str(draw(st.integers(0, 40)))], ["007", "9" * 19, "1x", ""])
    seps = [pick(draw, odd, [" - "], ["  - ", " -  ", " -", "-"]) for _ in keys]
    body = f"step:{step}" + "".join(f"{s}{k}:{v}" for s, k, v in zip(seps, keys, vals))
    tail = pick(draw, odd, [""], [" - ", " - nokey", " [repeated 2x across cluster]"])
    pre = pick(draw, odd, ["", RAY], ["(x) ", " ", "\x1b[32m", "bar 50%\r", "\x1b[36"])
    post = pick(draw, odd, ["", "\x1b[0m"], ["\rTraining 3/5", " ", "\r"])
    return pre + body + tail + post


@st.composite
def console_logs(draw) -> bytes:
    """Runs of step lines of one layout (veRL prints the same keys each step), noise between."""
    odd = draw(st.sampled_from([0.0, 0.01, 0.05, 0.3]))
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 3)) == 0:
            lines.append(draw(st.sampled_from(NOISE)))
            continue
        keys = draw(st.sampled_from(LAYOUTS))
        if draw(st.integers(0, 9)) == 0:  # now and then a layout of its own
            keys = draw(st.lists(st.sampled_from([k for lay in LAYOUTS for k in lay]), max_size=4))
        lines += [draw(step_line(keys, odd)) for _ in range(draw(st.integers(1, 12)))]
    ends = [draw(st.sampled_from(["\n"] * 6 + ["\r\n"])) for _ in lines]
    text = "".join(line + end for line, end in zip(lines, ends))
    if draw(st.booleans()):
        text = text.rstrip("\n")  # a torn last line
    return text.encode("utf-8", "surrogatepass")


@FAST
@given(
    data=console_logs(), batch=st.sampled_from([1, 7, 64, 1 << 16]), rows=st.sampled_from([1, 8])
)
def test_fast_and_general_paths_agree(tmp_path_factory, data, batch, rows):
    p = tmp_path_factory.mktemp("fast") / "console.log"
    p.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(verl_console, "BATCH_VALUES", batch)  # flushes inside a layout's run ...
        mp.setattr(verl_console, "MIN_BATCH_ROWS", rows)  # ... by columns or by rows
        fast, general = both_ways(p)
    assert fast == general


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("step:2 - a - 1 - b:2", "'a' is not key:value"),  # as many colons as fields
        ("step:2 - a:1 - b", "'b' is not key:value"),
        ("step:2 - a:1 - b:2 - ", "not a number: '2 -'"),
        ("step:2 - a:1 - b:np.float64(", "not a number: 'np.float64('"),
    ],
)
def test_lines_built_to_fool_the_split_fail_as_before(tmp_path, line, problem):
    p = tmp_path / "x.log"
    p.write_text(f"step:1 - a:1 - b:2\n{line}\nstep:3 - a:1 - b:2\n")
    fast, general = both_ways(p)
    assert fast == general
    assert fast[0] == "error" and problem in fast[1] and ":line 2: " in fast[1]


def test_lines_like_a_known_layout_read_as_before(tmp_path):
    lines = [
        "step:1 - a:1 - b:2",
        "step:2 - a:1:5 - b:2",  # the key is 'a:1'
        "step:3 - a :7 - b:\x1c8",  # padded key, a value padded with a control character
        "step:4 - a:1 - a:3",  # a repeated key: the later value
        "step:5 - a:1.5 - b:np.float64(2.5)",
        "step:6 - a:6 - b:True",
        "step:0007 - a:7 - b:7",
        "step:8 - a:8 - b:8 [repeated 2x across cluster]",
    ]
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\nstep:9 - a:9 - b")  # torn: a warning
    fast, general = both_ways(p)
    assert fast == general
    run = verl_console.load_verl_console(p)
    assert run.steps.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]
    np.testing.assert_array_equal(run.series["a"], [1, np.nan, 7, 3, 1.5, 6, 7, 8])
    np.testing.assert_array_equal(run.series["b"], [2, 2, 8, np.nan, 2.5, 1, 7, 8])
    assert run.series["a:1"].tolist()[1] == 5
    assert any("torn last line" in w for w in run.warnings)


def test_layouts_taking_turns_and_long_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(verl_console, "BATCH_VALUES", 30)  # several flushes in each run
    rng = random.Random(0)
    lines = []
    for s in range(400):
        n = 5 if s < 200 else 3
        lines.append(
            RAY + " - ".join([f"step:{s % 150}"] + [f"k{j}:{rng.random():.3f}" for j in range(n)])
        )
        if s % 3 == 0:
            lines.append(f"step:{s} - val-core/a/reward/mean@1:{rng.random():.3f} - k1:{s}")
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    fast, general = both_ways(p)
    assert fast == general
    assert "repeat an earlier step" in fast[6][0]


def test_add_columns_counts_values_as_add_row_does():
    rows = [(s, {"a": s * 0.5, "b": 1.0, "eval/c": 2.0}) for s in range(10)]
    by_row, by_col = RunBuilder(), RunBuilder()
    for s, v in rows:
        by_row.add_row(s, v)
    by_col.add_row(*rows[0])
    at = np.arange(9)
    by_col.add_columns(
        np.arange(1, 10),
        {k: (at, np.array([v[k] for _, v in rows[1:]])) for k in rows[0][1]},
        count=True,
    )
    assert by_col.held_bytes() == by_row.held_bytes()
    a, b = by_row.build(), by_col.build()
    assert a.steps.tolist() == b.steps.tolist() and a.eval_steps.tolist() == b.eval_steps.tolist()
    for k in a.series:
        np.testing.assert_array_equal(a.series[k], b.series[k])


CSI = ["\x1b", "[", "0", "9", ";", "?", " ", "/", "-", "@", "~", "m", "x", "\x1b[36m", "\x1b[0m"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(CSI), max_size=16).map("".join))
def test_strip_ansi_is_the_regex_substitution(text):
    assert strip_ansi(text) == ANSI.sub("", text)


def test_messages_of_a_line_with_and_without_carriage_returns():
    assert list(_console_lines.messages(RAY + "step:1 - a:1", "step:")) == ["step:1 - a:1"]
    got = list(_console_lines.messages("x\rstep:1 - a:1 \r (p) step:2\rstep\rstep:3", "step:"))
    assert got == ["step:1 - a:1", "step:2", "step:3"]


def test_scan_file_with_a_needle_finds_what_the_pattern_finds(tmp_path):
    pattern = re.compile(rb"(?:^|[\r\n])\{'loss': ")
    p = tmp_path / "x.log"
    p.write_bytes(b"x" * 100 + b"\n" + b"it/s] " * 400_000 + b"\n{'loss': 1}\n")
    head = p.read_bytes()[:65536]
    assert scan_file(p, head, pattern) and scan_file(p, head, pattern, needle=b"{'")
    p.write_bytes(b"x" * 100 + b"\n" + b"it/s] " * 400_000 + b"\n{'los': 1}\n")
    assert not scan_file(p, head, pattern) and not scan_file(p, head, pattern, needle=b"{'")

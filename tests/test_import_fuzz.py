"""Fuzzing the TRL, generic JSONL/CSV and per-group JSONL importers (hypothesis).

Every input — random bytes, valid files cut at random offsets or with bytes overwritten, and
hand-made adversarial shapes (deep nesting, huge numbers, wrong types, BOMs, CRLF, non-UTF-8) —
must give a ``Run`` or an ``InputError`` whose single-line message names the file. Any other
exception fails the test; so does an input that takes longer than :data:`HANG_S` seconds
(sizes are bounded, so nothing legitimate comes close).

Seed files come from the real producers: the TRL run of tests/_trl_producer.py (its
``trainer_state.json`` and completions parquet) and pandas for CSV.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import tempfile
from pathlib import Path

import pandas as pd
import pytest
import rlvitals_tests_trl_producer as P  # loaded by conftest.py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals import InputError, Run
from rlvitals.cli import main
from rlvitals.importers import load

HANG_S = 20
FORMATS = ("trl_state", "trl_completions", "jsonl", "csv", "groups_jsonl")
FUZZ = settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="session")
def seeds() -> dict[str, bytes]:
    run = P.shared_grpo_run()
    table = sorted((run / "completions").glob("completions_*.parquet"))[0]
    rows = [{"step": s, "reward": s / 7, "kl": {"mean": 0.1}, "note": "x"} for s in range(1, 30)]
    df = pd.DataFrame(
        {"step": range(1, 30), "reward": [s / 7 for s in range(1, 30)], "kl": [None] * 29}
    )
    groups = [
        {"step": s, "group": g, "rewards": [0, 1, 1, None], "advantages": [0, 1, 1, 0]}
        for s in range(1, 6)
        for g in range(3)
    ]
    return {
        "trl_state": (run / "trainer_state.json").read_bytes(),
        "trl_completions": table.read_bytes(),
        "jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(),
        "csv": df.to_csv(index=False).encode(),
        "groups_jsonl": "".join(json.dumps(g) + "\n" for g in groups).encode(),
    }


@pytest.fixture(scope="session")
def workdir():
    with tempfile.TemporaryDirectory(prefix="rlvitals-fuzz-") as d:
        yield Path(d)


@contextlib.contextmanager
def _no_hang():
    def boom(signum, frame):
        raise TimeoutError(f"input took longer than {HANG_S} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def check(path: Path, fmt: str | None) -> Run | None:
    """Load ``path``: a Run, or an InputError naming the file in one line; nothing else."""
    with _no_hang():
        try:
            run = load(path, fmt)
        except InputError as e:
            msg = str(e)
            assert str(path) in msg, msg
            assert "\n" not in msg, msg
            return None
    assert isinstance(run, Run)
    return run


def _write(workdir: Path, fmt: str, data: bytes) -> Path:
    suffix = {
        "trl_state": "trainer_state.json",
        "trl_completions": "completions_00001.parquet",
        "csv": "log.csv",
    }.get(fmt, "log.jsonl")
    d = workdir / fmt
    d.mkdir(exist_ok=True)
    p = d / suffix
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.binary(max_size=4096))
def test_random_bytes(seeds, workdir, fmt, data):
    check(_write(workdir, fmt, data), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(frac=st.floats(0, 1))
def test_truncated_valid_files(seeds, workdir, fmt, frac):
    seed = seeds[fmt]
    check(_write(workdir, fmt, seed[: int(len(seed) * frac)]), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(
    edits=st.lists(
        st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)), min_size=1, max_size=8
    )
)
def test_corrupted_valid_files(seeds, workdir, fmt, edits):
    buf = bytearray(seeds[fmt])
    for where, byte in edits:
        buf[int(where * len(buf))] = byte
    check(_write(workdir, fmt, bytes(buf)), fmt)


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("fmt", ("jsonl", "groups_jsonl", "trl_state"))
@FUZZ
@given(
    rows=st.lists(
        st.dictionaries(
            st.sampled_from(
                [
                    "step",
                    "global_step",
                    "group",
                    "prompt",
                    "rewards",
                    "advantages",
                    "lengths",
                    "reward",
                    "loss",
                    "eval_reward",
                    "log_history",
                    "data",
                    "x",
                ]
            ),
            _VALUES,
            max_size=6,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_wrong_types_in_json(workdir, fmt, rows):
    if fmt == "trl_state":
        text = json.dumps(
            {"global_step": 3, "logging_steps": rows[0].get("loss", 1), "log_history": rows}
        )
    else:
        text = "".join(json.dumps(r) + "\n" for r in rows)
    check(_write(workdir, fmt, text.encode()), fmt)


def _deep(n: int, kind: str) -> str:
    if kind == "list":
        return "[" * n + "]" * n
    return '{"a": ' * n + "1" + "}" * n


@pytest.mark.parametrize("fmt", ("jsonl", "groups_jsonl", "trl_state"))
@pytest.mark.parametrize(
    "text",
    [
        '{"step": 1, "reward": ' + _deep(100_000, "list") + "}\n",
        '{"step": 1, "reward": ' + _deep(5_000, "dict") + "}\n",
        '{"step": 1, "x": ' + _deep(15, "dict") + ', "group": 1, "rewards": [1]}\n',
        '{"step": 1, "group": ' + _deep(900, "list") + ', "rewards": [1]}\n',
        '{"step": ' + "9" * 5000 + ', "reward": 1}\n',
        '{"step": ' + "9" * 4000 + ', "group": 1, "rewards": [1]}\n',
        '{"step": 1, "group": 1, "rewards": [' + "9" * 400 + '], "reward": 1e999}\n',
        '{"step": 1e300, "group": 1, "rewards": [1]}\n',
        '{"log_history": [{"step": ' + "9" * 30 + ', "loss": ' + "9" * 400 + "}]}",
        '{"log_history": [{"step": 1, "loss": -Infinity, "kl": NaN}], "logging_steps": 1e400}',
        "\ufeff" + '{"step": 1, "group": "a", "rewards": [1, 0]}\r\n{"step": 2, "group": "b", '
        '"rewards": [0, 0]}\r\n',
        '{"step": true, "group": 1, "rewards": "abc"}\n',
    ],
)
def test_adversarial_json(workdir, fmt, text):
    check(_write(workdir, fmt, text.encode()), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "data",
    [
        b"\xef\xbb\xbf",
        b"\r\n\r\n",
        "step,reward\n1,caf\xe9\n".encode("latin-1"),
        b"step,reward\r\n1,0.5\r\n2,1e99999\r\n3,-inf\r\n",
        b"step,reward\n" + b"9" * 200_000 + b",1\n",
        b'step,reward\n1,"unterminated\n2,3\n',
        b'\xff\xfe{\x00"\x00s\x00',  # UTF-16
        b"PAR1" + b"\x00" * 64 + b"PAR1",
        b'{"step": 1, "data": {"a": 1}}\n',
    ],
)
def test_adversarial_bytes(workdir, fmt, data):
    check(_write(workdir, fmt, data), fmt)


@FUZZ
@given(data=st.binary(max_size=2048), fmt=st.sampled_from(FORMATS))
def test_cli_inspect_bad_files(seeds, workdir, data, fmt):
    """The CLI path: exit 0 with a report, or exit 2 with one plain line on stderr."""
    path = _write(workdir, fmt, seeds[fmt][: len(seeds[fmt]) // 2] + data)
    out, err = io.StringIO(), io.StringIO()
    with _no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["inspect", str(path)])
    if code == 2:
        assert out.getvalue() == ""
        assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("rlvitals: error:")
        assert "Traceback" not in err.getvalue()
    else:
        assert code == 0 and out.getvalue().startswith("source ")

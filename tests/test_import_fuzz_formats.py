"""Fuzzing the issue-9 importers: a ``Run`` or a one-line ``InputError`` naming the file.

Seeds come from the byte-faithful writers of ``tests/_format_producers.py`` (and the real
``trackio`` package for its database, pandas for the W&B history export); inputs are random
bytes, seeds cut at random places, seeds with bytes overwritten, and all of them gzip-compressed.
Any other exception, or a hang, fails the test; so does the CLI printing a traceback.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import signal
import tempfile
from pathlib import Path

import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals import InputError, Run
from rlvitals.cli import main
from rlvitals.importers import load

HANG_S = 20
FUZZ = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FORMATS = (
    "trl_console",
    "trl_log_history",
    "ms_swift",
    "ms_swift_completions",
    "nemo_rl",
    "prime_rl",
    "prime_rl_traces",
    "skyrl_console",
    "slime_console",
    "wandb_chart",
    "wandb_history",
)


@pytest.fixture(scope="session")
def seeds() -> dict[str, bytes]:
    run = F.simulate(12)
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        F.write_ms_swift(d / "swift", run)
        F.history_frame(run).to_csv(d / "h.csv")
        return {
            "trl_console": F.write_trl_console(d / "t.log", run).read_bytes(),
            "trl_log_history": F.write_log_history(
                d / "h.json", [run[:5], run], indent=1
            ).read_bytes(),
            "ms_swift": (d / "swift" / "logging.jsonl").read_bytes(),
            "ms_swift_completions": (d / "swift" / "completions.jsonl").read_bytes(),
            "nemo_rl": (F.write_nemo_rl(d / "e", run[:2]) / "train_data_step1.jsonl").read_bytes(),
            "prime_rl": F.write_prime_rl(d / "m.jsonl", run).read_bytes(),
            "prime_rl_traces": (
                F.write_prime_rl_traces(d / "pt", run[:3]) / "traces/step_1/train/traces.jsonl"
            ).read_bytes(),
            "skyrl_console": F.write_skyrl(d / "s.log", run, ansi=True).read_bytes(),
            "slime_console": F.write_slime(d / "sl.log", run).read_bytes(),
            "wandb_chart": F.write_wandb_chart(d / "c.csv", run, runs=("a", "b")).read_bytes(),
            "wandb_history": (d / "h.csv").read_bytes(),
        }


@pytest.fixture(scope="session")
def workdir():
    with tempfile.TemporaryDirectory(prefix="rlvitals-fuzz9-") as d:
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
    with _no_hang():
        try:
            run = load(path, fmt)
        except InputError as e:
            msg = str(e)
            assert str(path) in msg and "\n" not in msg, msg
            return None
    assert isinstance(run, Run)
    return run


def _write(workdir: Path, fmt: str, data: bytes, gz: bool = False) -> Path:
    d = workdir / fmt
    d.mkdir(exist_ok=True)
    p = d / ("log.gz" if gz else "log")
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


def test_seeds_are_read(seeds, workdir):
    for fmt, data in seeds.items():
        run = check(_write(workdir, fmt, data), None)
        assert run is not None and run.manifest.format == fmt, fmt


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(data=st.binary(max_size=4096), gz=st.booleans())
def test_random_bytes(workdir, fmt, data, gz):
    check(_write(workdir, fmt, data, gz), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(frac=st.floats(0, 1), gz=st.booleans())
def test_truncated(seeds, workdir, fmt, frac, gz):
    seed = seeds[fmt]
    check(_write(workdir, fmt, seed[: int(len(seed) * frac)], gz), fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@FUZZ
@given(
    edits=st.lists(
        st.tuples(
            st.floats(0, 1, exclude_max=True), st.sampled_from(b"\x00\xff{}[]'\":,0129-\n\r\x1b")
        ),
        min_size=1,
        max_size=8,
    )
)
def test_corrupted(seeds, workdir, fmt, edits):
    buf = bytearray(seeds[fmt])
    for where, byte in edits:
        buf[int(where * len(buf))] = byte
    check(_write(workdir, fmt, bytes(buf)), fmt)
    check(_write(workdir, fmt, bytes(buf)), None)


@pytest.mark.parametrize(
    "text",
    [
        "{'loss': '²', 'reward': '1e999'}\n",
        "{'loss': " + "[" * 5000 + "}\n",
        "Step 1: \n{'a': '0.5',\n" + " 'b': 1,\n" * 50 + "\n",
        '{"step": 1, "time": 1.0, "solve_all/all": "x"}\n',
        '{"step": ["²"], "prompt": ["p"], "R": [1]}\n',
        '{"loss": 1, "global_step/max_steps": "9999999999999999999999/1"}\n',
        "perf 99999999999999999999: {'rollout/x': 1}\n",
        '"Step","a - x","a - x__MIN","a - x__MAX"\n"²","1","1","1"\n',
        '[{"step": 1e400, "loss": 1}]',
    ],
)
def test_adversarial(workdir, text):
    for fmt in (None, *FORMATS):
        check(_write(workdir, fmt or "sniffed", text.encode()), fmt)


@FUZZ
@given(data=st.binary(max_size=2048), fmt=st.sampled_from(FORMATS))
def test_cli_exit_2_never_a_traceback(seeds, workdir, data, fmt):
    path = _write(workdir, fmt, seeds[fmt][: len(seeds[fmt]) // 2] + data)
    out, err = io.StringIO(), io.StringIO()
    with _no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["inspect", str(path)])
    if code == 2:
        assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("rlvitals: error:")
    else:
        assert code == 0 and out.getvalue().startswith("source ")

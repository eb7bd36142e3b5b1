"""Mutation fuzzer of every importer through the CLI, and value fuzzer of vitals → detectors →
every renderer (issue 11).

Run: ``python benchmarks/fuzz.py --minutes N [--seed S] [--seeds fast|all] [--keep DIR]``

**Seeds** are written by the real writers of every format the importers read: the real
``mlflow``, ``wandb`` and ``tensorboardX`` libraries (``tests/_binary_producers.py``, each in a
subprocess with HOME in a temporary directory), a real TRL GRPO run (``tests/_trl_producer.py``:
``trainer_state.json`` and the completions parquet), real ``trackio``, pandas (CSV, parquet),
rlvitals' own :class:`~rlvitals.recording.Recorder`, and the byte-faithful console and JSONL
writers of ``tests/_format_producers.py`` (veRL, OpenRLHF, TRL console, ms-swift, NeMo-RL,
prime-rl, SkyRL, slime, W&B exports). ``--seeds fast`` (the CI profile) skips the slow ones
(the TRL run, wandb, mlflow, trackio).

**File cases**: a seed (a file, or one file inside a copy of a seed directory) with one to three
mutations — truncations, bit flips, overwritten bytes, token swaps and duplicated or deleted
lines, numbers replaced by huge / NaN / inf / ``²`` / out-of-range ones, invalid UTF-8,
terminal escapes, CRC-valid garbage frames (recording, W&B and TFRecord framing, and a crafted
run of overlapping frame headers), deep nesting, long and dense lines — then ``rlvitals
doctor`` (text, JSON, Markdown or HTML), ``inspect`` or ``acr``, sometimes with the format forced
or ``--lenient``.

**Attack cases** (issue 21; ``--attack-share`` of the file cases): inputs no byte mutation
makes — a log, or an SQLite store's ``-journal`` / ``-wal`` / ``-shm``, that is a link to
``/dev/zero``, ``/dev/urandom`` or ``/dev/null``; CSV exports that are gzip bombs of newlines,
digits, commas or NUL bytes; a scan cache whose rows are damaged, foreign, nested 100,000 deep,
or whose file is a link planted to a victim file; folders 70 to 1,200 levels deep (scan, doctor,
inspect); a WAL-mode trackio store a writer process commits to while it is read (any exit 2 is
a failure there: a live store must read).

**Value cases**: a ``Run`` built from extreme series (NaN, ±inf, 1e308, subnormals, constants,
one-ulp differences at large magnitudes, empty and one-step runs, huge step numbers, odd manifests
and group tables) through ``diagnose`` and every renderer.

Each case runs in a forked copy of this process (the CLI in-process, nothing re-imported)
under a wall-clock limit (:data:`CASE_TIMEOUT_S`) and an address-space limit
(:data:`CASE_MEMORY`); a case that times out is re-run once in a fresh subprocess (``python -m
rlvitals``) to tell a hang from a slow start. It counts:

- **tracebacks**: an exception out of ``main`` (or out of diagnose/render);
- **hangs**: killed at the time limit, twice;
- **wrong exits**: an exit status the command does not document (doctor 0/1/2, inspect and acr
  0/2), or exit 2 without exactly one ``rlvitals: error:`` line naming the input;
- **inputs modified**: any byte, size or mtime of the input changed, or a file appeared next to
  it;
- **peak memory per MB of input**: the case's peak RSS above its start, for inputs of 1 MiB and
  more (smaller ones only show the constant).

Failing inputs are kept under ``--keep`` (default: a temporary directory, printed). Exit status
1 when any count above is not zero. One file, over 500 lines: the seeds, the mutators and the
runner only make sense together.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASE_TIMEOUT_S = 30.0
"""A case still running after this long is killed (and re-run once in a subprocess)."""
CASE_MEMORY = 6 << 30
"""Address space a case may add (beyond the fuzzer's own) before allocations fail."""
BIG_INPUT = 1 << 20
"""Inputs at least this large count in the memory-per-MB figures."""
EXITS = {"doctor": {0, 1, 2}, "inspect": {0, 2}, "acr": {0, 2}}
TRACEBACK_RC = 99


# --- seeds -----------------------------------------------------------------------------------
@dataclass
class Seed:
    name: str
    fmt: str
    path: Path  # the file, or the directory, a case copies
    target: str = ""  # for a directory: the file inside it to mutate
    kind: str = "text"  # text, binary, recording, wandb, tfrecord, sqlite, parquet


def _helpers() -> dict[str, Any]:
    """tests/ helper modules, loaded like tests/conftest.py does (standard library at import)."""
    sys.path.insert(0, str(ROOT / "dev"))
    mods = {}
    for name, filename in (
        ("rlvitals_tests_trl_harness", "trl_ddp_script.py"),
        ("rlvitals_tests_trl_producer", "_trl_producer.py"),
        ("rlvitals_tests_binary_producers", "_binary_producers.py"),
        ("rlvitals_tests_format_producers", "_format_producers.py"),
    ):
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / filename)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        mods[name] = sys.modules[name]
    return mods


_TRACKIO = """
import trackio
trackio.init(project="proj", name="trl-run", config={"num_generations": 4, "beta": 0.0})
for s in range(1, 41):
    trackio.log({"train/reward": s / 40, "train/frac_reward_zero_std": 0.25,
                 "train/global_step": 2 * s})
trackio.finish()
"""


def make_seeds(root: Path, which: str) -> list[Seed]:
    """Write every seed under ``root``; ``which``: ``fast`` or ``all``."""
    h = _helpers()
    F = h["rlvitals_tests_format_producers"]
    run = F.simulate(steps=60, groups=6, g=4)
    seeds: list[Seed] = []

    def file(name: str, fmt: str, writer, kind: str = "text") -> None:
        p = root / name
        writer(p)
        seeds.append(Seed(name, fmt, p, kind=kind))

    file("trl_console.log", "trl_console", lambda p: F.write_trl_console(p, run))
    file("log_history.json", "trl_log_history", lambda p: F.write_log_history(p, [run], indent=2))
    file("trainer_state.json", "trl_state", lambda p: F.write_trl_state(p, run))
    file("prime.jsonl", "prime_rl", lambda p: F.write_prime_rl(p, run))
    file("skyrl.log", "skyrl_console", lambda p: F.write_skyrl(p, run, ansi=True))
    file("slime.log", "slime_console", lambda p: F.write_slime(p, run))
    file("verl.log", "verl_console", lambda p: F.write_verl_console(p, run))
    file("verl_file.jsonl", "verl_file", lambda p: F.write_verl_file(p, run))
    file("openrlhf.log", "openrlhf_console", lambda p: F.write_openrlhf(p, run))
    file("groups.jsonl", "groups_jsonl", lambda p: F.write_groups_jsonl(p, run))
    file("generic.jsonl", "jsonl", lambda p: F.write_generic(p, run))
    file("generic.csv", "csv", lambda p: F.write_generic(p, run, csv=True))
    file("chart.csv", "wandb_chart", lambda p: F.write_wandb_chart(p, run))
    file("verl_rollout.jsonl", "verl_rollouts", lambda p: F.write_verl_rollouts(p, run[3]))
    file("generic.jsonl.gz", "jsonl", lambda p: F.gzip_copy(root / "generic.jsonl", p), "binary")
    frame = F.history_frame(run)
    file("history.csv", "wandb_history", lambda p: frame.to_csv(p, index=False))
    file("history.parquet", "wandb_history", lambda p: frame.to_parquet(p), "parquet")
    for name, fmt, writer, target in (
        ("ms_swift", "ms_swift", F.write_ms_swift, "logging.jsonl"),
        ("nemo_rl", "nemo_rl", F.write_nemo_rl, "train_data_step3.jsonl"),
    ):
        d = root / name
        writer(d, run)
        seeds.append(Seed(name, fmt, d, target))
    F.write_prime_rl_traces(root / "prime_rl_out", run[:8])
    seeds.append(
        Seed(
            "prime_rl_out",
            "prime_rl_traces",
            root / "prime_rl_out",
            "traces/step_2/train/traces.jsonl",
        )
    )
    seeds.append(_recording_seed(root / "recording"))
    seeds.append(_tensorboardx_seed(root / "tbx"))
    if which == "all":
        B = h["rlvitals_tests_binary_producers"]
        for kind in ("tensorboard", "wandb", "mlflow"):
            B.produced(kind, "tensorboard", "wandb", "mlflow")
        tb = B.produced("tensorboard")
        for f in sorted(tb.rglob("*tfevents*"))[:2]:
            seeds.append(Seed(f"tb-{f.parent.name}", "tensorboard", f, kind="tfrecord"))
        wb = B.produced("wandb")
        for f in sorted(wb.rglob("*.wandb"))[-1:]:
            seeds.append(Seed("wandb-run", "wandb", f, kind="wandb"))
        ml = B.produced("mlflow")
        seeds.append(Seed("mlflow.db", "mlflow", ml / "mlflow.db", kind="sqlite"))
        exp = next(p for p in (ml / "mlruns").iterdir() if (p / "meta.yaml").is_file())
        run_dir = next(p for p in exp.iterdir() if (p / "meta.yaml").is_file())
        metric = next((run_dir / "metrics").rglob("*"))
        while metric.is_dir():
            metric = next(metric.rglob("*"))
        seeds.append(
            Seed("mlruns", "mlflow", ml / "mlruns", str(metric.relative_to(ml / "mlruns")))
        )
        trl = _trl_seed(root / "trl" / "grpo-out")
        seeds.append(Seed("trl-run", "trl_state", trl, "trainer_state.json"))
        table = sorted((trl / "completions").glob("*.parquet"))[0]
        seeds.append(
            Seed("trl-completions", "trl_state", trl, str(table.relative_to(trl)), "parquet")
        )
        seeds.append(_trackio_seed(root / "trackio"))
    return seeds


def _recording_seed(d: Path) -> Seed:
    import numpy as np

    from rlvitals.recording import Manifest, Recorder

    rng = np.random.default_rng(0)
    with Recorder(d, Manifest(trainer="fuzz", group_size=4, reward_min=0, reward_max=1)) as rec:
        for step in range(40):
            r = (rng.random(24) < min(0.95, 0.2 + step / 40)).astype(float)
            rec.log_groups(step, r, np.repeat(np.arange(6), 4), prompts=list(range(6)))
            rec.log_scalars(step, {"loss": 0.1, "reward": float(r.mean()), "kl": 0.01})
        rec.log_event(20, "alert", "a note", acr=0.5)
    return Seed("recording", "recording", d, "groups.rank0.bin", "recording")


def _tensorboardx_seed(d: Path) -> Seed:
    from tensorboardX import SummaryWriter

    w = SummaryWriter(str(d))
    for step in range(40):
        w.add_scalar("train/reward", step / 40, step)
        w.add_scalar("train/frac_reward_zero_std", (step % 4) / 4, step)
        w.add_scalar("train/loss", 0.1, step)
    w.close()
    f = next(d.glob("*tfevents*"))
    return Seed("tensorboardx", "tensorboard", d, f.name, "tfrecord")


_TRL_RUN = """
import importlib.util, sys
from pathlib import Path
sys.path.insert(0, sys.argv[2] + "/dev")
for name, filename in (("rlvitals_tests_trl_harness", "trl_ddp_script.py"),
                       ("rlvitals_tests_trl_producer", "_trl_producer.py")):
    spec = importlib.util.spec_from_file_location(name, sys.argv[2] + "/tests/" + filename)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
mod.real_grpo_run(Path(sys.argv[1]))
"""


def _trl_seed(out: Path) -> Path:
    """A real TRL GRPO run (tests/_trl_producer.py), in a subprocess: torch stays out of the
    fuzzer, whose every case is a fork of it."""
    out.parent.mkdir(parents=True)
    subprocess.run(
        [sys.executable, "-c", _TRL_RUN, str(out), str(ROOT)],
        check=True,
        timeout=900,
        capture_output=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HOME": str(out.parent)},
    )
    return out


def _trackio_seed(d: Path) -> Seed:
    home = d / "home"
    home.mkdir(parents=True)
    env = {**os.environ, "HOME": str(home), "TRACKIO_DIR": str(d / "tk"), "HF_HUB_OFFLINE": "1"}
    subprocess.run(
        [sys.executable, "-c", _TRACKIO], env=env, check=True, timeout=300, capture_output=True
    )
    return Seed("trackio", "trackio", d / "tk" / "proj.db", kind="sqlite")


# --- mutators --------------------------------------------------------------------------------
NUMBERS = [
    b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity", b"nan", b"inf", b"-inf",
    "²".encode(), "٣".encode(), b"9" * 400, b"1e-400", b"-0", b"0", b"5e-324", b"1.7976931348623157e308",
    b"9223372036854775808", b"-9223372036854775809", b"4503599627370497.5", b"0x10", b"1_000",
    b"null", b"true", b"\"1\"", b"[]", b"{}",
]  # fmt: skip
BAD_UTF8 = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf0\x28\x8c\xbc", b"\xc0\xaf", b"\x80"]
ESCAPES = [b"\x1b]0;pwned\x07", b"\x1b[2J\x1b[H", "\x9b31m".encode(), b"\r\x1b[K",
           "\u202e".encode(), b"\x00", b"\x07"]  # fmt: skip
_NUM_RE = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_TOKEN_RE = re.compile(rb"[\w./-]+|[^\w\s]")


def _frame(payload: bytes) -> bytes:
    from rlvitals.recording import layout as _format

    return _format.encode_frame(payload)


def _bogus_headers(rng: random.Random, n: int) -> bytes:
    """Overlapping valid-looking frame headers with wrong payload CRCs (the resync attack)."""
    out = bytearray()
    for i in range(n // 16):
        head = b"RLVg" + struct.pack("<II", max(0, n - (i + 1) * 16 - 1), rng.getrandbits(32))
        out += head + struct.pack("<I", zlib.crc32(head))
    return bytes(out)


def _wandb_record(payload: bytes, rtype: int = 1) -> bytes:
    return struct.pack("<IHB", zlib.crc32(bytes([rtype]) + payload), len(payload), rtype) + payload


def _tfrecord(payload: bytes) -> bytes:
    from rlvitals.importers._crc32c import crc32c, mask

    head = struct.pack("<Q", len(payload))
    return (
        head
        + struct.pack("<I", mask(crc32c(head)))
        + payload
        + struct.pack("<I", mask(crc32c(payload)))
    )


def _protobuf_noise(rng: random.Random) -> bytes:
    """Protobuf-shaped bytes: nested length-delimited fields, varints, empty messages."""
    parts = []
    for _ in range(rng.randint(1, 40)):
        tag = rng.choice([0x0A, 0x12, 0x2A, 0x10, 0x08, 0x11, 0x15, 0x82, 0x1A])
        body = rng.choice([b"", b"\x0a\x00" * rng.randint(1, 50), os.urandom(rng.randint(0, 12))])
        parts.append(bytes([tag, len(body) & 0x7F]) + body)
    return b"".join(parts)


def mutate(rng: random.Random, data: bytes, seed: Seed, pool: list[bytes]) -> tuple[bytes, str]:
    """One mutation of ``data``; returns (new bytes, its name)."""
    n = len(data)
    choice = rng.choices(
        [
            "truncate", "flip", "overwrite", "swap_tokens", "dup_line", "drop_line", "number",
            "bad_utf8", "escape", "frame", "nesting", "long_line", "dense_line", "splice", "zero",
        ],
        weights=[10, 10, 6, 6, 5, 5, 12, 5, 4, 8, 3, 3, 3, 3, 2],
    )[0]  # fmt: skip
    at = rng.randrange(n + 1) if n else 0
    if choice == "truncate":
        return data[: rng.randrange(n + 1)] if n else data, choice
    if choice == "flip":
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b), choice
    if choice == "overwrite":
        k = rng.randint(1, 64)
        return data[:at] + os.urandom(k) + data[at + k :], choice
    if choice == "swap_tokens":
        toks = list(_TOKEN_RE.finditer(data))
        if len(toks) < 2:
            return data, choice
        a, b = sorted(rng.sample(toks, 2), key=lambda m: m.start())
        return (
            data[: a.start()] + b.group() + data[a.end() : b.start()] + a.group() + data[b.end() :]
        ), choice
    if choice in ("dup_line", "drop_line"):
        lines = data.split(b"\n")
        if len(lines) < 2:
            return data, choice
        i = rng.randrange(len(lines))
        if choice == "dup_line":
            lines.insert(i, lines[i] * rng.choice([1, 1, 2]))
        else:
            del lines[i]
        return b"\n".join(lines), choice
    if choice == "number":
        nums = list(_NUM_RE.finditer(data))
        if not nums:
            return data + rng.choice(NUMBERS), choice
        out = bytearray(data)
        for m in sorted(
            rng.sample(nums, min(len(nums), rng.randint(1, 6))), key=lambda m: -m.start()
        ):
            out[m.start() : m.end()] = rng.choice(NUMBERS)
        return bytes(out), choice
    if choice == "bad_utf8":
        return data[:at] + rng.choice(BAD_UTF8) + data[at:], choice
    if choice == "escape":
        return data[:at] + rng.choice(ESCAPES) + data[at:], choice
    if choice == "frame":
        kind = seed.kind
        if kind == "recording":
            junk = rng.choice(
                [_frame(os.urandom(rng.randint(0, 64))), _frame(b""), _bogus_headers(rng, 1 << 16)]
            )
            at = rng.choice([at, n, 0])
        elif kind == "wandb":
            junk = _wandb_record(_protobuf_noise(rng), rng.choice([1, 2, 3, 4]))
            at = max(7, at)
        elif kind == "tfrecord":
            junk = _tfrecord(_protobuf_noise(rng))
            at = rng.choice([0, n])
        else:
            junk = _frame(os.urandom(16))
        return data[:at] + junk + data[at:], choice
    if choice == "nesting":
        depth = rng.choice([100, 1000, 100_000])
        junk = rng.choice([b"[" * depth, b'{"a":' * depth, b"[" * depth + b"]" * depth])
        return data[:at] + junk + data[at:], choice
    if choice == "long_line":
        size = rng.choice([70_000, 1 << 20, 5 << 20, 20 << 20])
        junk = rng.choice([b"x", b"step:1 - ", b'"k": 1, ', b"\x1b[0m"]) * (size // 8 + 1)
        return data[:at] + junk[:size] + rng.choice([b"", b"\n"]) + data[at:], choice
    if choice == "dense_line":
        size = rng.choice([1 << 20, 4 << 20, 16 << 20])
        junk = rng.choice(
            [
                b'{"step": 7, "x": [' + b"{}," * (size // 3) + b"{}]}\n",
                b'{"step": 7, '
                + b"".join(b'"k%d": 0, ' % i for i in range(size // 10))
                + b'"z": 1}\n',
                b"step:7 - " + b" - ".join(b"k%d:0" % i for i in range(size // 8)) + b"\n",
            ]
        )
        return data[:at] + junk + data[at:], choice
    if choice == "splice":
        other = rng.choice(pool)
        s = rng.randrange(len(other) + 1)
        return data[:at] + other[s : s + rng.randint(1, 4096)] + data[at:], choice
    k = rng.randint(1, 4096)
    return data[:at] + b"\x00" * k + data[at + k :], choice


# --- the forked runner -----------------------------------------------------------------------
@dataclass
class Outcome:
    rc: int
    stdout: str
    stderr: str
    wall: float
    peak_growth: int  # bytes of RSS above the case's start
    timed_out: bool = False


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _vm() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_forked(body, timeout: float = CASE_TIMEOUT_S) -> Outcome:
    """Run ``body() -> int`` in a forked child with stdout/stderr captured, a wall-clock limit
    and an address-space limit; its exit status, output, wall time and peak RSS growth."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()  # noqa: SIM115 - closed below
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = TRACEBACK_RC
        try:
            os.close(rfd)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            os.write(wfd, struct.pack("<q", _rss()))
            os.close(wfd)
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(
                    resource.RLIMIT_AS, (_vm() + CASE_MEMORY, resource.RLIM_INFINITY)
                )
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            try:
                rc = int(body())
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 2
            except BaseException:
                traceback.print_exc()
                rc = TRACEBACK_RC
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(rc)
    os.close(wfd)
    base = struct.unpack("<q", os.read(rfd, 8) or b"\0" * 8)[0]
    os.close(rfd)
    timed_out = False
    delay = 0.0005
    while True:
        wpid, status, usage = os.wait4(pid, os.WNOHANG)
        if wpid:
            break
        if time.monotonic() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            wpid, status, usage = os.wait4(pid, 0)
            timed_out = True
            break
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    texts = []
    for f in (out, err):
        f.seek(0)
        texts.append(f.read(1 << 20).decode("utf-8", "replace"))
        f.close()
    return Outcome(rc, texts[0], texts[1], wall, max(0, usage.ru_maxrss * 1024 - base), timed_out)


def _cli_body(argv: list[str]):
    def body() -> int:
        from rlvitals.cli import main

        return main(argv)

    return body


# --- file cases ------------------------------------------------------------------------------
def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for p in sorted(root.rglob("*")) if root.is_dir() else [root]:
        st = os.lstat(p)
        digest = (
            hashlib.sha1(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
        )
        out[str(p.relative_to(root.parent))] = (st.st_size, st.st_mtime_ns, digest)
    return out


@dataclass
class Stats:
    runs: Counter = field(default_factory=Counter)
    tracebacks: Counter = field(default_factory=Counter)
    hangs: list[str] = field(default_factory=list)
    wrong_exits: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    mutations: Counter = field(default_factory=Counter)
    exits: Counter = field(default_factory=Counter)
    per_mb: list[float] = field(default_factory=list)  # peak growth / input size, big inputs
    max_growth: int = 0
    over_10x: int = 0  # the constant C of "peak growth <= 10 x input + C" over big inputs
    worst: list[tuple[float, int, int, str]] = field(default_factory=list)
    max_input: int = 0
    slowest: float = 0.0
    examples: dict[str, str] = field(default_factory=dict)
    attack_peak: dict[str, int] = field(default_factory=dict)  # kind -> max peak RSS growth


def _where(tb: str) -> str:
    """The innermost rlvitals frame of a traceback and the exception line: the dedup key."""
    frames = re.findall(r'File "([^"]*rlvitals[^"]*)", line (\d+), in (\S+)', tb)
    last = tb.strip().splitlines()[-1] if tb.strip() else "?"
    if frames:
        f, line, fn = frames[-1]
        return f"{f.split('src/')[-1]}:{line} in {fn}: {last[:120]}"
    return last[:160]


def file_case(rng: random.Random, i: int, seeds: list[Seed], pool: list[bytes], work: Path,
              keep: Path, stats: Stats) -> None:  # fmt: skip
    seed = rng.choice(seeds)
    case = work / f"case-{i:06d}"
    case.mkdir()
    if seed.path.is_dir():
        inp = case / seed.path.name
        shutil.copytree(seed.path, inp, symlinks=True)
        target = inp / seed.target
    else:
        inp = target = case / seed.path.name
        shutil.copyfile(seed.path, inp)
    data = target.read_bytes()
    names = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        data, name = mutate(rng, data, seed, pool)
        names.append(name)
    target.write_bytes(data)
    command = rng.choices(["doctor", "inspect", "acr"], weights=[5, 3, 2])[0]
    argv = [command, str(inp)]
    if command == "doctor":
        argv += ["--format", rng.choice(["text", "text", "json", "md", "html"])]
    if rng.random() < 0.25:
        argv += ["--input-format" if command == "doctor" else "--format", seed.fmt]
    if rng.random() < 0.15:
        argv.append("--lenient")
    size = (
        sum(p.stat().st_size for p in inp.rglob("*") if p.is_file()) if inp.is_dir() else len(data)
    )
    before = _snapshot(inp)
    listing = sorted(os.listdir(case))
    res = run_forked(_cli_body(argv))
    if res.timed_out:  # a hang, or a slow first import? a fresh process decides
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "rlvitals", *argv], capture_output=True, text=True,
                timeout=2 * CASE_TIMEOUT_S, cwd=work,
            )  # fmt: skip
            res = Outcome(proc.returncode, proc.stdout, proc.stderr, res.wall, res.peak_growth)
        except subprocess.TimeoutExpired:
            pass
    key = f"{seed.name} {command}"
    stats.runs[command] += 1
    stats.mutations.update(names)
    stats.exits[res.rc] += 1
    stats.slowest = max(stats.slowest, res.wall)
    stats.max_input = max(stats.max_input, size)
    if size >= BIG_INPUT:
        stats.per_mb.append(res.peak_growth / size)
        stats.max_growth = max(stats.max_growth, res.peak_growth)
        stats.worst.append((res.peak_growth / size, size, res.peak_growth, f"{key} {names}"))
        stats.worst = sorted(stats.worst, reverse=True)[:5]
        stats.over_10x = max(stats.over_10x, res.peak_growth - 10 * size)
    failed = None
    if res.timed_out:
        stats.hangs.append(key)
        failed = "hang"
    elif res.rc == TRACEBACK_RC or "Traceback (most recent call last)" in res.stderr:
        where = _where(res.stderr)
        stats.tracebacks[where] += 1
        stats.examples.setdefault(where, f"{' '.join(names)} | rlvitals {' '.join(argv)}")
        failed = "traceback"
    elif res.rc not in EXITS[command] or (res.rc == 2 and not _good_error(res.stderr, case)):
        stats.wrong_exits.append(f"{key}: rc {res.rc}: {res.stderr.strip()[-200:]!r}")
        failed = "wrong-exit"
    after = _snapshot(inp)
    if after != before or sorted(os.listdir(case)) != listing:
        stats.modified.append(key)
        failed = failed or "modified"
    if failed:
        dest = keep / f"{failed}-{i:06d}"
        shutil.copytree(case, dest, symlinks=True, dirs_exist_ok=True)
        (dest / "README.txt").write_text(
            f"rlvitals {' '.join(argv)}\nseed {seed.name}, mutations {names}\nrc {res.rc}\n"
            f"--- stderr\n{res.stderr[-20000:]}\n"
        )
    shutil.rmtree(case, ignore_errors=True)


def _good_error(stderr: str, case: Path) -> bool:
    """Exit 2 must say why in one line naming the input: ``rlvitals: error: PATH...``, or the
    doctor's ``rlvitals: PATH: not judged: ...`` (a documented exit 2)."""
    lines = stderr.strip().splitlines()
    return (
        len(lines) == 1
        and lines[0].startswith("rlvitals: ")
        and case.name in lines[0]
        and "\x1b" not in lines[0]
    )


# --- attack cases (issue 21) ------------------------------------------------------------------
ATTACKS = ("device_symlink", "csv_bomb", "damaged_cache", "deep_folder", "live_wal")
"""Hostile inputs no byte mutation makes: a log or an SQLite side file that is a link to a
device, decompression and newline bombs in CSV exports, a scan cache with damaged, foreign or
linked rows, folders hundreds of levels deep, a WAL-mode store being written while it is read."""
_TRACKIO_TABLE = (
    "CREATE TABLE metrics (id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp TEXT, run_id TEXT, "
    "run_name TEXT, step INTEGER, metrics TEXT)"
)
_WAL_WRITER = r"""
import json, sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], timeout=10)
con.execute("PRAGMA journal_mode=WAL")
print("ready", flush=True)
step, end = 1000, time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    con.executemany(
        "INSERT INTO metrics (timestamp, run_id, run_name, step, metrics) VALUES (?, ?, ?, ?, ?)",
        [("t", "r1", "run", step, json.dumps({"train/reward": 0.5, "train/k%d" % j: 1.0}))
         for j in range(20)],
    )
    con.commit()
    step += 1
"""


def _trackio_db(path: Path, steps: int = 60) -> Path:
    import sqlite3

    con = sqlite3.connect(path)
    con.execute(_TRACKIO_TABLE)
    con.executemany(
        "INSERT INTO metrics (timestamp, run_id, run_name, step, metrics) VALUES (?, ?, ?, ?, ?)",
        [("t", "r1", "run", s, json.dumps({"train/reward": (s % 7) / 7, "train/loss": 0.1}))
         for s in range(steps)],
    )  # fmt: skip
    con.commit()
    con.close()
    return path


def _deep_tree(root: Path, levels: int, run: bytes) -> None:
    """``root/d/d/.../d/train.jsonl`` built relative to descriptors (never a long path)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        wfd = os.open("train.jsonl", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(wfd, run)
        os.close(wfd)
    finally:
        os.close(fd)


def _remove_tree(root: Path) -> None:
    """shutil.rmtree recurses (a RecursionError at 1,000 levels): unchain the ``d`` folders."""
    cur, i = root, 0
    while os.path.isdir(cur / "d") and not os.path.islink(cur / "d"):
        nxt = root.parent / f"{root.name}-unchained-{i}"
        os.rename(cur / "d", nxt)
        shutil.rmtree(cur, ignore_errors=True)
        cur, i = nxt, i + 1
    shutil.rmtree(cur, ignore_errors=True)


def _shallow_snapshot(root: Path) -> dict[str, tuple[int, str]]:
    """Size and digest of every regular file within 8 levels of ``root`` (iterative)."""
    out: dict[str, tuple[int, str]] = {}
    stack = [(root, 0)]
    while stack:
        d, depth = stack.pop()
        for e in sorted(os.scandir(d), key=lambda e: e.name):
            if e.is_symlink():
                out[e.path] = (-1, os.readlink(e.path))
            elif e.is_dir() and depth < 8:
                stack.append((Path(e.path), depth + 1))
            elif e.is_file():
                out[e.path] = (
                    e.stat().st_size,
                    hashlib.sha1(Path(e.path).read_bytes()).hexdigest(),
                )
    return out


def _jsonl_run(rng: random.Random, steps: int = 40) -> bytes:
    return b"".join(
        json.dumps({"step": s, "reward": rng.random(), "loss": 0.1, "kl": 0.01}).encode() + b"\n"
        for s in range(steps)
    )


def _attack(rng: random.Random, kind: str, case: Path) -> tuple[list[str], Path, list[Path]]:
    """Build one attack under ``case``: the argv, the input (whose bytes must not change) and
    the other paths that must not change (a victim a planted link points at)."""
    victims: list[Path] = []
    if kind == "device_symlink":
        dev = rng.choice(["/dev/zero", "/dev/urandom", "/dev/null"])
        if rng.random() < 0.5:  # a log that is a device
            inp = case / rng.choice(["train.jsonl", "history.csv", "export.csv", "run.log"])
            os.symlink(dev, inp)
            fmt = rng.choice([None, "jsonl", "csv", "wandb_history", "wandb_chart", "verl_console"])
            argv = [rng.choice(["doctor", "inspect"]), str(inp)]
            if fmt:
                argv += ["--input-format" if argv[0] == "doctor" else "--format", fmt]
            return argv, case, victims
        inp = _trackio_db(case / "proj.db")  # an SQLite store whose side file is a device
        os.symlink(dev, case / f"proj.db{rng.choice(['-journal', '-wal', '-shm'])}")
        return [rng.choice(["doctor", "inspect"]), str(inp)], case, victims
    if kind == "csv_bomb":
        header = rng.choice(
            [b"_step,_runtime,train/reward\n0,1,0.5\n", b"Step,run - train/reward\n1,0.5\n"]
        )
        fmt = "wandb_history" if header.startswith(b"_step") else "wandb_chart"
        inp = case / f"{fmt}.csv.gz"
        import gzip

        with gzip.open(inp, "wb", compresslevel=6) as f:
            f.write(header)
            chunk = rng.choice([b"\n", b"\r\n", b"9", b",", b"\0"]) * (1 << 20)
            for _ in range(rng.choice([4, 32, 160])):
                f.write(chunk)
            if rng.random() < 0.5:
                f.write(b"\n" + header.split(b"\n")[1] + b"\n")
        argv = ["doctor", str(inp)] + (["--input-format", fmt] if rng.random() < 0.7 else [])
        return argv, case, victims
    if kind == "deep_folder":
        levels = rng.choice([70, 300, 800, 1000, 1200])
        root = case / "runs"
        _deep_tree(root, levels, _jsonl_run(rng))
        if rng.random() < 0.5:
            (root / "shallow").mkdir()
            (root / "shallow" / "train.jsonl").write_bytes(_jsonl_run(rng))
        cmd = rng.choice(["scan", "scan", "doctor", "inspect"])
        argv = [cmd, str(root)] + (["--no-cache", "-j", "1"] if cmd == "scan" else [])
        return argv, root, victims
    if kind == "damaged_cache":
        root = case / "runs"
        root.mkdir()
        for i in range(rng.choice([1, 3])):
            (root / f"r{i}.jsonl").write_bytes(_jsonl_run(rng))
        cache = case / "cache"
        warm = run_forked(_cli_body(["scan", str(root), "--cache-dir", str(cache), "-j", "1"]))
        if warm.rc not in (0, 1, 2) or not (cache / "scan.sqlite3").exists():
            return ["scan", str(root), "--cache-dir", str(cache), "-j", "1"], root, victims
        how = rng.choice(["garbage", "types", "nested", "link", "foreign"])
        db = cache / "scan.sqlite3"
        if how == "link":
            victim = case / "victim.txt"
            victim.write_bytes(b"precious\n")
            victims.append(victim)
            target = cache / f"scan.sqlite3{rng.choice(['', '-wal', '-shm', '-journal'])}"
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
            os.symlink(victim, target)
        else:
            import sqlite3

            con = sqlite3.connect(db)
            keys = [k for (k,) in con.execute("SELECT key FROM entries")]
            values = {
                "garbage": lambda: rng.choice(["not json", "{", "", "\x00\x01", "[1,2"]),
                "types": lambda: json.dumps(rng.choice([3, [], {"path": 3}, {"severities": "x"}])),
                "nested": lambda: "[" * 100_000 + "]" * 100_000,
                "foreign": lambda: json.dumps({"path": "/etc/passwd", "error": None, "x": 1}),
            }[how]
            for k in keys:
                if rng.random() < 0.7:
                    con.execute("UPDATE entries SET value = ? WHERE key = ?", (values(), k))
            con.commit()
            con.close()
        return ["scan", str(root), "--cache-dir", str(cache), "-j", "1"], root, victims
    assert kind == "live_wal"
    inp = _trackio_db(case / "proj.db")
    return [rng.choice(["doctor", "inspect"]), str(inp)], case, victims


def attack_case(rng: random.Random, i: int, work: Path, keep: Path, stats: Stats) -> None:
    kind = rng.choice(ATTACKS)
    case = work / f"case-{i:06d}"
    case.mkdir()
    writer = None
    try:
        argv, inp, victims = _attack(rng, kind, case)
        before = {} if kind == "live_wal" else _shallow_snapshot(inp)
        watched = {v: v.read_bytes() for v in victims}
        if kind == "live_wal":  # a writer commits and checkpoints all along the read
            writer = subprocess.Popen(
                [sys.executable, "-c", _WAL_WRITER, argv[1], str(CASE_TIMEOUT_S)],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            writer.stdout.readline()
        res = run_forked(_cli_body(argv))
        command = argv[0]
        key = f"attack:{kind} {command}"
        stats.runs[f"attack:{kind}"] += 1
        stats.attack_peak[kind] = max(stats.attack_peak.get(kind, 0), res.peak_growth)
        stats.exits[res.rc] += 1
        stats.slowest = max(stats.slowest, res.wall)
        failed = None
        allowed = {0, 1, 2} if command in ("doctor", "scan") else {0, 2}
        if res.timed_out:
            stats.hangs.append(key)
            failed = "hang"
        elif res.rc == TRACEBACK_RC or "Traceback (most recent call last)" in res.stderr:
            where = _where(res.stderr)
            stats.tracebacks[where] += 1
            stats.examples.setdefault(where, f"{kind} | rlvitals {' '.join(argv)}")
            failed = "traceback"
        elif res.rc not in allowed or (kind == "live_wal" and res.rc == 2):
            stats.wrong_exits.append(f"{key}: rc {res.rc}: {res.stderr.strip()[-200:]!r}")
            failed = "wrong-exit"
        elif command != "scan" and res.rc == 2 and not _good_error(res.stderr, case):
            stats.wrong_exits.append(f"{key}: rc 2: {res.stderr.strip()[-200:]!r}")
            failed = "wrong-exit"
        if (kind != "live_wal" and _shallow_snapshot(inp) != before) or any(
            v.read_bytes() != b for v, b in watched.items()
        ):
            stats.modified.append(key)
            failed = failed or "modified"
        if failed:
            dest = keep / f"{failed}-{i:06d}"
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "README.txt").write_text(
                f"attack {kind}\nrlvitals {' '.join(argv)}\nrc {res.rc}\n"
                f"--- stderr\n{res.stderr[-20000:]}\n"
            )
    finally:
        if writer is not None:
            writer.kill()
            writer.wait()
        for p in list(case.iterdir()):
            if p.is_dir() and not p.is_symlink():
                _remove_tree(p)
        shutil.rmtree(case, ignore_errors=True)


# --- value cases -----------------------------------------------------------------------------
SPECIAL = [
    math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e-300, 1.0, 0.5, 4500.0,
    4500.0000000000009, 1e16, 1e16 + 2, 2**53, -1.0,
]  # fmt: skip


def _value(rng: random.Random, mode: str, i: int, n: int) -> float:
    if mode == "special":
        return rng.choice(SPECIAL)
    if mode == "const":
        return 4500.0 if rng.random() < 0.9 else math.nextafter(4500.0, math.inf)
    if mode == "ulp":
        return math.nextafter(1e6, math.inf) if i % 2 else 1e6
    if mode == "ramp":
        return i / max(n, 1)
    if mode == "huge":
        return rng.choice([1e308, -1e308, 1e300]) * rng.random()
    if mode == "tiny":
        return rng.choice([5e-324, 1e-310, -5e-324])
    if mode == "mixed":
        return rng.choice(SPECIAL) if rng.random() < 0.2 else rng.random()
    return rng.random()


def value_spec(rng: random.Random) -> dict[str, Any]:
    from rlvitals.recording import CANONICAL

    n = rng.choice([0, 1, 2, 3, 5, 30, 60, 120, 300])
    keys = rng.sample(sorted(CANONICAL), rng.randint(1, 12))
    modes = ["special", "const", "ulp", "ramp", "huge", "tiny", "mixed", "random"]
    start = rng.choice([0, 1, -5, 2**40, 2**62])
    stride = rng.choice([1, 1, 2, 7, 2**20])
    steps = [start + stride * k for k in range(n)]
    series = {}
    for key in keys:
        mode = rng.choice(modes)
        col = [_value(rng, mode, j, n) for j in range(n)]
        if rng.random() < 0.3:
            col = [math.nan if rng.random() < 0.5 else v for v in col]
        series[key] = col
    groups = None
    if n and rng.random() < 0.5:
        g = rng.choice([1, 2, 4, 8])
        k = rng.choice([1, 3, 8])
        mode = rng.choice(modes)
        groups = [
            (s, [[_value(rng, mode, j, g) for j in range(g)] for _ in range(k)]) for s in steps
        ]
    manifest = {
        "group_size": rng.choice([None, 0, 1, 2, 4, 8, 10**9]),
        "reward_min": rng.choice([None, 0.0, -1.0, math.nan, 1.0]),
        "reward_max": rng.choice([None, 1.0, 0.0, math.inf, 100.0]),
        "kl_coef": rng.choice([None, 0.0, 0.04, math.nan, math.inf]),
        "estimator": rng.choice([None, "grpo", "dr_grpo", "avspo", "rloo", "weird\x1b[2J"]),
        "scale_rewards": rng.choice([None, "group", "batch", "none"]),
        "trainer": rng.choice([None, "trl", "verl", "x\x1b]0;t\x07"]),
        "filters_zero_var": rng.choice([None, True, False]),
    }
    return {"steps": steps, "series": series, "groups": groups, "manifest": manifest}


def _value_body(spec: dict[str, Any]):
    def body() -> int:
        import numpy as np

        from rlvitals.doctor import diagnose
        from rlvitals.recording import GroupTable, Manifest, RunBuilder
        from rlvitals.report import ReportFormat, render

        b = RunBuilder(Manifest(**spec["manifest"]))
        for j, s in enumerate(spec["steps"]):
            b.add_row(s, {k: v[j] for k, v in spec["series"].items()})
        if spec["groups"]:
            steps = [s for s, grp in spec["groups"] for _ in grp]
            rewards = [r for _, grp in spec["groups"] for r in grp]
            b.groups = GroupTable.from_lists(steps, rewards)
        d = diagnose(b.build())
        for f in ReportFormat:
            text = render(d, f.value)
            assert isinstance(text, str)
        np.seterr(all="ignore")
        return 0

    return body


def value_case(rng: random.Random, i: int, keep: Path, stats: Stats) -> None:
    spec = value_spec(rng)
    res = run_forked(_value_body(spec))
    stats.runs["value"] += 1
    stats.slowest = max(stats.slowest, res.wall)
    failed = None
    if res.timed_out:
        stats.hangs.append(f"value case {i}")
        failed = "hang"
    elif res.rc != 0:
        where = _where(res.stderr)
        stats.tracebacks[where] += 1
        stats.examples.setdefault(where, f"value case {i}")
        failed = "traceback"
    if failed:
        (keep / f"value-{failed}-{i:06d}.json").write_text(
            json.dumps(spec, default=repr) + "\n" + res.stderr[-20000:]
        )


# --- main ------------------------------------------------------------------------------------
def summarise(stats: Stats, elapsed: float) -> dict[str, Any]:
    per = sorted(stats.per_mb)
    return {
        "elapsed_s": round(elapsed),
        "file_cases": sum(v for k, v in stats.runs.items() if k != "value"),
        "attack_cases": {k: v for k, v in sorted(stats.runs.items()) if k.startswith("attack:")},
        "attack_peak_growth_mib": {
            k: round(v / (1 << 20)) for k, v in sorted(stats.attack_peak.items())
        },
        "value_cases": stats.runs["value"],
        "by_command": dict(stats.runs),
        "tracebacks": sum(stats.tracebacks.values()),
        "traceback_sites": dict(stats.tracebacks),
        "traceback_examples": stats.examples,
        "hangs": len(stats.hangs),
        "wrong_exits": len(stats.wrong_exits),
        "wrong_exit_examples": stats.wrong_exits[:10],
        "inputs_modified": len(stats.modified),
        "exit_codes": {str(k): v for k, v in sorted(stats.exits.items())},
        "mutations": dict(stats.mutations.most_common()),
        "big_inputs": len(per),
        "peak_growth_per_input_byte_max": round(per[-1], 2) if per else None,
        "peak_growth_per_input_byte_median": round(per[len(per) // 2], 2) if per else None,
        "peak_growth_max_mib": round(stats.max_growth / (1 << 20)),
        "peak_growth_minus_10x_input_max_mib": round(stats.over_10x / (1 << 20)),
        "worst_growth_per_byte": [
            f"{r:.1f}x: {sz / (1 << 20):.1f} MiB -> {g / (1 << 20):.0f} MiB, {what}"
            for r, sz, g, what in stats.worst
        ],
        "largest_input_mib": round(stats.max_input / (1 << 20), 1),
        "slowest_case_s": round(stats.slowest, 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=1.0, help="fuzzing time (default 1)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", choices=("fast", "all"), default="all")
    ap.add_argument("--value-share", type=float, default=0.25,
                    help="share of the time given to value cases (default 0.25)")  # fmt: skip
    ap.add_argument("--attack-share", type=float, default=0.15,
                    help="share of the file cases that are attack cases (default 0.15)")  # fmt: skip
    ap.add_argument("--files", type=int, default=0, help="stop file cases after this many")
    ap.add_argument("--values", type=int, default=0, help="stop value cases after this many")
    ap.add_argument("--keep", type=Path, help="where failing inputs are kept")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "offline")
    keep = args.keep or Path(tempfile.mkdtemp(prefix="rlvitals-fuzz-failures-"))
    keep.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="rlvitals-fuzz-") as tmp:
        root = Path(tmp)
        (root / "seeds").mkdir()
        work = root / "work"
        work.mkdir()
        t_seed = time.monotonic()
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
            seeds = make_seeds(root / "seeds", args.seeds)  # the TRL run prints its logs
        pool = [s.path.read_bytes() if s.path.is_file() else (s.path / s.target).read_bytes()
                for s in seeds]  # fmt: skip
        print(f"{len(seeds)} seeds in {time.monotonic() - t_seed:.0f} s: "
              + ", ".join(sorted({s.fmt for s in seeds})), flush=True)  # fmt: skip
        # Everything a case may import, once, before forking: each case then runs the same
        # code (a tree edited during a long run does not change it) and imports nothing.
        for name in ("rlvitals.cli", "rlvitals.doctor", "rlvitals.report", "rlvitals.scan"):
            importlib.import_module(name)
        importlib.import_module("rlvitals.importers").formats()
        cli = importlib.import_module("rlvitals.cli")
        for name in cli.COMMANDS:
            importlib.import_module(f"rlvitals.cli.{name}")

        stats = Stats()
        t0 = time.monotonic()
        budget = args.minutes * 60
        i = 0
        last_print = t0
        while True:
            elapsed = time.monotonic() - t0
            files = sum(v for k, v in stats.runs.items() if k != "value")
            values = stats.runs["value"]
            files_done = bool(args.files) and files >= args.files
            values_done = bool(args.values) and values >= args.values
            if elapsed > budget or (files_done and values_done):
                break
            want_value = not values_done and (
                files_done or values < args.value_share * (files + values + 1)
            )
            i += 1
            if want_value:
                value_case(rng, i, keep, stats)
            elif rng.random() < args.attack_share:
                attack_case(rng, i, work, keep, stats)
            else:
                file_case(rng, i, seeds, pool, work, keep, stats)
            if time.monotonic() - last_print > 60:
                last_print = time.monotonic()
                s = summarise(stats, time.monotonic() - t0)
                print(f"  {s['elapsed_s']} s: {s['file_cases']} files, {s['value_cases']} values, "
                      f"{s['tracebacks']} tracebacks, {s['hangs']} hangs, {s['wrong_exits']} "
                      f"wrong exits, {s['inputs_modified']} modified", flush=True)  # fmt: skip
    summary = summarise(stats, time.monotonic() - t0)
    summary["command"] = "python benchmarks/fuzz.py " + " ".join(argv or sys.argv[1:])
    summary["failures_kept_in"] = str(keep)
    text = json.dumps(summary, indent=1)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    bad = summary["tracebacks"] + summary["hangs"] + summary["wrong_exits"]
    return 1 if bad + summary["inputs_modified"] else 0


if __name__ == "__main__":
    sys.exit(main())

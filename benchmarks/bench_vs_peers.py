"""Against the peers: whole ``doctor`` processes of rlvitals, rl-doctor and rlprobe, log by log.

    python benchmarks/bench_vs_peers.py [--sizes 200,2000,20000,200000] [--rounds 5]
        [--big-rounds 3] [--timeout 180] [--mem-limit-gib 8] [--venvs DIR] [--src SRC]

Default run: about 7-9 minutes on the 2-core machine, most of it rl-doctor (one run of over a
minute on 20,000 rows; the timeout on 200,000). ``--src`` times another rlvitals tree (e.g. a
``git worktree`` of an older revision); the default is this checkout's ``src/``.

Target (issue 14): at every size, rlvitals' median wall time <= 0.8x the fastest peer's.
Exit code: 0 = every target met, 1 = one missed, 2 = nothing to compare with (no peer installed).

How it measures:
1. installs each peer in its own ``python -m venv`` with ``pip install`` (this machine's pip
   config resolves the wheels), in a temporary directory deleted at the end; ``--venvs DIR``
   (alias ``--keep DIR``) puts the venvs in ``DIR``, keeps them and reuses them on the next run.
   A peer that does not install is skipped and the output says so;
2. writes one JSONL log per size with the keys TRL's ``GRPOTrainer`` logs (reward, reward_std,
   frac_reward_zero_std, per-function rewards, kl, entropy, clip ratios, completion lengths,
   loss, grad_norm, learning_rate, num_tokens, epoch), the groups collapsing in the last
   quarter; rlprobe reads only its own recordings, so each log is converted once, untimed;
3. runs one untimed warm-up of each tool on a 200-row log (byte-compiles, warms the page
   cache), then times whole processes, wall clock from spawn to reap, the tools alternating
   within each round and their order rotating between rounds (``--big-rounds`` rounds from
   100,000 rows on; a tool that has spent a minute on one log is not repeated there). Peak RSS
   is each process's own ``ru_maxrss`` from ``wait4``, taken in a small timer process so that
   it does not include this benchmark's memory (the floor is the timer's ~15 MiB). A watchdog
   kills a process past ``--timeout`` seconds or over ``--mem-limit-gib`` of resident memory;
   the tool is then reported as timed out / over the guard and not run on larger logs. A peer
   that times out counts as at least that slow; one that fails does not count;
4. checks every run did the work: the exit code, a non-empty JSON report, no detector that
   raised (rl-doctor reports one as a skipped check), and for rlvitals and rl-doctor the number
   of steps the report says it read (rlprobe's report carries no count, so its recording's row
   count is checked once after conversion). The table lists what each tool fired.

How each peer is run (read from its installed sources):
- rl-doctor 0.2.0 (PyPI ``rldoctor``, import ``rl_doctor``): ``rl-doctor diagnose LOG.jsonl -f json
  -o OUT``. ``rl_doctor/cli.py`` (``_cmd_diagnose``) calls ``rl_doctor/ingest/base.py``
  ``load_run``, which reads a ``.jsonl`` line by line (``load_jsonl``) and maps the TRL keys
  through ``rl_doctor/aliases.py``; its JSON report (``rl_doctor/diagnosis.py`` ``to_dict``)
  carries ``run.n_steps`` and ``run.unmapped_keys``. Exit code 0 with ``--fail-on never``
  (its default).
- rlprobe 0.1.0: ``rlprobe doctor RUN_DIR --json`` (``rlprobe/cli/__init__.py``, ``doctor``)
  prints its findings as a JSON list; exit 1 means a critical finding, so 0 and 1 both count.
  ``RUN_DIR`` is a recording (``rlprobe/storage.py``: ``manifest.json`` and ``steps.parquet`` of
  ``StepRecord`` rows, ``rlprobe/schemas/__init__.py``), read back whole by
  ``rlprobe/doctor/runview.py`` ``RunView.load``. The conversion does what rlprobe's TRL
  callback does at each ``on_log`` (``rlprobe/integrations/trl.py``: ``_map_logs`` then
  ``Recorder.log_step``, ``rlprobe/recorder/core.py``), in rlprobe's venv with rlprobe's own
  code; that module imports ``transformers`` only for the callback's base class, so the
  conversion stands in a stub for it rather than installing transformers.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SIZES = (200, 2_000, 20_000, 200_000)
ROUNDS = 5
BIG_ROUNDS = 3
BIG_ROWS = 100_000
"""From this many rows on, ``--big-rounds`` rounds (a slow peer takes minutes per run)."""
TIMEOUT_S = 180.0
"""rl-doctor's trend test builds an n-by-n matrix (``rl_doctor/stats.py`` ``mann_kendall``):
6.4 GiB and 20-70 s on 20,000 rows; on 200,000 it runs into this limit (``--timeout``)."""
MEM_LIMIT_GIB = 8.0
RATIO_TARGET = 0.8
SLOW_BUDGET_S = 60.0
"""A tool whose runs on one log have taken this many seconds in all is not repeated there."""
WARM_ROWS = 200
"""Rows of the log each tool runs once, untimed, before the timed rounds."""
POLL_S = 0.05
"""How often the watchdog reads the child's resident set size."""


@dataclass(frozen=True)
class Peer:
    """A peer tool: its PyPI requirement, import name and console script."""

    name: str
    requirement: str
    module: str
    script: str


PEERS = (
    Peer("rl-doctor", "rldoctor==0.2.0", "rl_doctor", "rl-doctor"),
    Peer("rlprobe", "rlprobe==0.1.0", "rlprobe", "rlprobe"),
)

_TO_RLPROBE = r"""
import json, sys, types
from pathlib import Path
# rlprobe/integrations/trl.py imports transformers for TrainerCallback (its base class) only.
stub = types.ModuleType("transformers"); stub.TrainerCallback = object
sys.modules.setdefault("transformers", stub)
import pyarrow.parquet as pq
from rlprobe import storage
from rlprobe.integrations.trl import _map_logs
from rlprobe.recorder import Recorder
log, run_dir = sys.argv[1], Path(sys.argv[2])
with open(log) as f:
    rows = [json.loads(line) for line in f]
rec = Recorder(run_dir, algorithm="grpo", run_id=run_dir.name, capture_env=False,
               install_handlers=False, queue_size=len(rows) + 16)
for row in rows:
    step = row.pop("step")  # TRL passes state.global_step; the logs dict has no "step"
    rec.log_step(step, **_map_logs(row))
rec.close()
n = pq.ParquetFile(run_dir / storage.STEPS_FILE).metadata.num_rows
print(json.dumps({"steps": n, "dropped": rec.dropped}))
"""


# -- the log -------------------------------------------------------------------------------


def write_log(path: Path, rows: int, seed: int = 0) -> None:
    """Write ``rows`` TRL GRPO log lines (``{"step": s, **logs}``); groups collapse at 3/4.

    Up to the onset a run that learns: accuracy climbing, about a quarter of the groups with
    identical rewards. After it, nearly every group scores identically (all-correct), the
    reward's spread and the gradient vanish, entropy falls and completions shorten.

    >>> import tempfile; p = Path(tempfile.mkdtemp()) / "log.jsonl"; write_log(p, 8)
    >>> rows = [json.loads(line) for line in p.read_text().splitlines()]
    >>> len(rows), rows[0]["step"], "frac_reward_zero_std" in rows[-1]
    (8, 1, True)
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    onset = int(rows * 0.75)
    tokens = 0.0
    with open(path, "w") as f:
        for a in range(1, rows + 1, 50_000):
            s = np.arange(a, min(a + 50_000, rows + 1))
            cols = _columns(s, rows, onset, rng)
            tokens_col = tokens + np.cumsum(cols["completions/mean_length"] * 128 + 9_000)
            cols["num_tokens"] = tokens_col
            tokens = float(tokens_col[-1])
            names = list(cols)
            values = np.column_stack([cols[k] for k in names]).tolist()
            f.write("".join(_line(st, names, row) for st, row in zip(s.tolist(), values)))


def _columns(s, rows: int, onset: int, rng) -> dict:
    """The logged metrics at steps ``s`` ``(k,)``, key -> ``(k,)`` floats."""
    import numpy as np

    k = s.size
    u = lambda lo, hi: rng.uniform(lo, hi, k)  # noqa: E731
    dead = s >= onset
    progress = np.minimum(s / max(onset, 1), 1.0)
    acc = np.where(dead, u(0.97, 1.0), 0.25 + 0.5 * progress + u(-0.05, 0.05))
    fmt = np.where(dead, u(0.99, 1.0), 0.6 + 0.35 * progress + u(-0.03, 0.03))
    length = np.where(dead, u(40, 60), 260 - 80 * progress + u(-20, 20))
    warm = np.minimum(s / max(rows * 0.03, 1), 1.0)
    return {
        "loss": rng.normal(0, 0.02, k) * np.where(dead, 0.05, 1.0),
        "grad_norm": np.where(dead, u(0.001, 0.01), u(0.2, 0.6)),
        "learning_rate": 1e-6 * warm * (1 - s / (rows + 1)),
        "completions/mean_length": length,
        "completions/min_length": np.floor(length * u(0.2, 0.4)),
        "completions/max_length": np.minimum(np.ceil(length * u(1.8, 2.6)), 1024.0),
        "completions/clipped_ratio": np.where(dead, 0.0, u(0.0, 0.03)),
        "completions/mean_terminated_length": length * u(0.95, 1.0),
        "rewards/accuracy_reward/mean": acc,
        "rewards/accuracy_reward/std": np.where(dead, u(0.0, 0.03), u(0.35, 0.5)),
        "rewards/format_reward/mean": fmt,
        "rewards/format_reward/std": np.where(dead, u(0.0, 0.02), u(0.2, 0.4)),
        "reward": acc + fmt,
        "reward_std": np.where(dead, u(0.0, 0.02), u(0.4, 0.6)),
        "frac_reward_zero_std": np.where(dead, u(0.9, 1.0), u(0.15, 0.35)),
        "kl": np.where(dead, u(0.08, 0.12), 0.05 * progress + u(0.0, 0.01)),
        "entropy": np.where(dead, u(0.02, 0.05), 0.9 - 0.4 * progress + u(-0.05, 0.05)),
        "clip_ratio/low_mean": np.where(dead, 0.0, u(0.0, 0.002)),
        "clip_ratio/high_mean": np.where(dead, 0.0, u(0.0, 0.003)),
        "clip_ratio/region_mean": np.where(dead, 0.0, u(0.0, 0.005)),
        "epoch": s / rows * 3,
    }


def _line(step: int, names: list[str], values: list[float]) -> str:
    return json.dumps({"step": step, **dict(zip(names, values))}) + "\n"


# -- the peers -----------------------------------------------------------------------------


def install(peer: Peer, venvs: Path) -> tuple[Path | None, str]:
    """The peer's console script in its venv under ``venvs`` (made if missing), and a note.

    Returns ``(None, why)`` when the peer cannot be installed.
    """
    env_dir = venvs / peer.requirement.split("==")[0]
    script = env_dir / "bin" / peer.script
    py = env_dir / "bin" / "python"
    want = peer.requirement.split("==")[1]
    probe = [str(py), "-c", f"import {peer.module}; print({peer.module}.__version__)"]
    if script.exists() and _out(probe) == want:
        return script, f"reused {env_dir}"
    t = time.perf_counter()
    steps = {
        "python -m venv": [sys.executable, "-m", "venv", "--clear", str(env_dir)],
        f"pip install {peer.requirement}": [str(py), "-m", "pip", "install", "-q",
                                            "--disable-pip-version-check", peer.requirement],
    }  # fmt: skip
    for what, cmd in steps.items():
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            lines = (p.stderr or p.stdout).strip().splitlines()
            tail = [x for x in lines if not x.startswith("WARNING")][-2:]
            return None, f"`{what}` failed (rc {p.returncode}): {' | '.join(tail)}"
    if not script.exists() or _out(probe) != want:
        return None, f"installed, but no {script.name} {want} in {env_dir}"
    return script, f"installed in {time.perf_counter() - t:.0f} s"


def _out(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""


def to_rlprobe(script: Path, log: Path, run_dir: Path, rows: int) -> str | None:
    """Convert ``log`` to an rlprobe recording at ``run_dir``; ``None``, or why it failed."""
    py = script.parent / "python"
    p = subprocess.run(
        [str(py), "-c", _TO_RLPROBE, str(log), str(run_dir)],
        capture_output=True,
        text=True,
        env=_peer_env(),
    )
    if p.returncode != 0:
        return f"conversion failed: {p.stderr.strip().splitlines()[-1:]}"
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if got["steps"] != rows or got["dropped"]:
        return f"conversion kept {got['steps']} of {rows} rows ({got['dropped']} dropped)"
    return None


def _peer_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


# -- one timed process ---------------------------------------------------------------------


@dataclass
class Sample:
    """One process: wall seconds, peak RSS (MiB), exit code, why it was killed (or "")."""

    wall: float
    peak_mib: float
    rc: int
    killed: str = ""


def run_once(
    cmd: list[str],
    env: dict[str, str],
    stdout: Path,
    stderr: Path,
    timeout: float,
    mem_limit_mib: float,
) -> Sample:
    """Time ``cmd`` from a fresh, small timer process (see :func:`_time_child`)."""
    spec = json.dumps(
        {
            "cmd": cmd,
            "env": env,
            "stdout": str(stdout),
            "stderr": str(stderr),
            "timeout": timeout,
            "mem_limit_mib": mem_limit_mib,
        }
    )
    here = str(Path(__file__).resolve().parent)
    code = f"import sys; sys.path.insert(0, {here!r})\nimport bench_vs_peers as b\nb._time_child()"
    p = subprocess.run(
        [sys.executable, "-I", "-c", code],
        input=spec,
        capture_output=True,
        text=True,
        timeout=timeout + 60,
        check=True,
    )
    return Sample(**json.loads(p.stdout))


def _time_child() -> None:
    """Spawn the command in stdin's spec, reap it with ``wait4``; print a :class:`Sample`.

    Runs in its own process because a child's ``ru_maxrss`` keeps the high-water mark of the
    memory it was forked from: forked from this benchmark (numpy, the logs it wrote), every
    tool would report at least the benchmark's peak; this process stays near the bare
    interpreter's. A watchdog thread kills the child past the timeout or the memory guard.
    """
    spec = json.load(sys.stdin)
    with open(spec["stdout"], "wb") as out, open(spec["stderr"], "wb") as err:
        t = time.perf_counter()
        p = subprocess.Popen(
            spec["cmd"], env=spec["env"], stdout=out, stderr=err, stdin=subprocess.DEVNULL
        )
        done, killed = threading.Event(), []
        limits = (spec["timeout"], spec["mem_limit_mib"])
        dog = threading.Thread(target=_watch, args=(p.pid, t, *limits, done, killed))
        dog.start()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        done.set()
        dog.join()
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    s = Sample(wall, usage.ru_maxrss / 1024, p.returncode, killed[0] if killed else "")
    print(json.dumps(s.__dict__))


def _watch(
    pid: int, t0: float, timeout: float, limit_mib: float, done: threading.Event, killed: list[str]
) -> None:
    while not done.wait(POLL_S):
        why = ""
        if time.perf_counter() - t0 > timeout:
            why = f"timed out (> {timeout:.0f} s)"
        elif _rss_mib(pid) > limit_mib:
            why = f"over the memory guard (> {limit_mib / 1024:.1f} GiB RSS)"
        if why and not done.is_set():
            killed.append(why)
            os.kill(pid, signal.SIGKILL)
            return


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# -- the tools -----------------------------------------------------------------------------


@dataclass
class Tool:
    """A command to time on each size and the check that it read the whole log."""

    name: str  # "rlvitals" | "rl-doctor" | "rlprobe"
    exe: list[str]
    env: dict[str, str]
    inputs: dict[int, Path] = field(default_factory=dict)
    stopped: str = ""  # why it is not run on larger logs

    def command(self, rows: int, out: Path) -> list[str]:
        src = str(self.inputs[rows])
        if self.name == "rlvitals":
            return [
                *self.exe,
                "doctor",
                src,
                "--format",
                "json",
                "--fail-on",
                "never",
                "--no-progress",
                "-o",
                str(out),
            ]
        if self.name == "rl-doctor":
            return [*self.exe, "diagnose", src, "-f", "json", "-o", str(out)]
        return [*self.exe, "doctor", src, "--json"]  # the report goes to stdout


def check(tool: Tool, s: Sample, rows: int, out: Path, err: Path) -> tuple[str, str]:
    """``(problem, summary)``: why the run does not count ("" if it does), what it reported."""
    if s.killed:
        return s.killed, ""
    ok_rc = (0, 1) if tool.name == "rlprobe" else (0,)
    tail = " | ".join(err.read_text(errors="replace").strip().splitlines()[-2:])
    if s.rc not in ok_rc or "Traceback" in err.read_text(errors="replace"):
        return f"exit code {s.rc}: {tail}", ""
    try:
        report = json.loads(out.read_text()) if out.stat().st_size else None
    except (OSError, ValueError) as exc:
        return f"no JSON report ({exc})", ""
    if not report:
        return "empty report", ""
    return _summary(tool.name, report, rows)


def _summary(name: str, report, rows: int) -> tuple[str, str]:
    """``(problem, summary)`` of one report: rows read, what fired, detectors that raised."""
    if name == "rlvitals":
        steps, raised = report["run"]["steps"], sorted(report["errors"])
        fired = sorted({f["id"] for f in report["findings"]})
    elif name == "rl-doctor":
        steps = report["run"]["n_steps"]
        fired = sorted(
            f["detector"] for f in report["findings"] if f["severity"] in ("WARNING", "CRITICAL")
        )
        raised = sorted(
            f"{f['detector']} ({f['summary'].split(':')[0].split()[-1]})"
            for f in report["findings"]
            if f["summary"].startswith("detector raised")
        )
    else:
        steps, raised = rows, []  # checked on the recording after conversion
        fired = sorted({f"{f['signature_id']}({f['severity']})" for f in report})
    where = " (recording)" if name == "rlprobe" else ""
    found = f"{steps:,} rows{where}; fired: {', '.join(fired) or 'none'}"
    if steps != rows:
        return f"read {steps:,} of {rows:,} rows", found
    if raised:
        return f"{len(raised)} detector(s) raised: {', '.join(raised)}", found
    return "", found


# -- the run -------------------------------------------------------------------------------


@dataclass
class Result:
    """One tool on one size."""

    samples: list[Sample] = field(default_factory=list)
    problem: str = ""
    summary: str = ""

    @property
    def median(self) -> float:
        return statistics.median(s.wall for s in self.samples)


def time_size(
    tools: list[Tool], rows: int, rounds: int, work: Path, timeout: float, mem_limit_mib: float
) -> dict[str, Result]:
    """``rounds`` alternating rounds of every tool not stopped yet on the ``rows`` log.

    A tool stops repeating on this log after a run that does not count, or once its runs
    here have taken ``SLOW_BUDGET_S`` in all (its median is then over fewer runs).
    """
    live = [t for t in tools if not t.stopped]
    res = {t.name: Result() for t in live}
    for r in range(rounds):
        for tool in live[r % len(live) :] + live[: r % len(live)]:
            got = res[tool.name]
            if got.problem or sum(x.wall for x in got.samples) > SLOW_BUDGET_S:
                continue
            out, err = work / f"{tool.name}.json", work / f"{tool.name}.err"
            out.unlink(missing_ok=True)
            # rlprobe prints its JSON report; the others write it to ``out`` and print a line
            stdout = out if tool.name == "rlprobe" else work / f"{tool.name}.stdout"
            s = run_once(tool.command(rows, out), tool.env, stdout, err, timeout, mem_limit_mib)
            got.problem, got.summary = check(tool, s, rows, out, err)
            got.samples.append(s)
            if s.killed:
                tool.stopped = f"{s.killed} at {rows:,} rows"
    return res


def report_size(rows: int, rounds: int, res: dict[str, Result], tools: list[Tool]) -> bool | None:
    """Print one size's table; whether the target is met (``None``: no peer to compare)."""
    print(f"\n{rows:,} rows ({rounds} rounds)")
    print(f"  {'tool':10s} {'median s':>9s} {'min s':>8s} {'peak RSS':>10s}  runs  what it read")
    for t in tools:
        got = res.get(t.name)
        if got is None:
            print(f"  {t.name:10s} {'-':>9s} {'-':>8s} {'-':>10s}     -  not run: {t.stopped}")
            continue
        peak = max(s.peak_mib for s in got.samples)
        if got.problem:
            last = got.samples[-1]
            what = last.killed or f"FAILED: {got.problem}"
            print(
                f"  {t.name:10s} {'-':>9s} {'-':>8s} {peak:7.0f} MiB  {len(got.samples):4d}  "
                f"{what} (after {last.wall:.1f} s)"
            )
            continue
        mn = min(s.wall for s in got.samples)
        print(
            f"  {t.name:10s} {got.median:9.3f} {mn:8.3f} {peak:7.0f} MiB  "
            f"{len(got.samples):4d}  {got.summary}"
        )
    return _verdict(res, tools)


def _verdict(res: dict[str, Result], tools: list[Tool]) -> bool | None:
    mine = res.get("rlvitals")
    if mine is None or mine.problem:
        print("  target MISSED: rlvitals did not complete")
        return False
    peers = {n: r for n, r in res.items() if n != "rlvitals"}
    bounds = {}  # peer -> (seconds, exact?)
    for name, r in peers.items():
        if not r.problem:
            bounds[name] = (r.median, True)
        elif r.samples and r.samples[-1].killed.startswith("timed out"):
            bounds[name] = (r.samples[-1].wall, False)  # at least this long
    stopped = [t.name for t in tools if t.name not in res and t.stopped.startswith("timed out")]
    if not bounds and not stopped:
        print("  no peer completed: nothing to compare with")
        return None
    if not bounds:
        print(f"  {', '.join(stopped)} timed out on a smaller log: rlvitals is ahead")
        return True
    name, (secs, exact) = min(bounds.items(), key=lambda kv: kv[1][0])
    ratio = mine.median / secs
    ok = ratio <= RATIO_TARGET
    rel = "" if exact else "<= "
    print(
        f"  ratio rlvitals / fastest peer ({name}): {rel}{ratio:.2f}x "
        f"(target <= {RATIO_TARGET}x)  {'met' if ok else 'MISSED'}"
    )
    return ok


def _tools(scripts: dict[str, Path], src: Path) -> list[Tool]:
    env = dict(os.environ, PYTHONPATH=str(src))
    tools = [Tool("rlvitals", [sys.executable, "-m", "rlvitals"], env)]
    for name, script in scripts.items():
        tools.append(Tool(name, [str(script)], _peer_env()))
    return tools


def _prepare(tools: list[Tool], sizes: list[int], work: Path) -> None:
    """Write the logs (and rlprobe's recordings) and warm every tool up once, untimed."""
    for rows in sorted({*sizes, WARM_ROWS}):
        t = time.perf_counter()
        log = work / f"trl_{rows}.jsonl"
        write_log(log, rows)
        for tool in tools:
            tool.inputs[rows] = log
        note = ""
        for tool in (t for t in tools if t.name == "rlprobe" and not t.stopped):
            tool.inputs[rows] = work / f"rlprobe_{rows}"
            why = to_rlprobe(Path(tool.exe[0]), log, tool.inputs[rows], rows)
            if why:
                tool.stopped = f"{why} ({rows:,} rows)"
            note = ", converted to an rlprobe recording"
        mib = log.stat().st_size / 2**20
        print(f"wrote {rows:,}-row log ({mib:.1f} MiB{note}) in {time.perf_counter() - t:.1f} s")
    for tool in tools:
        if not tool.stopped:
            got = time_size([tool], WARM_ROWS, 1, work, TIMEOUT_S, MEM_LIMIT_GIB * 1024)
            if got[tool.name].problem:
                print(f"{tool.name} warm-up on {WARM_ROWS} rows: {got[tool.name].problem}")


def _header(src: Path) -> None:
    rev = _out(["git", "-C", str(src), "rev-parse", "--short", "HEAD"]) or "?"
    dirty = len(_out(["git", "-C", str(src), "status", "--short", "--", "."]).splitlines())
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load "
        f"{os.getloadavg()[0]:.2f}; rlvitals from {src} (git {rev}, "
        f"{dirty} uncommitted file(s) there)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="rows per log, a,b,c")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument(
        "--big-rounds",
        type=int,
        default=BIG_ROUNDS,
        help=f"rounds on logs of {BIG_ROWS:,} rows or more",
    )
    ap.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per process")
    ap.add_argument(
        "--mem-limit-gib",
        type=float,
        default=MEM_LIMIT_GIB,
        help="kill a process whose resident set grows past this",
    )
    ap.add_argument(
        "--venvs",
        "--keep",
        metavar="DIR",
        help="keep the peers' venvs in DIR (reused when already there)",
    )
    ap.add_argument(
        "--src",
        type=Path,
        default=ROOT / "src",
        help="the rlvitals tree to time (default: this checkout's src/)",
    )
    a = ap.parse_args(argv)
    sizes = sorted(int(s.replace("_", "")) for s in a.sizes.split(","))
    _header(a.src.resolve())
    with tempfile.TemporaryDirectory(prefix="bench_vs_peers_") as tmp:
        work = Path(tmp)
        venvs = Path(a.venvs) if a.venvs else work / "venvs"  # deleted with ``work``
        venvs.mkdir(parents=True, exist_ok=True)
        scripts = {}
        for peer in PEERS:
            script, note = install(peer, venvs)
            print(
                f"{peer.name} ({peer.requirement}): {note}"
                if script
                else f"{peer.name} ({peer.requirement}): SKIPPED, cannot install: {note}"
            )
            if script:
                scripts[peer.name] = script
        tools = _tools(scripts, a.src.resolve())
        _prepare(tools, sizes, work)
        verdicts = []
        for rows in sizes:
            rounds = a.big_rounds if rows >= BIG_ROWS else a.rounds
            res = time_size(tools, rows, rounds, work, a.timeout, a.mem_limit_gib * 1024)
            verdicts.append(report_size(rows, rounds, res, tools))
    missing = [p.name for p in PEERS if p.name not in scripts]
    if missing:
        print(f"\nnot compared (did not install): {', '.join(missing)}")
    if any(v is False for v in verdicts):
        print("TARGET MISSED")
        return 1
    if all(v is None for v in verdicts):
        print("NOTHING TO COMPARE WITH")
        return 2
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Start-up: whole ``rlvitals doctor`` processes on a small log, against ``import numpy``.

    python benchmarks/bench_startup.py [--rounds 20] [--tree NAME=SRC ...]

Writes a 200-step JSONL log of TRL keys (deleted at the end), then times, in alternating rounds,
``rlvitals doctor LOG --format json`` and ``python -c "import rlvitals.cli"`` for each tree
(``--tree NAME=SRC`` puts ``SRC`` first on ``PYTHONPATH``; default: this checkout), and
``python -c "import numpy"`` (the floor every numpy program pays). Prints medians and minima of
wall time; the machine's load moves them, the differences between trees less so. Used to
compare a checkout with an older one (``git worktree add /tmp/old REV``;
``--tree old=/tmp/old/src --tree now=src``).

The doctor runs as the installed ``rlvitals`` script does (``from rlvitals.cli import main``),
in the log's temporary folder (no project config file above it), and every tree is byte-compiled
first: an installed package has its ``.pyc`` files, and with ``PYTHONDONTWRITEBYTECODE`` set a
checkout would otherwise recompile every edited module at every start.

``--instructions`` also counts the instructions each process executes under valgrind's
callgrind (when ``valgrind`` is installed): unlike wall time, the count does not move with the
machine's load, so it compares trees on a busy machine.

Target (issue 14): the doctor's median at most the numpy floor + 60 ms, judged on the last
``--tree``. Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_log(path: Path, steps: int = 200) -> None:
    with open(path, "w") as f:
        for s in range(1, steps + 1):
            row = {"step": s, "reward": 0.5 + 0.001 * s, "reward_std": 0.3,
                   "frac_reward_zero_std": 0.1, "kl": 0.01, "loss": 0.01, "grad_norm": 0.3,
                   "entropy": 0.5, "completions/mean_length": 120.0}  # fmt: skip
            f.write(json.dumps(row) + "\n")


TARGET_MS = 60.0
"""The doctor's start-up over ``import numpy``, at most (issue 14)."""
SCRIPT = "import sys; from rlvitals.cli import main; sys.exit(main())"
"""What the installed ``rlvitals`` console script runs."""


def _time(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def _instructions(cmd: list[str], env: dict[str, str], cwd: str) -> int:
    """Instructions ``cmd`` executes (callgrind's "Collected"), one BLAS thread."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd],
        env=dict(env, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(re.search(r"Collected : (\d+)", out.stderr).group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--tree", action="append", default=[], metavar="NAME=SRC")
    ap.add_argument("--instructions", action="store_true", help="also count instructions")
    a = ap.parse_args(argv)
    if a.instructions and shutil.which("valgrind") is None:
        ap.error("--instructions needs valgrind (apt-get install valgrind)")
    trees = dict(t.split("=", 1) for t in a.tree) or {"this checkout": str(ROOT / "src")}
    py = sys.executable
    doctor: dict[str, list[float]] = {k: [] for k in trees}
    cli: dict[str, list[float]] = {k: [] for k in trees}
    numpy: list[float] = []
    for src in trees.values():
        compileall.compile_dir(str(Path(src) / "rlvitals"), quiet=1)
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "small.jsonl"
        write_log(log)
        for _ in range(a.rounds):
            numpy.append(_time([py, "-c", "import numpy"], dict(os.environ), d))
            for name, src in trees.items():
                env = dict(os.environ, PYTHONPATH=f"{src}:{ROOT / 'dev'}")
                cmd = [py, "-c", SCRIPT, "doctor", str(log), "--format", "json",
                       "--fail-on", "never"]  # fmt: skip
                doctor[name].append(_time(cmd, env, d))
                cli[name].append(_time([py, "-c", "import rlvitals.cli"], env, d))
        if a.instructions:
            base = _instructions([py, "-c", "import numpy"], dict(os.environ), d)
            print(f"instructions (callgrind): python -c 'import numpy' {base / 1e6:.0f} M")
            for name, src in trees.items():
                env = dict(os.environ, PYTHONPATH=f"{src}:{ROOT / 'dev'}")
                cmd = [py, "-c", SCRIPT, "doctor", str(log), "--format", "json",
                       "--fail-on", "never"]  # fmt: skip
                n = _instructions(cmd, env, d)
                print(f"{name:20s} doctor {n / 1e6:.0f} M = numpy + {(n - base) / 1e6:.0f} M")
    floor = statistics.median(numpy)
    print(f"{a.rounds} alternating rounds, wall time; python -c 'import numpy': median "
          f"{floor * 1000:.0f} ms")  # fmt: skip
    ok = True
    for name in trees:  # the target is judged on the last tree (``--tree old=... --tree now=...``)
        md = statistics.median(doctor[name])
        over = (md - floor) * 1000
        ok = over <= TARGET_MS
        print(f"{name:20s} doctor process median {md * 1000:.0f} ms (min "
              f"{min(doctor[name]) * 1000:.0f}; numpy floor + {over:.0f} ms, target <= "
              f"+{TARGET_MS:.0f}), 'import rlvitals.cli' median "
              f"{statistics.median(cli[name]) * 1000:.0f} ms")  # fmt: skip
    print("target met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

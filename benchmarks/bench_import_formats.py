"""Import speed and memory of the issue-9 text importers, each against its own baseline.

For every format, one file (or, for NeMo-RL, one folder of per-step dumps) is written with
``--steps`` steps by the byte-faithful writers of ``tests/_format_producers.py``; then, in fresh
subprocesses, alternately (``--repeat`` rounds; medians printed):

- **baseline**: the least any importer must do on that input — split it into records and parse
  each one, keeping nothing: ``json.loads`` per line for JSONL formats (every file of the folder
  for NeMo-RL; every train ``traces.jsonl`` and the ``metrics.jsonl`` for prime-rl rollouts),
  ``ast.literal_eval`` per dict for console formats, ``csv.reader`` plus
  ``float()`` of every non-empty cell for CSV, ``json.load`` of the whole list for
  ``log_history``;
- **import**: ``rlvitals.importers.load`` on the same input, sniffing included. The importer
  modules are imported before the clock starts (library start-up, paid once per process, is not
  per-file work).

Printed per format: the ratio of process CPU times (target <= 3x; the median of the rounds' own
ratios, each round's baseline and import run back to back) and the peak RSS (VmHWM) of each
process in MB. ``--scale K`` also imports a K-times longer input and prints how much the
import's peak grew against the input: a bounded importer's peak follows the series it keeps
(and, for per-sample formats, the groups), not the file.

Run: ``python benchmarks/bench_import_formats.py`` (``--steps N``, ``--formats a,b``,
``--repeat R``, ``--scale K``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 3.0
NEMO_EVERY = 10
"""NeMo-RL dumps are written for one step in this many (each dump holds a whole batch)."""

HWM = r"""
def hwm():
    # peak RSS of this process image (VmHWM resets at exec; ru_maxrss would not)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")
"""

BASELINE = (
    HWM
    + r"""
import ast, csv, json, os, sys, time
kind, path = sys.argv[1], sys.argv[2]
t = time.process_time()
if kind == "jsonl":
    paths = [path]
    if os.path.isdir(path):
        paths = sorted(os.path.join(path, p) for p in os.listdir(path) if p.endswith(".jsonl"))
    for p in paths:
        with open(p, "rb") as f:
            for line in f:
                if line.strip():
                    json.loads(line)
elif kind == "jsonl_tree":  # every JSONL file an importer of a folder reads, at any depth
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(x for x in dirs if x not in ("annotations", "eval"))
        for name in sorted(files):
            if name.endswith(".jsonl"):
                with open(os.path.join(root, name), "rb") as f:
                    for line in f:
                        if line.strip():
                            json.loads(line)
elif kind == "json":
    with open(path, "rb") as f:
        json.load(f)
elif kind == "csv":
    with open(path, newline="") as f:
        rows = csv.reader(f)
        next(rows)
        for row in rows:
            for cell in row:
                if cell:
                    try:
                        float(cell)
                    except ValueError:
                        pass
elif kind == "dict":
    with open(path, encoding="utf-8", errors="replace") as f:
        block = None
        for line in f:
            seg = line.rsplit("\r", 1)[-1]
            if block is not None:
                block.append(seg)
                if seg.rstrip().endswith("}"):
                    ast.literal_eval("".join(block)); block = None
                continue
            i = seg.find("{'")
            if i >= 0:
                text = seg[i:].rstrip()
                if text.endswith("}"):
                    ast.literal_eval(text)
                else:
                    block = [seg[i:]]
t = time.process_time() - t
print(json.dumps({"cpu": t, "rss": hwm()}))
"""
)

IMPORT = (
    HWM
    + r"""
import importlib, json, sys, time
sys.path.insert(0, sys.argv[3])
import numpy  # library start-up is not per-file work
import rlvitals.recording.run
from rlvitals.importers import load
from rlvitals.importers._catalogue import CATALOGUE
for module, _, _ in CATALOGUE.values():
    importlib.import_module("rlvitals.importers." + module)
path = sys.argv[2]
t = time.process_time()
run = load(path)
t = time.process_time() - t
assert run.manifest.format == sys.argv[1], run.manifest.format
print(json.dumps({"cpu": t, "rss": hwm(), "steps": run.n_steps}))
"""
)


def _producers():
    spec = importlib.util.spec_from_file_location("fp", ROOT / "tests" / "_format_producers.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fp"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def write_all(d: Path, steps: int) -> dict[str, tuple[str, Path]]:
    """``{format: (baseline kind, file or folder)}``."""
    F = _producers()
    d.mkdir(parents=True, exist_ok=True)
    run = F.simulate(steps, groups=8, g=4)
    F.write_ms_swift(d / "swift", run)
    (d / "swift" / "args.json").unlink()
    (d / "swift" / "completions.jsonl").rename(d / "completions.jsonl")
    F.history_frame(run).to_csv(d / "hist.csv")
    nemo = F.write_nemo_rl(d / "exp_001", run[::NEMO_EVERY], config=True)
    return {
        "trl_console": ("dict", F.write_trl_console(d / "trl.log", run, logging_steps=1)),
        "trl_log_history": ("json", F.write_log_history(d / "lh.json", [run])),
        "ms_swift": ("jsonl", d / "swift" / "logging.jsonl"),
        "ms_swift_completions": ("jsonl", d / "completions.jsonl"),
        "prime_rl": ("jsonl", F.write_prime_rl(d / "metrics.jsonl", run)),
        "skyrl_console": ("dict", F.write_skyrl(d / "sky.log", run)),
        "slime_console": ("dict", F.write_slime(d / "slime.log", run)),
        "wandb_chart": ("csv", F.write_wandb_chart(d / "chart.csv", run)),
        "wandb_history": ("csv", d / "hist.csv"),
        "nemo_rl": ("jsonl", nemo),
        "prime_rl_traces": ("jsonl_tree", F.write_prime_rl_traces(d / "prime", run[::NEMO_EVERY])),
    }


def _size(path: Path) -> float:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*.jsonl") if p.suffix == ".jsonl") / 2**20
    return os.path.getsize(path) / 2**20


def _run(code: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--formats", default="")
    ap.add_argument("--repeat", type=int, default=3, help="alternating rounds; medians printed")
    ap.add_argument("--scale", type=int, default=0, help="also import a K-times longer input")
    args = ap.parse_args()
    src = str(ROOT / "src")
    med = statistics.median
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench9-") as d:
        files = write_all(Path(d) / "a", args.steps)
        big = write_all(Path(d) / "b", args.steps * args.scale) if args.scale > 1 else {}
        want = [f for f in args.formats.split(",") if f] or list(files)
        head = f"{'format':<22} {'MB':>7} {'base s':>7} {'import s':>8} {'ratio':>6} {'base MB':>8} {'imp MB':>7}"
        if big:
            head += f"  x{args.scale}: {'MB':>7} {'imp MB':>7} {'peak growth':>11}"
        print(f"{args.steps} steps, {args.repeat} alternating rounds, medians")
        print(head)
        worst = 0.0
        for fmt in want:
            kind, path = files[fmt]
            bases, imps = [], []
            for _ in range(args.repeat):
                bases.append(_run(BASELINE, kind, str(path)))
                imps.append(_run(IMPORT, fmt, str(path), src))
            base_cpu = med(b["cpu"] for b in bases)
            imp_cpu = med(i["cpu"] for i in imps)
            # the median of each round's own ratio: a round's two runs share the machine's load
            ratio = med(i["cpu"] / max(b["cpu"], 1e-9) for b, i in zip(bases, imps))
            worst = max(worst, ratio)
            line = (
                f"{fmt:<22} {_size(path):7.1f} {base_cpu:7.2f} {imp_cpu:8.2f} {ratio:6.2f} "
                f"{med(b['rss'] for b in bases):8.0f} {med(i['rss'] for i in imps):7.0f}"
            )
            if big:
                bpath = big[fmt][1]
                bigrun = _run(IMPORT, fmt, str(bpath), src)
                small_rss = med(i["rss"] for i in imps)
                line += (
                    f"      {_size(bpath):7.1f} {bigrun['rss']:7.0f} "
                    f"{bigrun['rss'] / small_rss:6.2f}x ({_size(bpath) / _size(path):.0f}x file)"
                )
            print(line, flush=True)
        print(f"worst ratio {worst:.2f} (target <= {TARGET})")


if __name__ == "__main__":
    main()

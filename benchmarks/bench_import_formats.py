"""Import speed and memory of the issue-9 text importers, each against its own baseline.

For every format, one file is written (``--steps`` rows, from the byte-faithful writers of
``tests/_format_producers.py``), then, in fresh subprocesses:

- **baseline**: the least any importer must do on that file — split it into records and parse
  each one (``json.loads`` per line for JSONL formats, ``ast.literal_eval`` per dict for console
  formats, ``csv.reader`` for CSV, ``json.load`` of the whole list for ``log_history``), keeping
  nothing;
- **import**: ``rlvitals.importers.load`` on the same file (sniffing included).

Printed per format: the ratio of process CPU times (target <= 3x) and the peak RSS of each
process, import vs baseline, in MB. A bounded importer's peak follows the series it keeps, not
the file: ``--steps`` x4 should grow the file x4 and the import's peak far less.

Run: ``python benchmarks/bench_import_formats.py`` (``--steps N``, ``--formats a,b``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 3.0

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
import ast, csv, json, sys, time
kind, path = sys.argv[1], sys.argv[2]
t = time.process_time()
if kind == "jsonl":
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                json.loads(line)
elif kind == "json":
    with open(path, "rb") as f:
        json.load(f)
elif kind == "csv":
    with open(path, newline="") as f:
        for row in csv.reader(f):
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
import json, sys, time
sys.path.insert(0, sys.argv[3])
import numpy  # library start-up is not per-file work
import rlvitals.recording.run
from rlvitals.importers import load
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
    """``{format: (baseline kind, file)}``."""
    F = _producers()
    run = F.simulate(steps, groups=8, g=4)
    F.write_ms_swift(d / "swift", run)
    (d / "swift" / "args.json").unlink()
    (d / "swift" / "completions.jsonl").rename(d / "completions.jsonl")
    F.history_frame(run).to_csv(d / "hist.csv")
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
        "nemo_rl": (
            "jsonl",
            F.write_nemo_rl(d / "exp_001", run[:1], config=True) / "train_data_step1.jsonl",
        ),
    }


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
    args = ap.parse_args()
    src = str(ROOT / "src")
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench9-") as d:
        files = write_all(Path(d), args.steps)
        want = [f for f in args.formats.split(",") if f] or list(files)
        print(
            f"{'format':<22} {'MB':>7} {'base s':>7} {'import s':>8} {'ratio':>6} {'base MB':>8} {'imp MB':>7}"
        )
        worst = 0.0
        for fmt in want:
            kind, path = files[fmt]
            base = _run(BASELINE, kind, str(path))
            imp = _run(IMPORT, fmt, str(path), src)
            ratio = imp["cpu"] / max(base["cpu"], 1e-9)
            worst = max(worst, ratio)
            size = os.path.getsize(path) / 2**20
            print(
                f"{fmt:<22} {size:7.1f} {base['cpu']:7.2f} {imp['cpu']:8.2f} {ratio:6.2f} "
                f"{base['rss']:8.0f} {imp['rss']:7.0f}"
            )
        print(f"worst ratio {worst:.2f} (target <= {TARGET})")


if __name__ == "__main__":
    main()

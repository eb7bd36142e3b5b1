"""Binary importers benchmark: TensorBoard, W&B and MLflow logs of 10,000 steps x 20 keys.

Each log is written by the real library (tensorboardX, wandb offline, mlflow with SQLite), then
read by rlvitals and by a baseline in the same process, and the ratio of their CPU times is
printed with rlvitals' peak Python allocation (tracemalloc):

- TensorBoard: baseline = TensorBoard's own ``EventFileLoader`` (the ``tensorboard`` package
  without TensorFlow: pure-Python CRC, C++ protobuf) iterating every event and reading every
  ``simple_value``. rlvitals verifies both checksums of every record, like it.
- W&B: baseline = the least a reader does with wandb's own generated protobuf classes: LevelDB
  framing with ``zlib.crc32``, ``Record.FromString`` (C++ upb), ``json.loads`` of each history
  value.
- MLflow: baseline = one ``SELECT key, value, step`` of the run's metrics with ``sqlite3``
  (the least any reader does); MLflow's own ``MlflowClient.get_metric_history`` is timed too.

Run: ``python benchmarks/bench_import_binary.py`` (``--steps N``; ``--only tensorboard`` etc.).
Writing the logs takes longer than reading them; it is not timed.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import struct
import sys
import tempfile
import time
import tracemalloc
import zlib
from pathlib import Path

N_KEYS = 20
KEYS = (*(f"train/metric_{i:02d}" for i in range(N_KEYS - 2)), "train/reward", "train/kl")


def _rows(steps: int):
    rng = random.Random(0)
    for step in range(steps):
        yield step, {k: rng.random() for k in KEYS}


def _cpu(fn):
    t0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.process_time() - t0, time.perf_counter() - w0


def _rlvitals(path: Path, fmt: str):
    """Timed without tracemalloc (it slows allocation-heavy code several-fold); then a second,
    untimed read measures the peak Python allocation."""
    from rlvitals.importers import load

    (run, cpu, wall) = _cpu(lambda: load(path, fmt=fmt))
    tracemalloc.start()
    load(path, fmt=fmt)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return run, cpu, wall, peak


def _report(name: str, size: int, base: tuple[str, float, float], ours, extra: str = "") -> None:
    run, cpu, wall, peak = ours
    label, bcpu, bwall = base
    print(f"{name}: {run.n_steps:,} steps x {len(run.series)} series, file {size / 2**20:.1f} MiB")
    print(f"  baseline {label + ':':<44} cpu {bcpu:7.2f} s  wall {bwall:7.2f} s")
    print(
        f"  {'rlvitals load():':<53} cpu {cpu:7.2f} s  wall {wall:7.2f} s  ratio {cpu / bcpu:.2f}x"
    )
    print(f"  rlvitals peak Python allocation: {peak / 2**20:.1f} MiB{extra}")


def bench_tensorboard(tmp: Path, steps: int) -> None:
    from tensorboardX import SummaryWriter

    d = tmp / "tb"
    w = SummaryWriter(str(d), flush_secs=3600, max_queue=100_000)
    for step, row in _rows(steps):
        for k, v in row.items():
            w.add_scalar(k, v, step)
    w.close()
    (path,) = d.glob("events.out.tfevents.*")

    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    def baseline() -> int:
        n = 0
        for ev in EventFileLoader(str(path)).Load():
            for v in ev.summary.value:
                n += v.simple_value == v.simple_value
        return n

    _, bcpu, bwall = _cpu(baseline)
    ours = _rlvitals(path, "tensorboard")
    _report("TensorBoard", path.stat().st_size, ("tensorboard EventFileLoader", bcpu, bwall), ours)


def bench_wandb(tmp: Path, steps: int) -> None:
    os.environ.update(WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(tmp))
    os.environ["HOME"] = str(tmp)
    import json

    import wandb
    from wandb.proto import wandb_internal_pb2

    run = wandb.init(project="bench")
    for step, row in _rows(steps):
        run.log(row, step=step)
    run.finish()
    wandb.teardown()
    (path,) = tmp.glob("wandb/offline-run-*/*.wandb")

    def baseline() -> int:
        data = path.read_bytes()
        pos, block, n, pending = 7, 32768, 0, b""
        while pos + 7 <= len(data):
            if block - pos % block < 7:
                pos += block - pos % block
                continue
            crc, length, rtype = struct.unpack_from("<IHB", data, pos)
            chunk = data[pos + 7 : pos + 7 + length]
            assert zlib.crc32(data[pos + 6 : pos + 7 + length]) == crc
            pos += 7 + length
            pending += chunk
            if rtype in (1, 4):
                rec = wandb_internal_pb2.Record.FromString(pending)
                pending = b""
                if rec.HasField("history"):
                    for item in rec.history.item:
                        json.loads(item.value_json)
                        n += 1
        return n

    _, bcpu, bwall = _cpu(baseline)
    ours = _rlvitals(path, "wandb")
    _report("W&B", path.stat().st_size, ("wandb Record.FromString + json.loads", bcpu, bwall), ours)


def bench_mlflow(tmp: Path, steps: int) -> None:
    os.environ["HOME"] = str(tmp)
    import mlflow
    from mlflow.entities import Metric

    db = tmp / "mlflow.db"
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    client = mlflow.MlflowClient()
    with mlflow.start_run() as active:
        run_id = active.info.run_id
        batch: list[Metric] = []
        for step, row in _rows(steps):
            batch.extend(Metric(k, v, 0, step) for k, v in row.items())
            if len(batch) >= 1000:
                client.log_batch(run_id, metrics=batch)
                batch = []
        if batch:
            client.log_batch(run_id, metrics=batch)

    def baseline() -> int:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows = con.execute(
                "SELECT key, value, step FROM metrics WHERE run_uuid = ?", (run_id,)
            ).fetchall()
        finally:
            con.close()
        return len(rows)

    _, bcpu, bwall = _cpu(baseline)
    _, ccpu, _ = _cpu(lambda: [client.get_metric_history(run_id, k) for k in KEYS])
    ours = _rlvitals(db, "mlflow")
    _report(
        "MLflow (SQLite)",
        db.stat().st_size,
        ("sqlite3 SELECT of the run's metrics", bcpu, bwall),
        ours,
        extra=f"\n  MlflowClient.get_metric_history, every key: cpu {ccpu:.2f} s",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--only", choices=["tensorboard", "wandb", "mlflow"], action="append")
    args = ap.parse_args(argv)
    only = args.only or ["tensorboard", "wandb", "mlflow"]
    print(
        f"{args.steps:,} steps x {N_KEYS} keys; CPU times of this process (python "
        f"{sys.version.split()[0]})"
    )
    with tempfile.TemporaryDirectory(prefix="rlvitals-bench-") as tmp:
        for name in only:
            sub = Path(tmp) / name
            sub.mkdir()
            {"tensorboard": bench_tensorboard, "wandb": bench_wandb, "mlflow": bench_mlflow}[name](
                sub, args.steps
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Real producers of TensorBoard, W&B and MLflow files for the importer tests (not a test module).

Each producer runs the real library (tensorboardX, torch.utils.tensorboard, wandb offline,
mlflow) in a subprocess — so HOME, WANDB_* and MLflow's global tracking URI never leak into the
test process, and wandb's service process ends with it — and writes into a fresh directory.
:func:`produced` runs each producer once per test process and returns that directory.

What is logged is defined here (``STEPS``, :func:`train_row`, ``EVAL``...), so tests compare the
importers' output with these values, never with the importers' own code. Run as a script:
``python tests/_binary_producers.py {tensorboard|wandb|mlflow} OUT_DIR``.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = [
    "EVAL",
    "LONG_STEPS",
    "STEPS",
    "TRAIN_NAMES",
    "TRL_CONFIG",
    "produced",
    "train_row",
]

STEPS = (0, 1, 2, 5, 9, 20, 100)
"""Non-contiguous training steps of the main run."""
EVAL = {2: 0.25 + 1 / 9, 20: 0.5 + 1 / 7}
"""``eval/reward`` logged at these steps."""
LONG_STEPS = range(200, 520)
"""Extra W&B steps, so the ``.wandb`` file spans several 32 KiB blocks."""
TRAIN_NAMES = {
    "train/reward": "reward_mean",
    "train/frac_reward_zero_std": "zero_std_frac",
    "train/kl": "kl",
    "train/policy_loss": "pg_loss",
    "train/grad_norm": "grad_norm",
}
"""Raw tag → the canonical name rlvitals documents for it (recording/metrics.py)."""
TRL_CONFIG = {
    "num_generations": 8,
    "beta": 0.04,
    "scale_rewards": "batch",
    "logging_steps": 1,
    "learning_rate": 1e-6,
    "model": {"hidden_size": 32, "layers": [1, 2]},
}
"""A GRPOConfig-shaped configuration (what TRL's callbacks log)."""
MULTI = {"run_a": range(0, 5), "run_b": range(5, 10)}
"""TensorBoard run sub-directories of one log directory (a resumed run)."""
TC_STEP = 7
"""Step of the hand-built tensor summaries written through torch's real file writer."""
TC_VALUES = {
    "tc/float_content": 0.1,
    "tc/double_content": 1 / 3,
    "tc/int64": -(2**40),
    "tc/int32": 12345,
    "tc/half": 0.333,
    "tc/bfloat16": 1.5,
}
MLFLOW_REPEAT_STEP = 9
"""MLflow: ``train/reward`` is logged twice at this step; the second value must win."""

_SHARED: dict[str, Path] = {}
_TIMEOUT_S = 300
_ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")


def train_row(step: int) -> dict[str, float]:
    """The training scalars logged at ``step`` (NaN and inf included; not float32-exact)."""
    return {
        "train/reward": 0.1 * step + 1 / 3,
        "train/frac_reward_zero_std": (step % 4) / 4,
        "train/kl": math.nan if step == 5 else 0.01 * step,
        "train/policy_loss": -0.5 + step / 7,
        "train/grad_norm": math.inf if step == 9 else 1 + step / 3,
    }


def produced(kind: str, *also: str) -> Path:
    """Run producer ``kind`` once per process; the directory it wrote (do not modify it).

    Producers named in ``also`` that have not run yet are started at the same time (each is a
    separate process, so two CPUs halve the wait); their directories come from later calls.
    """
    todo = [k for k in dict.fromkeys((kind, *also)) if k not in _SHARED]
    started = []
    for k in todo:
        out = Path(tempfile.mkdtemp(prefix=f"rlvitals-{k}-"))
        atexit.register(shutil.rmtree, out, ignore_errors=True)
        home = out / "home"
        home.mkdir()
        env = {name: os.environ[name] for name in _ENV_KEEP if name in os.environ}
        env.update(
            HOME=str(home),
            WANDB_MODE="offline",
            WANDB_SILENT="true",
            WANDB_DIR=str(out),
            WANDB_DISABLE_GIT="true",
            WANDB_DISABLE_CODE="true",
            HF_HUB_OFFLINE="1",
            MLFLOW_ALLOW_FILE_STORE="true",
            PYTHONWARNINGS="ignore",
        )
        proc = subprocess.Popen(
            [sys.executable, __file__, k, str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        started.append((k, out, proc))
    for k, out, proc in started:
        try:
            log, _ = proc.communicate(timeout=_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            log, _ = proc.communicate()
        if proc.returncode != 0:
            tail = log.decode(errors="replace")[-3000:]
            raise RuntimeError(f"producer {k!r} failed ({proc.returncode}):\n{tail}")
        _SHARED[k] = out
    return _SHARED[kind]


# --- producers (run in the subprocess) -------------------------------------------------------
def _tensorboard(out: Path) -> None:
    import numpy as np
    from tensorboard.compat.proto import summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboardX import SummaryWriter as XWriter
    from torch.utils.tensorboard import SummaryWriter as TWriter

    # tensorboardX: simple_value scalars, add_scalars sub-directories
    w = XWriter(str(out / "tbx"))
    for step in STEPS:
        for tag, v in train_row(step).items():
            w.add_scalar(tag, v, step)
        if step in EVAL:
            w.add_scalar("eval/reward", EVAL[step], step)
        w.add_scalars("loss_parts", {"a": step / 3, "b": -step / 3}, step)
    w.close()

    # torch.utils.tensorboard: simple_value, new-style float_val and double_val tensors
    w = TWriter(str(out / "torch"))
    w.add_text("args", json.dumps(TRL_CONFIG))  # what transformers' TensorBoardCallback writes
    for step in STEPS:
        row = train_row(step)
        w.add_scalar("train/reward", row["train/reward"], step)
        w.add_scalar("train/frac_reward_zero_std", row["train/frac_reward_zero_std"], step)
        w.add_scalar("train/kl", row["train/kl"], step, new_style=True)
        w.add_scalar(
            "train/policy_loss",
            row["train/policy_loss"],
            step,
            new_style=True,
            double_precision=True,
        )
        w.add_scalar("train/grad_norm", row["train/grad_norm"], step)
        w.add_histogram("hist/weights", np.arange(10.0) * step, step)
        if step in EVAL:
            w.add_scalar("eval/reward", EVAL[step], step)

    def tensor_summary(tag: str, tensor: tensor_pb2.TensorProto) -> summary_pb2.Summary:
        meta = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
        )
        return summary_pb2.Summary(
            value=[summary_pb2.Summary.Value(tag=tag, tensor=tensor, metadata=meta)]
        )

    scalar_shape = tensor_shape_pb2.TensorShapeProto()
    half_bits = int(np.array([TC_VALUES["tc/half"]], np.float16).view(np.uint16)[0])
    bf16_bits = int(np.array([TC_VALUES["tc/bfloat16"]], np.float32).view(np.uint32)[0]) >> 16
    tensors = {
        # TF2's tf.summary.scalar: a DT_FLOAT scalar in tensor_content
        "tc/float_content": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_FLOAT,
            tensor_shape=scalar_shape,
            tensor_content=np.float32(TC_VALUES["tc/float_content"]).tobytes(),
        ),
        "tc/double_content": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_DOUBLE,
            tensor_shape=scalar_shape,
            tensor_content=np.float64(TC_VALUES["tc/double_content"]).tobytes(),
        ),
        "tc/int64": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_INT64,
            tensor_shape=scalar_shape,
            int64_val=[TC_VALUES["tc/int64"]],
        ),
        "tc/int32": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_INT32, tensor_shape=scalar_shape, int_val=[TC_VALUES["tc/int32"]]
        ),
        "tc/half": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_HALF, tensor_shape=scalar_shape, half_val=[half_bits]
        ),
        "tc/bfloat16": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_BFLOAT16, tensor_shape=scalar_shape, half_val=[bf16_bits]
        ),
        # not a scalar: must be ignored
        "tc/vector": tensor_pb2.TensorProto(
            dtype=types_pb2.DT_FLOAT,
            tensor_shape=tensor_shape_pb2.TensorShapeProto(
                dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=3)]
            ),
            float_val=[1.0, 2.0, 3.0],
        ),
    }
    fw = w._get_file_writer()
    for tag, t in tensors.items():
        fw.add_summary(tensor_summary(tag, t), TC_STEP)
    w.close()

    # one log directory, two runs (a resumed run); one tag only in the second run
    for name, steps in MULTI.items():
        w = XWriter(str(out / "multi" / name))
        for step in steps:
            w.add_scalar("train/reward", step * 0.5, step)
            if name == "run_b":
                w.add_scalar("train/entropy", 2.0 - step / 10, step)
        w.close()

    # Keras layout: the same tag in train/ and validation/
    for name, offset in (("train", 0.0), ("validation", 10.0)):
        w = XWriter(str(out / "keras" / name))
        for step in range(3):
            w.add_scalar("epoch_loss", offset + step, step)
        w.close()

    # two runs logging the same tag over the same steps: ambiguous, warned about
    for name in ("a", "b"):
        w = XWriter(str(out / "overlap" / name))
        for step in range(3):
            w.add_scalar("train/reward", float(step), step)
        w.close()


def _wandb(out: Path) -> None:
    import numpy as np
    import wandb

    old = wandb.init(project="rlvitals-test", config={"lr": 1.0})
    old.log({"train/reward": 99.0}, step=0)
    old.finish()
    time.sleep(1.1)  # run directories are named by the second they start

    run = wandb.init(project="rlvitals-test", config=TRL_CONFIG)
    for step in STEPS:
        row: dict = dict(train_row(step))
        row["nested"] = {"a": step, "b": {"c": step / 2}}
        row["text"] = "not a number"
        row["hist"] = wandb.Histogram(np.arange(5.0) * step)
        if step in EVAL:
            row["eval/reward"] = EVAL[step]
        run.log(row, step=step)
    run.config.update({"big_note": "x" * 100_000})  # one record over three 32 KiB blocks
    for step in LONG_STEPS:
        run.log({"train/reward": step / 1000, "filler": "y" * 200}, step=step)
    run.finish()

    # TRL / transformers' WandbCallback: wandb.log(rows + train/global_step) with no step=
    (out / "trlstyle").mkdir()
    run = wandb.init(project="rlvitals-test", config=TRL_CONFIG, dir=str(out / "trlstyle"))
    for gs in (10, 20, 30):
        run.log({"train/reward": gs / 100, "train/global_step": gs})
    run.finish()
    wandb.teardown()


def _mlflow(out: Path) -> None:
    import mlflow

    def log_main() -> None:
        with mlflow.start_run(run_name="main"):
            mlflow.log_params(TRL_CONFIG)
            for step in STEPS:
                metrics = dict(train_row(step))
                if step in EVAL:
                    metrics["eval/reward"] = EVAL[step]
                mlflow.log_metrics(metrics, step=step)
                if step == MLFLOW_REPEAT_STEP:
                    time.sleep(0.01)
                    mlflow.log_metric("train/reward", -1.0, step=step)

    for uri in (f"sqlite:///{out / 'mlflow.db'}", (out / "mlruns").as_uri()):
        mlflow.set_tracking_uri(uri)
        with mlflow.start_run(run_name="warmup"):
            mlflow.log_param("num_generations", 2)
            mlflow.log_metric("train/reward", 42.0, step=0)
        time.sleep(0.02)
        log_main()


if __name__ == "__main__":
    kind, target = sys.argv[1], Path(sys.argv[2])
    {"tensorboard": _tensorboard, "wandb": _wandb, "mlflow": _mlflow}[kind](target)

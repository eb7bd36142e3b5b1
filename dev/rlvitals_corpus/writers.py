"""Write a :class:`~rlvitals_corpus.LabelledRun` in a real input format, as its producer would.

====================  ========================================================================
format                what is written
====================  ========================================================================
``trl_state``         ``<dir>/trainer_state.json`` (``json.dumps(..., indent=2, sort_keys=True)``
                      like ``TrainerState.save_to_json``: NaN bare; eval rows; the final
                      summary row) and ``<dir>/training_args.json`` (``num_generations``, ...)
``jsonl``             one ``{"step": N, ...}`` object per logged row (NaN bare), eval rows apart
``csv``               header row, one row per logged step, ``nan`` for missing values
``groups_jsonl``      one ``{"step", "group", "rewards"[, "advantages"]}`` line per group
``verl_console``      the launch command, then ``step:N - key:value - ...`` lines (``%.3f``)
``verl_file``         veRL's file logger: ``{"step": N, "data": {...}}`` per step (veRL keys,
                      full precision, NaN as ``null``; validation keys in the step's row)
``openrlhf_console``  the launch command (``--n_samples_per_prompt`` ...), then
                      ``Global step N: {...}`` lines (Python repr, OpenRLHF key names where
                      OpenRLHF has them) and ``Eval at step N: {...}``
``tensorboard``       ``tensorboardX.SummaryWriter`` event file: ``add_scalar("train/<key>", v,
                      step)`` as transformers' TensorBoard callback names them (eval rows as
                      ``eval/<key>``; float32; NaN kept), plus its ``args`` text summary
``recording``         the rlvitals flight recorder (:class:`rlvitals.recording.Recorder`):
                      scalars, per-group rewards (and advantages) when the run has groups, the
                      manifest (group size, scale_rewards, KL, estimator, reward range)
``wandb``             the real ``wandb`` library, offline (the caller sets ``WANDB_MODE``,
                      ``WANDB_DIR`` or ``HOME``): ``wandb.log({"train/<key>": v, ...,
                      "train/global_step": step})`` like transformers' W&B callback; slow
``mlflow``            the real ``mlflow`` library into ``<dir>/mlflow.db`` (SQLite store):
                      params from the TRL arguments, ``log_metrics(..., step=step)``; slow
====================  ========================================================================

``wandb`` and ``mlflow`` take seconds per run; they are in :data:`WRITERS` but in no run's
rotation (:data:`SLOW`). Every writer imports its tracker library inside the function.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals_corpus import LabelledRun

__all__ = ["SLOW", "WRITERS", "write"]


def _num(v: float) -> float | int:
    return float(v)


def write_trl_state(lr: LabelledRun, dest: Path) -> Path:
    """TRL output folder; returns the ``trainer_state.json`` path."""
    dest.mkdir(parents=True, exist_ok=True)
    m = lr.manifest
    T = int(m.get("steps", int(lr.steps[-1]) if lr.steps.size else 0))
    rows: list[tuple[int, int, dict]] = []
    cols = list(lr.columns.items())
    for i, s in enumerate(lr.steps.tolist()):
        row = {k: _num(v[i]) for k, v in cols}
        row["step"] = int(s)
        rows.append((int(s), 0, row))
    for i, s in enumerate(lr.eval_steps.tolist()):
        row = {k: _num(v[i]) for k, v in lr.eval_columns.items()}
        row.update(step=int(s), epoch=round(3.0 * s / max(T, 1), 4))
        rows.append((int(s), 1, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    history = [r[2] for r in rows]
    loss = lr.columns.get("loss")
    train_loss = float(np.nanmean(loss)) if loss is not None and np.isfinite(loss).any() else 0.0
    history.append(
        {
            "epoch": 3.0,
            "step": T,
            "total_flos": 0.0,
            "train_loss": train_loss,
            "train_runtime": 1234.5,
            "train_samples_per_second": 1.0,
            "train_steps_per_second": 0.1,
        }
    )
    state = {
        "best_global_step": None,
        "best_metric": None,
        "best_model_checkpoint": None,
        "epoch": 3.0,
        "eval_steps": 50,
        "global_step": T,
        "is_hyper_param_search": False,
        "is_local_process_zero": True,
        "is_world_process_zero": True,
        "log_history": history,
        "logging_steps": lr.log_every,
        "max_steps": T,
        "num_input_tokens_seen": 0,
        "num_train_epochs": 3,
        "save_steps": 500,
        "stateful_callbacks": {},
        "total_flos": 0.0,
        "train_batch_size": 8,
        "trial_name": None,
        "trial_params": None,
    }
    path = dest / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    args = _trl_args(lr, dest)
    (dest / "training_args.json").write_text(json.dumps(args, indent=2) + "\n")
    return path


def _trl_args(lr: LabelledRun, dest: Path) -> dict[str, Any]:
    """The GRPOConfig fields a TRL run would report (training_args.json, W&B config, ...)."""
    m = lr.manifest
    return {
        "num_generations": m.get("group_size"),
        "scale_rewards": m.get("scale_rewards", "group"),
        "beta": m.get("kl_coef", 0.0),
        "loss_type": "dr_grpo" if m.get("estimator") == "dr_grpo" else "dapo",
        "logging_steps": lr.log_every,
        "output_dir": str(dest),
    }


def write_jsonl(lr: LabelledRun, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "metrics.jsonl"
    cols = list(lr.columns.items())
    with open(path, "w") as f:
        for i, s in enumerate(lr.steps.tolist()):
            row = {"step": int(s)}
            row.update({k: _num(v[i]) for k, v in cols})
            f.write(json.dumps(row) + "\n")
        for i, s in enumerate(lr.eval_steps.tolist()):
            row = {"step": int(s)}
            row.update({k: _num(v[i]) for k, v in lr.eval_columns.items()})
            f.write(json.dumps(row) + "\n")
    return path


def write_csv(lr: LabelledRun, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "metrics.csv"
    names = list(lr.columns)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["step", *names])
        cols = [lr.columns[n] for n in names]
        for i, s in enumerate(lr.steps.tolist()):
            w.writerow([int(s), *(_cell(c[i]) for c in cols)])
    return path


def _cell(v: float) -> str:
    return "nan" if math.isnan(v) else repr(float(v))


def write_groups_jsonl(lr: LabelledRun, dest: Path) -> Path:
    if lr.groups is None:
        raise ValueError(f"{lr.name}: no per-group rewards to write")
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "groups.jsonl"
    g = lr.groups
    off = g.offsets
    steps = g.step.tolist()
    rewards = g.rewards.tolist()
    adv = g.advantages.tolist() if g.advantages is not None else None
    prev, j = None, 0
    with open(path, "w") as f:
        for i, s in enumerate(steps):
            j = 0 if s != prev else j + 1
            prev = s
            row = {"step": int(s), "group": j, "rewards": rewards[off[i] : off[i + 1]]}
            if adv is not None:
                row["advantages"] = [round(a, 6) for a in adv[off[i] : off[i + 1]]]
            f.write(json.dumps(row) + "\n")
    return path


def write_verl_console(lr: LabelledRun, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "verl.log"
    m = lr.manifest
    est = "grpo"
    cmd = (
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator="
        + est
        + f" actor_rollout_ref.rollout.n={m.get('group_size')}"
        + " actor_rollout_ref.actor.use_kl_loss="
        + ("True" if m.get("kl_coef") else "False")
        + f" actor_rollout_ref.actor.kl_loss_coef={m.get('kl_coef') or 0.0}"
        + f" data.train_batch_size={m.get('n_prompts', 16)} trainer.logger=['console']"
    )
    evals = {int(s): i for i, s in enumerate(lr.eval_steps.tolist())}
    cols = list(lr.columns.items())
    with open(path, "w") as f:
        f.write(f"+ {cmd}\n")
        f.write("(TaskRunner pid=4242) Training from scratch\n")
        for i, s in enumerate(lr.steps.tolist()):
            parts = [f"step:{int(s)}"]
            for k, v in cols:
                x = float(v[i])
                if k == "actor/lr":
                    parts.append(f"{k}:{x:g}")
                else:
                    parts.append(f"{k}:{'nan' if math.isnan(x) else format(x, '.3f')}")
            if int(s) in evals:
                e = evals[int(s)]
                val = float(lr.eval_columns["eval_reward"][e])
                parts.append(f"{VERL_VAL_KEY}:{val:.3f}")
            f.write("(TaskRunner pid=4242) " + " - ".join(parts) + "\n")
    return path


def _rows(lr: LabelledRun) -> list[tuple[int, dict[str, float]]]:
    """``[(step, {key: value})]`` of the training rows (NaN kept), in step order."""
    cols = list(lr.columns.items())
    return [(int(s), {k: float(v[i]) for k, v in cols}) for i, s in enumerate(lr.steps.tolist())]


def _eval_rows(lr: LabelledRun) -> list[tuple[int, dict[str, float]]]:
    cols = list(lr.eval_columns.items())
    return [
        (int(s), {k: float(v[i]) for k, v in cols}) for i, s in enumerate(lr.eval_steps.tolist())
    ]


def _hf_tag(key: str) -> str:
    """transformers' ``rewrite_logs``: ``eval_x`` → ``eval/x``, ``test_x`` → ``test/x``, else
    ``train/<key>``."""
    for prefix in ("eval_", "test_"):
        if key.startswith(prefix):
            return prefix[:-1] + "/" + key[len(prefix) :]
    return "train/" + key


def _verl_eval(lr: LabelledRun) -> dict[int, float]:
    """Training step → the validation reward veRL logs in that step's row."""
    vals = lr.eval_columns.get("eval_reward")
    if vals is None:
        return {}
    return {int(s): float(vals[i]) for i, s in enumerate(lr.eval_steps.tolist())}


VERL_VAL_KEY = "val-core/math/reward/mean@1"
"""The validation reward key both veRL writers use."""


def write_verl_file(lr: LabelledRun, dest: Path) -> Path:
    """veRL's file logger JSONL; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "verl_metrics.jsonl"
    evals = _verl_eval(lr)
    with open(path, "w") as f:
        for s, row in _rows(lr):
            data: dict[str, float | None] = {
                k: None if math.isnan(v) else v for k, v in row.items()
            }
            if s in evals:
                data[VERL_VAL_KEY] = evals[s]
            f.write(json.dumps({"step": s, "data": data}) + "\n")
    return path


OPENRLHF_KEYS = {
    "reward": "reward",
    "reward_mean": "reward",
    "critic/score/mean": "reward",
    "loss": "policy_loss",
    "actor/pg_loss": "policy_loss",
    "kl": "kl",
    "actor/kl_loss": "kl",
    "response_length": "response_length",
    "completions/mean_length": "response_length",
    "response_length/mean": "response_length",
    "completions/clipped_ratio": "response_clip_ratio",
    "response_length/clip_ratio": "response_clip_ratio",
    "learning_rate": "actor_lr",
    "actor/lr": "actor_lr",
    "entropy": "policy_entropy",
    "actor/entropy": "policy_entropy",
    "clip_frac": "ppo_clip_ratio",
    "clip_ratio/region_mean": "ppo_clip_ratio",
    "actor/pg_clipfrac": "ppo_clip_ratio",
    "step_time": "timing/step_total",
}
"""Corpus column → the key OpenRLHF's status dict uses for it (others keep their name)."""


def write_openrlhf_console(lr: LabelledRun, dest: Path) -> Path:
    """OpenRLHF's console log; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / "openrlhf.log"
    m = lr.manifest
    est = {"dr_grpo": "dr_grpo"}.get(str(m.get("estimator")), "group_norm")
    kl = m.get("kl_coef") or 0.0
    cmd = (
        "python3 -m openrlhf.cli.train_ppo_ray --advantage_estimator "
        + est
        + f" --n_samples_per_prompt {m.get('group_size')} --init_kl_coef {kl}"
        + (" --use_kl_loss" if kl else "")
        + f" --rollout_batch_size {m.get('n_prompts', 16)} --logging_steps {lr.log_every}"
    )
    head = "INFO 05-12 10:11:12 ppo_trainer.py:412] "
    rows = [(s, 0, row) for s, row in _rows(lr)] + [(s, 1, row) for s, row in _eval_rows(lr)]
    rows.sort(key=lambda r: (r[0], r[1]))
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"+ {cmd}\n")
        for s, is_eval, row in rows:
            if is_eval:
                f.write(f"{head}Eval at step {s}: {row!r}\n")
                continue
            status = {OPENRLHF_KEYS.get(k, k): v for k, v in row.items()}
            f.write(f"{head}\u2728 Global step {s}: {status!r}\n")
    return path


def write_tensorboard(lr: LabelledRun, dest: Path) -> Path:
    """A TRL run's TensorBoard log through ``tensorboardX``; returns the log folder."""
    from tensorboardX import SummaryWriter

    logdir = dest / "runs"
    rows = [*_rows(lr), *_eval_rows(lr)]
    rows.sort(key=lambda r: r[0])
    writer = SummaryWriter(logdir=str(logdir), flush_secs=3600)
    # tensorboardX warns once per NaN it is given; TRL logs NaN as is, so they are expected
    noisy = logging.getLogger("tensorboardX.x2num")
    level = noisy.level
    noisy.setLevel(logging.ERROR)
    try:
        writer.add_text("args", json.dumps(_trl_args(lr, dest), indent=2))
        for s, row in rows:
            for k, v in row.items():
                writer.add_scalar(_hf_tag(k), v, s)
    finally:
        noisy.setLevel(level)
        writer.close()
    return logdir


def write_recording(lr: LabelledRun, dest: Path) -> Path:
    """An rlvitals recording (flight recorder); returns its folder."""
    from rlvitals.recording import Recorder
    from rlvitals.recording.run import Manifest

    m = lr.manifest
    manifest = Manifest(
        trainer=m.get("trainer"),
        group_size=m.get("group_size"),
        scale_rewards=m.get("scale_rewards"),
        estimator=m.get("estimator"),
        kl_coef=m.get("kl_coef"),
        reward_min=m.get("reward_min", 0.0),
        reward_max=m.get("reward_max", 1.0),
        logging_steps=lr.log_every,
    )
    path = dest / "recording"
    rows = [(s, 0, row) for s, row in _rows(lr)] + [(s, 1, row) for s, row in _eval_rows(lr)]
    rows.sort(key=lambda r: (r[0], r[1]))
    g = lr.groups
    with Recorder(path, manifest) as rec:
        if g is not None:
            off, sizes = g.offsets, g.sizes()
            bounds = np.flatnonzero(np.diff(g.step)) + 1
            for a, b in zip(np.r_[0, bounds].tolist(), np.r_[bounds, g.step.size].tolist()):
                lo, hi = int(off[a]), int(off[b])
                ids = np.repeat(np.arange(b - a), sizes[a:b])
                adv = g.advantages[lo:hi] if g.advantages is not None else None
                rec.log_groups(int(g.step[a]), g.rewards[lo:hi], ids, advantages=adv)
        for s, _, row in rows:
            rec.log_scalars(s, row)
    return path


def write_wandb(lr: LabelledRun, dest: Path) -> Path:
    """A TRL run's offline W&B log through ``wandb``; returns the folder holding ``wandb/``.

    The caller sets ``HOME`` (or ``WANDB_DIR``) to a temporary folder; the run is offline.
    """
    import wandb

    dest.mkdir(parents=True, exist_ok=True)
    rows = [*_rows(lr), *_eval_rows(lr)]
    rows.sort(key=lambda r: r[0])
    run = wandb.init(
        project="rlvitals-corpus",
        name=lr.name,
        dir=str(dest),
        mode="offline",
        config=_trl_args(lr, dest),
        settings=wandb.Settings(silent=True, console="off"),
    )
    try:
        for s, row in rows:
            run.log({**{_hf_tag(k): v for k, v in row.items()}, "train/global_step": s})
    finally:
        run.finish()
        wandb.teardown()  # flush, and leave no process-wide wandb settings behind
    return dest


MLFLOW_BATCH = 1000
"""Metrics per ``log_batch`` call (MLflow's limit for one batch)."""


def write_mlflow(lr: LabelledRun, dest: Path) -> Path:
    """A TRL run's MLflow log (SQLite store) through ``mlflow``; returns ``mlflow.db``."""
    import mlflow
    from mlflow.entities import Metric

    dest.mkdir(parents=True, exist_ok=True)
    db = dest / "mlflow.db"
    rows = [*_rows(lr), *_eval_rows(lr)]
    rows.sort(key=lambda r: r[0])
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(f"sqlite:///{db}")
    try:
        exp = mlflow.create_experiment(
            "rlvitals-corpus", artifact_location=(dest / "artifacts").as_uri()
        )
        with mlflow.start_run(experiment_id=exp, run_name=lr.name) as run:
            mlflow.log_params(_trl_args(lr, dest))
            client = mlflow.MlflowClient()
            t0 = int(time.time() * 1000)
            batch: list[Any] = []
            for s, row in rows:
                batch.extend(Metric(k, v, t0 + s, s) for k, v in row.items())
                if len(batch) >= MLFLOW_BATCH:
                    client.log_batch(run.info.run_id, metrics=batch)
                    batch = []
            if batch:
                client.log_batch(run.info.run_id, metrics=batch)
    finally:
        mlflow.set_tracking_uri(before)
    return db


WRITERS = {
    "trl_state": write_trl_state,
    "jsonl": write_jsonl,
    "csv": write_csv,
    "groups_jsonl": write_groups_jsonl,
    "verl_console": write_verl_console,
    "verl_file": write_verl_file,
    "openrlhf_console": write_openrlhf_console,
    "tensorboard": write_tensorboard,
    "recording": write_recording,
    "wandb": write_wandb,
    "mlflow": write_mlflow,
}
"""Format name (the importer's ``--format`` name) → writer ``(run, folder) -> path``."""
SLOW = frozenset({"wandb", "mlflow"})
"""Writers that take seconds per run (a tracker library starting up): in no rotation."""


def write(lr: LabelledRun, fmt: str, dest: str | Path) -> Path:
    """Write ``lr`` in ``fmt`` under the folder ``dest``; returns the path to load."""
    try:
        fn = WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(WRITERS)}") from None
    return fn(lr, Path(dest))

"""Write a :class:`~rlvitals.corpus.LabelledRun` in a real input format, as its producer would.

=================  ===========================================================================
format             what is written
=================  ===========================================================================
``trl_state``      ``<dir>/trainer_state.json`` (``json.dumps(..., indent=2, sort_keys=True)``
                   like ``TrainerState.save_to_json``: NaN bare; eval rows; the final summary
                   row) and ``<dir>/training_args.json`` (``num_generations``, ``beta``, ...)
``jsonl``          one ``{"step": N, ...}`` object per logged row (NaN bare), eval rows apart
``csv``            header row, one row per logged step, ``nan`` for missing values
``groups_jsonl``   one ``{"step", "group", "rewards"[, "advantages"]}`` line per group
``verl_console``   the launch command, then ``step:N - key:value - ...`` lines (``%.3f``)
=================  ===========================================================================
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np

from rlvitals.corpus import LabelledRun

__all__ = ["WRITERS", "write"]


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
    history.append({
        "epoch": 3.0, "step": T, "total_flos": 0.0, "train_loss": train_loss,
        "train_runtime": 1234.5, "train_samples_per_second": 1.0, "train_steps_per_second": 0.1,
    })
    state = {
        "best_global_step": None, "best_metric": None, "best_model_checkpoint": None,
        "epoch": 3.0, "eval_steps": 50, "global_step": T, "is_hyper_param_search": False,
        "is_local_process_zero": True, "is_world_process_zero": True, "log_history": history,
        "logging_steps": lr.log_every, "max_steps": T, "num_input_tokens_seen": 0,
        "num_train_epochs": 3, "save_steps": 500, "stateful_callbacks": {},
        "total_flos": 0.0, "train_batch_size": 8, "trial_name": None, "trial_params": None,
    }
    path = dest / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    args = {
        "num_generations": m.get("group_size"),
        "scale_rewards": m.get("scale_rewards", "group"),
        "beta": m.get("kl_coef", 0.0),
        "loss_type": "dr_grpo" if m.get("estimator") == "dr_grpo" else "dapo",
        "logging_steps": lr.log_every,
        "output_dir": str(dest),
    }
    (dest / "training_args.json").write_text(json.dumps(args, indent=2) + "\n")
    return path


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
        "python3 -m verl.trainer.main_ppo algorithm.adv_estimator=" + est
        + f" actor_rollout_ref.rollout.n={m.get('group_size')}"
        + " actor_rollout_ref.actor.use_kl_loss=" + ("True" if m.get("kl_coef") else "False")
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
                parts.append(f"val-core/math/reward/mean@1:{val:.3f}")
            f.write("(TaskRunner pid=4242) " + " - ".join(parts) + "\n")
    return path


WRITERS = {
    "trl_state": write_trl_state,
    "jsonl": write_jsonl,
    "csv": write_csv,
    "groups_jsonl": write_groups_jsonl,
    "verl_console": write_verl_console,
}
"""Format name (the importer's ``--format`` name) → writer ``(run, folder) -> path``."""


def write(lr: LabelledRun, fmt: str, dest: str | Path) -> Path:
    """Write ``lr`` in ``fmt`` under the folder ``dest``; returns the path to load."""
    try:
        fn = WRITERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(WRITERS)}") from None
    return fn(lr, Path(dest))

"""The lab's TRL trainer: ``RlvitalsGRPOTrainer`` plus a completion count, the shuffled-keys
control's read keys, and DAPO dynamic sampling; and the callbacks that evaluate and stop a run.

Facts about TRL 1.16 relied on (see also :mod:`rlvitals.integrations.trl._batch`): one call of
``_generate_and_score_completions(inputs)`` generates and scores ``len(inputs)`` completions,
G consecutive rows per prompt, and returns the batch as a dict of row tensors (prompts
left-padded, completions right-padded) plus ``num_items_in_batch`` (the completion tokens the
``dapo`` loss divides by). The lab trains on one process, so a batch is global.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from rlvitals import signal
from rlvitals._text import prompt_id
from rlvitals.estimators import DynamicSampler

__all__ = [
    "BudgetCallback",
    "EvalCallback",
    "LabMixin",
    "lab_trainer_class",
]


_LAB_TRAINER: type | None = None


def lab_trainer_class() -> type:
    """``LabTrainer``: :class:`LabMixin` over ``RlvitalsGRPOTrainer``.

    Built on first use: importing TRL's ``GRPOTrainer`` loads tracker libraries (W&B, MLflow),
    so the lab's modules import it only when a run starts.
    """
    global _LAB_TRAINER
    if _LAB_TRAINER is None:
        from rlvitals.integrations.trl import RlvitalsGRPOTrainer

        _LAB_TRAINER = type(
            "LabTrainer", (LabMixin, RlvitalsGRPOTrainer), {"__doc__": LabMixin.__doc__}
        )
    return _LAB_TRAINER


class LabMixin:
    """``RlvitalsGRPOTrainer`` that counts generated completions and can sample dynamically.

    Extra keyword arguments:
        lab_budget: completions to generate in all (training); the run stops when spent.
        dynamic: None, or ``{"max_attempts": int, "prompts": [str, ...], "seed": int}`` for
            DAPO dynamic sampling (Yu et al., arXiv 2503.14476): batches are drawn until the
            step holds as many informative groups (``0 < correct < G``) as a plain step holds
            groups, or ``max_attempts`` batches were drawn, or the budget is spent. Every
            generated completion counts against the budget; the discarded ones are recorded
            with the step (the pre-filter ACR is the one that matters).

    Attributes:
        lab_generated: training completions generated so far.
        lab_steps: per optimizer step, what the lab itself measured: ``step``, ``generated``
            (cumulative), ``groups``, ``acr`` / ``acr_solve_all`` / ``acr_solve_none`` (raw,
            over every generated group), ``acr_residual`` (trained groups whose advantages
            are all zero), ``reward`` (mean over generated completions), ``wasted``
            (completions generated this step that train with advantage 0, discarded ones
            included), ``attempts``.
    """

    def __init__(self, *args: Any, lab_budget: int, dynamic: dict | None = None, **kwargs: Any):
        self.lab_budget = int(lab_budget)
        self.lab_dynamic = dynamic
        self.lab_generated = 0
        self.lab_steps: list[dict[str, float]] = []
        self._lab_batches: list[dict[str, Any]] = []
        self._lab_read: dict[str, str] | None = None
        super().__init__(*args, **kwargs)
        if getattr(self.rlvitals_config, "control", None) is not None:  # lab_pg_control
            self.rlvitals_config = dataclasses.replace(self.rlvitals_config, seed=self.args.seed)
        if dynamic is not None:
            rng = random.Random(f"dapo:{dynamic.get('seed', 0)}")
            self._lab_pool = list(dynamic["prompts"])
            rng.shuffle(self._lab_pool)
            self._lab_cursor = 0

    # -- which prompts a step draws -----------------------------------------------------------

    @property
    def lab_sampler(self) -> Any:
        """The trainer's posterior sampler (``rlvitals_sampler``), or None with TRL's."""
        return self.rlvitals_sampler

    def _rlvitals_selects(self) -> bool:
        """The estimator selects prompts (``pg_grpo`` with ``select=True``), not with dynamic
        sampling (whose refills draw their own prompts)."""
        return super()._rlvitals_selects() and self.lab_dynamic is None

    def _rlvitals_read_keys(self, dataset: Any) -> list[str] | None:
        read = self._lab_read_map([row["prompt"] for row in dataset])
        return None if read is None else [read[prompt_id(row["prompt"])] for row in dataset]

    def _rlvitals_set_keys(self, n_total: int, group_size: int) -> list[str] | None:
        """The trainer's prompt keys (and importance weights) for the step, plus the
        shuffled-keys control's ``read_keys``: the key whose posterior each group reads."""
        keys = super()._rlvitals_set_keys(n_total, group_size)
        read = self._lab_read_map()
        if keys is not None and read is not None:
            read_keys = tuple(read.get(k, k) for k in self._rlvitals_keys)
            self.rlvitals_config = dataclasses.replace(self.rlvitals_config, read_keys=read_keys)
        return keys

    def _lab_read_map(self, prompts: list[Any] | None = None) -> dict[str, str] | None:
        """The shuffled-keys control's map: each training prompt's key -> the key whose
        posterior it reads (a fixed random permutation of the training prompts, seeded by the
        run seed); None for every other estimator."""
        if getattr(self.rlvitals_config, "control", None) != "shuffled_keys":
            return None
        if self._lab_read is None:
            if prompts is None:
                prompts = [row["prompt"] for row in self.train_dataset]
            keys = [prompt_id(p) for p in prompts]
            perm = np.random.default_rng([int(self.args.seed), 26]).permutation(len(keys))
            self._lab_read = {k: keys[j] for k, j in zip(keys, perm)}
        return self._lab_read

    # -- one step's generation ---------------------------------------------------------------

    def _generate_and_score_completions(self, inputs):
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)
        self._lab_batches = []
        if self.lab_dynamic is None:
            out = self._lab_generate(inputs)
            trained = self._lab_batches[-1]["advantages"]
        else:
            out, trained = self._lab_dynamic(inputs)
        self._lab_close_step(trained)
        return out

    def _lab_generate(self, inputs):
        """Generate and score one batch (the trainer gives history estimators the prompts'
        keys: :meth:`_rlvitals_set_keys`)."""
        before = len(self._lab_batches)
        out = super()._generate_and_score_completions(inputs)
        self.lab_generated += len(inputs)
        if len(self._lab_batches) == before:  # the estimator failed: TRL's advantages trained
            n = len(inputs)
            self._lab_batches.append(
                {
                    "rewards": np.full(n, np.nan),  # not known here: the step's ACR is NaN
                    "group_ids": np.arange(n) // self.num_generations,
                    "advantages": out["advantages"].detach().cpu().double().numpy(),
                }
            )
        return out

    def _rlvitals_after_estimate(self, info: dict[str, Any]) -> None:
        super()._rlvitals_after_estimate(info)
        if info["mode"] == "train":
            self._lab_batches.append(
                {
                    "rewards": np.asarray(info["rewards"], dtype=np.float64),
                    "group_ids": np.asarray(info["group_ids"]),
                    "advantages": np.asarray(info["advantages"], dtype=np.float64),
                }
            )

    def _lab_dynamic(self, inputs):
        g = self.num_generations
        n_groups = len(inputs) // g
        sampler = DynamicSampler(n_groups, max_attempts=int(self.lab_dynamic["max_attempts"]))
        outs, keeps = [], []
        batch = inputs
        while True:
            out = self._lab_generate(batch)
            b = self._lab_batches[-1]
            keeps.append(np.asarray(sampler.add(b["rewards"], b["group_ids"]), dtype=bool))
            outs.append(out)
            if sampler.done or self.lab_generated >= self.lab_budget:
                break
            batch = self._lab_more(n_groups, inputs)
        out, trained = _assemble(outs, keeps, len(inputs), self.processing_class.pad_token_id)
        self._metrics["train"]["rlvitals/ds_attempts"].append(float(len(outs)))
        self._metrics["train"]["rlvitals/ds_kept_groups"].append(
            float(sampler.result().kept_groups)
        )
        return out, trained

    def _lab_more(self, n_groups: int, like: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The next ``n_groups`` prompts of the shuffled pool, each repeated G times."""
        rows = []
        for _ in range(n_groups):
            prompt = self._lab_pool[self._lab_cursor % len(self._lab_pool)]
            self._lab_cursor += 1
            rows.extend({**like[0], "prompt": prompt} for _ in range(self.num_generations))
        return rows

    def _lab_close_step(self, trained: np.ndarray) -> None:
        rewards = np.concatenate([b["rewards"] for b in self._lab_batches])
        ids = np.concatenate(
            [b["group_ids"] + i * (1 << 20) for i, b in enumerate(self._lab_batches)]
        )
        scored = bool(np.isfinite(rewards).any())
        split = signal.collapse_split(rewards, ids) if scored else None
        nan = float("nan")
        g = self.num_generations
        live_rows = np.abs(trained) > signal.ZERO_ATOL
        alive = live_rows.reshape(-1, g)
        self.lab_steps.append(
            {
                "step": int(self.state.global_step) + 1,
                "generated": int(self.lab_generated),
                "groups": int(np.unique(ids).size),
                "acr": float(split.acr) if split else nan,
                "acr_solve_all": float(split.solve_all) if split else nan,
                "acr_solve_none": float(split.solve_none) if split else nan,
                "acr_residual": float((~alive.any(axis=1)).mean()),
                "reward": float(np.nanmean(rewards)) if scored else nan,
                "wasted": int(rewards.size - live_rows.sum()),
                "attempts": len(self._lab_batches),
            }
        )


def _assemble(
    outs: list[dict[str, Any]], keeps: list[np.ndarray], n_rows: int, pad_id: int
) -> tuple[dict[str, Any], np.ndarray]:
    """One training batch of ``n_rows`` rows from the kept rows of several batches.

    When fewer rows were kept (the attempts or the budget ran out), rows of discarded groups
    fill the batch with advantage 0 and an all-zero completion mask, so they add neither
    gradient nor tokens to the loss's denominator. Returns the batch and its advantages.
    """
    keep = np.concatenate(keeps)
    order = np.flatnonzero(keep)[:n_rows]
    filler = np.flatnonzero(~keep)[: n_rows - order.size]
    rows = torch.as_tensor(np.concatenate([order, filler]), dtype=torch.long)
    n_fill = filler.size
    first = outs[0]
    out: dict[str, Any] = {}
    for key, value in first.items():
        if not (torch.is_tensor(value) and value.dim() >= 1 and value.shape[0] == keeps[0].size):
            out[key] = value
            continue
        parts = [o[key] for o in outs]
        width = max(p.shape[1] for p in parts) if value.dim() >= 2 else None
        if width is not None:
            fill = pad_id if key.endswith("_ids") else 0
            left = key.startswith("prompt")
            parts = [_pad(p, width, fill, left) for p in parts]
        out[key] = torch.cat(parts, dim=0)[rows.to(value.device)]
    adv = out["advantages"]
    if n_fill:
        adv[-n_fill:] = 0.0
        out["completion_mask"][-n_fill:] = 0
    if "num_items_in_batch" in first:
        out["num_items_in_batch"] = out["completion_mask"].sum().to(first["num_items_in_batch"])
    return out, adv.detach().cpu().numpy().astype(np.float64)


def _pad(t: torch.Tensor, width: int, fill: int, left: bool) -> torch.Tensor:
    extra = width - t.shape[1]
    if extra <= 0:
        return t
    pad = torch.full((t.shape[0], extra, *t.shape[2:]), fill, dtype=t.dtype, device=t.device)
    return torch.cat([pad, t] if left else [t, pad], dim=1)


class BudgetCallback(TrainerCallback):
    """Stop training once the trainer (:meth:`bind`) has generated its budget of completions."""

    trainer: Any

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer.lab_generated >= self.trainer.lab_budget:
            control.should_training_stop = True


class EvalCallback(TrainerCallback):
    """Held-out accuracy before training, at every ``budget / evals`` completions, at the end.

    Args:
        evaluate: ``evaluate() -> dict`` of accuracies for the current policy (``accuracy``
            among them).
        budget: the run's budget of completions; evals: evaluation points over it (the end
            included).
        recorder_of: returns the recording's ``Recorder`` (or None): accuracies are recorded
            as ``eval_reward`` so the doctor sees an evaluation series.

    :meth:`bind` gives it the lab trainer whose completion count decides when. List it
    before the ``RlvitalsCallback``, so the last evaluation is recorded before the recording
    closes.

    Attributes:
        points: ``[{"step", "generated", **accuracies}, ...]`` in order.
    """

    trainer: Any

    def __init__(self, evaluate, budget: int, evals: int, recorder_of=None):
        self.evaluate = evaluate
        self.every = budget / max(1, evals)
        self.next_at = self.every
        self.recorder_of = recorder_of or (lambda: None)
        self.points: list[dict[str, float]] = []

    def bind(self, trainer: Any) -> None:
        self.trainer = trainer

    def _eval(self, step: int) -> None:
        acc = self.evaluate()
        self.points.append({"step": step, "generated": int(self.trainer.lab_generated), **acc})
        rec = self.recorder_of()
        if rec is not None and step > 0:
            rec.log_scalars(step, {"eval_reward": acc["accuracy"]})

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.points:
            self._eval(int(state.global_step))

    def on_step_end(self, args, state, control, **kwargs):
        if self.trainer.lab_generated + 1e-9 >= self.next_at:
            while self.next_at <= self.trainer.lab_generated + 1e-9:
                self.next_at += self.every
            self._eval(int(state.global_step))

    def on_train_end(self, args, state, control, **kwargs):
        if self.points[-1]["step"] != int(state.global_step):
            self._eval(int(state.global_step))

"""The lab's TRL trainer: ``RlvitalsGRPOTrainer`` plus a completion count, prompt keys for
history estimators, and DAPO dynamic sampling; and the callbacks that evaluate and stop a run.

Facts about TRL 1.16 relied on (see also :mod:`rlvitals.integrations.trl._batch`): one call of
``_generate_and_score_completions(inputs)`` generates and scores ``len(inputs)`` completions,
G consecutive rows per prompt, and returns the batch as a dict of row tensors (prompts
left-padded, completions right-padded) plus ``num_items_in_batch`` (the completion tokens the
``dapo`` loss divides by). The lab trains on one process, so a batch is global.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from rlvitals import signal
from rlvitals.estimators import DynamicSampler

__all__ = [
    "BudgetCallback",
    "EvalCallback",
    "LabMixin",
    "PosteriorSampler",
    "lab_trainer_class",
    "prompt_key",
]


def prompt_key(prompt: Any) -> str:
    """The key a history estimator files a prompt under: the SHA-1 prefix of its text, the
    same id the TRL callback records per group (``rlvitals.integrations.trl._batch``)."""
    return hashlib.sha1(repr(prompt).encode("utf-8")).hexdigest()[:12]


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
        self.lab_sampler: PosteriorSampler | None = None
        self._lab_read: dict[str, str] | None = None
        super().__init__(*args, **kwargs)
        self._lab_keys = "keys" in self.rlvitals_estimator.config_fields
        if getattr(self.rlvitals_config, "control", None) is not None:  # lab_pg_control
            self.rlvitals_config = dataclasses.replace(self.rlvitals_config, seed=self.args.seed)
        if dynamic is not None:
            rng = random.Random(f"dapo:{dynamic.get('seed', 0)}")
            self._lab_pool = list(dynamic["prompts"])
            rng.shuffle(self._lab_pool)
            self._lab_cursor = 0

    # -- which prompts a step draws -----------------------------------------------------------

    def _get_train_sampler(self, dataset=None):
        """TRL's ``RepeatSampler``, or a :class:`PosteriorSampler` when the estimator selects
        prompts (``pg_grpo`` with ``select=True``; not with dynamic sampling)."""
        if not (getattr(self.rlvitals_config, "select", False) and self.lab_dynamic is None):
            return super()._get_train_sampler(dataset)
        dataset = self.train_dataset if dataset is None else dataset
        prompts = [row["prompt"] for row in dataset]
        read = self._lab_read_map(prompts)
        self.lab_sampler = PosteriorSampler(
            prompts,
            group_size=self.num_generations,
            batch_size=self.args.generation_batch_size // self.num_generations,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            state_of=lambda: self.rlvitals_state,
            config_of=lambda: self.rlvitals_config,
            seed=self.args.seed,
            read_keys=None if read is None else [read[prompt_key(p)] for p in prompts],
        )
        return self.lab_sampler

    def _lab_read_map(self, prompts: list[Any] | None = None) -> dict[str, str] | None:
        """The shuffled-keys control's map: each training prompt's key -> the key whose
        posterior it reads (a fixed random permutation of the training prompts, seeded by the
        run seed); None for every other estimator."""
        if getattr(self.rlvitals_config, "control", None) != "shuffled_keys":
            return None
        if self._lab_read is None:
            if prompts is None:
                prompts = [row["prompt"] for row in self.train_dataset]
            keys = [prompt_key(p) for p in prompts]
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
        """Generate and score one batch (history estimators get the prompts' keys)."""
        if self._lab_keys:
            g = self.num_generations
            keys = tuple(prompt_key(inputs[i]["prompt"]) for i in range(0, len(inputs), g))
            extra: dict[str, Any] = {"keys": keys}
            read = self._lab_read_map()
            if read is not None:
                extra["read_keys"] = tuple(read.get(k, k) for k in keys)
            if getattr(self.rlvitals_config, "importance", False) and self.lab_sampler:
                extra["weights"] = self.lab_sampler.weights(keys)
            self.rlvitals_config = dataclasses.replace(self.rlvitals_config, **extra)
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


class PosteriorSampler(torch.utils.data.Sampler):
    """Draws each step's prompts with probability ``q`` from ``pg_grpo``'s posterior
    (:func:`rlvitals.estimators.pg_grpo.selection_weights`: ``q ∝ eps + (1 - eps) P(mixed)``),
    in the order TRL's ``RepeatSampler`` yields them.

    A drop-in for what ``GRPOTrainer._get_train_sampler`` returns in TRL 1.16
    (``trl/trainer/grpo_trainer.py``; ``RepeatSampler`` in ``trl/trainer/utils.py``): it yields
    dataset indices, each of a step's ``batch_size`` distinct prompts ``group_size`` times in a
    row, the block ``repeat_count`` times, and has the same length per epoch. Unlike
    ``RepeatSampler`` it is lazy: a step's prompts are drawn (without replacement, numpy's
    ``Generator.choice``) when the dataloader asks for them, from the estimator state of that
    moment (``state_of()``). The dataloader fetches one batch ahead, so the posterior a step
    is drawn from lacks the last step's rewards. One process: under data parallelism each rank
    would need the same state and seed (left for later, issue 26).

    Args:
        prompts: the dataset's prompts ``(N,)``; keys are :func:`prompt_key` of each.
        group_size: G. batch_size: prompts per generation batch. repeat_count: TRL's
            ``num_iterations * steps_per_generation``.
        state_of, config_of: return the estimator's current state and ``PgGrpoConfig``.
        seed: seed of the draws (epoch e uses ``seed + e``).
        read_keys: the key whose posterior each prompt is selected by (the shuffled-keys
            control); None = its own.

    Attributes:
        last_q: prompt key -> ``N q`` (1 = uniform) at its last draw.
    """

    def __init__(
        self,
        prompts: list[Any],
        *,
        group_size: int,
        batch_size: int,
        repeat_count: int,
        state_of,
        config_of,
        seed: int = 0,
        read_keys: list[str] | None = None,
    ):
        self.keys = [prompt_key(p) for p in prompts]
        if read_keys is not None and len(read_keys) != len(self.keys):
            raise ValueError(f"read_keys holds {len(read_keys)} keys for {len(self.keys)} prompts")
        self.read_keys = self.keys if read_keys is None else [str(k) for k in read_keys]
        self.group_size = int(group_size)
        self.batch_size = int(batch_size)
        self.repeat_count = int(repeat_count)
        self.state_of, self.config_of = state_of, config_of
        self.seed = int(seed)
        self.epoch = 0
        self.last_q: dict[str, float] = {}

    def __len__(self) -> int:
        n = len(self.keys)
        return (n // self.batch_size) * self.batch_size * self.group_size * self.repeat_count

    def __iter__(self):
        from rlvitals.estimators.pg_grpo import selection_weights

        rng = np.random.default_rng(self.seed + self.epoch)
        self.epoch += 1
        n = len(self.keys)
        for _ in range(n // self.batch_size):
            q = selection_weights(
                self.state_of(), self.read_keys, self.config_of(), self.group_size
            )
            chunk = rng.choice(n, size=self.batch_size, replace=False, p=q)
            for i in chunk:
                self.last_q[self.keys[i]] = float(n * q[i])
            for _ in range(self.repeat_count):
                for i in chunk:
                    for _ in range(self.group_size):
                        yield int(i)

    def weights(self, keys: tuple[str, ...]) -> tuple[float, ...]:
        """Importance weights ``1 / (N q)`` of a step's groups, normalised to mean 1."""
        w = np.array([1.0 / self.last_q.get(k, 1.0) for k in keys], dtype=np.float64)
        return tuple(float(x) for x in w / w.mean())


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

"""A TRL ``GRPOTrainer`` whose advantages come from any registered rlvitals estimator.

TRL 1.16 has no hook for the advantage computation: it happens inline in
``GRPOTrainer._generate_and_score_completions``. Rather than copy that method, the mixin wraps it:

1. ``_calculate_rewards`` (overridden, calls TRL's) keeps the rewards TRL has just gathered from
   every process, ``(B_global, n_reward_funcs)``.
2. ``_generate_and_score_completions`` (overridden, calls TRL's) lets TRL build the batch, then
   runs the estimator on the *global* rewards, grouped as TRL groups them (consecutive runs of
   ``num_generations``), and replaces ``batch["advantages"]`` with this process's slice. Every
   process runs the same computation on the same global batch, so the statistics equal the
   single-process result and the estimator state (AVSPO ``tau_adapt``) evolves identically on
   every rank, with no extra communication.
3. The estimator's metrics go into TRL's own accumulator (``self._metrics[mode]``) as
   ``rlvitals/<name>``, so TRL averages them over the logging interval and every reporter
   (``log_history``, TensorBoard, W&B, ...) shows them; eval batches log ``eval_rlvitals/...``.
4. The estimator state is written next to each checkpoint (``rlvitals_estimator_state.json``)
   and read back on ``trainer.train(resume_from_checkpoint=...)``.

If the estimator raises, the failure is reported once and counted, the batch keeps TRL's own
advantages (any that are not finite set to 0 and counted in ``rlvitals/nonfinite_advantages``),
and ``rlvitals/estimator_fallback`` is 1 for that batch. One exception: rewards outside the
estimator's declared range (:class:`~rlvitals.estimators.RewardRangeError`) on the first batch,
before any optimizer step, stop training with that error: it names the setting to change, and
a run that trains with another estimator than the one asked for would be a quiet lie. The
estimator itself never returns a non-finite advantage (:mod:`rlvitals.estimators._safety`).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from trl import GRPOTrainer

from rlvitals.estimators import RewardRangeError
from rlvitals.guard.containment import Guard
from rlvitals.integrations.trl._batch import (
    GroupBatch,
    combined_rewards,
    group_prompt_ids,
    process_slice,
    replace_logged_advantages,
)

__all__ = [
    "STATE_FILE",
    "RlvitalsGRPOMixin",
    "RlvitalsGRPOTrainer",
    "default_estimator",
    "with_estimator",
]

STATE_FILE = "rlvitals_estimator_state.json"
"""File written into every checkpoint folder: the estimator's name, its state, the step and the
failure counts."""
METRIC_PREFIX = "rlvitals/"
"""Prefix of the metrics rlvitals adds to TRL's logs."""
ESTIMATOR_ON_CHOICES = ("host", "device")
"""Where the estimator runs: ``host`` (numpy, one copy of the rewards to the CPU; a batch of
rewards is small and dozens of tiny kernels cost more than the copy) or ``device`` (torch, on
the rewards' device)."""


def default_estimator(scale_rewards: str) -> str:
    """The estimator that reproduces TRL's own advantages for its ``scale_rewards``.

    The vocabulary's name of what TRL computes (:func:`rlvitals.vocabulary.from_trl`): ``grpo``
    for ``group`` and ``batch`` (its ``scale_rewards`` field, which the trainer fills from
    ``GRPOConfig.scale_rewards`` unless ``estimator_config`` sets it, makes it batch-scaled) and
    ``dr_grpo`` for ``none``, so what is recorded says what trained.

    >>> default_estimator("none"), default_estimator("batch")
    ('dr_grpo', 'grpo')
    """
    from rlvitals import vocabulary

    if scale_rewards not in ("group", "batch", "none"):
        raise ValueError(f"unknown scale_rewards {scale_rewards!r}; valid: group, batch, none")
    return vocabulary.from_trl(scale_rewards=scale_rewards)


class RlvitalsGRPOMixin:
    """Mix into a ``GRPOTrainer`` (sub)class to take its advantages from an rlvitals estimator.

    Keyword arguments (besides the trainer's own):
        estimator: a registered estimator name (``grpo``, ``dr_grpo``, ``avspo``,
            ``avspo_released``, ...); None = ``grpo`` with TRL's ``scale_rewards``, i.e. TRL's
            own advantages, recomputed, plus the rlvitals metrics.
        estimator_config: the estimator's config fields (validated at construction). Fields
            the user leaves out that TRL's config also has (``scale_rewards``) are taken from
            ``GRPOConfig``.
        estimator_on: ``"host"`` (default: numpy on the CPU; TRL copies the rewards to the host
            for its logs anyway) or ``"device"`` (torch on the rewards' device).

    Attributes:
        rlvitals_estimator: the :class:`~rlvitals.estimators.Estimator` in use.
        rlvitals_config: its config instance.
        rlvitals_state: the estimator state after the last training batch (None until then).
        rlvitals_guard: failure counts (``.errors``, ``.total``).
        rlvitals_seconds, rlvitals_cpu_seconds: wall and CPU (this thread) time spent in the
            estimator so far, host copies included.
        rlvitals_sampler: PG-GRPO's :class:`~rlvitals.integrations.trl._sampler.PosteriorSampler`
            when the estimator selects the prompts (``pg_grpo`` with ``select=True``, its
            default), once training has built its dataloader; None with TRL's sampler.
    """

    rlvitals_sampler: Any = None

    def __init__(
        self,
        *args: Any,
        estimator: str | None = None,
        estimator_config: dict[str, Any] | None = None,
        estimator_on: str = "host",
        **kwargs: Any,
    ):
        if estimator_on not in ESTIMATOR_ON_CHOICES:
            raise ValueError(
                f"estimator_on must be one of {', '.join(ESTIMATOR_ON_CHOICES)}, got {estimator_on!r}"
            )
        self.rlvitals_estimator_on = estimator_on
        self.rlvitals_guard = Guard("TRL estimator")
        self.rlvitals_state: Any = None
        self._rlvitals_estimated = False
        self.rlvitals_seconds = 0.0
        self.rlvitals_cpu_seconds = 0.0
        self._rlvitals_rewards_per_func: Any = None
        super().__init__(*args, **kwargs)
        self._rlvitals_configure(estimator, estimator_config)
        for cb in self.callback_handler.callbacks:
            _bind(cb, self)

    # -- configuration ------------------------------------------------------------------------

    def _rlvitals_configure(self, name: str | None, config: dict[str, Any] | None) -> None:
        from rlvitals.estimators import get_estimator

        args = self.args
        if (
            getattr(args, "multi_objective_aggregation", "sum_then_normalize")
            != "sum_then_normalize"
        ):
            raise ValueError(
                "rlvitals estimators need one reward per completion: set "
                "multi_objective_aggregation='sum_then_normalize' (got "
                f"{args.multi_objective_aggregation!r})"
            )
        est = get_estimator(name or default_estimator(args.scale_rewards))
        fields = dict(config or {})
        if "scale_rewards" in est.config_fields and "scale_rewards" not in fields:
            fields["scale_rewards"] = args.scale_rewards
        self.rlvitals_estimator = est
        self.rlvitals_config = est.make_config(**fields)
        # History estimators (history_baseline, pg_grpo) keep state per prompt: each step's
        # groups get their prompts' ids as keys, unless the caller keys them (the lab does).
        self._rlvitals_keys: tuple | None = None
        self._rlvitals_keyed = "keys" in est.config_fields and fields.get("keys") is None

    @property
    def rlvitals_estimator_name(self) -> str:
        return self.rlvitals_estimator.name

    def add_callback(self, callback: Any) -> None:
        super().add_callback(callback)
        for cb in self.callback_handler.callbacks:
            _bind(cb, self)

    # -- the overrides ------------------------------------------------------------------------

    def _get_train_sampler(self, dataset=None):
        """TRL's ``RepeatSampler``, or, when the estimator selects prompts (``pg_grpo`` with
        ``select=True``), a sampler drawing each step's prompts from its live posterior."""
        if not self._rlvitals_selects():
            return super()._get_train_sampler(dataset)
        from rlvitals.integrations.trl._sampler import posterior_sampler

        dataset = self.train_dataset if dataset is None else dataset
        self.rlvitals_sampler = posterior_sampler(self, dataset, self._rlvitals_read_keys(dataset))
        return self.rlvitals_sampler

    def _rlvitals_selects(self) -> bool:
        """Whether the estimator draws the training prompts (``pg_grpo``'s ``select``)."""
        return bool(getattr(self.rlvitals_config, "select", False))

    def _rlvitals_read_keys(self, dataset: Any) -> list[str] | None:
        """Subclass hook: the key whose posterior each prompt of ``dataset`` is selected by
        (the lab's shuffled-keys control); None = its own."""
        return None

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(
            inputs, prompts, completions, completion_ids_list
        )
        self._rlvitals_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        self._rlvitals_rewards_per_func = None
        output = super()._generate_and_score_completions(inputs)
        mode = "train" if self.model.training else "eval"
        try:
            info = self._rlvitals_apply(output, len(inputs), mode)
            self._rlvitals_estimated = True
        except Exception as err:
            if isinstance(err, RewardRangeError) and not self._rlvitals_estimated:
                raise  # a setting to fix, found before the first optimizer step: stop here
            self.rlvitals_guard.report("advantage estimation", err)
            self._rlvitals_fall_back(output, mode)
            return output
        self.rlvitals_guard.run("handing the batch to callbacks", self._rlvitals_handover, info)
        self.rlvitals_guard.run("the after-estimate hook", self._rlvitals_after_estimate, info)
        return output

    # -- the estimator step -------------------------------------------------------------------

    def _rlvitals_fall_back(self, output: dict[str, Any], mode: str) -> None:
        """The batch keeps TRL's own advantages; any that are not finite become 0, counted in
        ``rlvitals/nonfinite_advantages`` and reported once (a NaN must not reach the model)."""
        import torch

        self._metrics[mode][METRIC_PREFIX + "estimator_fallback"].append(1.0)
        adv = output["advantages"]
        bad = ~torch.isfinite(adv)
        n_bad = int(bad.sum())
        if n_bad:
            output["advantages"] = torch.where(bad, torch.zeros_like(adv), adv)
            self.rlvitals_guard.report(
                "TRL's own advantages",
                FloatingPointError(
                    f"{n_bad} of {adv.numel()} advantages not finite; set to 0 for this batch"
                ),
            )
        self._metrics[mode][METRIC_PREFIX + "nonfinite_advantages"].append(float(n_bad))

    def _rlvitals_set_keys(self, n_total: int, group_size: int) -> list[str] | None:
        """Give a history estimator this step's prompt keys: the id of each group's prompt (the
        recording's prompt ids), in group order, read from TRL's gathered prompt log. Without
        them the groups' positions (0..k-1) would be the keys, and group 0 of every step would
        share one prompt's history. Keys set by the caller since the last step are left alone.
        Returns the prompt ids it read (the handover reuses them), else None."""
        import dataclasses

        if not self._rlvitals_keyed:
            return None
        current = getattr(self.rlvitals_config, "keys", None)
        if current is not None and current != self._rlvitals_keys:
            return None  # keyed by the caller (a subclass setting its own keys each step)
        keys = group_prompt_ids(self, n_total, group_size)
        if keys is None:
            raise RuntimeError(
                f"{self.rlvitals_estimator_name} keeps a history per prompt but TRL's prompt log "
                f"holds fewer than the batch's {n_total} prompts"
            )
        self._rlvitals_keys = tuple(keys)
        extra: dict[str, Any] = {"keys": self._rlvitals_keys}
        if getattr(self.rlvitals_config, "importance", False) and self.rlvitals_sampler:
            extra["weights"] = self.rlvitals_sampler.weights(self._rlvitals_keys)  # 1/(N q)
        self.rlvitals_config = dataclasses.replace(self.rlvitals_config, **extra)
        return keys

    def _rlvitals_apply(self, output: dict[str, Any], n_local: int, mode: str) -> dict[str, Any]:
        import torch

        rewards_per_func = self._rlvitals_rewards_per_func
        self._rlvitals_rewards_per_func = None
        if rewards_per_func is None:
            raise RuntimeError("no rewards captured: _calculate_rewards was not called by TRL")
        rewards = combined_rewards(rewards_per_func, self.reward_weights)
        n_total = int(rewards.shape[0])
        group_size = self.num_generations if mode == "train" else self.num_generations_eval
        if n_total % group_size:
            raise RuntimeError(f"global batch {n_total} is not a multiple of G={group_size}")
        prompts = self._rlvitals_set_keys(n_total, group_size)
        state = self.rlvitals_state
        start, cpu_start = time.perf_counter(), time.thread_time()
        if self.rlvitals_estimator_on == "host":
            import numpy as np

            rewards = rewards.detach().cpu()
            group_ids = torch.from_numpy(np.arange(n_total) // group_size)
            adv, metrics, new_state = self.rlvitals_estimator(
                rewards.numpy(), group_ids.numpy(), self.rlvitals_config, state
            )
            adv = torch.from_numpy(adv)
        else:
            group_ids = torch.arange(n_total, device=rewards.device) // group_size
            adv, metrics, new_state = self.rlvitals_estimator(
                rewards, group_ids, self.rlvitals_config, state
            )
        self.rlvitals_seconds += time.perf_counter() - start
        self.rlvitals_cpu_seconds += time.thread_time() - cpu_start
        trl_local = output["advantages"]
        local = adv[process_slice(self.accelerator.process_index, n_local)]
        if tuple(local.shape) != tuple(trl_local.shape):
            raise RuntimeError(
                f"estimator advantages {tuple(local.shape)} do not fit TRL's {tuple(trl_local.shape)}"
            )
        output["advantages"] = local.to(device=trl_local.device, dtype=trl_local.dtype)
        if mode == "train":  # evaluation batches must not move the estimator's state
            self.rlvitals_state = new_state
        for key, value in metrics.items():
            self._metrics[mode][METRIC_PREFIX + key].append(float(value))
        self._metrics[mode][METRIC_PREFIX + "estimator_fallback"].append(0.0)
        return {
            "mode": mode,
            "rewards": rewards,
            "group_ids": group_ids,
            "group_size": group_size,
            "prompts": prompts,
            "advantages": adv,
            "local_advantages": output["advantages"],
            "trl_local_advantages": trl_local,
            "slice": process_slice(self.accelerator.process_index, n_local),
            "metrics": dict(metrics),
            "state_before": _state_dict(state),
            "state": _state_dict(new_state),
        }

    def _rlvitals_handover(self, info: dict[str, Any]) -> None:
        n_total = int(info["rewards"].shape[0])
        adv = info["advantages"]
        replace_logged_advantages(self, adv.tolist())
        batch = GroupBatch(
            step=int(self.state.global_step) + 1,
            mode=info["mode"],
            rewards=info["rewards"],
            group_ids=info["group_ids"],
            group_size=info["group_size"],
            prompts=info.get("prompts") or group_prompt_ids(self, n_total, info["group_size"]),
            advantages=adv,
            metrics=info["metrics"],
        )
        handover(self, batch)

    def _rlvitals_after_estimate(self, info: dict[str, Any]) -> None:
        """Subclass hook, called on every process after each estimated batch.

        ``info`` holds ``mode``, global ``rewards``/``group_ids``/``advantages`` ``(n,)``,
        ``local_advantages`` (what this process trains on), ``trl_local_advantages`` (what TRL
        had computed), ``slice``, ``metrics``, and ``state_before``/``state``: the estimator
        state before and after this batch (dicts, or None), and ``prompts``: each group's
        prompt id when a history estimator was keyed by them this batch, else None.
        """

    # -- checkpoints --------------------------------------------------------------------------

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        self.rlvitals_guard.run("saving the estimator state", self._rlvitals_save_state, trial)

    def _rlvitals_save_state(self, trial: Any) -> None:
        if not self.args.should_save:
            return
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        folder = os.path.join(
            self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        )
        payload = {
            "estimator": self.rlvitals_estimator.name,
            "state": _state_dict(self.rlvitals_state),
            "global_step": int(self.state.global_step),
            "errors": dict(self.rlvitals_guard.errors),
        }
        with open(os.path.join(folder, STATE_FILE), "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self.rlvitals_guard.run(
                "restoring the estimator state", self._rlvitals_load_state, checkpoint
            )

    def _rlvitals_load_state(self, checkpoint: str) -> None:
        path = os.path.join(checkpoint, STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path} is missing (checkpoint written without rlvitals?); the estimator "
                "starts from its initial state"
            )
        with open(path, encoding="utf-8") as f:
            payload = json.load(f)
        if payload.get("estimator") != self.rlvitals_estimator.name:
            raise ValueError(
                f"{path} holds the state of estimator {payload.get('estimator')!r}, not "
                f"{self.rlvitals_estimator.name!r}; the estimator starts from its initial state"
            )
        raw = payload.get("state")
        cls = self.rlvitals_estimator.state_cls
        self.rlvitals_state = None if raw is None or cls is None else cls.from_dict(raw)


def _state_dict(state: Any) -> dict[str, Any] | None:
    if state is None:
        return None
    to_dict = getattr(state, "to_dict", None)
    return to_dict() if callable(to_dict) else None


def _bind(callback: Any, trainer: Any) -> None:
    bind = getattr(callback, "rlvitals_bind", None)
    if callable(bind):
        bind(trainer)


def handover(trainer: Any, batch: GroupBatch) -> None:
    """Give a scored batch to every callback that records groups (``rlvitals_groups``)."""
    for cb in trainer.callback_handler.callbacks:
        take = getattr(cb, "rlvitals_groups", None)
        if callable(take):
            take(batch)


_CLASS_CACHE: dict[type, type] = {}


def with_estimator(trainer_cls: type) -> type:
    """``trainer_cls`` (a ``GRPOTrainer`` subclass) with :class:`RlvitalsGRPOMixin` mixed in.

    Use it for trainers that already subclass ``GRPOTrainer``::

        MyTrainer = with_estimator(MyGRPOTrainer)
        trainer = MyTrainer(..., estimator="avspo")
    """
    if not (isinstance(trainer_cls, type) and issubclass(trainer_cls, GRPOTrainer)):
        raise TypeError(f"with_estimator needs a GRPOTrainer subclass, got {trainer_cls!r}")
    if issubclass(trainer_cls, RlvitalsGRPOMixin):
        return trainer_cls
    if trainer_cls not in _CLASS_CACHE:
        _CLASS_CACHE[trainer_cls] = type(
            f"Rlvitals{trainer_cls.__name__}",
            (RlvitalsGRPOMixin, trainer_cls),
            {"__module__": trainer_cls.__module__, "__doc__": RlvitalsGRPOMixin.__doc__},
        )
    return _CLASS_CACHE[trainer_cls]


class RlvitalsGRPOTrainer(RlvitalsGRPOMixin, GRPOTrainer):
    """TRL's ``GRPOTrainer`` with advantages from an rlvitals estimator (see the mixin).

    Example::

        trainer = RlvitalsGRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...),
                                      estimator="avspo", callbacks=[RlvitalsCallback("rec")])
    """

"""TRL 1.16's ``AsyncGRPOTrainer``: what it computes, and where rlvitals reads its groups.

Facts of ``trl/experimental/async_grpo`` in TRL 1.16.0 this relies on:

- advantages are computed by the rollout worker, per group, in ``AsyncRolloutWorker.
  _score_group`` (``async_rollout_worker.py``): ``(r - mean) / (std + 1e-8)`` with numpy's
  **population** std (``ndarray.std()``, ddof 0) over the group's scorable rewards; an
  unscorable completion (every reward function returned None) has reward NaN and advantage 0.
  The manifest says so (``advantage_std: population``, ``advantage_eps: 1e-8``): the doctor reads
  group-std advantages (``grpo``, ``scale_rewards="group"``); there is no KL term
  (``AsyncGRPOConfig`` has no ``beta``).
- the trainer logs no zero-std fraction: its ``reward_std`` is the mean over samples of their
  group's population std. The ACR therefore comes from the per-group rewards rlvitals reads
  from the batches the trainer trains on (below), or the collapse family judges from
  ``reward_std`` alone.
- every training sample reaches ``DataCollatorForRollout`` (``async_grpo_trainer.py``) as a
  dict with ``group_id``, ``advantage`` and ``metrics["reward"]``; the collator gets one
  micro-batch at a time (``examples == [rows]``, each row a ``TreeRow`` with ``samples``), after
  stale samples were dropped (``max_staleness``). :func:`install_tap` wraps the collator of the
  trainer's dataloader to read them, without changing what it returns.

Groups are assembled across micro-batches by ``group_id`` and handed to the callback at the
optimizer step that completed them; a group still short of ``num_generations`` samples after
two steps (some were dropped as stale) is handed over as it is. A multi-turn conversation that
forked into several training rows counts once per row (TRL stamps the same reward and advantage
on each): such groups look larger than G.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

from rlvitals.integrations.trl._batch import GroupBatch

__all__ = ["ADVANTAGE_EPS", "ESTIMATOR_FACTS", "install_tap", "is_async"]

ADVANTAGE_EPS = 1e-8
"""AsyncGRPO's epsilon in ``(r - mean) / (std + eps)`` (TRL 1.16.0)."""
ESTIMATOR_FACTS: dict[str, Any] = {
    "scale_rewards": "group",
    "beta": 0.0,
    "reward_std_kind": "group_mean",
    "config": {
        "trainer_class": "AsyncGRPOTrainer",
        "advantage_std": "population",
        "advantage_eps": ADVANTAGE_EPS,
        "zero_std_frac_logged": False,
    },
}
"""What the manifest records for an AsyncGRPOTrainer run (module docstring)."""
STALE_STEPS = 2
"""Steps after which an incomplete group is handed over as it is."""


def is_async(trainer: Any) -> bool:
    """True for TRL's ``AsyncGRPOTrainer`` (or a subclass), without importing it."""
    mod = sys.modules.get("trl.experimental.async_grpo.async_grpo_trainer")
    cls = getattr(mod, "AsyncGRPOTrainer", None)
    return cls is not None and isinstance(trainer, cls)


class _Groups:
    """Samples by ``group_id`` until their group is complete."""

    def __init__(self, group_size: int):
        self.group_size = group_size
        self.pending: dict[Any, dict[str, Any]] = {}

    def add(self, samples: list[dict[str, Any]], step: int) -> None:
        for ex in samples:
            gid = ex.get("group_id")
            g = self.pending.get(gid)
            if g is None:
                g = self.pending[gid] = {"rewards": [], "adv": [], "first": step}
            reward = (ex.get("metrics") or {}).get("reward", math.nan)
            g["rewards"].append(math.nan if reward is None else float(reward))
            g["adv"].append(float(ex.get("advantage", math.nan)))

    def take(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        ready = [
            gid
            for gid, g in self.pending.items()
            if len(g["rewards"]) >= self.group_size or step - g["first"] >= STALE_STEPS
        ]
        if not ready:
            return None
        rewards, ids, adv = [], [], []
        for j, gid in enumerate(ready):
            g = self.pending.pop(gid)
            rewards.extend(g["rewards"])
            adv.extend(g["adv"])
            ids.extend([j] * len(g["rewards"]))
        return (
            np.asarray(rewards, dtype=np.float64),
            np.asarray(ids, dtype=np.int64),
            np.asarray(adv, dtype=np.float64),
        )


class _TapCollator:
    """Calls the trainer's collator unchanged; keeps what each sample says about its group."""

    def __init__(self, inner: Any, groups: _Groups, trainer: Any, callback: Any):
        self.inner, self.groups, self.trainer, self.callback = inner, groups, trainer, callback

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, examples: Any) -> Any:
        out = self.inner(examples)
        self.callback.guard.run("reading AsyncGRPO's batch", self._read, examples)
        return out

    def _read(self, examples: Any) -> None:
        samples = [ex for row in examples[0] for ex in row.samples]
        self.groups.add(samples, int(self.trainer.state.global_step) + 1)


def install_tap(trainer: Any, callback: Any) -> None:
    """Read the groups of ``trainer`` (an ``AsyncGRPOTrainer``) into ``callback``."""
    if getattr(trainer, "_rlvitals_tapped", False):
        return
    groups = _Groups(int(trainer.args.num_generations))
    original = trainer.get_train_dataloader

    def get_train_dataloader(*args: Any, **kwargs: Any) -> Any:
        dl = original(*args, **kwargs)
        callback.guard.run("wrapping AsyncGRPO's collator", _wrap, dl, groups, trainer, callback)
        return dl

    def flush(step: int) -> None:
        got = groups.take(step)
        if got is None:
            return
        rewards, ids, adv = got
        callback.rlvitals_groups(
            GroupBatch(
                step=step,
                mode="train",
                rewards=rewards,
                group_ids=ids,
                group_size=groups.group_size,
                advantages=adv,
            )
        )

    trainer.get_train_dataloader = get_train_dataloader
    trainer._rlvitals_tapped = True
    callback._step_hooks.append(flush)


def _wrap(dl: Any, groups: _Groups, trainer: Any, callback: Any) -> None:
    for target in (getattr(dl, "base_dataloader", None), dl):
        if target is not None and getattr(target, "collate_fn", None) is not None:
            target.collate_fn = _TapCollator(target.collate_fn, groups, trainer, callback)
            return
    raise RuntimeError("the AsyncGRPO dataloader has no collate_fn to read the groups from")

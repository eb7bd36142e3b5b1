"""Posterior-guided GRPO in veRL: stable prompt keys and a sampler for veRL's train dataloader.

``rlvitals_pg_grpo`` (and ``rlvitals_history_baseline``) keep one posterior per *prompt*; veRL
gives each response a fresh ``uuid4`` uid every step (``RayPPOTrainer.fit``, veRL 0.9.1), so
the adapter (:mod:`rlvitals.integrations.verl`) alone cannot tell that two steps drew the same
prompt. This module supplies what is missing, without changing veRL's code:

1. :class:`KeyedDataset` wraps the train dataset so every row carries its prompt key in
   ``extra_info["rlvitals_key"]`` (veRL keeps ``extra_info`` in the batch for the reward).
2. :func:`install` wraps veRL's ``ray_trainer.compute_advantage`` (the driver-side function
   ``fit`` calls): for an ``rlvitals_*`` estimator with a ``keys`` knob, it reads the rows'
   keys, checks that every uid has one key, and passes them as ``algorithm.rlvitals.keys``
   (one per group, in the adapter's sorted-uid group order) on a copy of the config.
3. :class:`PosteriorSampler` is a sampler for veRL's train dataloader (``RayPPOTrainer(...,
   train_sampler=...)``): it draws each batch's prompts without replacement with probability
   ``q ∝ select_eps + (1 - select_eps) P(mixed)`` from the adapter run's posterior
   (:func:`rlvitals.estimators.pg_grpo.selection_weights`), lazily, when the dataloader asks.

Usage, in a custom veRL entrypoint (docs/verl.md)::

    from rlvitals.integrations import verl_sampler
    verl_sampler.install()
    train = verl_sampler.KeyedDataset(train_dataset)
    sampler = verl_sampler.PosteriorSampler(train.keys, batch_size=config.data.train_batch_size,
                                            run="default", seed=config.data.get("seed", 0))
    trainer = RayPPOTrainer(..., train_dataset=train, train_sampler=sampler)

with ``algorithm.adv_estimator=rlvitals_pg_grpo``. The posterior is the adapter's one state in
the driver, so it is one posterior under data parallelism (veRL computes advantages once, on the
driver, from the gathered batch). The dataloader prefetches, so a batch is drawn from a
posterior that lacks the last few steps' rewards (``prefetch_factor x num_workers`` batches).
Its state (:meth:`PosteriorSampler.state_dict`) is the epoch and the draws made in it: veRL's
``StatefulDataLoader`` saves it with checkpoints; the posterior itself is saved by the
adapter's ``state_file``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from rlvitals._text import prompt_id as key_of
from rlvitals.estimators import get_estimator
from rlvitals.estimators.pg_grpo import PgGrpoConfig, selection_weights

__all__ = ["KEY_FIELD", "KeyedDataset", "PosteriorSampler", "batch_keys", "install", "key_of"]

KEY_FIELD = "rlvitals_key"
"""The ``extra_info`` entry holding a row's prompt key."""

# key_of(prompt), public here: a prompt's key is rlvitals._text.prompt_id, the id the TRL
# integration records per group.


class KeyedDataset(torch.utils.data.Dataset):
    """A veRL train dataset whose rows carry their prompt key in ``extra_info[KEY_FIELD]``.

    Args:
        dataset: the dataset (``RLHFDataset`` or any indexable of row dicts).
        keys: one key per row; None = :func:`key_of` of the row's ``prompt_field`` (read once
            per row, here).
        prompt_field: the row entry a key is made from when ``keys`` is None (``raw_prompt``
            for veRL's ``RLHFDataset``, else ``prompt``).

    A row's ``extra_info`` is copied before the key goes in: the wrapped dataset is unchanged.
    """

    def __init__(
        self,
        dataset: Any,
        keys: Sequence[str] | None = None,
        prompt_field: str | None = None,
    ):
        self.dataset = dataset
        if keys is None:
            keys = [self._key(dataset[i], prompt_field) for i in range(len(dataset))]
        if len(keys) != len(dataset):
            raise ValueError(f"keys holds {len(keys)} keys for {len(dataset)} rows")
        self.keys = [str(k) for k in keys]

    @staticmethod
    def _key(row: Any, field: str | None) -> str:
        for name in [field] if field else ["raw_prompt", "prompt"]:
            if isinstance(row, dict) and name in row:
                return key_of(row[name])
        raise ValueError(
            f"a row has no {field or 'raw_prompt or prompt'} entry to key it by; pass keys="
        )

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> dict[str, Any]:
        row = dict(self.dataset[i])
        extra = row.get("extra_info")
        row["extra_info"] = {**(dict(extra) if extra else {}), KEY_FIELD: self.keys[i]}
        return row

    def __getattr__(self, name: str) -> Any:  # collate_fn and other dataset attributes
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)


def batch_keys(non_tensor_batch: dict[str, Any]) -> np.ndarray | None:
    """Each row's prompt key (``extra_info[KEY_FIELD]``), or None when any row lacks one."""
    extra = non_tensor_batch.get("extra_info")
    if extra is None:
        return None
    keys = []
    for e in extra:
        if not isinstance(e, dict) or KEY_FIELD not in e:
            return None
        keys.append(str(e[KEY_FIELD]))
    return np.asarray(keys, dtype=object)


def group_keys(uids: Any, keys: np.ndarray) -> tuple[str, ...]:
    """One key per group, in the adapter's group order (sorted uids, ``np.unique``).

    Raises ValueError when a uid's rows carry different keys (a group must be one prompt).

    >>> group_keys(np.array(["u2", "u1", "u2"], dtype=object), np.array(["b", "a", "b"]))
    ('a', 'b')
    """
    arr = np.asarray(uids).astype(str)
    order, inverse = np.unique(arr, return_inverse=True)
    out: list[str | None] = [None] * len(order)
    for code, key in zip(inverse.reshape(-1), keys):
        if out[code] is None:
            out[code] = str(key)
        elif out[code] != str(key):
            raise ValueError(
                f"uid {order[code]} holds rows of two prompts ({out[code]!r} and {key!r}); "
                "a group must be one prompt's responses"
            )
    return tuple(str(k) for k in out)


def _with_keys(config: Any, keys: tuple[str, ...]) -> Any:
    """A copy of veRL's ``algorithm`` config with ``rlvitals.keys`` set."""
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(config, DictConfig):
            plain = OmegaConf.to_container(config, resolve=True)
        else:
            plain = dict(config) if isinstance(config, dict) else copy.copy(vars(config))
    except ImportError:  # pragma: no cover - veRL always ships omegaconf
        plain = dict(config)
    user = plain.get("rlvitals") or {}
    plain["rlvitals"] = {**dict(user), "keys": list(keys)}
    return plain


def install() -> Callable[..., Any]:
    """Wrap veRL's ``ray_trainer.compute_advantage`` so keyed rlvitals estimators get prompt
    keys; idempotent. Returns the function now in place.

    For ``adv_estimator=rlvitals_<name>`` whose config has a ``keys`` field (``pg_grpo``,
    ``history_baseline``), when every row carries ``extra_info[KEY_FIELD]`` (rows from a
    :class:`KeyedDataset`): the call gets a copy of the config with ``rlvitals.keys``. Any
    other call passes through unchanged.
    """
    from verl.trainer.ppo import ray_trainer

    current = ray_trainer.compute_advantage
    if getattr(current, "rlvitals_keyed", False):
        return current
    original = current

    def compute_advantage(data: Any, adv_estimator: Any = None, *args: Any, **kwargs: Any):
        name = str(getattr(adv_estimator, "value", adv_estimator))
        config = kwargs.get("config")
        uids = data.non_tensor_batch.get("uid")
        if name.startswith("rlvitals_") and config is not None and uids is not None:
            method = name[len("rlvitals_") :]
            if "keys" in get_estimator(method).config_fields:
                keys = batch_keys(data.non_tensor_batch)
                if keys is not None:
                    kwargs["config"] = _with_keys(config, group_keys(uids, keys))
        return original(data, adv_estimator, *args, **kwargs)

    compute_advantage.rlvitals_keyed = True  # type: ignore[attr-defined]
    compute_advantage.__wrapped__ = original  # type: ignore[attr-defined]
    ray_trainer.compute_advantage = compute_advantage
    return compute_advantage


class PosteriorSampler(torch.utils.data.Sampler):
    """veRL train-dataloader sampler: each batch's prompts drawn by ``pg_grpo``'s posterior.

    Yields dataset indices, ``batch_size`` distinct ones per batch (veRL's dataloader groups
    them; ``rollout.n`` repeats each prompt later), ``len(keys) // batch_size`` batches per
    epoch, drawn when the dataloader asks, from the adapter state of ``run``
    (:func:`rlvitals.integrations.verl.get_state`; uniform before the first step).

    Args:
        keys: the prompt key of every dataset row (``KeyedDataset.keys``).
        batch_size: prompts per batch (``data.train_batch_size``).
        run: the adapter run whose posterior selects (``algorithm.rlvitals.run``).
        config: the ``pg_grpo`` knobs of the selection (``select_eps``, prior settings); the
            same as the run's ``algorithm.rlvitals``.
        group_size: G of P(mixed) before the adapter has seen a step (``rollout.n``).
        seed: seed of the draws (batch b of epoch e uses ``[seed, e, b]``).
        state_of: returns the posterior state (default: the adapter run's); for tests and
            custom loops.
    """

    def __init__(
        self,
        keys: Sequence[str],
        *,
        batch_size: int,
        run: str = "default",
        config: PgGrpoConfig | None = None,
        group_size: int = 8,
        seed: int = 0,
        state_of: Callable[[], Any] | None = None,
    ):
        if not (isinstance(batch_size, int) and 1 <= batch_size <= len(keys)):
            raise ValueError(f"batch_size must be in 1..{len(keys)} (the rows), got {batch_size!r}")
        self.keys = [str(k) for k in keys]
        self.batch_size = batch_size
        self.run = run
        self.config = config or PgGrpoConfig()
        self.group_size = int(group_size)
        self.seed = int(seed)
        self._state_of = state_of
        self.epoch = 0
        self.drawn = 0  # batches drawn in this epoch
        self.last_q: np.ndarray | None = None

    def _state(self) -> Any:
        if self._state_of is not None:
            return self._state_of()
        # the posterior of the adapter veRL calls: its registered function's module
        from verl.trainer.ppo import core_algos

        fn = core_algos.ADV_ESTIMATOR_REGISTRY.get("rlvitals_pg_grpo")
        get_state = getattr(fn, "__globals__", {}).get("get_state")
        if get_state is None:
            from rlvitals.integrations.verl import get_state
        return get_state(self.run)

    def __len__(self) -> int:
        return (len(self.keys) // self.batch_size) * self.batch_size

    def __iter__(self):
        n = len(self.keys)
        while self.drawn < n // self.batch_size:
            state = self._state()
            g = getattr(state, "group_size", 0) or self.group_size
            q = selection_weights(state, self.keys, self.config, g)
            self.last_q = q
            rng = np.random.default_rng([self.seed, self.epoch, self.drawn])  # resumable
            idx = rng.choice(n, size=self.batch_size, replace=False, p=q)
            self.drawn += 1
            yield from (int(i) for i in idx)
        self.epoch += 1
        self.drawn = 0

    def state_dict(self) -> dict[str, int]:
        """``{"epoch", "drawn"}``: where the draws are (``StatefulDataLoader`` saves it)."""
        return {"epoch": int(self.epoch), "drawn": int(self.drawn)}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Continue from :meth:`state_dict`."""
        self.epoch = int(state.get("epoch", 0))
        self.drawn = int(state.get("drawn", 0))

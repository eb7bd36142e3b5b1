"""What a trainer's logged configuration says about the run: trainer, G, scaling, KL, estimator.

Shared by the importers whose sources log a configuration next to the metrics (W&B config,
MLflow params, the ``args`` text summary of TensorBoard). A configuration may be nested
(``{"algorithm": {"adv_estimator": "grpo"}}``), flattened with dots or slashes
(``"algorithm.adv_estimator"``, MLflow's ``"algorithm/adv_estimator"``), and its values may be
strings (MLflow params are always strings).

Recognised trainers:

- veRL: ``actor_rollout_ref`` present. G = ``actor_rollout_ref.rollout.n``, estimator =
  ``algorithm.adv_estimator``, KL = ``actor.kl_loss_coef`` when ``actor.use_kl_loss``, else
  ``algorithm.kl_ctrl.kl_coef`` when ``algorithm.use_kl_in_reward``, else 0.
- OpenRLHF: ``n_samples_per_prompt`` present. G = it, estimator = ``advantage_estimator``,
  KL = ``init_kl_coef``.
- TRL (GRPO/RLOO configs): ``num_generations`` present. G = it, KL = ``beta``,
  ``scale_rewards`` (``True``/``False`` in older TRL mean ``group``/``none``),
  ``logging_steps``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlvitals.recording.run import Manifest

__all__ = ["apply_config", "lookup"]

_MISSING = object()
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


def lookup(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """``config["a"]["b"]`` for ``"a.b"``, or the flattened keys ``"a.b"`` / ``"a/b"``.

    >>> lookup({"a": {"b": 1}}, "a.b"), lookup({"a/b": 2}, "a.b"), lookup({}, "a.b", 3)
    (1, 2, 3)
    """
    for flat in (dotted, dotted.replace(".", "/")):
        if flat in config:
            return config[flat]
    node: Any = config
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            node = _MISSING
            break
        node = node[part]
    return default if node is _MISSING else node


def _has_prefix(config: Mapping[str, Any], name: str) -> bool:
    return name in config or any(
        isinstance(k, str) and (k.startswith(name + ".") or k.startswith(name + "/"))
        for k in config
    )


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f == int(f) and f > 0 else None


def _float(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        return True if s in _TRUE else False if s in _FALSE else None
    if isinstance(v, (int, float)):
        return bool(v)
    return None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) and v and v.lower() not in ("none", "null") else None


def apply_config(manifest: Manifest, config: Mapping[str, Any]) -> None:
    """Fill ``manifest``'s trainer, group size, scaling, KL and estimator from ``config``.

    Fields already set are kept; nothing is guessed when the configuration is silent.

    >>> m = Manifest()
    >>> apply_config(m, {"num_generations": "8", "beta": "0.0", "scale_rewards": "True"})
    >>> m.trainer, m.group_size, m.kl_coef, m.scale_rewards
    ('trl', 8, 0.0, 'group')
    """
    if not isinstance(config, Mapping) or not config:
        return
    found: dict[str, Any] = {}
    if _has_prefix(config, "actor_rollout_ref"):
        found["trainer"] = "verl"
        found["group_size"] = _int(lookup(config, "actor_rollout_ref.rollout.n"))
        found["estimator"] = _str(lookup(config, "algorithm.adv_estimator"))
        if _bool(lookup(config, "actor_rollout_ref.actor.use_kl_loss")):
            found["kl_coef"] = _float(lookup(config, "actor_rollout_ref.actor.kl_loss_coef"))
        elif _bool(lookup(config, "algorithm.use_kl_in_reward")):
            found["kl_coef"] = _float(lookup(config, "algorithm.kl_ctrl.kl_coef"))
        elif lookup(config, "actor_rollout_ref.actor.use_kl_loss") is not None:
            found["kl_coef"] = 0.0
    elif "n_samples_per_prompt" in config:
        found["trainer"] = "openrlhf"
        found["group_size"] = _int(config.get("n_samples_per_prompt"))
        found["estimator"] = _str(config.get("advantage_estimator"))
        found["kl_coef"] = _float(config.get("init_kl_coef"))
    elif "num_generations" in config:
        found["trainer"] = "trl"
        found["group_size"] = _int(config.get("num_generations"))
        found["kl_coef"] = _float(config.get("beta"))
        found["logging_steps"] = _int(config.get("logging_steps"))
        scale = config.get("scale_rewards")
        as_bool = _bool(scale)
        if as_bool is not None:
            found["scale_rewards"] = "group" if as_bool else "none"
        elif _str(scale) in ("group", "batch", "none"):
            found["scale_rewards"] = scale
    for name, value in found.items():
        if value is not None and getattr(manifest, name) is None:
            setattr(manifest, name, value)

"""The trainer-facts record and the readers of configuration values (see :mod:`rlvitals.trainers`).

Every importer that finds a configuration (a launch command's flags, a W&B config, MLflow params,
a TensorBoard ``args`` text, a TRL args file) and the TRL callback turn it into the same
:class:`TrainerFacts` here — group size, estimator and advantage scale (:mod:`rlvitals.vocabulary`),
KL coefficient, reward range, whether the trainer filters zero-variance groups — and
:func:`apply_facts` puts them in the run's :class:`~rlvitals.recording.Manifest`.

Configurations may be nested (``{"algorithm": {"adv_estimator": "grpo"}}``), flattened with dots
or slashes (``"algorithm.adv_estimator"``, MLflow's ``"algorithm/adv_estimator"``), and their
values may be strings (MLflow params always are); :func:`lookup` and the ``as_*`` readers accept
all of them. Nothing is guessed when a configuration is silent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field, fields
from typing import Any

from rlvitals._record import record

__all__ = [
    "Trainer",
    "TrainerFacts",
    "apply_facts",
    "as_bool",
    "as_float",
    "as_int",
    "as_str",
    "has_prefix",
    "lookup",
    "reward_range",
]

MAX_GROUP_SIZE = 2**31 - 1
"""A stated group size above this is ignored (nobody samples that many completions)."""
_MISSING = object()
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no"}


@record(frozen=True)
class TrainerFacts:
    """What a configuration states about a run; None = not stated.

    Attributes:
        trainer: ``trl``, ``verl``, ``openrlhf``, ...
        group_size: completions per prompt (G).
        estimator: advantage estimator, rlvitals name (:mod:`rlvitals.vocabulary`) or the
            trainer's own when unknown to the vocabulary.
        adv_scale: what the advantages are divided by (:class:`rlvitals.vocabulary.Scale`).
        scale_rewards: TRL's ``scale_rewards`` (``group``, ``batch``, ``none``).
        kl_coef: KL coefficient; 0.0 = no KL term.
        reward_min, reward_max: the reward range.
        filters_zero_var: the trainer drops zero-variance groups before the update.
        logging_steps: training steps between logged rows.
        trainer_version: the trainer's version, when stated.
        reward_std_kind: what the logged ``reward_std`` is (``group_mean``, ``batch``).
        config: settings worth keeping in ``manifest.config`` (raw).
    """

    trainer: str | None = None
    group_size: int | None = None
    estimator: str | None = None
    adv_scale: str | None = None
    scale_rewards: str | None = None
    kl_coef: float | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    filters_zero_var: bool | None = None
    logging_steps: int | None = None
    trainer_version: str | None = None
    reward_std_kind: str | None = None
    config: dict[str, Any] = field(default_factory=dict)


@record(frozen=True)
class Trainer:
    """What rlvitals knows of one trainer beyond a run's facts, declared once in its module
    (``TRAINER = Trainer(...)`` in ``trainers/<name>.py``); the advice's knob table
    (:data:`rlvitals.advice.KNOBS`) and the trainers whose collapse metrics are post-filter
    (:data:`rlvitals.trainers.POST_FILTER_TRAINERS`) are read from these declarations.

    Attributes:
        name: the trainer's name in ``Manifest.trainer`` (the module's name).
        knobs: advice concept (a key of :data:`rlvitals.advice.CONCEPTS`) -> the trainer's own
            setting that controls it (a config key, argument or flag).
        mitigations: mitigation (``avspo``, ``dynamic_sampling``) -> how to turn it on there.
        post_filter: its logged collapse metrics describe the batch *after* its zero-variance
            filter (DESIGN.md 3.6), so the pre-filter ACR is rebuilt from the filtered share.
        log_keys: ``(step keys only it logs, metric keys only it logs)``: an export holding one
            of each is this trainer's (:func:`rlvitals.trainers.trainer_from_keys`); empty when
            its keys are not unmistakable.
    """

    name: str
    knobs: dict[str, str] = field(default_factory=dict)
    mitigations: dict[str, str] = field(default_factory=dict)
    post_filter: bool = False
    log_keys: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())


def apply_facts(manifest: Any, facts: TrainerFacts | None, *, overwrite: bool = False) -> None:
    """Copy the stated ``facts`` onto ``manifest`` (a :class:`~rlvitals.recording.Manifest`).

    Fields the manifest already holds are kept unless ``overwrite``; ``facts.config`` is merged
    under the manifest's own config (the manifest's keys win).
    """
    if facts is None:
        return
    for f in fields(facts):
        if f.name == "config":
            continue
        value = getattr(facts, f.name)
        if value is not None and (overwrite or getattr(manifest, f.name) is None):
            setattr(manifest, f.name, value)
    if facts.config:
        manifest.config = {**facts.config, **manifest.config}


# --------------------------------------------------------------------------------------------
# Reading configuration values


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


def has_prefix(config: Mapping[str, Any], name: str) -> bool:
    """True when ``config`` holds ``name`` as a key or as the first part of a flattened key."""
    return name in config or any(
        isinstance(k, str) and (k.startswith(name + ".") or k.startswith(name + "/"))
        for k in config
    )


def as_int(v: Any) -> int | None:
    """A positive integer (``8``, ``8.0``, ``"8"``), or None.

    >>> as_int("8"), as_int(8.5), as_int(True), as_int(-1)
    (8, None, None, None)
    """
    if isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    if not math.isfinite(f) or f != int(f) or not 0 < f <= MAX_GROUP_SIZE:
        return None
    return int(f)


def as_float(v: Any) -> float | None:
    """A finite number (``0.001``, ``"1e-3"``), or None."""
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def as_bool(v: Any) -> bool | None:
    """True/False from a bool, ``"true"``/``"False"``/``"1"``, or a number; None otherwise."""
    if isinstance(v, bool):
        return v
    if isinstance(v, str):
        s = v.strip().lower()
        return True if s in _TRUE else False if s in _FALSE else None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return bool(v)
    return None


def as_str(v: Any) -> str | None:
    """A non-empty string that is not ``None``/``null`` or an unresolved ``$VAR``, or None."""
    if not isinstance(v, str):
        return None
    s = v.strip()
    if not s or s.lower() in ("none", "null") or s.startswith("$"):
        return None
    return s


def reward_range(config: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """``(reward_min, reward_max)`` from keys ending ``reward_min``/``min_reward`` (and max)."""
    lo = hi = None
    for key, value in _flat_items(config):
        last = key.replace("/", ".").rsplit(".", 1)[-1]
        x = as_float(value)
        if x is None:
            continue
        if last in ("reward_min", "min_reward"):
            lo = x
        elif last in ("reward_max", "max_reward"):
            hi = x
    return lo, hi


def _flat_items(config: Mapping[str, Any], prefix: str = "", depth: int = 0):
    for k, v in config.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and depth < 8:
            yield from _flat_items(v, key, depth + 1)
        else:
            yield key, v

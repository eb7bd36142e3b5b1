"""The estimator registry, the :class:`Estimator` record and the one-call :func:`estimate`.

Every estimator shares one signature (STYLE.md, shaped like veRL's ``core_algos``)::

    fn(rewards (n,), group_ids (n,), config, state) -> (advantages (n,), metrics, state)

``config`` is an instance of the estimator's frozen config dataclass, ``metrics`` a flat
``dict[str, float]`` and ``state`` whatever the estimator carries from step to step (``None`` for
stateless ones).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from rlvitals.errors import RlvitalsError
from rlvitals.estimators._safety import safe_call
from rlvitals.registry import Registry

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "EstimatorName",
    "UnknownEstimatorError",
    "estimate",
    "get_estimator",
    "register_estimator",
]


class EstimatorName(str, Enum):
    """Names of the built-in estimators (those registered by ``rlvitals.estimators``' modules).

    Checked when they register (:func:`register_estimator`): a built-in estimator whose name is
    missing here fails to import, so the enum cannot lag the registry. Code that needs every
    estimator, built-in or not (the veRL adapter), reads :data:`ESTIMATORS` instead.
    """

    GRPO = "grpo"
    DR_GRPO = "dr_grpo"
    RLOO = "rloo"
    AVSPO = "avspo"
    AVSPO_RELEASED = "avspo_released"
    ZERO_VAR_FILTER = "zero_var_filter"
    HISTORY_BASELINE = "history_baseline"
    PG_GRPO = "pg_grpo"


class UnknownEstimatorError(RlvitalsError, KeyError, ValueError):
    """An estimator name that is not registered; the message lists the valid ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


EstimatorFn = Callable[[Any, Any, Any, Any], "tuple[Any, dict[str, float], Any]"]


@dataclass(frozen=True)
class Estimator:
    """A registered advantage estimator.

    Attributes:
        name: the registered name (``"grpo"``, ``"avspo"``, ...).
        config_cls: frozen dataclass of the estimator's knobs; every field documented.
        fn: ``fn(rewards, group_ids, config, state) -> (advantages, metrics, state)``.
        state_cls: the state dataclass (``to_dict``/``from_dict``), or None when stateless.
        summary: one line for listings.
        scale: what its advantages are divided by (:class:`rlvitals.vocabulary.Scale` value),
            from the vocabulary; None for an estimator the vocabulary does not know.
        ranged: its advantages depend on the config's ``r_min``/``r_max`` (virtual rewards,
            Beta counts), so rewards outside that range are refused
            (:class:`~rlvitals.estimators.RewardRangeError`). For the others the range only
            splits ACR into solve-all / solve-none.
    """

    name: str
    config_cls: type
    fn: EstimatorFn
    state_cls: type | None = None
    summary: str = ""
    scale: str | None = None
    ranged: bool = False

    def __call__(
        self, rewards: Any, group_ids: Any, config: Any = None, state: Any = None
    ) -> tuple[Any, dict[str, float], Any]:
        """Run the estimator. ``config`` defaults to ``config_cls()``.

        Every call goes through :func:`rlvitals.estimators._safety.safe_call`: half-precision
        rewards are widened to float32, a ``ranged`` estimator refuses rewards outside
        ``[r_min, r_max]``, and non-finite advantages are recomputed in float64 or refused
        (:class:`~rlvitals.estimators.NonFiniteAdvantageError`): none is ever returned.
        """
        if config is None:
            config = self.config_cls()
        elif not isinstance(config, self.config_cls):
            raise TypeError(
                f"estimator {self.name!r} needs a {self.config_cls.__name__}, "
                f"got {type(config).__name__}"
            )
        return safe_call(
            self.fn, rewards, group_ids, config, state, name=self.name, ranged=self.ranged
        )

    def make_config(self, **kwargs: Any) -> Any:
        """Build ``config_cls(**kwargs)``; an unknown key raises ValueError listing valid ones."""
        valid = self.config_fields
        unknown = sorted(set(kwargs) - set(valid))
        if unknown:
            raise ValueError(
                f"unknown config key(s) {', '.join(map(repr, unknown))} for {self.name!r}; "
                f"valid: {', '.join(valid)}"
            )
        return self.config_cls(**kwargs)

    @property
    def config_fields(self) -> list[str]:
        return [f.name for f in dataclasses.fields(self.config_cls)]


ESTIMATORS: Registry[Estimator] = Registry("estimator")
"""Every registered estimator by name."""


def register_estimator(
    name: str,
    config_cls: type,
    *,
    state_cls: type | None = None,
    summary: str = "",
    scale: str | None = None,
    ranged: bool = False,
) -> Callable[[EstimatorFn], EstimatorFn]:
    """Decorator: register ``fn`` under ``name`` (twice raises).

    ``config_cls`` is a frozen dataclass whose docstring documents every field; ``state_cls``
    (optional) a dataclass with ``to_dict``/``from_dict``; ``scale`` what the advantages are
    divided by (``group_std``, ``batch_std``, ``none``, ``virtual``), so the doctor judges runs
    trained with it by the right gates; ``ranged`` that its advantages depend on the config's
    ``r_min``/``r_max`` (rewards outside are then refused); a name of the vocabulary (:mod:`rlvitals.vocabulary`)
    takes its scale from there. For example::

        @dataclass(frozen=True)
        class ZeroConfig:
            scale: float = 0.0  # documented in the class docstring in real code

        @register_estimator("zero", ZeroConfig, summary="all advantages 0")
        def zero(rewards, group_ids, config, state):
            return rewards * config.scale, {}, None
    """

    from rlvitals import vocabulary

    known = vocabulary.info(name)
    if known is not None and known.name == name:
        if scale is not None and scale != known.scale.value:
            raise ValueError(
                f"estimator {name!r} divides by {known.scale.value} (vocabulary), "
                f"got scale={scale!r}"
            )
        scale = known.scale.value
    elif scale is not None and scale not in {s.value for s in vocabulary.Scale}:
        valid = ", ".join(s.value for s in vocabulary.Scale)
        raise ValueError(f"scale must be one of {valid}, got {scale!r}")

    def deco(fn: EstimatorFn) -> EstimatorFn:
        _check_builtin(name, fn)
        ESTIMATORS.add(name, Estimator(name, config_cls, fn, state_cls, summary, scale, ranged))
        if known is None and scale is not None:  # runs recorded with it resolve its scale
            vocabulary.add(vocabulary.EstimatorInfo(name, vocabulary.Scale(scale), summary=summary))
        return fn

    return deco


_BUILTIN_PACKAGE = __name__.rpartition(".")[0] + "."


def _check_builtin(name: str, fn: EstimatorFn) -> None:
    """A built-in estimator (registered from a module of this package) is an
    :class:`EstimatorName`; anything else registered from outside needs no enum member."""
    module = getattr(fn, "__module__", None) or ""
    if module.startswith(_BUILTIN_PACKAGE) and name not in _BUILTIN_NAMES:
        raise ValueError(
            f"built-in estimator {name!r} ({module}) is not an EstimatorName member; add it there"
        )


_BUILTIN_NAMES = frozenset(e.value for e in EstimatorName)


def get_estimator(name: str | EstimatorName) -> Estimator:
    """The estimator registered under ``name``; unknown names raise and list the valid ones."""
    key = name.value if isinstance(name, EstimatorName) else name
    if not isinstance(key, str) or key not in ESTIMATORS:
        valid = ", ".join(ESTIMATORS.names())
        raise UnknownEstimatorError(f"unknown estimator {key!r}; valid: {valid}")
    return ESTIMATORS.get(key)


def estimate(
    method: str | EstimatorName,
    rewards: Any,
    group_ids: Any,
    *,
    state: Any = None,
    **config: Any,
) -> tuple[Any, dict[str, float], Any]:
    """Advantages of one step with a registered estimator.

    Args:
        method: a registered name (``"grpo"``, ``"dr_grpo"``, ``"avspo"``, ...).
        rewards: ``(n,)`` float, numpy or torch (any device; tensors stay on their device).
            NaN marks an unscorable completion (advantage 0, left out of every statistic).
        group_ids: ``(n,)`` integer group keys (strings for numpy); ragged groups allowed.
        state: what the previous call returned (None on the first step).
        **config: fields of the estimator's config dataclass; unknown keys raise ValueError.

    Returns:
        ``(advantages (n,), metrics, state)``: advantages of the same kind, dtype and device as
        ``rewards``; metrics a flat ``dict[str, float]``; state to pass to the next call.

    >>> import numpy as np
    >>> adv, m, _ = estimate("dr_grpo", np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1]))
    >>> adv.tolist(), m["acr"]
    ([0.5, -0.5, 0.0, 0.0], 0.5)
    """
    est = get_estimator(method)
    return est(rewards, group_ids, _config(est, config), state)


_CONFIGS: dict[Any, Any] = {}
"""Validated configs by estimator and knobs (frozen, so shared): a step's config is checked once."""
_CONFIGS_MAX = 256
_PLAIN = (bool, int, float, str, type(None))


def _config(est: Estimator, config: dict[str, Any]) -> Any:
    """``est.make_config(**config)``, memoised for knobs of plain types (keyed by type and repr,
    so ``1`` and ``True``, ``0.0`` and ``-0.0`` stay apart)."""
    if not all(type(v) in _PLAIN for v in config.values()):
        return est.make_config(**config)
    key = (est.name, est.config_cls, *((k, type(v), repr(v)) for k, v in sorted(config.items())))
    cfg = _CONFIGS.get(key)
    if cfg is None:
        cfg = est.make_config(**config)
        if len(_CONFIGS) >= _CONFIGS_MAX:
            _CONFIGS.clear()
        _CONFIGS[key] = cfg
    return cfg

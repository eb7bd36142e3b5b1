"""Advantage estimators and group filters: one registry, one signature, numpy and torch alike.

    >>> import numpy as np
    >>> from rlvitals import estimate
    >>> rewards = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0])
    >>> adv, metrics, state = estimate("avspo", rewards, np.repeat([0, 1], 4))
    >>> metrics["acr"], metrics["avspo_triggered"], metrics["acr_residual"]
    (0.5, 0.0, 0.5)

Built-ins (:class:`EstimatorName`): ``grpo``, ``dr_grpo``, ``rloo`` (reference.py), ``avspo``,
``avspo_released`` (avspo.py), ``zero_var_filter`` (filters.py), ``history_baseline``
(history.py). Every estimator is called as
``fn(rewards (n,), group_ids (n,), config, state) -> (advantages (n,), metrics, state)`` and
returns the metrics in :data:`COMMON_METRICS`; see docs/estimators.md.
"""

from rlvitals.estimators import avspo as _avspo  # noqa: F401  (registers)
from rlvitals.estimators import filters as _filters  # noqa: F401  (registers)
from rlvitals.estimators import history as _history  # noqa: F401  (registers)
from rlvitals.estimators import pg_grpo as _pg_grpo  # noqa: F401  (registers)
from rlvitals.estimators import reference as _reference  # noqa: F401  (registers)
from rlvitals.estimators._base import (
    ESTIMATORS,
    Estimator,
    EstimatorName,
    UnknownEstimatorError,
    estimate,
    get_estimator,
    register_estimator,
)
from rlvitals.estimators._safety import NonFiniteAdvantageError, RewardRangeError
from rlvitals.estimators.avspo import (
    AvspoConfig,
    AvspoReleasedConfig,
    AvspoState,
    advantages_with_virtual,
    stratified_k,
    stratified_virtual_rewards,
)
from rlvitals.estimators.common import COMMON_METRICS
from rlvitals.estimators.filters import (
    DynamicSampler,
    DynamicSamplingResult,
    FilterResult,
    ZeroVarFilterConfig,
    dynamic_sampling,
    zero_variance_filter,
)
from rlvitals.estimators.history import HistoryBaselineConfig, HistoryState
from rlvitals.estimators.reference import DrGrpoConfig, GrpoConfig, RlooConfig

__all__ = [
    "COMMON_METRICS",
    "ESTIMATORS",
    "AvspoConfig",
    "AvspoReleasedConfig",
    "AvspoState",
    "DrGrpoConfig",
    "DynamicSampler",
    "DynamicSamplingResult",
    "Estimator",
    "EstimatorName",
    "FilterResult",
    "GrpoConfig",
    "HistoryBaselineConfig",
    "HistoryState",
    "NonFiniteAdvantageError",
    "RewardRangeError",
    "RlooConfig",
    "UnknownEstimatorError",
    "ZeroVarFilterConfig",
    "advantages_with_virtual",
    "dynamic_sampling",
    "estimate",
    "get_estimator",
    "register_estimator",
    "stratified_k",
    "stratified_virtual_rewards",
    "zero_variance_filter",
]

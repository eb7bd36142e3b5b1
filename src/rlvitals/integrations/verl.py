"""veRL integration: every rlvitals estimator in veRL's advantage-estimator registry.

Importing this module registers, with veRL's own ``register_adv_est`` (``verl.trainer.ppo.
core_algos``), one veRL estimator per registered rlvitals estimator (the names come from the
registry, :data:`rlvitals.estimators.ESTIMATORS`) under ``rlvitals_<name>``: ``rlvitals_grpo``,
``rlvitals_dr_grpo``, ``rlvitals_rloo``, ``rlvitals_avspo``, ``rlvitals_avspo_released``,
``rlvitals_zero_var_filter``, ``rlvitals_history_baseline``, and any estimator registered
before :func:`register` is called again. Select one with ``algorithm.adv_estimator=rlvitals_avspo``.

How veRL finds it (tested with veRL 0.9.1): rlvitals declares a ``verl.plugins`` entry point, and
``import verl`` loads every such entry point in every process (driver, TaskRunner actor,
workers) unless ``VERL_USE_EXTERNAL_PLUGINS=none``. Where entry points are off, set
``VERL_USE_EXTERNAL_MODULES=rlvitals.integrations.verl`` (also read by ``import verl``) or import
this module in a custom entrypoint. See docs/verl.md.

What one call does (veRL's call: ``fn(token_level_rewards (bs, T), response_mask (bs, T),
config, index (bs,) uids)``):

1. scores = ``token_level_rewards.sum(-1)`` (bs,), as veRL's GRPO does; group ids = the uid of
   each response (``index``); tensors stay on their device;
2. ``rlvitals.estimate(name, scores, group_ids, state=..., **knobs)``;
3. advantages broadcast over the response: ``adv[:, None] * response_mask``; returned as
   ``(advantages, returns)`` (the same tensor twice, as veRL's GRPO).

Knobs: veRL-compatible defaults (``eps=1e-6``; a lone response gets mean 0 and std 1;
``algorithm.norm_adv_by_std_in_grpo=False`` selects Dr. GRPO scaling), overridden by the
``algorithm.rlvitals`` mapping (``+algorithm.rlvitals.alpha=0.5`` on the command line), which
also takes the adapter's own keys. Where the config cannot carry an extra mapping, the
environment variable ``RLVITALS_VERL_CONFIG`` may hold the same knobs as a JSON object (read only
when ``algorithm.rlvitals`` is absent). Adapter keys:

- ``run`` (str, default "default"): key of the per-run state kept in this process;
- ``state_file`` (path): the run's state is loaded from it on first use and saved to it
  (atomically, JSON) after every step, so a resumed run continues with the same tau_adapt;
- ``record_dir`` (path): record per-group rewards, advantages and the metrics into an rlvitals
  recording directory (``rlvitals doctor <record_dir>`` reads it). Recording never stops
  training: its failures are reported once and counted.
- ``guard`` (mapping): watch the run live with an :class:`rlvitals.Monitor` fed by every
  advantage computation (the exact per-group rewards, in the driver) and **fail fast**: when
  its halt policy matches, the call raises :class:`~rlvitals.guard.RlvitalsHalt` (a
  ``RuntimeError``), which ends veRL's ``fit`` with an error instead of a degenerate run that
  reports success (verl#7405). Keys: ``halt_on`` (rule text such as ``collapse:20``, or a rule
  mapping), ``alert_on``, ``check_every``, ``window``, ``webhook`` / ``slack`` (URLs; W&B and
  trackio alerts go to their active runs on their own), ``checkpoint_dir`` (veRL's
  ``trainer.default_local_dir``, to name the ``global_step_N`` checkpoint to resume from:
  ``+algorithm.rlvitals.guard.checkpoint_dir=${trainer.default_local_dir}``) and ``name``. With
  ``record_dir`` the monitor writes the recording (alerts and the halt included).

The estimator state (AVSPO's tau_adapt, windowed ACR, J) lives in this module, keyed by ``run``,
in the process that computes advantages (veRL's driver / TaskRunner). ``last_metrics(run)``
returns the last step's metrics as ``rlvitals/<name>`` floats for a custom trainer to log.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals import vocabulary
from rlvitals.errors import MissingExtraError
from rlvitals.estimators import ESTIMATORS, EstimatorName, estimate, get_estimator

try:
    import torch
    from verl.trainer.ppo import core_algos as _core_algos
except ImportError as err:  # pragma: no cover - exercised only without veRL
    raise MissingExtraError("the veRL integration", "verl", "verl") from err

__all__ = [
    "VERL_NAMES",
    "compute_advantage",
    "get_state",
    "guard",
    "last_metrics",
    "load_state",
    "register",
    "reset",
    "save_state",
]

PREFIX = "rlvitals_"
VERL_NAMES: dict[str, str] = {PREFIX + name: name for name in ESTIMATORS.names()}
"""veRL estimator name -> rlvitals estimator name, for every registered estimator (the registry
is the one list; :func:`register` adds those registered since)."""
VERL_EPS = 1e-6
"""veRL's ``compute_grpo_outcome_advantage`` epsilon, the default here."""
ADAPTER_KEYS = ("run", "state_file", "record_dir", "guard")
"""Keys of ``algorithm.rlvitals`` that configure this adapter, not the estimator."""
DEFAULT_RUN = "default"
ENV_CONFIG = "RLVITALS_VERL_CONFIG"
"""JSON object of knobs, used when the ``algorithm`` config has no ``rlvitals`` mapping."""
METRIC_PREFIX = "rlvitals/"
logger = logging.getLogger("rlvitals.integrations")


@dataclass
class _RunState:
    estimator: str
    state: Any = None
    step: int = 0
    last_metrics: dict[str, float] = field(default_factory=dict)
    recorder: Any = None
    monitor: Any = None


_RUNS: dict[str, _RunState] = {}


# --------------------------------------------------------------------------------------------
# Configuration


def _plain(obj: Any) -> Any:
    """A DictConfig / dataclass / mapping as plain Python containers."""
    if obj is None:
        return {}
    try:
        from omegaconf import DictConfig, OmegaConf

        if isinstance(obj, DictConfig):
            return OmegaConf.to_container(obj, resolve=True)
    except ImportError:  # pragma: no cover - veRL always ships omegaconf
        pass
    return dict(obj)


def _config_get(config: Any, key: str, default: Any) -> Any:
    if config is None:
        return default
    if hasattr(config, "get"):
        return config.get(key, default)
    return getattr(config, key, default)


def _knobs(method: str, config: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(estimator knobs, adapter options)`` for one call: veRL defaults, then the user's."""
    norm = bool(_config_get(config, "norm_adv_by_std_in_grpo", True))
    fields = get_estimator(method).config_fields
    knobs: dict[str, Any] = {}
    if "eps" in fields:
        knobs["eps"] = VERL_EPS
    if "singleton" in fields:
        knobs["singleton"] = "verl"
    if "scale_rewards" in fields and not norm:
        knobs["scale_rewards"] = "none"
    if not norm and method in (EstimatorName.AVSPO.value, EstimatorName.AVSPO_RELEASED.value):
        raise ValueError(
            f"{PREFIX}{method} normalises by the augmented std; it cannot run with "
            "algorithm.norm_adv_by_std_in_grpo=False"
        )
    user = _plain(_config_get(config, "rlvitals", None))
    if not user and os.environ.get(ENV_CONFIG):
        try:
            user = json.loads(os.environ[ENV_CONFIG])
        except json.JSONDecodeError as err:
            raise ValueError(f"{ENV_CONFIG} must hold a JSON object of knobs: {err}") from None
    if not isinstance(user, dict):
        raise ValueError(f"algorithm.rlvitals must be a mapping of knobs, got {user!r}")
    options = {k: user.pop(k) for k in ADAPTER_KEYS if k in user}
    knobs.update(user)
    return knobs, options


# --------------------------------------------------------------------------------------------
# Per-run state


def _run_state(run: str, method: str, state_file: str | None) -> _RunState:
    rs = _RUNS.get(run)
    if rs is not None and rs.estimator != method:
        if rs.state is not None:  # logged, never warned: this runs inside veRL's loop
            logger.warning(
                "rlvitals veRL run %r switches from %s%s to %s%s: the old estimator's state is "
                "dropped (use algorithm.rlvitals.run to keep runs apart)",
                run,
                PREFIX,
                rs.estimator,
                PREFIX,
                method,
            )
        reset(run)
        rs = None
    if rs is None:
        rs = _RunState(estimator=method)
        if state_file and Path(state_file).exists():
            _load_into(rs, state_file)
        _RUNS[run] = rs
    return rs


def get_state(run: str = DEFAULT_RUN) -> Any:
    """The estimator state of ``run`` (e.g. an ``AvspoState``), or None."""
    rs = _RUNS.get(run)
    return None if rs is None else rs.state


def last_metrics(run: str = DEFAULT_RUN) -> dict[str, float]:
    """The last step's metrics of ``run`` as ``{"rlvitals/<name>": float}``."""
    rs = _RUNS.get(run)
    return {} if rs is None else dict(rs.last_metrics)


def guard(run: str = DEFAULT_RUN) -> Any:
    """The live :class:`~rlvitals.Monitor` of ``run`` (None until a call with ``guard`` options):
    its alerts, incidents and halt decision (``guard(run).halted``)."""
    rs = _RUNS.get(run)
    return None if rs is None else rs.monitor


def reset(run: str | None = None) -> None:
    """Forget one run's state (or every run's), closing its recorder and monitor."""
    for key in [run] if run is not None else list(_RUNS):
        rs = _RUNS.pop(key, None)
        if rs is not None and rs.monitor is not None:
            rs.monitor.close()
        if rs is not None and rs.recorder is not None:
            rs.recorder.close()


def save_state(path: str | os.PathLike, run: str = DEFAULT_RUN) -> None:
    """Write ``run``'s state as JSON, atomically (temp file + rename)."""
    rs = _RUNS.get(run)
    if rs is None:
        raise KeyError(f"no rlvitals veRL run named {run!r}; known: {sorted(_RUNS)}")
    payload = {
        "estimator": rs.estimator,
        "step": rs.step,
        "state": None if rs.state is None else rs.state.to_dict(),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, path)


def load_state(path: str | os.PathLike, run: str = DEFAULT_RUN) -> None:
    """Restore ``run`` from a file written by :func:`save_state`."""
    data = json.loads(Path(path).read_text())
    rs = _RunState(estimator=data.get("estimator", ""))
    _load_into(rs, path, data)
    reset(run)
    _RUNS[run] = rs


def _load_into(rs: _RunState, path: str | os.PathLike, data: dict | None = None) -> None:
    if data is None:
        data = json.loads(Path(path).read_text())
    if data.get("estimator") != rs.estimator:
        raise ValueError(
            f"{path}: state of estimator {data.get('estimator')!r}, expected {rs.estimator!r}"
        )
    est = get_estimator(rs.estimator)
    raw = data.get("state")
    rs.state = None if raw is None or est.state_cls is None else est.state_cls.from_dict(raw)
    rs.step = int(data.get("step", 0))


# --------------------------------------------------------------------------------------------
# The veRL-facing function


def _group_ids(index: Any, n: int, device: Any) -> Any:
    """uids (any hashable, e.g. str) -> int64 group ids on ``device``."""
    if index is None:
        raise ValueError(
            "rlvitals estimators need the uid of each response (veRL's 'uid' "
            "non-tensor field, passed as index)"
        )
    if isinstance(index, torch.Tensor):
        ids = index.to(device)
    else:
        arr = np.asarray(index)
        if arr.dtype.kind in "iub":
            codes = arr.astype(np.int64)
        else:
            codes = np.unique(arr.astype(str), return_inverse=True)[1].reshape(-1)
        ids = torch.as_tensor(codes, dtype=torch.int64, device=device)
    if ids.shape != (n,):
        raise ValueError(
            f"index must hold one uid per response ({n}), got shape {tuple(ids.shape)}"
        )
    return ids


def compute_advantage(
    method: str,
    token_level_rewards: Any,
    response_mask: Any,
    index: Any = None,
    config: Any = None,
    **unused: Any,
) -> tuple[Any, Any]:
    """One veRL advantage computation with the rlvitals estimator ``method``.

    Args:
        method: rlvitals estimator name (``"avspo"``, ...).
        token_level_rewards: ``(bs, T)`` float; the sequence score is its sum over T.
        response_mask: ``(bs, T)`` 0/1.
        index: ``(bs,)`` uid of each response's prompt (numpy array of str, as veRL passes).
        config: veRL's ``algorithm`` config (DictConfig or AlgoConfig), or None.

    Returns:
        ``(advantages, returns)``, both ``(bs, T)``: ``adv[:, None] * response_mask``.
    """
    knobs, options = _knobs(method, config)
    run = str(options.get("run", DEFAULT_RUN))
    state_file = options.get("state_file")
    rs = _run_state(run, method, state_file)
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        ids = _group_ids(index, scores.shape[0], scores.device)
        adv, metrics, rs.state = estimate(method, scores, ids, state=rs.state, **knobs)
        rs.step += 1
        rs.last_metrics = {METRIC_PREFIX + k: v for k, v in metrics.items()}
        if options.get("guard") is not None:
            _watch(rs, options, method, knobs, scores, ids, adv)
        elif options.get("record_dir"):
            _record(rs, options["record_dir"], method, knobs, scores, ids, adv)
        if state_file:
            save_state(state_file, run)
        out = adv.unsqueeze(-1) * response_mask
    return out, out


def _record(
    rs: _RunState,
    path: str,
    method: str,
    knobs: dict,
    scores: Any,
    ids: Any,
    adv: Any,
) -> None:
    from rlvitals.guard.containment import Guard

    guard = _GUARDS.setdefault(path, Guard("veRL recorder"))

    def write() -> None:
        from rlvitals.recording import Recorder

        if rs.recorder is None:
            rs.recorder = Recorder(path, _manifest(method, knobs, ids))
        rs.recorder.log_groups(rs.step, scores, ids, advantages=adv)
        rs.recorder.log_scalars(
            rs.step, {k: v for k, v in rs.last_metrics.items() if not math.isnan(v)}
        )

    guard.run("record", write)


_GUARDS: dict[str, Any] = {}
GUARD_KEYS = (
    "halt_on",
    "alert_on",
    "check_every",
    "window",
    "webhook",
    "slack",
    "checkpoint_dir",
    "name",
)
"""Keys of ``algorithm.rlvitals.guard``."""
_CHECKPOINT_PREFIX = "global_step_"
"""veRL's checkpoints under ``trainer.default_local_dir`` are ``global_step_N`` folders."""


def _manifest(method: str, knobs: dict, ids: Any) -> Any:
    from rlvitals.recording import Manifest

    sizes = torch.bincount(ids)
    sizes = sizes[sizes > 0]
    g = int(sizes[0]) if bool((sizes == sizes[0]).all()) else None
    return Manifest(
        trainer="verl",
        estimator=method,
        group_size=g,
        adv_scale=vocabulary.scale_of(method, scale_rewards=knobs.get("scale_rewards")),
        reward_min=knobs.get("r_min"),
        reward_max=knobs.get("r_max"),
        config={"rlvitals": {k: v for k, v in knobs.items()}},
    )


def _guard_options(raw: Any) -> dict[str, Any]:
    opts = _plain(raw) if raw else {}
    if not isinstance(opts, dict):
        raise ValueError(f"algorithm.rlvitals.guard must be a mapping, got {raw!r}")
    unknown = sorted(set(opts) - set(GUARD_KEYS))
    if unknown:
        raise ValueError(
            f"unknown algorithm.rlvitals.guard key(s) {', '.join(unknown)}; valid: "
            + ", ".join(GUARD_KEYS)
        )
    return opts


def _new_monitor(rs: _RunState, options: dict, method: str, knobs: dict, ids: Any) -> Any:
    from rlvitals.guard import SlackSink, WebhookSink, default_sinks
    from rlvitals.guard.monitor import DEFAULT_CHECK_EVERY, DEFAULT_MONITOR_WINDOW, Monitor
    from rlvitals.guard.policy import step_folders

    opts = _guard_options(options.get("guard"))
    sinks = default_sinks()
    for url in _as_list(opts.get("webhook")):
        sinks.append(WebhookSink(str(url)))
    for url in _as_list(opts.get("slack")):
        sinks.append(SlackSink(str(url)))
    ckpt = opts.get("checkpoint_dir")
    return Monitor(
        _manifest(method, knobs, ids),
        window=int(opts.get("window", DEFAULT_MONITOR_WINDOW)),
        check_every=int(opts.get("check_every", DEFAULT_CHECK_EVERY)),
        recording_dir=options.get("record_dir"),
        halt_on=opts.get("halt_on"),
        alert_on=str(opts.get("alert_on", "warn")),
        sinks=sinks,
        name=opts.get("name"),
        checkpoints=None if not ckpt else (lambda: step_folders(str(ckpt), _CHECKPOINT_PREFIX)),
    )


def _watch(rs: _RunState, options: dict, method: str, knobs: dict, scores, ids, adv) -> None:
    """Feed the run's monitor; raise :class:`RlvitalsHalt` when its halt policy matches."""
    from rlvitals.guard import RlvitalsHalt

    if rs.monitor is None:
        rs.monitor = _new_monitor(rs, options, method, knobs, ids)
    mon = rs.monitor
    values = {k: v for k, v in rs.last_metrics.items() if not math.isnan(v)}
    mon.observe(rs.step, scores, ids, advantages=adv, values=values)
    if mon.should_stop:
        halt = mon.halted
        mon.close()
        raise RlvitalsHalt(halt)


def _as_list(x: Any) -> list:
    if x is None:
        return []
    if isinstance(x, str):
        return [x]
    return list(x)


def _make_verl_fn(method: str) -> Any:
    def fn(
        token_level_rewards: Any,
        response_mask: Any,
        config: Any = None,
        index: Any = None,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        return compute_advantage(
            method, token_level_rewards, response_mask, index=index, config=config, **kwargs
        )

    fn.__name__ = f"{PREFIX}{method}"
    fn.__qualname__ = fn.__name__
    fn.__doc__ = f"rlvitals estimator {method!r} for veRL (see rlvitals.integrations.verl)."
    fn.rlvitals_estimator = method  # type: ignore[attr-defined]
    return fn


def register() -> list[str]:
    """Register every ``rlvitals_<name>`` with veRL's ``register_adv_est``; idempotent.

    Returns the veRL names now registered.
    """
    registry = _core_algos.ADV_ESTIMATOR_REGISTRY
    VERL_NAMES.update({PREFIX + name: name for name in ESTIMATORS.names()})
    for verl_name, method in VERL_NAMES.items():
        current = registry.get(verl_name)
        if getattr(current, "rlvitals_estimator", None) == method:
            continue  # this module was imported (or reloaded) before
        _core_algos.register_adv_est(verl_name)(_make_verl_fn(method))
    return list(VERL_NAMES)


register()

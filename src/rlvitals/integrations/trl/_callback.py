"""``RlvitalsCallback``: record a TRL GRPO run and guard it live with the doctor while it trains.

What it does, on which process:

- records the run into a recording directory (:class:`rlvitals.recording.Recorder`) on the main
  process only: the manifest (trainer ``trl``, G, ``scale_rewards``, beta as ``kl_coef``,
  estimator, loss type, ...), every row TRL logs (``on_log``), and per-group rewards of every
  training batch. TRL gathers rewards over all processes before normalising them, so the main
  process holds every group and one stream suffices;
- feeds the same data to a live :class:`~rlvitals.Monitor` (main process): every
  ``doctor_every`` steps it runs the doctor over the last ``window`` steps; each incident is told
  once (a log line on ``rlvitals.guard``, an ``alert`` event in the recording, the sinks: W&B /
  trackio alerts while their run is active, webhooks, Slack, callables), then only when it gets
  worse or recovers; each condition it points to (the cause, :mod:`rlvitals.conditions`) is told
  once when it opens (named at two checks in a row) and once when it closes (three checks
  without it), never per step (:attr:`RlvitalsCallback.conditions`). With ``halt_on`` set, an ongoing incident matching the policy stops
  training (``control.should_training_stop``), records a ``halt`` event naming the last healthy
  step and the checkpoint to resume from (:attr:`RlvitalsCallback.halt`). A check runs at the
  step's log row when TRL logs that step (its scalars are then in), else at ``on_step_end``
  (per-group rewards arrive with every batch, whatever ``logging_steps`` is). Under
  ``torch.distributed`` the main process's decision is shared with one ``all_reduce`` of a flag
  at each check step, so every rank stops at the same step (a rank that went on alone would hang
  the others).

Per-group rewards reach the callback in one of two ways: :class:`RlvitalsGRPOTrainer` hands
every scored batch to it, or :meth:`RlvitalsCallback.attach` wraps a plain ``GRPOTrainer``
instance (its ``_calculate_rewards`` and ``_generate_and_score_completions``, without changing
what they compute) or an ``AsyncGRPOTrainer`` (its rollout collator: see
:mod:`rlvitals.integrations.trl._async`) to read the same batch. A trainer given the callback
through ``callbacks=[...]`` without ``attach`` records scalars only, and says so once.

Every hook body runs under a :class:`~rlvitals.guard.containment.Guard`: a failure (an
unwritable directory, a full disk, a doctor bug) is reported once through ``logging``, counted,
and training goes on; no warning is issued from a hook (under ``-W error`` it would be an
exception in the trainer).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from rlvitals.guard.containment import Guard, quiet
from rlvitals.guard.monitor import (
    DEFAULT_CHECK_EVERY,
    DEFAULT_FULL_EVERY,
    DEFAULT_MONITOR_WINDOW,
    Monitor,
)
from rlvitals.guard.policy import step_folders
from rlvitals.integrations.trl._batch import GroupBatch
from rlvitals.integrations.trl._tap import install_tap

__all__ = ["DEFAULT_DOCTOR_EVERY", "RECORDING_SUBDIR", "RlvitalsCallback"]

logger = logging.getLogger("rlvitals.integrations")

DEFAULT_DOCTOR_EVERY = DEFAULT_CHECK_EVERY
"""Steps between two doctor checks (the monitor's ``check_every``)."""
RECORDING_SUBDIR = "rlvitals"
"""Default recording directory, under the trainer's ``output_dir``."""
_SUMMARY_KEYS = ("train_runtime", "train_samples_per_second")
"""TRL's final summary row (averaged ``train_loss`` etc.) is not a step row; it is skipped."""
_FACT_ARGS = (
    "num_generations",
    "scale_rewards",
    "beta",
    "logging_steps",
    "multi_objective_aggregation",
)
"""GRPOConfig fields the trainer facts (:mod:`rlvitals.trainers.trl`) read."""
_MANIFEST_ARGS = (
    "loss_type",
    "num_generations",
    "num_generations_eval",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "steps_per_generation",
    "num_iterations",
    "learning_rate",
    "max_completion_length",
    "temperature",
    "epsilon",
    "epsilon_high",
    "importance_sampling_level",
    "mask_truncated_completions",
    "reward_weights",
    "multi_objective_aggregation",
    "seed",
    "max_steps",
    "use_vllm",
    "max_staleness",
    "weight_sync_steps",
)


class RlvitalsCallback(TrainerCallback):
    """Record a TRL GRPO run and guard it live (see the module docstring).

    Args:
        recording_dir: where to record; None = ``<output_dir>/rlvitals``. An existing recording
            is appended to (a resumed run continues its recording).
        doctor_every: steps between doctor checks over the last ``window`` steps (the
            monitor's ``check_every``: the collapse family and the cheap critical detectors;
            the whole catalogue every ``full_every`` steps). 0 = never (then neither alerts nor
            halts; the run is only recorded).
        halt_on: when to stop training: ``"critical"``, ``"warn"``, ``"info"`` (an incident at
            or above that severity), rule text such as ``"collapse:20"`` (a collapse incident
            lasting 20 steps), a :class:`~rlvitals.guard.HaltPolicy`; None (default) never halts.
        window: steps the live monitor keeps and diagnoses.
        record_groups: record per-group rewards when the trainer provides them.
        doctor_config: a :class:`~rlvitals.DoctorConfig` for the checks.
        alert_on: lowest incident severity that is told.
        sinks: where alerts go besides the log (sinks, callables, webhook URLs); None = W&B and
            trackio alerts while a run of theirs is active; ``[]`` = the log only.
        full_every: steps between checks of the whole catalogue.
        name: the run's name in alerts (default: ``args.run_name``).

    Attributes:
        monitor: the live :class:`~rlvitals.Monitor`.
        recorder: the :class:`~rlvitals.recording.Recorder` (main process), or None.
        guard: failure counts per hook (``guard.errors``).
        findings: every new finding reported so far, as ``(step, finding)``.
        alerts: every alert sent so far (:class:`~rlvitals.guard.Alert`).
        halt: the :class:`~rlvitals.guard.Halt` that stopped training, or None.
        halted_at: the step at which this callback stopped training, or None.
        seconds, cpu_seconds: wall and CPU (this thread) time spent in this callback's hooks.
    """

    def __init__(
        self,
        recording_dir: str | Path | None = None,
        *,
        doctor_every: int = DEFAULT_DOCTOR_EVERY,
        halt_on: Any = None,
        window: int = DEFAULT_MONITOR_WINDOW,
        record_groups: bool = True,
        doctor_config: Any = None,
        alert_on: str = "warn",
        sinks: Any = None,
        full_every: int = DEFAULT_FULL_EVERY,
        name: str | None = None,
    ):
        if isinstance(doctor_every, bool) or not isinstance(doctor_every, int) or doctor_every < 0:
            raise ValueError(f"doctor_every must be an integer >= 0, got {doctor_every!r}")
        self.halt_on = halt_on
        self.recording_dir = None if recording_dir is None else Path(recording_dir)
        self.doctor_every = doctor_every
        self.window = window
        self.record_groups = record_groups
        self.doctor_config = doctor_config
        self.name = name
        self.guard = Guard("TRL callback")
        self.monitor = Monitor(
            window=window,
            config=doctor_config,
            check_every=doctor_every,
            full_every=full_every if doctor_every else 0,
            halt_on=halt_on,
            alert_on=alert_on,
            sinks=sinks,
            name=name,
        )
        self.monitor.guard = self.guard
        self.recorder: Any = None
        self.findings: list[tuple[int, Any]] = []
        self.halt: Any = None
        self.halted_at: int | None = None
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self._estimator: str | None = None
        self._estimator_config: dict[str, Any] | None = None
        self._estimator_scale: str | None = None
        self._estimator_facts: dict[str, Any] = {}
        self._groups_source = False
        self._is_main = True
        self._last_check: int | None = None
        self._output_dir: str | None = None
        self._step_hooks: list[Any] = []

    @property
    def alerts(self) -> list[Any]:
        return list(self.monitor.alerts)

    @property
    def conditions(self) -> Any:
        """The conditions followed with hysteresis (the monitor's
        :class:`~rlvitals.guard.conditions.ConditionTracker`): ``conditions.timeline`` is every
        opened / closed / reopened, ``conditions.open`` those open now."""
        return self.monitor.conditions

    # -- wiring --------------------------------------------------------------------------------

    def rlvitals_bind(self, trainer: Any) -> None:
        """Called by :class:`RlvitalsGRPOTrainer`: learn the estimator; groups will be handed over."""
        est = getattr(trainer, "rlvitals_estimator", None)
        if est is not None:
            self._estimator = est.name
            cfg = getattr(trainer, "rlvitals_config", None)
            self._estimator_config = _config_dict(cfg)
            self._estimator_scale = getattr(cfg, "scale_rewards", None)
        self._groups_source = True

    def attach(self, trainer: Any) -> RlvitalsCallback:
        """Add this callback to ``trainer`` and make sure it receives per-group rewards.

        For a plain ``GRPOTrainer`` this wraps the instance's ``_calculate_rewards`` and
        ``_generate_and_score_completions`` to read the scored batch (TRL's own advantages
        included); for TRL's ``AsyncGRPOTrainer`` its rollout collator; an
        :class:`RlvitalsGRPOTrainer` already hands batches over. Returns self.
        """
        if self not in trainer.callback_handler.callbacks:
            trainer.add_callback(self)
        if hasattr(trainer, "rlvitals_estimator"):
            return self
        from rlvitals.integrations.trl import _async

        if _async.is_async(trainer):
            _async.install_tap(trainer, self)
            self._estimator_facts = _async.ESTIMATOR_FACTS
        else:
            install_tap(trainer, self)
        self._groups_source = True
        return self

    # -- TrainerCallback events ----------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        self._timed("starting the recording", self._begin, args, state)

    def on_step_end(self, args, state, control, **kwargs):
        for hook in self._step_hooks:  # trainers whose groups are read per optimizer step
            self._timed("reading the step's groups", hook, int(state.global_step))
        # A step TRL logs is checked at its log row (its scalars are in by then); others here.
        if not getattr(control, "should_log", False):
            self._timed(
                "checking the step", self._maybe_check, int(state.global_step), None, control
            )

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or any(k in logs for k in _SUMMARY_KEYS):
            return
        self._timed("checking the step", self._maybe_check, int(state.global_step), logs, control)

    def on_save(self, args, state, control, **kwargs):
        if self.recorder is not None:
            self._timed("flushing the recording", self.recorder.flush)

    def on_train_end(self, args, state, control, **kwargs):
        if self.doctor_every and self._is_main and self.halt is None:
            self._timed("running the doctor", self._final_check, int(state.global_step))
        self._timed("closing the recording", self._end, state)

    def rlvitals_groups(self, batch: GroupBatch) -> None:
        """Take one scored batch (global over processes) from the trainer."""
        if batch.mode == "train" and self.record_groups and self._is_main:
            self._timed("recording groups", self._groups, batch)

    # -- bodies --------------------------------------------------------------------------------

    def _timed(self, site: str, fn: Any, *args: Any) -> Any:
        start, cpu_start = time.perf_counter(), time.thread_time()
        try:
            with quiet():
                return self.guard.run(site, fn, *args)
        finally:
            self.seconds += time.perf_counter() - start
            self.cpu_seconds += time.thread_time() - cpu_start

    def _begin(self, args: Any, state: Any) -> None:
        from rlvitals.recording import Manifest
        from rlvitals.trainers import apply_facts
        from rlvitals.trainers import trl as trl_facts

        self._is_main = bool(state.is_world_process_zero)
        self._output_dir = getattr(args, "output_dir", None)
        fields = trl_facts.config_of(args, _FACT_ARGS)
        if self._estimator_scale is not None:  # what the estimator ran with wins over GRPOConfig
            fields["scale_rewards"] = self._estimator_scale
        for key in ("scale_rewards", "beta"):
            if key in self._estimator_facts and fields.get(key) is None:
                fields[key] = self._estimator_facts[key]
        manifest = Manifest(trainer="trl", config=self._manifest_config(args))
        apply_facts(manifest, trl_facts.facts(fields, estimator=self._estimator))
        if "reward_std_kind" in self._estimator_facts:
            manifest.reward_std_kind = self._estimator_facts["reward_std_kind"]
        self.monitor.set_manifest(manifest)
        self.monitor.checkpoints = self._checkpoints
        if self.monitor.name is None:
            self.monitor.name = getattr(args, "run_name", None) or None
        if not self._groups_source:
            logger.info(
                "rlvitals: per-group rewards need RlvitalsGRPOTrainer or "
                "RlvitalsCallback(...).attach(trainer); recording scalars only"
            )
        if not self._is_main:
            self.monitor.close()  # the main process records and checks
            return
        from rlvitals.recording import Recorder

        path = self.recording_dir or Path(args.output_dir) / RECORDING_SUBDIR
        self.recording_dir = Path(path)
        self.recorder = Recorder(path, manifest, rank=0, world_size=1)
        self.monitor.recorder = self.recorder
        if state.global_step > 0:
            self.recorder.log_event(
                state.global_step, "resume", f"training resumed at step {state.global_step}"
            )

    def _manifest_config(self, args: Any) -> dict[str, Any]:
        import trl

        cfg: dict[str, Any] = {"trl_version": trl.__version__}
        for name in _MANIFEST_ARGS:
            if hasattr(args, name):
                cfg[name] = _jsonable(getattr(args, name))
        cfg["world_size"] = int(getattr(args, "world_size", 1))
        cfg["per_group_rewards"] = bool(self._groups_source and self.record_groups)
        if self._estimator_config is not None:
            cfg["estimator_config"] = self._estimator_config
        for key, value in self._estimator_facts.get("config", {}).items():
            cfg.setdefault(key, value)
        return cfg

    def _groups(self, batch: GroupBatch) -> None:
        self._take(
            self.monitor.observe(
                batch.step,
                batch.rewards,
                batch.group_ids,
                prompts=batch.prompts,
                advantages=batch.advantages,
                check=False,
            )
        )

    def _take(self, result: Any) -> None:
        """Keep what a monitor call judged: new findings (at the step checked), a halt."""
        if result is None or not result.checked:
            return
        self.findings.extend((result.step, f) for f in result.new)
        if result.halt is not None and self.halt is None:
            self.halt = result.halt

    def _maybe_check(self, step: int, logs: dict[str, Any] | None, control: Any) -> None:
        """Feed a log row; at a check step (the same on every rank) run the doctor on the main
        process and share its halt decision."""
        every = self.doctor_every
        # the next multiple of doctor_every since the last check, the same on every rank (no
        # rank-local state here: a rank that skipped a collective the others run would hang)
        due = (
            bool(every)
            and self.halted_at is None
            and step // every > (self._last_check or 0) // every
        )
        if self._is_main and not due and logs:
            self._take(self.monitor.observe(step, values=logs, check=False))
        if not due:
            return
        self._last_check = step
        if self._is_main:  # the row and the check in one call
            self.guard.run("running the doctor", self._check, step, logs)
        halt = self._is_main and self.halt is not None
        if self.guard.run("sharing the halt decision", _agree, halt, default=False):
            control.should_training_stop = True
            if self.halted_at is None:
                self.halted_at = step

    def _check(self, step: int, logs: dict[str, Any] | None = None) -> None:
        """Feed the step's log row (if any) and check."""
        self._take(self.monitor.observe(step, values=logs or None, check=True))

    def _final_check(self, step: int) -> None:
        if self.monitor.n_steps and step != self._last_check:
            self._take(self.monitor.check())

    def _checkpoints(self) -> list[tuple[int, str]]:
        return step_folders(self._output_dir, "checkpoint-")

    def _end(self, state: Any) -> None:
        self.monitor.close()
        if self.recorder is None:
            return
        self.guard.note(self.recorder, int(state.global_step), "rlvitals callback hooks")
        self.recorder.update_manifest(config={"rlvitals_callback_seconds": round(self.seconds, 3)})
        self.recorder.close()


# -- small helpers ----------------------------------------------------------------------------


def _agree(flag: bool) -> bool:
    """The main process's flag on every rank (``all_reduce`` MAX) under torch.distributed."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return flag
    from rlvitals.integrations.distributed import comm_device

    t = torch.tensor([1 if flag else 0], dtype=torch.int64)
    t = t.to(comm_device(t, None))
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def _config_dict(cfg: Any) -> dict[str, Any] | None:
    import dataclasses

    if cfg is None or not dataclasses.is_dataclass(cfg):
        return None
    return {k: _jsonable(v) for k, v in dataclasses.asdict(cfg).items()}


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return repr(v)

"""One lab run: real GRPO with TRL on a generated task, recorded for the doctor.

The trainer is TRL's ``GRPOTrainer`` through :class:`rlvitals.integrations.trl.RlvitalsGRPOTrainer`
(the same code path a GPU user runs), with any registered rlvitals estimator, and an
:class:`~rlvitals.integrations.trl.RlvitalsCallback` recording the run with per-group rewards and
prompt ids, so ``rlvitals doctor`` and every report read a lab run like any other.

Read top to bottom: :class:`Args` (one docstring per field) and the presets, then
:func:`train`: set-up (task, level, prompts, policy), the trainer, and TRL's loop, whose phases
are *sample* (generate G completions per prompt) → *score* (the task's verifier) → *advantage*
(the rlvitals estimator) → *update* (TRL's clipped policy loss) → *record* (the callback; the
lab also keeps its own per-step ACR from the same rewards, evaluates on held-out prompts and
stops when the budget of generated completions is spent). The result is a JSON-ready dict.

    >>> from rlvitals.lab.train import PRESETS
    >>> PRESETS["quick"].budget // (PRESETS["quick"].prompts_per_step * PRESETS["quick"].group_size)
    60
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["METHODS", "PRESETS", "Args", "Method", "method_of", "train"]


@dataclass
class Args:
    """Settings of one lab run."""

    name: str = "run"
    """Name of the run (its folder under ``out``)."""
    task: str = "sum"
    """Task (:data:`rlvitals.lab.tasks.TASKS`): ``sum`` (add digits) or ``sort`` (sort digits)."""
    level: int = 4
    """Difficulty level 0..6 = base pass rate 95, 80, 60, 40, 20, 5, 1 % (He et al. 2026), or 7
    = the mixed level LM (:data:`rlvitals.lab.tasks.MIXED_MIXTURE`: easy, medium and hard sizes,
    so groups collapse on both sides, the paper's regime)."""
    reward: str = "binary"
    """``binary`` (exact answer) or ``partial`` (share of answer characters in place)."""
    method: str = "grpo"
    """A lab method (:data:`METHODS`: ``grpo``, ``dr_grpo``, ``avspo``, ``avspo_released``,
    ``zero_var_filter``, ``dapo``, ``history_baseline``, ``pg_grpo``, ``pg_grpo_select``,
    ``pg_grpo_baseline``, ``pg_grpo_iw`` and the controls ``ctl_random_sign``,
    ``ctl_shuffled_keys``, ``ctl_random_select``) or any registered estimator name."""
    estimator_config: dict[str, Any] = field(default_factory=dict)
    """Fields of the estimator's config, over the method's own (e.g. ``{"alpha": 0.3}``)."""
    group_size: int = 8
    """G: completions per prompt (TRL ``num_generations``)."""
    prompts_per_step: int = 8
    """Prompts (groups) per optimizer step; a step generates ``prompts_per_step * G``."""
    temperature: float = 1.0
    """Sampling temperature of the training rollouts."""
    budget: int = 64 * 300
    """Completions to generate in all (training). Every method gets the same budget; dynamic
    sampling spends more per step and so takes fewer steps."""
    learning_rate: float = 1e-4
    """AdamW learning rate, constant after the warm-up (no decay: runs stopped by the budget
    stay comparable)."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up steps."""
    beta: float = 0.0
    """KL coefficient (the paper uses none)."""
    epsilon: float = 0.2
    """PPO clip epsilon (paper: 0.2)."""
    loss_type: str = "dapo"
    """TRL ``loss_type`` (its default: token-level normalisation), the same for every method."""
    max_attempts: int = 4
    """Dynamic sampling: most batches drawn for one step."""
    train_prompts: int = 512
    """Training prompts drawn from the level (training split)."""
    eval_prompts: int = 128
    """Held-out evaluation prompts of the level (evaluation split; the same set for every run
    of a level, whatever its seed)."""
    eval_samples: int = 4
    """Sampled completions per evaluation prompt."""
    eval_temperature: float = 1.0
    """Temperature of the sampled evaluation (greedy accuracy is measured too)."""
    eval_set: str = "level"
    """``level``: held-out prompts of the run's level; ``common``: held-out prompts of every
    size the base policy was measured on, equally weighted (one set for every run whatever its
    level: predict-v2, issue 26.4)."""
    evals: int = 4
    """Evaluation points over the budget, the end included (plus one before training)."""
    seed: int = 0
    """Seed of the run: training prompts, TRL's sampler, rollouts."""
    max_completion_length: int | None = None
    """New tokens per completion; None = the task's longest answer + 1."""
    model: str | None = None
    """A local Hugging Face causal-LM directory; None = the lab's tiny model."""
    device: str = "cpu"
    """``cpu`` or ``cuda`` (TRL trains on the first visible GPU; pick one with
    ``CUDA_VISIBLE_DEVICES``). Untested on a GPU so far: the tests run the tiny model on CPU."""
    cache_dir: str | None = None
    """Cache of base policies; None = ``$RLVITALS_LAB_CACHE`` or ``~/.cache/rlvitals/lab``."""
    warm_steps: int = 1000
    """Warm-start steps of the tiny base model (part of its cache key)."""
    out: str | None = None
    """Folder of the run (recording, result.json); None = a temporary folder, removed."""
    threads: int = 1
    """torch CPU threads of this run."""


PRESETS: dict[str, Args] = {
    "smoke": Args(budget=64 * 8, evals=1, eval_prompts=32, eval_samples=2, warm_steps=200),
    "quick": Args(budget=64 * 60, evals=2, eval_prompts=64),
    "full": Args(budget=64 * 300, evals=6),
}
"""``smoke``: seconds, for tests; ``quick``: about 10 s; ``full``: the experiments' run length."""


@dataclass(frozen=True)
class Method:
    """A lab method: an estimator, its config, and how batches are sampled.

    Attributes:
        name: the lab's name.
        estimator: registered estimator name.
        config: its config fields.
        dynamic: DAPO dynamic sampling (Yu et al., arXiv 2503.14476) instead of plain batches.
    """

    name: str
    estimator: str
    config: dict[str, Any] = field(default_factory=dict)
    dynamic: bool = False


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("grpo", "grpo"),
        Method("dr_grpo", "dr_grpo"),
        Method("avspo", "avspo"),
        Method("avspo_released", "avspo_released"),
        Method("zero_var_filter", "zero_var_filter"),
        Method("dapo", "grpo", dynamic=True),
        Method("history_baseline", "history_baseline"),
        Method("pg_grpo", "pg_grpo"),
        Method("pg_grpo_select", "pg_grpo", {"baseline": False}),
        Method("pg_grpo_baseline", "pg_grpo", {"select": False}),
        Method("pg_grpo_iw", "pg_grpo", {"importance": True}),
        Method("ctl_random_sign", "lab_pg_control", {"control": "random_sign"}),
        Method("ctl_shuffled_keys", "lab_pg_control", {"control": "shuffled_keys"}),
        Method("ctl_random_select", "pg_grpo", {"select_eps": 1.0}),
    )
}
"""The lab's methods. ``pg_grpo`` is posterior-guided GRPO (selection and baseline);
``pg_grpo_select`` its selection alone (collapsed groups keep GRPO's 0), ``pg_grpo_baseline``
its baseline alone (TRL's shuffled sampler), ``pg_grpo_iw`` with 1/q importance weights. The
negative controls (issue 26.7) are ``pg_grpo`` with one ingredient randomised:
``ctl_random_sign`` (each collapsed group's advantage gets a random sign, its size kept),
``ctl_shuffled_keys`` (every prompt is selected by and scored against another prompt's
posterior: a fixed random permutation of the training prompts) and ``ctl_random_select``
(prompts drawn uniformly by the same sampler, ``select_eps = 1``)."""


def method_of(name: str) -> Method:
    """The lab method ``name``, or a plain method for any registered estimator."""
    from rlvitals.estimators import get_estimator
    from rlvitals.lab import _variants  # noqa: F401  (registers the ablation estimator)

    if name in METHODS:
        return METHODS[name]
    return Method(name, get_estimator(name).name)


def _check(args: Args) -> None:
    from rlvitals.lab.tasks import MIXED_LEVEL, get_task

    get_task(args.task)
    if not (isinstance(args.level, int) and 0 <= args.level <= MIXED_LEVEL):
        raise ValueError(
            f"level must be an integer in 0..{MIXED_LEVEL} (7 = the mixed level), "
            f"got {args.level!r}"
        )
    if args.reward not in ("binary", "partial"):
        raise ValueError(f"reward must be 'binary' or 'partial', got {args.reward!r}")
    for name in ("group_size", "prompts_per_step", "budget", "train_prompts", "eval_prompts"):
        v = getattr(args, name)
        if not (isinstance(v, int) and v >= (2 if name == "group_size" else 1)):
            raise ValueError(f"{name} must be an integer >= 1 (G >= 2), got {v!r}")
    if args.budget < args.group_size * args.prompts_per_step:
        raise ValueError(
            f"budget {args.budget} is less than one step "
            f"({args.prompts_per_step} prompts x G={args.group_size})"
        )
    if not args.temperature > 0:
        raise ValueError(f"temperature must be > 0, got {args.temperature!r}")
    if args.eval_set not in ("level", "common"):
        raise ValueError(f"eval_set must be 'level' or 'common', got {args.eval_set!r}")
    method_of(args.method)


Progress = Callable[[int, int], None]
"""``progress(generated, budget)`` after every step."""


def train(args: Args, *, progress: Progress | None = None, base: Any = None) -> dict[str, Any]:
    """Train one lab run; returns its result (also written to ``<out>/<name>/result.json``).

    Args:
        args: the settings.
        progress: called with ``(completions generated, budget)`` after every step.
        base: a prepared :class:`~rlvitals.lab.policy.BasePolicy` (default: prepared, or read
            from the cache, here).

    The result holds ``args``, ``summary`` (ACR_100, mean raw and residual ACR, final held-out
    accuracy, entropy, wall time, wasted rollouts, ...), ``steps`` (the lab's own per-step
    measurements), ``evals`` (accuracy against completions generated) and ``recording`` (the
    rlvitals recording directory, when ``out`` is set).
    """
    _check(args)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import tempfile

    import torch

    started = time.perf_counter()
    cpu_started = time.process_time()
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    tmp = None
    if args.out is None:
        tmp = tempfile.TemporaryDirectory(prefix="rlvitals-lab-")
        run_dir = Path(tmp.name)
    else:
        run_dir = Path(args.out) / args.name
    try:
        with warnings.catch_warnings():
            # transformers 5 deprecation notices TRL 1.16 triggers on every run
            warnings.simplefilter("ignore", FutureWarning)
            return _train(args, run_dir, (started, cpu_started), progress, base, tmp is None)
    finally:
        torch.set_num_threads(threads)
        if tmp is not None:
            tmp.cleanup()


def _train(args: Args, run_dir: Path, started: tuple, progress, base, persist: bool) -> dict:
    import torch
    import transformers
    from datasets import Dataset
    from transformers import PrinterCallback

    from rlvitals.integrations.trl import RlvitalsCallback
    from rlvitals.lab._trainer import BudgetCallback, EvalCallback, lab_trainer_class
    from rlvitals.lab.policy import WarmStart, load_policy, pass_rates, prepare_base
    from rlvitals.lab.tasks import LEVEL_TARGETS, get_task, level_name, make_prompts
    from rlvitals.signal import acr_100

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()

    # -- set-up: task, level, prompts ----------------------------------------------------------
    task = get_task(args.task)
    if base is None:
        base = prepare_base(
            task,
            model=args.model,
            device=args.device,
            cache_dir=args.cache_dir,
            warm=WarmStart(steps=args.warm_steps),
        )
    mixture = base.mixture(args.level)
    train_set = make_prompts(task, mixture, args.train_prompts, seed=args.seed, split="train")
    eval_mixture = mixture
    if args.eval_set == "common":  # every measured size, equally weighted
        eval_mixture = {size: 1.0 for size in sorted(base.pass_rates)}
    eval_set = make_prompts(task, eval_mixture, args.eval_prompts, seed=0, split="eval")
    answers = {p.prompt: p for p in train_set}
    partial = args.reward == "partial"

    def reward(prompts, completions, **kwargs) -> list[float]:  # the verifier
        return [task.reward(answers[p], c, partial=partial) for p, c in zip(prompts, completions)]

    reward.__name__ = f"{task.name}_{args.reward}"

    # -- set-up: the policy, fresh from the base for every run ----------------------------------
    torch.manual_seed(args.seed)
    model, tok = load_policy(base.path, args.device)
    max_len = args.max_completion_length or task.answer_chars + 1
    eval_point = [0]

    def evaluate() -> dict[str, float]:
        eval_point[0] += 1  # the same sampling seed at the k-th evaluation of every run
        kw = dict(max_new_tokens=max_len, partial=partial, seed=1000 + eval_point[0])
        sampled = pass_rates(
            model,
            tok,
            task,
            eval_set,
            samples=args.eval_samples,
            temperature=args.eval_temperature,
            **kw,
        )
        greedy = pass_rates(model, tok, task, eval_set, samples=1, temperature=0.0, **kw)
        return {
            "accuracy": sum(sampled) / len(sampled),
            "greedy_accuracy": sum(greedy) / len(greedy),
        }

    # -- the trainer: TRL's GRPO loop with the method's estimator ------------------------------
    method = method_of(args.method)
    per_step = args.prompts_per_step * args.group_size
    config = grpo_config(
        run_dir,
        args.seed,
        args.device,
        max_steps=math.ceil(args.budget / per_step),
        per_device_train_batch_size=per_step,
        num_generations=args.group_size,
        max_completion_length=max_len,
        temperature=args.temperature,
        learning_rate=args.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=args.warmup_steps,
        beta=args.beta,
        epsilon=args.epsilon,
        loss_type=args.loss_type,
        report_to="none",
    )
    recorder = RlvitalsCallback(run_dir / "rlvitals", doctor_every=0)
    evaluator = EvalCallback(evaluate, args.budget, args.evals, lambda: recorder.recorder)
    budget_stop = BudgetCallback()
    dynamic = None
    if method.dynamic:
        dynamic = {
            "max_attempts": args.max_attempts,
            "prompts": [p.prompt for p in train_set],
            "seed": args.seed,
        }
    trainer = lab_trainer_class()(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in train_set]}),
        processing_class=tok,
        estimator=method.estimator,
        estimator_config={**method.config, **args.estimator_config},
        callbacks=[evaluator, recorder, budget_stop],
        lab_budget=args.budget,
        dynamic=dynamic,
    )
    trainer.remove_callback(PrinterCallback)
    evaluator.bind(trainer)
    budget_stop.bind(trainer)
    if progress is not None:
        trainer.add_callback(_ProgressCallback(trainer, progress))

    # -- the loop: sample -> score -> advantage -> update -> record (TRL + the callbacks) ------
    train_started = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - train_started
    with contextlib.suppress(OSError):  # TRL's output folder, empty with save_strategy="no"
        (run_dir / "trl").rmdir()

    # -- what the run did -------------------------------------------------------------------
    steps = trainer.lab_steps
    acr = [s["acr"] for s in steps]
    history = [r for r in trainer.state.log_history if "entropy" in r]
    tail = history[-max(1, len(history) // 10) :]
    wasted = sum(s["wasted"] for s in steps)
    summary = {
        "method": method.name,
        "estimator": method.estimator,
        "level": args.level,
        "level_name": level_name(args.level),
        "level_target": LEVEL_TARGETS[args.level] if args.level < len(LEVEL_TARGETS) else None,
        "level_base_rate": base.level_rate(args.level),
        "steps": len(steps),
        "generated": trainer.lab_generated,
        "acr_100": acr_100(acr) if acr else math.nan,
        "acr_mean": _mean(acr),
        "acr_residual_mean": _mean([s["acr_residual"] for s in steps]),
        "acr_solve_all_mean": _mean([s["acr_solve_all"] for s in steps]),
        "acr_solve_none_mean": _mean([s["acr_solve_none"] for s in steps]),
        # groups whose own rewards differ (0 < correct < G), per 1,000 generated completions
        "informative_per_1k": 1000.0
        * sum(s["groups"] * (1.0 - s["acr"]) for s in steps if s["acr"] == s["acr"])
        / max(1, trainer.lab_generated),
        "acr_final": _mean(acr[-max(1, len(acr) // 10) :]),
        "wasted_fraction": wasted / trainer.lab_generated if trainer.lab_generated else math.nan,
        "base_accuracy": evaluator.points[0]["accuracy"],
        "final_accuracy": evaluator.points[-1]["accuracy"],
        "final_greedy_accuracy": evaluator.points[-1]["greedy_accuracy"],
        "entropy_final": _mean([r["entropy"] for r in tail]),
        "train_seconds": round(train_seconds, 3),
        "wall_seconds": round(time.perf_counter() - started[0], 3),
        "cpu_seconds": round(time.process_time() - started[1], 3),
        "estimator_fallbacks": sum(trainer.rlvitals_guard.errors.values()),
        "sampler": "posterior" if trainer.lab_sampler is not None else "trl",
    }
    result = {
        "args": dataclasses.asdict(args),
        "summary": summary,
        "steps": steps,
        "evals": evaluator.points,
        "base": {"path": str(base.path), "mixture": {str(k): v for k, v in mixture.items()}},
        "recording": str(run_dir / "rlvitals") if persist else None,
    }
    if persist:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "result.json").write_text(json.dumps(_jsonable(result), indent=1))
    return _jsonable(result)


def grpo_config(run_dir: Path, seed: int, device: str, **settings: Any) -> Any:
    """TRL's ``GRPOConfig`` of a lab or zoo run: the run's own ``settings`` over what every such
    run shares: plain sampling (no top-k, top-p), a log row every step, nothing saved, fp32 on
    ``device``, no dataloader workers, no tqdm, seeded by ``seed``, TRL's folder in
    ``run_dir/trl``."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(run_dir / "trl"),
        top_k=0,
        top_p=1.0,
        logging_steps=1,
        save_strategy="no",
        bf16=False,
        use_cpu=device == "cpu",
        activation_checkpointing=False,
        dataloader_num_workers=0,
        seed=seed,
        data_seed=seed,
        disable_tqdm=True,
        **settings,
    )


def _ProgressCallback(trainer: Any, progress: Progress) -> Any:
    """A callback calling ``progress(generated, budget)`` after every optimizer step."""
    from transformers import TrainerCallback

    class ProgressCallback(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            progress(trainer.lab_generated, trainer.lab_budget)

    return ProgressCallback()


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return sum(xs) / len(xs) if xs else math.nan


def _jsonable(x: Any) -> Any:
    """NaN and inf as None, numpy numbers as Python numbers (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x

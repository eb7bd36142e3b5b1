"""The failure zoo: real TRL GRPO runs with one known failure injected into each.

Each run is the lab's code path (:mod:`rlvitals.lab.train`: the tiny Qwen2 warm-started on the
``sum`` task, TRL's ``GRPOTrainer`` through ``RlvitalsGRPOTrainer``, CPU) with one condition of
:mod:`rlvitals.conditions` injected from *inside* the run, the way it happens in practice:

============================  ==================================================================
condition                     injection
============================  ==================================================================
``HEALTHY``                   none
``VERIFIER_CONSTANT``         from step k the reward function returns 0.0 for every completion
                              (its answer parser broke: nothing matches any more)
``IDENTICAL_COMPLETIONS``     from step k generation is greedy (``do_sample=False``)
``SATURATED``                 the easiest level (L0, base pass rate ~95%)
``TOO_HARD``                  the hardest level (L6, ~1%)
``SMALL_GROUPS``              G = 2 and four prompts a step at a mid level (learning rate 5e-5:
                              eight completions a step are a noisy gradient)
``ADVANTAGE_PIPELINE``        from step k the estimator's std epsilon is 1e4 (a typo for 1e-4)
``POLICY_DEGRADATION``        from step k the learning rate is 3x (the tiny policy degrades
                              over ~20 steps; 6x wrecks it in three)
``ENTROPY_COLLAPSE``          from step k the policy's logits grow 3% a step (the gain of its
                              final norm): what entropy collapse is — a policy ever more sure of
                              its answers, the pass rate holding while groups agree. (A sign
                              error on TRL's ``entropy_coef``, -10 or -3, wrecked the tiny
                              policy's pass rate before its entropy fell; -1 did nothing.)
``ENTROPY_BLOWUP``            from step k TRL's ``entropy_coef`` is 3.0 (a bonus far too large)
``RUNAWAY_LENGTH``            from step k the end-of-sequence token's logit is lowered by 4 (a
                              stop token the template no longer favours): most completions
                              run to the cap, the few that stop stay short
``LENGTH_LIMIT``              ``max_completion_length`` 2 from the start (two-digit answers need 3)
``KL_BLOWUP``                 beta 0.05 and, from step k, the learning rate 100x
``REWARD_HACKING``            the reward adds 1 for a one-character completion (a length term a
                              policy can game: two-digit sums cannot be right in one character)
============================  ==================================================================

``NO_GROUP_BASELINE`` has no zoo run: TRL refuses ``num_generations < 2``
(``trl/trainer/grpo_config.py``, TRL 1.16), so the condition is only seen in veRL/OpenRLHF logs.

The verifier is strict, as a math verifier is: a completion scores 1 when it terminated (an
end-of-sequence token) and its text is exactly the answer. Each run folder holds what a user
would have: ``rlvitals/`` (the :class:`~rlvitals.integrations.trl.RlvitalsCallback` recording),
``trainer_state.json`` (TRL's ``save_state``), ``console.log`` (TRL's printed log rows) and
``tensorboard/`` (``report_to="tensorboard"``), and the ground truth in ``truth.json``:
``condition``, ``injected_step`` (1 for conditions present from the start), and per step the
ACR of the rewards the reward function returned and the true pass rate by the honest verifier.

The held-out accuracy (32 evaluation prompts x 2 samples, honest verifier) is logged as
``eval_accuracy`` every :data:`EVAL_EVERY` steps, so reward hacking is visible to every writer.

One module, a little over 500 lines: each condition's injection sits beside the run that applies
it and the truth that scores it, so a condition is read, and calibrated, in one place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["PRESETS", "ZooRun", "runs_of", "zoo"]

STEPS = 80
"""Optimizer steps of a zoo run."""
INJECT_AT = 20
"""The step from which an injected fault acts (k)."""
EVAL_EVERY = 5
"""Steps between held-out evaluations."""
LEARNING_RATE = 2e-4
"""The healthy learning rate of every zoo run."""
MAX_LENGTH = 8
"""``max_completion_length`` of zoo runs: room for an answer (1-3 characters) and EOS, and for
a run-away completion to show as one."""


@dataclass(frozen=True)
class ZooRun:
    """The settings of one zoo run.

    Attributes:
        condition: the condition ID injected (:data:`rlvitals.conditions.CONDITIONS`).
        seed: the run's seed.
        split: ``"dev"`` (to tune the doctor on) or ``"heldout"`` (only to report).
        level: difficulty level of the prompts (0..6, :mod:`rlvitals.lab.tasks`).
        group_size: G.
        prompts_per_step: groups per step.
        steps: optimizer steps.
        learning_rate: AdamW learning rate before any injection.
        beta: KL coefficient.
        max_length: ``max_completion_length``.
        inject: ``(kind, value)`` applied at ``inject_at``; None = nothing injected later.
        inject_at: the step the injection starts acting (1 = from the start).
        hack: the reward adds the gameable length term.
    """

    condition: str
    seed: int = 0
    split: str = "dev"
    level: int = 2
    group_size: int = 8
    prompts_per_step: int = 8
    steps: int = STEPS
    learning_rate: float = LEARNING_RATE
    beta: float = 0.0
    max_length: int = MAX_LENGTH
    inject: tuple[str, float] | None = None
    inject_at: int = 1
    hack: bool = False

    @property
    def name(self) -> str:
        return f"{self.condition.lower()}-s{self.seed}"


def _spec(condition: str) -> dict[str, Any]:
    """The settings that make ``condition`` (see the module table)."""
    k = {"inject_at": INJECT_AT}
    return {
        "HEALTHY": {},
        "VERIFIER_CONSTANT": {"inject": ("verifier_constant", 0.0), **k},
        "IDENTICAL_COMPLETIONS": {"inject": ("greedy", 1.0), **k},
        "SATURATED": {"level": 0},
        "TOO_HARD": {"level": 6},
        "SMALL_GROUPS": {"group_size": 2, "prompts_per_step": 4, "learning_rate": 5e-5},
        "ADVANTAGE_PIPELINE": {"inject": ("adv_eps", 1e4), **k},
        "POLICY_DEGRADATION": {"inject": ("lr_times", 3.0), **k},
        "ENTROPY_COLLAPSE": {"inject": ("sharpen", 1.03), **k},
        "ENTROPY_BLOWUP": {"inject": ("entropy_coef", 3.0), **k},
        "RUNAWAY_LENGTH": {"inject": ("eos_bias", -10.0), **k},
        "LENGTH_LIMIT": {"max_length": 2},
        "KL_BLOWUP": {"beta": 0.05, "inject": ("lr_times", 100.0), **k},
        "REWARD_HACKING": {"hack": True, "learning_rate": 1e-3},
    }[condition]


ZOO_CONDITIONS = (
    "HEALTHY",
    "VERIFIER_CONSTANT",
    "IDENTICAL_COMPLETIONS",
    "SATURATED",
    "TOO_HARD",
    "SMALL_GROUPS",
    "ADVANTAGE_PIPELINE",
    "POLICY_DEGRADATION",
    "ENTROPY_COLLAPSE",
    "ENTROPY_BLOWUP",
    "RUNAWAY_LENGTH",
    "LENGTH_LIMIT",
    "KL_BLOWUP",
    "REWARD_HACKING",
)
"""Conditions with a zoo run (every condition but NO_GROUP_BASELINE)."""
DEV_SEEDS = (0, 1, 2, 3, 4, 5, 6, 7)
"""Seeds the doctor is tuned on. Seeds 1 and 3, then 5 and 7, were held out; once a held-out
split's misses had been read to fix the differential (a KL jump against a noisy start, a fall
after a slow start; a truncation episode the policy half-recovers from, an onset dated at step
1), its seeds became development seeds and fresh held-out seeds replaced them
(benchmarks/RESULTS.md has every round's score)."""
HELDOUT_SEEDS = (9, 11)
"""Seeds only scored, never read while tuning (benchmarks/zoo.py reports them apart)."""
HEALTHY_DEV_SEEDS = (0, 1, 2, 3, 4, 5, 6, 7, 8)
HEALTHY_HELDOUT_SEEDS = (9, 11, 13)


def runs_of(conditions: Sequence[str], *, dev: bool = True, heldout: bool = True) -> list[ZooRun]:
    """The zoo runs of ``conditions``: development seeds, held-out seeds, or both."""
    out = []
    for cid in conditions:
        healthy = cid == "HEALTHY"
        seeds = []
        if dev:
            seeds += [(s, "dev") for s in (HEALTHY_DEV_SEEDS if healthy else DEV_SEEDS)]
        if heldout:
            seeds += [(s, "heldout") for s in (HEALTHY_HELDOUT_SEEDS if healthy else HELDOUT_SEEDS)]
        out += [ZooRun(cid, seed=s, split=sp, **_spec(cid)) for s, sp in seeds]
    return out


PRESETS: dict[str, list[ZooRun]] = {
    "smoke": [
        r
        for r in runs_of(
            ["HEALTHY", "IDENTICAL_COMPLETIONS", "POLICY_DEGRADATION", "RUNAWAY_LENGTH"],
            heldout=False,
        )
        if r.seed == 2
    ],  # one healthy control and three injected conditions, development seed 2
    "dev": runs_of(ZOO_CONDITIONS, heldout=False),
    "full": runs_of(ZOO_CONDITIONS),
}
"""``smoke``: four runs (one healthy control), for CI; ``dev``: every condition's development
seeds; ``full``: development and held-out seeds."""


# --------------------------------------------------------------------------------------------
# One run


class _Truth:
    """What the reward function returned and what was really right, per step."""

    def __init__(self, group_size: int):
        self.g = group_size
        self.steps: list[dict[str, Any]] = []

    def add(self, step: int, rewards: list[float], correct: list[float]) -> None:
        g = self.g
        groups = [rewards[i : i + g] for i in range(0, len(rewards), g)]
        collapsed = [max(x) - min(x) <= 1e-6 for x in groups]
        self.steps.append(
            {
                "step": step,
                "acr": sum(collapsed) / len(groups),
                "pass_rate": sum(correct) / len(correct),
                "reward_mean": sum(rewards) / len(rewards),
            }
        )


def _reward_fn(spec: ZooRun, answers: dict, eos: int, truth: _Truth, state: dict):
    """The zoo's verifier (strict), with the reward-side injections."""

    def reward(prompts, completions, completion_ids=None, **kwargs) -> list[float]:
        correct = []
        for p, text, ids in zip(prompts, completions, completion_ids or [None] * len(prompts)):
            terminated = ids is None or eos in list(ids)
            correct.append(float(terminated and text.strip() == answers[p].answer))
        rewards = list(correct)
        if spec.hack:  # a length term the policy can game
            rewards = [r + float(len(t.strip()) == 1) for r, t in zip(rewards, completions)]
        if state["verifier_constant"] is not None:  # the answer parser broke: one score for all
            rewards = [state["verifier_constant"]] * len(rewards)
        truth.add(state["step"], rewards, correct)
        return rewards

    reward.__name__ = "sum_exact"
    return reward


def _injector(spec: ZooRun, state: dict) -> Any:
    """A callback applying ``spec.inject`` before step ``spec.inject_at`` generates."""
    from transformers import TrainerCallback

    class Injector(TrainerCallback):
        trainer: Any = None

        def on_step_begin(self, args, st, control, **kwargs):
            state["step"] = st.global_step + 1
            if spec.inject is None or state["step"] < spec.inject_at:
                return
            kind, value = spec.inject
            t = self.trainer
            if kind == "sharpen":  # every step from k: the policy's logits grow by `value`
                _sharpen(t.model, value)
                return
            if state["step"] != spec.inject_at:
                return
            if kind == "verifier_constant":
                state["verifier_constant"] = value
            elif kind == "greedy":
                _generation(t, do_sample=False)
            elif kind == "eos_bias":  # EOS made unlikely, not impossible: some still stop
                _generation(t, sequence_bias={(t.processing_class.eos_token_id,): value})
            elif kind == "entropy_coef":  # TRL's entropy term (grpo_trainer.py, TRL 1.16)
                t.entropy_coef = value
                t._entropy_bonus_enabled = True
            elif kind == "adv_eps":
                t.rlvitals_config = dataclasses.replace(t.rlvitals_config, eps=value)
            elif kind == "lr_times":
                _scale_lr(t, value)
            else:  # pragma: no cover - _spec names only the kinds above
                raise ValueError(f"unknown injection {kind!r}")

    return Injector()


def _sharpen(model: Any, factor: float) -> None:
    """Multiply the policy's logits by ``factor``: the gain of the final RMSNorm, which feeds
    the LM head alone, scales every logit of the next forward pass (Qwen2 ``model.norm``)."""
    import torch

    with torch.no_grad():
        model.model.norm.weight.mul_(factor)


def _scale_lr(trainer: Any, factor: float) -> None:
    """Multiply the learning rate from now on (the optimizer's and the scheduler's base: a
    LambdaLR sets the rate from its base every step)."""
    for group in trainer.optimizer.param_groups:
        group["lr"] *= factor
    sched = trainer.lr_scheduler
    sched.base_lrs = [lr * factor for lr in sched.base_lrs]


def _generation(trainer: Any, **changes: Any) -> None:
    """Change TRL's sampling settings: its GenerationConfig and the kwargs it overrides the
    model's generation config with (TRL 1.16 ``grpo_trainer.py``: both are used)."""
    for key, value in changes.items():
        setattr(trainer.generation_config, key, value)
        trainer.generation_kwargs[key] = value


def _evaluator(eval_set: list, state: dict) -> Any:
    from transformers import TrainerCallback

    from rlvitals.lab.policy import generate

    class HeldOut(TrainerCallback):
        trainer: Any = None

        def on_step_end(self, args, st, control, **kwargs):
            if st.global_step % EVAL_EVERY and st.global_step != 1:
                return
            t = self.trainer
            texts = generate(
                t.model,
                t.processing_class,
                [p.prompt for p in eval_set],
                samples=2,
                temperature=1.0,
                max_new_tokens=MAX_LENGTH,
                seed=1000 + st.global_step,
            )
            right = [
                float(texts[i].strip() == p.answer)
                for i, p in enumerate(q for q in eval_set for _ in range(2))
            ]
            state["eval"] = sum(right) / len(right)

    return HeldOut()


def _zoo_trainer(base_cls: type) -> type:
    class ZooTrainer(base_cls):
        """Adds the pending held-out accuracy to the training log row of its step."""

        zoo_state: dict[str, Any] | None = None  # set per run, after construction

        def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
            pending = self.zoo_state.get("eval")
            if pending is not None and "loss" in logs:
                logs = {**logs, "eval_accuracy": pending}
                self.zoo_state["eval"] = None
            super().log(logs, *args, **kwargs)

    return ZooTrainer


def run_one(spec: ZooRun, out: str | os.PathLike, *, base: Any = None, **base_kw: Any) -> dict:
    """Train one zoo run into ``out/<spec.name>``; returns its truth (also ``truth.json``).

    ``base_kw`` go to :func:`rlvitals.lab.policy.prepare_base` (``model``, ``device``,
    ``cache_dir``) when ``base`` is None.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers/TRL deprecation notices, greedy notes
            return _run_one(spec, Path(out) / spec.name, base, base_kw)
    finally:
        torch.set_num_threads(threads)


def _run_one(spec: ZooRun, run_dir: Path, base: Any, base_kw: dict) -> dict:
    import shutil

    import torch
    import transformers
    from datasets import Dataset

    from rlvitals.integrations.trl import RlvitalsCallback, RlvitalsGRPOTrainer
    from rlvitals.lab.policy import load_policy, prepare_base
    from rlvitals.lab.tasks import get_task, make_prompts
    from rlvitals.lab.train import _jsonable, grpo_config

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    started = time.perf_counter()
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)

    # -- set-up: the lab's task, level and base policy --------------------------------------
    task = get_task("sum")
    base = base or prepare_base(task, **base_kw)
    mixture = base.mixture(spec.level)
    n_prompts = spec.steps * spec.prompts_per_step
    train_set = make_prompts(task, mixture, n_prompts, seed=spec.seed, split="train")
    eval_set = make_prompts(task, base.mixture(2), 32, seed=0, split="eval")
    answers = {p.prompt: p for p in train_set}
    torch.manual_seed(spec.seed)
    model, tok = load_policy(base.path, base_kw.get("device", "cpu"))
    state: dict[str, Any] = {"step": 1, "verifier_constant": None, "eval": None}
    truth = _Truth(spec.group_size)
    reward = _reward_fn(spec, answers, tok.eos_token_id, truth, state)

    # -- the trainer: every writer a user would have -----------------------------------------
    os.environ["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
    per_step = spec.prompts_per_step * spec.group_size
    # TRL prints each log row (PrinterCallback, no tqdm): the console writer
    config = grpo_config(
        run_dir,
        spec.seed,
        base_kw.get("device", "cpu"),
        max_steps=spec.steps,
        per_device_train_batch_size=per_step,
        num_generations=spec.group_size,
        max_completion_length=spec.max_length,
        temperature=1.0,
        learning_rate=spec.learning_rate,
        lr_scheduler_type="constant",
        beta=spec.beta,
        report_to=["tensorboard"],
    )
    injector = _injector(spec, state)
    held_out = _evaluator(eval_set, state)
    recorder = RlvitalsCallback(run_dir / "rlvitals", doctor_every=0)
    trainer = _zoo_trainer(RlvitalsGRPOTrainer)(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [p.prompt for p in train_set]}),
        processing_class=tok,
        callbacks=[injector, held_out, recorder],
    )
    trainer.zoo_state = state
    injector.trainer = held_out.trainer = trainer

    # -- the loop, its printout captured as a console log ------------------------------------
    console = io.StringIO()
    with contextlib.redirect_stdout(console):
        trainer.train()
    (run_dir / "console.log").write_text(console.getvalue(), encoding="utf-8")
    trainer.state.save_to_json(str(run_dir / "trainer_state.json"))
    shutil.rmtree(run_dir / "trl", ignore_errors=True)
    os.environ.pop("TENSORBOARD_LOGGING_DIR", None)

    doc = {
        "condition": spec.condition,
        "injected_step": spec.inject_at if spec.inject else 1,
        "injection": list(spec.inject) if spec.inject else None,
        "split": spec.split,
        "seed": spec.seed,
        "run": dataclasses.asdict(spec),
        "seconds": round(time.perf_counter() - started, 2),
        "steps": truth.steps,
    }
    (run_dir / "truth.json").write_text(json.dumps(_jsonable(doc), indent=1), encoding="utf-8")
    return doc


# --------------------------------------------------------------------------------------------
# The whole zoo


def _job(spec_dict: dict, out: str, base_dict: dict | None, base_kw: dict) -> dict:
    from rlvitals.lab.policy import BasePolicy

    spec = ZooRun(
        **{**spec_dict, "inject": tuple(spec_dict["inject"]) if spec_dict["inject"] else None}
    )
    base = BasePolicy.from_dict(base_dict) if base_dict else None
    return run_one(spec, out, base=base, **base_kw)


def _done(spec: ZooRun, out: Path) -> dict | None:
    """The truth of a finished run with the same settings (a zoo is resumable)."""
    from rlvitals.lab._runner import read_json

    doc = read_json(out / spec.name / "truth.json")
    want = json.loads(json.dumps(dataclasses.asdict(spec)))
    return doc if isinstance(doc, dict) and doc.get("run") == want else None


def zoo(
    preset: str | Sequence[ZooRun] = "smoke",
    out: str | os.PathLike = "zoo",
    *,
    workers: int = 2,
    model: str | None = None,
    device: str = "cpu",
    cache_dir: str | None = None,
    progress: Callable[[ZooRun, int, int], None] | None = None,
) -> list[dict]:
    """Run (or read back) every run of ``preset``; returns their truths in preset order.

    Args:
        preset: ``"smoke"``, ``"dev"``, ``"full"`` (:data:`PRESETS`) or a list of runs.
        out: folder of the zoo; each run in ``out/<condition>-s<seed>``. Resumable.
        workers: runs training at once (one torch thread each).
        model: a local Hugging Face causal-LM directory instead of the tiny model.
        device: ``cpu`` or ``cuda``.
        cache_dir: cache of base policies (default ``~/.cache/rlvitals/lab``).
        progress: called with ``(run, done, total)`` after each run.
    """
    from rlvitals.lab._runner import map_jobs
    from rlvitals.lab.policy import prepare_base

    if isinstance(preset, str):
        if preset not in PRESETS:
            raise ValueError(f"unknown zoo preset {preset!r}; valid: {', '.join(PRESETS)}")
        runs = PRESETS[preset]
    else:
        runs = list(preset)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base_kw = {"model": model, "device": device, "cache_dir": cache_dir}
    base = prepare_base("sum", **base_kw)
    results: dict[int, dict] = {}
    todo = []
    for i, spec in enumerate(runs):
        done = _done(spec, out)
        if done is not None:
            results[i] = done
        else:
            todo.append(i)
    finished = len(results)
    if progress:
        for i in results:
            progress(runs[i], finished, len(runs))
    jobs = {i: (dataclasses.asdict(runs[i]), str(out), base.to_dict(), base_kw) for i in todo}
    for i, result in map_jobs(_job, jobs, workers):
        results[i] = result
        finished += 1
        if progress:
            progress(runs[i], finished, len(runs))
    index = [{"name": runs[i].name, **_summary(results[i])} for i in range(len(runs))]
    (out / "zoo.json").write_text(json.dumps({"runs": index}, indent=1), encoding="utf-8")
    return [results[i] for i in range(len(runs))]


def _summary(truth: dict) -> dict:
    return {k: truth[k] for k in ("condition", "injected_step", "split", "seed", "seconds")}

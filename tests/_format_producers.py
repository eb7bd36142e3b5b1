"""Writers of the foreign log formats the importers read, byte-faithful to each trainer's source.

Each function writes what the trainer writes, with the exact format strings of its writer (cited
per function), from one simulated GRPO run (:func:`simulate`): binary rewards, G completions per
prompt, a pass rate that climbs and then saturates so groups collapse. Where the real writer
installs on CPU the tests use it (transformers' callbacks, trackio, pandas) and check these
byte for byte against it. Imported by conftest as ``rlvitals_tests_format_producers``; the
standard library only at import time.
"""

from __future__ import annotations

import gzip
import json
import math
import pprint
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TS = "2026-01-01 12:00:00"


@dataclass
class Step:
    step: int
    rewards: list[list[float]]  # (groups, G)

    @property
    def flat(self) -> list[float]:
        return [r for g in self.rewards for r in g]

    @property
    def mean(self) -> float:
        f = self.flat
        return sum(f) / len(f)

    @property
    def batch_std(self) -> float:
        f = self.flat
        m = self.mean
        return math.sqrt(sum((x - m) ** 2 for x in f) / (len(f) - 1))

    @property
    def group_std_mean(self) -> float:
        out = []
        for g in self.rewards:
            m = sum(g) / len(g)
            out.append(math.sqrt(sum((x - m) ** 2 for x in g) / (len(g) - 1)))
        return sum(out) / len(out)

    @property
    def zero_std_frac(self) -> float:
        return sum(1 for g in self.rewards if max(g) == min(g)) / len(self.rewards)

    @property
    def solve_all(self) -> float:
        return sum(1 for g in self.rewards if min(g) == 1.0) / len(self.rewards)

    @property
    def solve_none(self) -> float:
        return sum(1 for g in self.rewards if max(g) == 0.0) / len(self.rewards)

    def advantages(self) -> list[list[float]]:
        """GRPO (unbiased std, eps 1e-4), 0 for a collapsed group."""
        out = []
        for g in self.rewards:
            m = sum(g) / len(g)
            s = math.sqrt(sum((x - m) ** 2 for x in g) / (len(g) - 1))
            out.append([0.0 if s == 0 else (x - m) / (s + 1e-4) for x in g])
        return out


def simulate(steps: int = 60, groups: int = 8, g: int = 4, seed: int = 0) -> list[Step]:
    """A run whose pass rate climbs to 1: early steps mix, late steps are all solve_all."""
    rng = random.Random(seed)
    out = []
    for s in range(1, steps + 1):
        p = min(1.0, 0.2 + s / (0.6 * steps))
        rows = []
        for _ in range(groups):
            q = min(1.0, max(0.0, p + rng.uniform(-0.2, 0.2)))
            rows.append([1.0 if rng.random() < q else 0.0 for _ in range(g)])
        out.append(Step(s, rows))
    return out


def trl_row(st: Step) -> dict[str, Any]:
    """A TRL 1.16 GRPOTrainer log dict (``_generate_and_score_completions`` keys, in order)."""
    return {
        "loss": 0.01 * st.mean,
        "grad_norm": 0.5 * (1 - st.zero_std_frac) + 1e-3,
        "learning_rate": 1e-6,
        "num_tokens": 158.0 * st.step,
        "completions/mean_length": 5.875,
        "rewards/acc/mean": st.mean,
        "rewards/acc/std": st.batch_std,
        "reward": st.mean,
        "reward_std": st.batch_std,
        "frac_reward_zero_std": st.zero_std_frac,
        "kl": 6.2e-05 * st.step,
        "entropy": 3.7 - 0.01 * st.step,
        "clip_ratio/region_mean": 0.0,
        "step_time": 0.015,
    }


# --- TRL --------------------------------------------------------------------------------------


def trl_console_line(logs: dict[str, Any]) -> str:
    """``PrinterCallback.on_log`` of transformers 5.24.0 (``trainer_callback.py``):
    ``print({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in logs.items()})``."""
    return str({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in logs.items()})


def write_trl_console(
    path: Path, run: list[Step], logging_steps: int = 2, legacy: bool = False
) -> Path:
    """The stdout+stderr of a TRL GRPO run with ``logging_steps``: tqdm frames (``\\r``), the dict
    lines, the summary line. ``legacy``: transformers 4.x (bare floats, epoch rounded)."""
    max_steps = len(run)
    lines = ["Loading weights: 100%|██████████| 14/14 [00:00<00:00, 13258.13it/s]"]
    for st in run:
        if st.step % logging_steps:
            continue
        logs = {**trl_row(st), "epoch": st.step / max_steps}
        bar = (
            f"\r {100 * st.step // max_steps}%|█    | {st.step}/{max_steps} [00:01<00:02, 1.50it/s]"
        )
        if legacy:
            logs["epoch"] = round(logs["epoch"], 2)
            lines.append(bar + "\r          \r" + str(logs))
        else:
            lines.append(bar + "\r          \r" + trl_console_line(logs))
    summary = {
        "train_runtime": 20.0,
        "train_samples_per_second": 3.2,
        "train_steps_per_second": max_steps / 20.0,
        "train_loss": 0.01,
        "epoch": 1.0,
    }
    lines.append("\r" + (str(summary) if legacy else trl_console_line(summary)))
    lines.append(f"\r100%|██████████| {max_steps}/{max_steps} [00:20<00:00, 3.00it/s]")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def log_history(run: list[Step], max_steps: int | None = None) -> list[dict[str, Any]]:
    """``trainer.state.log_history`` rows (``Trainer.log``: ``{**logs, "step": global_step}``)."""
    n = max_steps or len(run)
    rows = [{**trl_row(st), "epoch": st.step / n, "step": st.step} for st in run]
    rows.append(
        {
            "train_runtime": 20.0,
            "train_samples_per_second": 3.2,
            "train_steps_per_second": 3.0,
            "total_flos": 0.0,
            "train_loss": 0.01,
            "epoch": 1.0,
            "step": len(run),
        }
    )
    return rows


def write_log_history(path: Path, runs: list[list[Step]], indent: int | None = None) -> Path:
    """``json.dump(trainer.state.log_history, f)``; several runs appended to one list."""
    rows = [r for run in runs for r in log_history(run)]
    with open(path, "w") as f:
        json.dump(rows, f, indent=indent)
    return path


# --- ms-swift ---------------------------------------------------------------------------------


def write_ms_swift(out: Path, run: list[Step], g: int = 4) -> Path:
    """``<output_dir>/logging.jsonl``, ``completions.jsonl`` and ``args.json`` of ms-swift 4.6.0
    (``swift/trainers/patcher.py`` ``add_train_message``, floats ``round(v, 8)``;
    ``swift/utils/io_utils.py`` ``json.dumps(obj, ensure_ascii=False) + "\\n"``;
    ``swift/rlhf_trainers/grpo_trainer.py`` completions table, ``step`` as strings)."""
    out.mkdir(parents=True, exist_ok=True)
    n = len(run)
    with (
        open(out / "logging.jsonl", "w", encoding="utf-8") as f,
        open(out / "completions.jsonl", "w", encoding="utf-8") as c,
    ):
        for st in run:
            row = trl_row(st)
            row["rewards/MathAccuracy/mean"] = row.pop("rewards/acc/mean")
            row["rewards/MathAccuracy/std"] = row.pop("rewards/acc/std")
            logs = {**row, "reward_std": st.group_std_mean, "epoch": st.step / n}
            logs["global_step/max_steps"] = f"{st.step}/{n}"
            logs["elapsed_time"] = f"{st.step}s"
            logs["remaining_time"] = f"{n - st.step}s"
            logs = {k: (round(v, 8) if isinstance(v, float) else v) for k, v in logs.items()}
            logs["train_speed(s/it)"] = round(1.0, 6)
            f.write(json.dumps(logs, ensure_ascii=False) + "\n")
            flat = st.flat
            prompts = [
                f"<|im_start|>user\nq{st.step}-{i // g} ✓<|im_end|>" for i in range(len(flat))
            ]
            table = {
                "step": [str(st.step)] * len(flat),
                "prompt": prompts,
                "completion": ["answer"] * len(flat),
                "MathAccuracy": flat,
                "advantages": [a for grp in st.advantages() for a in grp],
            }
            c.write(json.dumps(table, ensure_ascii=False) + "\n")
        summary = {"train_runtime": 9.0, "train_loss": 0.01, "epoch": 1.0}
        summary["global_step/max_steps"] = f"{n}/{n}"
        f.write(json.dumps(summary, ensure_ascii=False) + "\n")
        final = {
            "last_model_checkpoint": str(out / "checkpoint-1"),
            "global_step": n,
            "log_history": [],
        }
        f.write(json.dumps(final, ensure_ascii=False) + "\n")
    (out / "args.json").write_text(
        json.dumps(
            {"rlhf_type": "grpo", "num_generations": g, "beta": 0.04, "advantage_estimator": "grpo"}
        )
    )
    return out / "logging.jsonl"


# --- NeMo-RL ----------------------------------------------------------------------------------


def write_nemo_rl(exp: Path, run: list[Step], g: int = 4, config: bool = True) -> Path:
    """``logs/exp_NNN/train_data_step{N}.jsonl`` (NeMo-RL ``grpo.py`` @ 002cdc27, ``logger.py``
    ``log_batched_dict_as_jsonl``: ``json.dumps({**sample, "idx": i}, default=str)``, every value
    a one-element list; token-level advantages masked by ``token_loss_mask``)."""
    exp.mkdir(parents=True, exist_ok=True)
    for st in run:
        with open(exp / f"train_data_step{st.step}.jsonl", "w") as f:
            advs = _loo_advantages(st.rewards)
            i = 0
            for grp, agrp in zip(st.rewards, advs):
                for r, a in zip(grp, agrp):
                    sample = {
                        "content": [f"<|user|>q{st.step}-{i // g}<|assistant|>ans"],
                        "rewards": [r],
                        "input_lengths": [12],
                        "token_ids": [[151644] * 8 + [11] * 4],
                        "token_loss_mask": [[0] * 8 + [1] * 4],
                        "sample_loss_mask": [1.0],
                        "advantages": [[0.0] * 8 + [a] * 4],
                        "generation_logprobs": [[0.0] * 8 + [-0.5] * 4],
                        "prev_logprobs": [[0.0] * 8 + [-0.5] * 4],
                    }
                    f.write(json.dumps({**sample, "idx": i}, default=str) + "\n")
                    i += 1
    if config:
        (exp / "config.yaml").write_text(
            f"grpo:\n  num_generations_per_prompt: {g}\n  num_prompts_per_step: {len(run[0].rewards)}\n"
            "  normalize_rewards: true\n  use_leave_one_out_baseline: true\n"
            "loss_fn:\n  reference_policy_kl_penalty: 0.01\n"
        )
    return exp


def _loo_advantages(groups: list[list[float]]) -> list[list[float]]:
    """NeMo-RL ``calculate_baseline_and_std_per_prompt`` with LOO and ``normalize_rewards``."""
    out = []
    for g in groups:
        n = len(g)
        row = []
        for i, r in enumerate(g):
            others = [x for j, x in enumerate(g) if j != i]
            m = sum(others) / (n - 1)
            std = math.sqrt(max(sum(x * x for x in others) / (n - 1) - m * m, 0.0))
            a = r - m
            row.append(a / (std + 1e-6) if std > 0 else a)
        out.append(row)
    return out


# --- prime-rl ---------------------------------------------------------------------------------


def write_prime_rl(path: Path, run: list[Step]) -> Path:
    """FileMonitor rows (prime-rl ``monitors/file/monitor.py`` @ 048a6e23: ``json.dumps({"step":
    step, "time": time.time(), **sanitized}) + "\\n"``, ``producer``; ``step=None`` rows)."""
    with open(path, "w") as f:
        f.write(
            json.dumps({"step": None, "time": 1767225600.0, "inference/throughput": 12.5}) + "\n"
        )
        for st in run:
            row = {
                "step": st.step - 1,  # 0-based orchestrator step
                "time": 1767225600.0 + st.step,
                "progress/tokens": 1000 * st.step,
                "reward/all/mean": st.mean,
                "solve_none/all": st.solve_none,
                "solve_all/all": st.solve_all,
                "effective_batch_size/all": 1 - st.solve_none - st.solve_all,
                "producer": "orchestrator",
            }
            f.write(json.dumps(row) + "\n")
    return path


def write_prime_rl_traces(
    out: Path, run: list[Step], metrics: bool = True, seed: int = 0, failed: int = 0
) -> Path:
    """A prime-rl output folder: ``traces/step_<n>/train/traces.jsonl`` (``FileMonitor.log_episodes``,
    ``monitors/file.py`` @ 0b77f237: ``orjson.dumps(episode.to_record(), option=
    OPT_APPEND_NEWLINE)`` per episode, compact separators, as each completes: groups interleave),
    with the record fields prime-rl's reader uses (``monitors/file/traces/index.py`` @ 13e96a12,
    ``summarize_episode``), the shipped traces' ``annotations/orchestrator.jsonl`` updates
    (``utils/trace_updates.py`` @ 0b77f237, ``make_update``), eval episodes, and ``metrics.jsonl``
    (:func:`write_prime_rl`; the same 0-based orchestrator step). Advantages are prime-rl's
    ``reward - group mean``. ``failed`` episodes per step have no rewards (a failed rollout)."""
    rng = random.Random(seed)

    def dumps(obj: Any) -> str:
        return json.dumps(obj, separators=(",", ":")) + "\n"

    for st in run:
        n = st.step - 1
        kind_dir = out / "traces" / f"step_{n}" / "train"
        kind_dir.mkdir(parents=True, exist_ok=True)
        episodes, updates = [], []
        for k, grp in enumerate(st.rewards):
            mean = sum(grp) / len(grp)
            for j, r in enumerate(grp):
                tid = f"tr-{n}-{k}-{j}"
                adv = r - mean
                trace = {
                    "id": tid,
                    "rewards": {"correct": {"score": r, "weight": 1.0}},
                    "metrics": {"num_turns": 1},
                    "info": {"kind": "train", "advantage": adv, "train": {"logged_at_step": n}},
                    "stop_condition": None,
                    "nodes": [{"message": {"role": "assistant"}, "parent": None}],
                    "calls": [{"finish_reason": "stop", "error": None}],
                }
                judge = {"id": f"{tid}-judge", "rewards": {}, "info": {"kind": "train"}}
                episodes.append(
                    {
                        "id": f"ep-{n}-{k}-{j}",
                        "env": {"name": "gsm8k"},
                        "group": {"id": f"grp-{n}-{k}"},
                        "ok": True,
                        "errors": [],
                        "num_input_tokens": 40,
                        "num_output_tokens": 12,
                        "traces": [trace, judge] if j == 0 else [trace],
                        "run": {"work": {"type": "train"}},
                    }
                )
                if adv != 0:
                    info = {
                        "train": {"effective": True, "trained_at_step": n + 1},
                        "advantage": adv,
                    }
                    updates.append({"version": 1, "trace_id": tid, "info": info, "branches": []})
        for i in range(failed):
            episodes.append(
                {"id": f"ep-{n}-fail-{i}", "group": {"id": f"grp-{n}-fail"}, "ok": False,
                 "errors": [{"type": "Timeout"}], "traces": [], "run": {"work": {"type": "train"}}}
            )  # fmt: skip
        rng.shuffle(episodes)  # asynchronous completion order
        with open(kind_dir / "traces.jsonl", "w") as f:
            f.writelines(dumps(e) for e in episodes)
        (kind_dir / "annotations").mkdir(exist_ok=True)
        with open(kind_dir / "annotations" / "orchestrator.jsonl", "w") as f:
            f.writelines(dumps(u) for u in updates)
        ev = out / "traces" / f"step_{n}" / "eval"
        ev.mkdir(parents=True, exist_ok=True)
        (ev / "traces.jsonl").write_text(
            dumps({"id": f"ev-{n}", "group": {"id": f"eg-{n}"}, "traces": [
                {"id": f"et-{n}", "rewards": {"correct": {"score": 0.0, "weight": 1.0}},
                 "info": {"kind": "eval"}}]})
        )  # fmt: skip
    if metrics:
        write_prime_rl(out / "metrics.jsonl", run)
    return out


# --- SkyRL ------------------------------------------------------------------------------------


def _stringify_floats(obj: Any) -> Any:
    """SkyRL 0.3.0 ``ConsoleLogger.stringify_floats``."""
    if isinstance(obj, float):
        return f"{obj:.4f}"
    if isinstance(obj, dict):
        return {k: _stringify_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_stringify_floats(v) for v in obj]
    return obj


def write_skyrl(path: Path, run: list[Step], g: int = 4, ansi: bool = False) -> Path:
    """``ConsoleLogger.log`` of skyrl 0.3.0 (``skyrl/train/utils/tracking.py``):
    ``logger.info(f"Step {step}: \\n{pprint.pformat(stringify_floats(data))}")`` under loguru's
    format of ``configure_ray_worker_logging``."""
    with open(path, "w") as f:
        for st in run:
            n_groups = len(st.rewards)
            data = {
                "generate/batch_num_seq": n_groups * g,
                "loss/avg_final_rewards": st.mean,
                "policy/grad_norm": 0.3,
                "policy/policy_loss": -0.01,
                f"reward/avg_pass_at_{g}": 1 - st.solve_none,
                "reward/avg_raw_reward": st.mean,
                "reward/num_zero_variance_filtered": round(st.zero_std_frac * n_groups),
                "trainer/epoch": 0,
                "trainer/global_step": st.step,
            }
            msg = f"Step {st.step}: \n{pprint.pformat(_stringify_floats(data))}"
            head = f"{TS}.271 | INFO     | skyrl.train.utils.tracking:log:189 - "
            if ansi:
                head = f"\x1b[32m{TS}.271\x1b[0m | \x1b[1mINFO    \x1b[0m | skyrl.train.utils.tracking:log:189 - "
            f.write(head + msg + "\n")
            f.write(
                f"{TS}.300 | INFO     | skyrl.train.trainer:train:400 - avg_final_rewards: {st.mean}\n"
            )
    return path


# --- slime ------------------------------------------------------------------------------------


def write_slime(path: Path, run: list[Step], g: int = 4, launch: bool = True) -> Path:
    """slime's console (``slime/ray/rollout.py``: ``logger.info(f"perf {rollout_id}:
    {log_dict}")`` under ``configure_logger``'s ``[%(asctime)s] %(filename)s:%(lineno)d - ``,
    Ray's actor prefix; the Megatron actor's ``step {accumulated_step_id}: {log_dict}``)."""
    n_groups = len(run[0].rewards)
    with open(path, "w") as f:
        if launch:
            f.write(
                f"+ python3 train.py --n-samples-per-prompt {g} --rollout-batch-size {n_groups} "
                "--num-steps-per-rollout 1 --advantage-estimator grpo --use-kl-loss --kl-loss-coef 0.0\n"
            )
        for st in run:
            rid = st.step - 1
            d: dict[str, Any] = {"rollout/response_len/mean": 812.5, "rollout/raw_reward": st.mean}
            counts: dict[str, int] = {}
            for grp in st.rewards:
                if all(grp[0] == r for r in grp):
                    counts[str(round(grp[0], 1))] = counts.get(str(round(grp[0], 1)), 0) + 1
            for label, c in counts.items():
                d[f"rollout/zero_std/count_{label}"] = c
            d["rollout/truncated_ratio"] = 0.03125
            d["perf/rollout_time"] = 61.2
            f.write(f"(RolloutManager pid=12345) [{TS}] rollout.py:612 - perf {rid}: {d}\n")
            t = {
                "train/loss": 0.01,
                "train/pg_loss": 0.01,
                "train/grad_norm": 0.2,
                "train/step": rid,
            }
            f.write(f"(MegatronTrainRayActor pid=777) [{TS}] model.py:501 - step {rid}: {t}\n")
    return path


# --- veRL -------------------------------------------------------------------------------------


def verl_config(
    n: int = 5,
    adv_estimator: str = "grpo",
    norm_adv_by_std: bool = True,
    use_kl_loss: bool = True,
    kl_loss_coef: float = 0.001,
    filter_groups: bool = False,
    max_response_length: int = 1024,
) -> dict[str, Any]:
    """A resolved veRL 0.9.1 config, shaped as ``verl/trainer/config/_generated_ppo_trainer.yaml``
    (a subset of its keys, its nesting and value types: ``_target_`` strings, bools, None,
    lists, floats, ints)."""
    return {
        "actor_rollout_ref": {
            "actor": {
                "_target_": "verl.workers.config.FSDPActorConfig",
                "checkpoint": {
                    "_target_": "verl.trainer.config.CheckpointConfig",
                    "async_save": False,
                    "load_contents": ["model", "optimizer", "extra"],
                },
                "clip_ratio": 0.2,
                "entropy_coeff": 0,
                "kl_loss_coef": kl_loss_coef,
                "kl_loss_type": "low_var_kl",
                "optim": {"betas": [0.9, 0.999], "lr": 1e-06, "warmup_style": None},
                "ppo_mini_batch_size": 256,
                "use_kl_loss": use_kl_loss,
            },
            "model": {"path": "Qwen/Qwen2.5-7B-Instruct", "use_remove_padding": True},
            "rollout": {
                "_target_": "verl.workers.config.RolloutConfig",
                "n": n,
                "name": "vllm",
                "temperature": 1.0,
                "val_kwargs": {"do_sample": False, "n": 1, "top_p": 1.0},
            },
        },
        "algorithm": {
            "_target_": "verl.trainer.config.AlgoConfig",
            "adv_estimator": adv_estimator,
            "filter_groups": {
                "_target_": "verl.trainer.config.FilterGroupsConfig",
                "enable": filter_groups,
                "max_num_gen_batches": 0,
                "metric": "reward",
            },
            "gamma": 1.0,
            "kl_ctrl": {"kl_coef": 0.001, "target_kl": 0.1, "type": "fixed"},
            "norm_adv_by_std_in_grpo": norm_adv_by_std,
            "use_kl_in_reward": False,
        },
        "data": {
            "max_prompt_length": 512,
            "max_response_length": max_response_length,
            "train_batch_size": 64,
            "train_files": ["~/data/gsm8k/train.parquet"],
        },
        "trainer": {
            "logger": ["console", "wandb"],
            "max_actor_ckpt_to_keep": None,
            "project_name": "verl_examples",
            "total_epochs": 15,
            "total_training_steps": None,
            "val_before_train": True,
        },
    }


def verl_printed_config(cfg: dict[str, Any], prefix: str = "") -> list[str]:
    """The lines ``verl/trainer/main_ppo.py`` (0.9.1) prints at start:
    ``pprint(OmegaConf.to_container(config, resolve=True))`` — ``pprint`` (sorted keys, width
    80) — each line behind the Ray prefix of the TaskRunner actor when run under Ray."""
    return [prefix + line for line in pprint.pformat(cfg).split("\n")]


def verl_metrics(st: Step) -> dict[str, float]:
    """What veRL 0.9.1's ``compute_data_metrics`` logs for a GRPO step (a subset)."""
    flat_adv = [a for grp in st.advantages() for a in grp]
    return {
        "actor/entropy": 0.8 - 0.004 * st.step,
        "actor/pg_loss": -0.01 * (1 - st.zero_std_frac),
        "actor/grad_norm": 0.4 * (1 - st.zero_std_frac) + 1e-3,
        "critic/score/mean": st.mean,
        "critic/score/max": max(st.flat),
        "critic/score/min": min(st.flat),
        "critic/advantages/mean": sum(flat_adv) / len(flat_adv),
        "critic/advantages/max": max(flat_adv),
        "critic/advantages/min": min(flat_adv),
        "response_length/mean": 412.5,
        "response_length/clip_ratio": 0.015625,
    }


def write_verl_console(path: Path, run: list[Step], g: int = 4, printed: bool = True) -> Path:
    """A veRL 0.9.1 console log under Ray: the printed config (:func:`verl_printed_config`),
    then per step ``concat_dict_to_str`` (``verl/utils/logger/aggregate_logger.py``:
    ``"step:N - " + " - ".join(f"{k}:{pprint.pformat(v)}")``) behind the TaskRunner prefix,
    among tqdm lines."""
    prefix = "\x1b[36m(TaskRunner pid=46086)\x1b[0m "
    lines = ["2026-01-01 12:00:00,498\tINFO worker.py:1832 -- Started a local Ray instance."]
    if printed:
        lines += verl_printed_config(verl_config(n=g, kl_loss_coef=0.0, use_kl_loss=False), prefix)
    for st in run:
        fields = [f"step:{st.step}"] + [
            f"{k}:{pprint.pformat(v)}" for k, v in verl_metrics(st).items()
        ]
        lines.append(prefix + " - ".join(fields))
        lines.append(prefix + f"Training Progress: {st.step}/{len(run)} [00:01<00:02, 1.50it/s]")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_verl_file(path: Path, run: list[Step]) -> Path:
    """veRL 0.9.1's ``file`` logger (``verl/utils/tracking.py`` ``FileLogger.log``:
    ``orjson.dumps({"step": step, "data": data}) + b"\\n"``; orjson writes compact JSON)."""
    with open(path, "w") as f:
        for st in run:
            f.write(json.dumps({"step": st.step, "data": verl_metrics(st)}, separators=(",", ":")))
            f.write("\n")
    return path


def write_verl_rollouts(path: Path, st: Step, g: int = 4) -> Path:
    """One rollout dump of veRL 0.9.1 (``ray_trainer._write_generations``:
    ``<dump_path>/{global_steps}.jsonl``, ``json.dumps(entry, ensure_ascii=False,
    default=str)`` per sample with ``input``, ``output``, ``gts``, ``score``, ``step``)."""
    with open(path, "w", encoding="utf-8") as f:
        for j, grp in enumerate(st.rewards):
            for r in grp:
                entry = {"input": f"question {st.step}-{j}", "output": "answer", "gts": "1",
                         "score": r, "step": st.step}  # fmt: skip
                f.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")
    return path


def write_openrlhf(path: Path, run: list[Step], g: int = 4) -> Path:
    """OpenRLHF's Ray PPO trainer console: ``logger.info(f"✨ Global step {n}: {status}")`` under
    its ``LEVEL MM-DD HH:MM:SS file:line]`` format, after the launch command."""
    lines = [f"python3 -m openrlhf.cli.train_ppo_ray --advantage_estimator group_norm "
             f"--n_samples_per_prompt {g} --use_kl_loss --init_kl_coef 0.0"]  # fmt: skip
    for st in run:
        status = {"policy_loss": -0.01, "reward": st.mean, "group_reward_std": st.group_std_mean,
                  "kl": 0.0, "response_length": 300.5}  # fmt: skip
        lines.append(f"INFO 05-12 10:11:12 ppo_trainer.py:412] ✨ Global step {st.step}: {status}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_trl_state(path: Path, run: list[Step]) -> Path:
    """``TrainerState.save_to_json`` (transformers 5.24.0): ``json.dumps(asdict(self),
    indent=2, sort_keys=True) + "\\n"``."""
    state = {"best_global_step": None, "best_metric": None, "epoch": 1.0, "eval_steps": 500,
             "global_step": len(run), "is_hyper_param_search": False, "logging_steps": 1,
             "log_history": log_history(run), "max_steps": len(run), "num_train_epochs": 1,
             "save_steps": 500, "train_batch_size": 8}  # fmt: skip
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def write_groups_jsonl(path: Path, run: list[Step]) -> Path:
    """rlvitals' own per-group rewards lines (``docs/importers.md``, ``groups_jsonl``)."""
    with open(path, "w") as f:
        for st in run:
            for j, grp in enumerate(st.rewards):
                f.write(json.dumps({"step": st.step, "group": j, "rewards": grp}) + "\n")
    return path


def write_generic(path: Path, run: list[Step], csv: bool = False) -> Path:
    """A hand-written loop's log: one JSON object (or CSV row) per step."""
    rows = [{"step": st.step, "reward": st.mean, "reward_std": st.group_std_mean,
             "frac_reward_zero_std": st.zero_std_frac} for st in run]  # fmt: skip
    if csv:
        text = "step,reward,reward_std,frac_reward_zero_std\n" + "".join(
            f"{r['step']},{r['reward']},{r['reward_std']},{r['frac_reward_zero_std']}\n"
            for r in rows
        )
    else:
        text = "".join(json.dumps(r) + "\n" for r in rows)
    path.write_text(text)
    return path


# --- W&B exports ------------------------------------------------------------------------------


def write_wandb_chart(
    path: Path, run: list[Step], runs: tuple[str, ...] = ("brisk-pond-1",), x: str = "Step"
) -> Path:
    """A W&B chart "Download → CSV": every field quoted, ``<run> - <metric>`` with ``__MIN``/
    ``__MAX`` (shape of ``ChemRxnEngLab/nRTD`` ``Plots/wandb_export_*.csv`` @ cec23f8a)."""
    metrics = ("train/reward", "train/frac_reward_zero_std")
    header = [x] + [f"{r} - {m}{s}" for r in runs for m in metrics for s in ("", "__MIN", "__MAX")]
    lines = [",".join(f'"{h}"' for h in header)]
    for st in run:
        vals = {"train/reward": st.mean, "train/frac_reward_zero_std": st.zero_std_frac}
        cells = [str(st.step)]
        for _r in runs:
            for m in metrics:
                v = repr(vals[m])
                cells += [v, v, v]
        lines.append(",".join(f'"{c}"' for c in cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def history_frame(run: list[Step]):
    """``run.history(pandas=True)`` of a TRL run: the TransformersCallback's ``train/*`` keys with
    ``train/global_step``, W&B's ``_step``/``_runtime``/``_timestamp``, and TRL's profiling rows
    (no global step)."""
    import pandas as pd

    rows = []
    k = 0
    for st in run:
        rows.append(
            {
                "_step": k,
                "_runtime": float(k),
                "_timestamp": 1.7e9 + k,
                "profiling/Time taken: GRPOTrainer._prepare_inputs": 0.01,
            }
        )
        k += 1
        rows.append(
            {
                "_step": k,
                "_runtime": float(k),
                "_timestamp": 1.7e9 + k,
                **{f"train/{a}": b for a, b in trl_row(st).items()},
                "train/global_step": st.step,
            }
        )
        k += 1
    return pd.DataFrame(rows)


# --- compression ------------------------------------------------------------------------------


def gzip_copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(gzip.compress(src.read_bytes()))
    return dst

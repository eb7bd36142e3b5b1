"""veRL importers: console lines, the ``file`` logger JSONL and rollout dumps.

Fixtures are written here in veRL's documented formats (``concat_dict_to_str`` for the console:
``step:N - key:value`` joined by `` - ``, values as ``{v:.3f}`` or ``pprint.pformat(v)``; the
FileLogger's ``{"step": N, "data": {...}}``; ``_dump_generations``' rows), never copied logs.
"""

from __future__ import annotations

import json
import math
import pprint
import random
from pathlib import Path

import numpy as np
import pytest

from rlvitals.errors import InputError
from rlvitals.importers import load, sniff
from rlvitals.importers._console import parse_hydra_overrides
from rlvitals.importers.verl_console import load_verl_console

RAY = "\x1b[36m(TaskRunner pid=678203)\x1b[0m "

COMMAND = (
    "++ python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo "
    "'data.train_files=['\\''/d/train.parquet'\\'']' data.train_batch_size=64 "
    "actor_rollout_ref.rollout.n=5 actor_rollout_ref.actor.use_kl_loss=True "
    "actor_rollout_ref.actor.kl_loss_coef=0.001 algorithm.kl_ctrl.kl_coef=0.02 "
    "+trainer.val_before_train=False 'trainer.logger=[console,wandb]' trainer.test_freq=5"
)

NOISE = [
    "++ export CUDA_DEVICE_MAX_CONNECTIONS=1",
    "2025-06-18 16:49:37,692\tWARNING services.py:411 -- Found multiple active Ray instances",
    RAY + "\rFiltering prompts longer than 1024 tokens:  13%|\u2588\u258e   | 1000/7473",
    RAY + "Training Progress:   2%|\u258f         | 2/105 [01:10<59:01, 34.40s/it]",
    "Warning at step:5 - something odd happened",
    "(WorkerDict pid=2101) kwargs: {'n': 1, 'logprobs': 0, 'max_tokens': 1024}",
    "step: 3 done",
    "Traceback (most recent call last):",
    '  File "/verl/trainer/main_ppo.py", line 64, in main',
]


def fmt3(v: float) -> str:
    """veRL's older console format, ``f"{v:.3f}"``."""
    return f"{v:.3f}"


def step_line(step: int, metrics: dict[str, float], fmt=fmt3, prefix: str = "") -> str:
    """One console line as veRL's ``concat_dict_to_str`` prints it."""
    return prefix + " - ".join([f"step:{step}"] + [f"{k}:{fmt(v)}" for k, v in metrics.items()])


def train_metrics(rng: random.Random, step: int) -> dict[str, float]:
    return {
        "global_seqlen/min": 171528.0 + step,
        "actor/entropy": rng.uniform(0.0, 0.5),
        "actor/pg_loss": rng.uniform(-0.05, 0.05),
        "actor/pg_clipfrac": rng.uniform(0, 0.01),
        "actor/ppo_kl": -rng.uniform(0, 1e-4),  # prints as -0.000
        "actor/kl_loss": rng.uniform(0, 0.1),
        "actor/grad_norm": rng.uniform(0.05, 2.0),
        "critic/score/mean": rng.uniform(0, 1),
        "critic/advantages/max": rng.uniform(0.5, 3),
        "critic/advantages/min": -rng.uniform(0.5, 3),
        "critic/advantages/mean": rng.uniform(-0.05, 0.05),
        "response_length/mean": rng.uniform(100, 600),
        "response_length/clip_ratio": rng.uniform(0, 0.5),
        "timing_s/step": rng.uniform(20, 60),
        "perf/throughput": rng.uniform(1000, 3000),
    }


def write_console(tmp_path: Path, n_steps: int = 30, seed: int = 0) -> tuple[Path, dict]:
    """A console log: command, noise, validation at step 0 and every 10 steps, train steps."""
    rng = random.Random(seed)
    lines = [*NOISE[:2], COMMAND, *NOISE[2:]]
    expected: dict[int, dict[str, float]] = {}
    lines.append(step_line(0, {"val-core/openai/gsm8k/reward/mean@1": 0.212}, prefix=RAY))
    for s in range(1, n_steps + 1):
        m = train_metrics(rng, s)
        if s % 10 == 0:
            m["val-core/openai/gsm8k/reward/mean@1"] = 0.5 + s / 100
            m["val-aux/openai/gsm8k/reward/std@1"] = 0.1
        expected[s] = m
        lines.append(step_line(s, m, prefix=RAY if s % 2 else ""))
        lines.append(rng.choice(NOISE))
    p = tmp_path / "verl.log"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p, expected


def rounded(v: float) -> float:
    return float(fmt3(v))


# --- console ---------------------------------------------------------------------------


def test_console_reads_steps_series_and_eval(tmp_path):
    path, expected = write_console(tmp_path, n_steps=30)
    assert sniff(path).name == "verl_console"
    run = load(path)
    assert run.manifest.trainer == "verl"
    assert run.manifest.format == "verl_console"
    assert run.steps.tolist() == list(range(1, 31))
    # canonical names, values as printed (3 decimals)
    pairs = {
        "entropy": "actor/entropy",
        "pg_loss": "actor/pg_loss",
        "clip_frac": "actor/pg_clipfrac",
        "ppo_kl": "actor/ppo_kl",
        "kl": "actor/kl_loss",
        "grad_norm": "actor/grad_norm",
        "reward_mean": "critic/score/mean",
        "adv_max": "critic/advantages/max",
        "adv_min": "critic/advantages/min",
        "adv_mean": "critic/advantages/mean",
        "length_mean": "response_length/mean",
        "truncation_frac": "response_length/clip_ratio",
        "step_time": "timing_s/step",
        "throughput": "perf/throughput",
    }
    for canon, raw in pairs.items():
        want = [rounded(expected[s][raw]) for s in range(1, 31)]
        np.testing.assert_allclose(run.series[canon], want, err_msg=canon)
    # -0.000 is a number, and is zero
    assert np.all(run.series["ppo_kl"] == 0.0)
    assert "global_seqlen/min" in run.unknown_keys
    # validation rows are eval series, not gaps in the train index
    ev = [k for k in run.eval_series if k.endswith("openai/gsm8k/reward/mean@1")]
    assert len(ev) == 1, run.eval_series.keys()
    key = ev[0]
    assert run.eval_steps.tolist() == [0, 10, 20, 30]
    np.testing.assert_allclose(run.eval_series[key], [0.212, 0.6, 0.7, 0.8])
    assert run.coverage("entropy") == 1.0
    assert run.warnings == []


def test_console_launch_command_sets_manifest(tmp_path):
    path, _ = write_console(tmp_path, n_steps=3)
    m = load(path).manifest
    assert m.group_size == 5
    assert m.estimator == "grpo"
    assert m.kl_coef == pytest.approx(0.001)  # use_kl_loss → kl_loss_coef, not kl_ctrl
    assert m.logging_steps == 1
    assert m.config["entrypoint"] == "verl.trainer.main_ppo"
    assert m.config["data.train_batch_size"] == 64
    assert m.config["data.train_files"] == "['/d/train.parquet']"  # shell quoting undone
    assert m.config["trainer.val_before_train"] is False  # '+' prefix dropped
    assert m.config["trainer.logger"] == "[console,wandb]"


@pytest.mark.parametrize(
    ("overrides", "kl"),
    [
        (
            "actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.05",
            0.05,
        ),
        (
            "actor_rollout_ref.actor.use_kl_loss=False algorithm.use_kl_in_reward=True "
            "algorithm.kl_ctrl.kl_coef=0.2",
            0.2,
        ),
        (
            "actor_rollout_ref.actor.use_kl_loss=False algorithm.use_kl_in_reward=False "
            "actor_rollout_ref.actor.kl_loss_coef=0.001",
            0.0,
        ),
        ("algorithm.kl_ctrl.kl_coef=0.001", None),  # not stated which KL is used
    ],
)
def test_console_kl_coef_rules(tmp_path, overrides, kl):
    p = tmp_path / "log.txt"
    p.write_text(
        f"python3 -m verl.trainer.main_ppo algorithm.adv_estimator=gpg {overrides}\n"
        + step_line(1, {"actor/entropy": 0.3})
        + "\n"
    )
    m = load(p).manifest
    assert m.kl_coef == (None if kl is None else pytest.approx(kl))
    assert m.estimator == "gpg"
    assert m.group_size is None  # rollout.n not stated


def test_console_multiline_command_with_continuations(tmp_path):
    text = (
        "```\n### grpo_trainer/run.sh\n"
        "python3 -m verl.trainer.main_ppo \\\n"
        "    algorithm.adv_estimator=grpo \\\n"
        "    data.train_files=$train_files \\\n"
        "    actor_rollout_ref.rollout.n=8 \\\n"
        "    trainer.logger=['console','wandb'] \\\n"
        "    reward_model.reward_kwargs.reward_max=2.0 \\\n"
        "    trainer.total_epochs=160\n"
        "```\n"
        "trainer.nnodes=4\n"  # after the command ended: not an override
        + step_line(1, {"critic/score/mean": 0.25})
        + "\n"
    )
    p = tmp_path / "run.log"
    p.write_text(text)
    m = load(p).manifest
    assert m.group_size == 8
    assert m.config["data.train_files"] == "$train_files"
    assert m.config["trainer.total_epochs"] == 160
    assert m.reward_max == 2.0
    assert "trainer.nnodes" not in m.config


def test_parse_hydra_overrides_skips_non_overrides():
    got = parse_hydra_overrides(
        "--config-path=config --config-name=x.yaml a.b=1 ~c.d=null x=1e-6 2>&1 | tee out.log"
    )
    assert got == {"a.b": 1, "c.d": None, "x": 1e-6}


def test_console_values_nan_inf_ints_and_numpy_reprs(tmp_path):
    lines = [
        step_line(
            1,
            {"a/int": 5, "a/nan": math.nan, "a/inf": math.inf, "a/ninf": -math.inf},
            fmt=pprint.pformat,
        ),
        step_line(
            2,
            {
                "a/int": np.int64(6),
                "a/nan": np.float64(0.25),
                "a/inf": np.float32(2.5),
                "a/ninf": 1e-6,
            },
            fmt=pprint.pformat,
        ),
        step_line(3, {"a/int": True, "a/nan": -0.0, "a/inf": 1e300, "a/ninf": 0}),
    ]
    p = tmp_path / "x.log"
    p.write_text("\n".join(lines) + "\n")
    run = load(p, fmt="verl_console")
    s = run.series
    assert s["a/int"].tolist() == [5.0, 6.0, 1.0]
    assert math.isnan(s["a/nan"][0]) and s["a/nan"][1:].tolist() == [0.25, 0.0]
    assert s["a/inf"].tolist() == [math.inf, 2.5, 1e300]
    assert s["a/ninf"].tolist() == [-math.inf, 1e-6, 0.0]


def test_console_repeated_steps_keep_later_values_and_warn(tmp_path):
    lines = [step_line(s, {"actor/entropy": 0.1 * s}) for s in (1, 2, 3)]
    lines += [step_line(s, {"actor/entropy": 0.5 + s}) for s in (2, 3, 4)]  # resumed at 2
    p = tmp_path / "resumed.log"
    p.write_text("\n".join(lines) + "\n")
    run = load(p)
    assert run.steps.tolist() == [1, 2, 3, 4]
    np.testing.assert_allclose(run.series["entropy"], [0.1, 2.5, 3.5, 4.5])
    assert len(run.warnings) == 1 and "2 training step line(s)" in run.warnings[0]


def test_console_without_step_lines_says_so(tmp_path):
    p = tmp_path / "nosteps.log"
    p.write_text(COMMAND + "\n" + "\n".join(NOISE) + "\n")
    imp = sniff(p)
    assert imp.name == "verl_console"  # it looks like veRL ...
    assert imp.sniff(p, p.read_bytes()) < 0.5  # ... but without confidence
    with pytest.raises(InputError, match="no veRL step lines found") as e:
        load(p)
    assert str(p) in str(e.value)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ("step:7 - actor/entropy:0.3 - critic/score/mean:abc", "not a number: 'abc'"),
        ("step:7 - actor/entropy:0.3 - critic/score/mean", "is not key:value"),
        ("step:7 - :0.3", "is not key:value"),
        ("step:" + "9" * 30 + " - a:1", "out of range"),
        ("step:9223372036854775808 - a:1", "out of range"),
    ],
)
def test_console_bad_step_line_names_file_and_line(tmp_path, bad, problem):
    p = tmp_path / "bad.log"
    p.write_text("\n".join([step_line(1, {"a": 1.0}), "noise", bad, step_line(8, {"a": 2})]) + "\n")
    with pytest.raises(InputError) as e:
        load(p, fmt="verl_console")
    msg = str(e.value)
    assert msg.startswith(f"{p}:line 3: ")
    assert problem in msg


def test_console_torn_last_line_is_a_warning(tmp_path):
    p = tmp_path / "live.log"
    p.write_text(step_line(1, {"a": 1.0}) + "\n" + step_line(2, {"a": 2.0}) + "\nstep:3 - a:1 - b")
    run = load(p)
    assert run.steps.tolist() == [1, 2]
    assert any("torn last line" in w and "line 3" in w for w in run.warnings)


def test_console_step_lines_past_the_sniff_head(tmp_path):
    noise = RAY + "\rGenerating train split: 7473 examples [00:00, 244720.40 examples/s]\n"
    p = tmp_path / "long_start.log"
    p.write_text(COMMAND + "\n" + noise * 2000 + RAY + step_line(1, {"actor/entropy": 0.3}) + "\n")
    assert p.stat().st_size > 65536
    assert sniff(p).name == "verl_console"
    assert load(p).n_steps == 1


def test_console_carriage_returns_windows_newlines_and_ray_dedup(tmp_path):
    p = tmp_path / "crlf.log"
    body = "progress 10%\r" + step_line(1, {"actor/entropy": 0.3}) + "\r\n"
    body += step_line(2, {"actor/entropy": 0.2}) + "\r\n"
    body += RAY + step_line(3, {"actor/entropy": 0.1}) + " [repeated 2x across cluster]\n"
    p.write_bytes(body.encode())
    run = load(p)
    np.testing.assert_allclose(run.series["entropy"], [0.3, 0.2, 0.1])


def test_console_many_steps_stream(tmp_path):
    p = tmp_path / "big.log"
    n = 20_000
    with open(p, "w") as f:
        for s in range(1, n + 1):
            f.write(step_line(s, {"actor/entropy": 1 / s, "critic/score/mean": (s % 7) / 7}))
            f.write("\n")
    calls = []
    run = load_verl_console(p, progress=lambda d, t: calls.append((d, t)))
    assert run.n_steps == n
    assert run.series["reward_mean"][6] == pytest.approx(0.0)
    assert calls and calls[-1][0] == calls[-1][1] == p.stat().st_size


# --- file logger -----------------------------------------------------------------------


def file_logger_line(step: int, data: dict) -> str:
    """What veRL's FileLogger writes (orjson turns NaN into null; json.dumps writes NaN)."""
    return json.dumps({"step": step, "data": data})


def test_file_logger_reads_rows(tmp_path):
    rng = random.Random(1)
    p = tmp_path / "metrics.jsonl"
    rows = {s: train_metrics(rng, s) for s in range(1, 21)}
    lines = [file_logger_line(0, {"val-core/openai/gsm8k/reward/mean@1": 0.3})]
    lines += [file_logger_line(s, m) for s, m in rows.items()]
    lines.append(file_logger_line(21, {"actor/entropy": None, "note": "text", "x": [1, 2]}))
    p.write_text("\n".join(lines) + "\n")
    assert sniff(p).name == "verl_file"
    run = load(p)
    assert run.manifest.trainer == "verl"
    assert run.steps.tolist() == list(range(1, 22))
    np.testing.assert_allclose(
        run.series["reward_mean"][:20], [rows[s]["critic/score/mean"] for s in range(1, 21)]
    )
    assert math.isnan(run.series["entropy"][20])
    assert run.eval_steps.tolist() == [0]
    assert any("2 non-numeric" in w for w in run.warnings)


def test_file_logger_torn_last_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    good = [file_logger_line(s, {"actor/entropy": 0.1 * s}) for s in (1, 2)]
    p.write_text("\n".join(good) + '\n{"step": 3, "data": {"actor/ent')
    run = load(p)
    assert run.steps.tolist() == [1, 2]
    assert any("torn last line" in w for w in run.warnings)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"step": 2, "data": {"a": 1}', "invalid JSON"),
        ('{"step": "2", "data": {"a": 1}}', "'step' must be an integer"),
        ('{"step": 2.5, "data": {"a": 1}}', "'step' must be an integer"),
        ('{"step": 2, "data": [1]}', "'data' must be an object"),
        ('{"step": 2}', 'expected {"step": N, "data": {...}}'),
        ("[1, 2]", 'expected {"step": N, "data": {...}}'),
        ('{"step": 99999999999999999999, "data": {}}', "out of range"),
    ],
)
def test_file_logger_bad_lines(tmp_path, line, problem):
    p = tmp_path / "metrics.jsonl"
    p.write_text(
        file_logger_line(1, {"a": 1}) + "\n" + line + "\n" + file_logger_line(3, {}) + "\n"
    )
    with pytest.raises(InputError) as e:
        load(p, fmt="verl_file")
    assert str(e.value).startswith(f"{p}:line 2: ")
    assert problem in str(e.value)


def test_file_logger_sniff_outranks_groups_jsonl_and_console(tmp_path):
    from rlvitals.importers import formats

    p = tmp_path / "m.jsonl"
    p.write_text(file_logger_line(1, {"a": 1}) + "\n")
    head = p.read_bytes()
    scores = {imp.name: imp.sniff(p, head) for imp in formats()}
    assert scores["verl_file"] == 0.95
    assert all(v < 0.95 for k, v in scores.items() if k != "verl_file"), scores


# --- rollout dumps ---------------------------------------------------------------------


def dump_generations(directory: Path, step: int, rows: list[tuple[str, float]], n: int) -> None:
    """Rows as veRL's ``_dump_generations`` writes them (input, output, gts, score, step, ...)."""
    directory.mkdir(exist_ok=True)
    lines = []
    for prompt, p in rows:
        for i in range(n):
            score = float(i < round(p * n))
            lines.append(
                json.dumps(
                    {
                        "input": prompt,
                        "output": f"answer {i}",
                        "gts": "42",
                        "score": score,
                        "step": step,
                        "acc": bool(score),
                    },
                    ensure_ascii=False,
                )
            )
    (directory / f"{step}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_rollouts_group_by_input(tmp_path):
    d = tmp_path / "rollouts"
    prompts = ["What is 2+2?", "Ünïcödé prompt \u2603", "Solve x^2=4"]
    dump_generations(d, 1, [(prompts[0], 1.0), (prompts[1], 0.4), (prompts[2], 0.0)], n=5)
    dump_generations(d, 2, [(prompts[0], 1.0), (prompts[2], 0.6)], n=5)
    dump_generations(d, 10, [(prompts[1], 0.2)], n=5)  # numeric, not lexical order
    assert sniff(d).name == "verl_rollouts"
    run = load(d)
    g = run.groups
    assert g is not None
    assert run.manifest.trainer == "verl" and run.manifest.group_size == 5
    assert g.step.tolist() == [1, 1, 1, 2, 2, 10]
    sums = [float(g.rewards[g.offsets[i] : g.offsets[i + 1]].sum()) for i in range(g.n_groups)]
    assert sums == [5.0, 2.0, 0.0, 5.0, 3.0, 1.0]
    # prompt ids: short, stable across steps, distinct across prompts
    ids = g.prompt.tolist()
    assert all(len(x) == 12 for x in ids)
    assert ids[0] == ids[3] and ids[1] == ids[5] and ids[2] == ids[4]
    assert len(set(ids)) == 3


def test_rollouts_uid_groups_and_single_file(tmp_path):
    p = tmp_path / "7.jsonl"
    rows = [
        {"input": "same text", "output": "a", "score": 1.0, "step": 7, "uid": "u1"},
        {"input": "same text", "output": "b", "score": 0.0, "step": 7, "uid": "u1"},
        {"input": "same text", "output": "c", "score": 1.0, "step": 7, "uid": "u2"},
        {"input": "same text", "output": "d", "score": None, "step": 7, "uid": "u2"},
    ]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert sniff(p).name == "verl_rollouts"
    run = load(p)
    assert run.groups.n_groups == 2
    assert run.groups.sizes().tolist() == [2, 2]
    assert math.isnan(run.groups.rewards[3])


def test_rollouts_without_step_field_use_the_file_name(tmp_path):
    d = tmp_path / "dump"
    d.mkdir()
    (d / "3.jsonl").write_text(json.dumps({"input": "q", "output": "o", "score": 1}) + "\n")
    run = load(d, fmt="verl_rollouts")
    assert run.groups.step.tolist() == [3]


def test_rollouts_uneven_groups_warn(tmp_path):
    d = tmp_path / "dump"
    dump_generations(d, 1, [("a", 1.0)], n=4)
    dump_generations(d, 2, [("a", 1.0)], n=3)
    run = load(d)
    assert run.manifest.group_size is None
    assert any("group sizes differ (3..4)" in w for w in run.warnings)


def test_rollouts_bad_inputs(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("hi")
    with pytest.raises(InputError, match=r"no <step>\.jsonl rollout files found"):
        load(empty, fmt="verl_rollouts")
    d = tmp_path / "d"
    dump_generations(d, 1, [("a", 1.0)], n=2)
    (d / "2.jsonl").write_text(
        json.dumps({"input": "a", "score": 1})
        + "\n"
        + json.dumps({"input": "a", "score": "x"})
        + "\n"
    )
    with pytest.raises(InputError) as e:
        load(d)
    assert str(e.value).startswith(f"{d / '2.jsonl'}:line 2: ")
    (d / "2.jsonl").write_text(json.dumps({"output": "a", "score": 1}) + "\n")
    with pytest.raises(InputError, match="no 'input'"):
        load(d)
    (d / "2.jsonl").write_text(json.dumps({"input": "a", "score": 1}) + '\n{"input": "a", "sc')
    run = load(d)
    assert run.groups.n_groups == 2
    assert any("torn last line" in w for w in run.warnings)


def test_sniffers_leave_each_others_formats_alone(tmp_path):
    from rlvitals.importers import IMPORTERS, formats

    formats()
    console, _ = write_console(tmp_path, n_steps=2)
    flog = tmp_path / "m.jsonl"
    flog.write_text(file_logger_line(1, {"a": 1}) + "\n")
    ray_openrlhf = tmp_path / "openrlhf.log"
    ray_openrlhf.write_text(
        "(PPOTrainer pid=1) INFO 05-12 10:11:12 ppo_trainer.py:412] Global step 1: {'kl': 0.1}\n"
    )
    for path, mine in [(console, "verl_console"), (flog, "verl_file")]:
        head = path.read_bytes()[:65536]
        for other in ("verl_console", "verl_file", "verl_rollouts"):
            s = IMPORTERS.get(other).sniff(path, head)
            assert (s >= 0.9) if other == mine else (s < 0.5), (path.name, other, s)
    head = ray_openrlhf.read_bytes()
    for other in ("verl_console", "verl_file", "verl_rollouts"):
        assert IMPORTERS.get(other).sniff(ray_openrlhf, head) == 0.0


# --- the configuration veRL prints at start -------------------------------------------------


def _printed_log(tmp_path, cfg, prefix=RAY, extra=(), steps=3, name="cfg.log"):
    """A console log as veRL's TaskRunner writes it: the printed config (pprint), lines of
    other processes interleaved with it, then step lines."""
    import rlvitals_tests_format_producers as F

    lines = [
        "ray init kwargs: {'num_cpus': 8, 'num_gpus': 1}",
        prefix + "TaskRunner hostname: 792186fbdaac, PID: 46086",
    ]
    printed = F.verl_printed_config(cfg, prefix)
    for i, line in enumerate(printed):
        lines.append(line)
        if i == 3:
            lines.append("\x1b[36m(WorkerDict pid=2101)\x1b[0m kwargs: {'n': 1, 'logprobs': 0}")
        if i == 7:
            lines.append("2025-12-18 11:25:07,498\tINFO worker.py:1832 -- Started a Ray instance")
    lines += list(extra)
    rng = random.Random(0)
    lines += [step_line(s, train_metrics(rng, s), prefix=prefix) for s in range(1, steps + 1)]
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize(
    ("kwargs", "want"),
    [
        ({}, dict(group_size=5, estimator="grpo", adv_scale="group_std", kl_coef=0.001)),
        (
            dict(n=8, norm_adv_by_std=False, use_kl_loss=False, filter_groups=True),
            dict(group_size=8, estimator="dr_grpo", adv_scale="none", kl_coef=0.0),
        ),
        (dict(n=1, adv_estimator="gae"), dict(group_size=1, estimator="gae", kl_coef=0.001)),
        (dict(adv_estimator="rloo", n=4), dict(group_size=4, estimator="rloo", adv_scale="none")),
    ],
)
def test_printed_config_gives_the_facts(tmp_path, kwargs, want):
    import rlvitals_tests_format_producers as F

    run = load(_printed_log(tmp_path, F.verl_config(**kwargs)))
    m = run.manifest
    for k, v in want.items():
        assert getattr(m, k) == (pytest.approx(v) if isinstance(v, float) else v), k
    assert m.filters_zero_var is kwargs.get("filter_groups", False)
    assert m.config["config_source"] == "printed configuration (line 3)"
    assert m.config["data.max_response_length"] == 1024
    assert m.config["data.train_batch_size"] == 64
    assert m.config["actor_rollout_ref.actor.checkpoint.load_contents"] == [
        "model",
        "optimizer",
        "extra",
    ]
    assert run.steps.tolist() == [1, 2, 3] and run.warnings == []


def test_printed_config_wins_over_the_launch_command_and_without_a_ray_prefix(tmp_path):
    import rlvitals_tests_format_producers as F

    cfg = F.verl_config(n=6)
    cmd = "python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=2 trainer.nnodes=4"
    p = tmp_path / "plain.log"
    lines = [cmd, *F.verl_printed_config(cfg)]
    lines.insert(5, "Unindented driver output in the middle")  # skipped: pprint indents
    lines.append(step_line(1, {"critic/score/mean": 0.5}))
    p.write_text("\n".join(lines) + "\n")
    m = load(p).manifest
    assert m.group_size == 6  # the resolved config, not the override
    assert m.config["trainer.nnodes"] == 4  # the command's other overrides stay
    assert m.config["entrypoint"] == "verl.trainer.main_ppo"
    assert m.config["config_source"] == "printed configuration (line 2)"


def test_printed_config_with_a_reward_range(tmp_path):
    import rlvitals_tests_format_producers as F

    cfg = F.verl_config()
    cfg["reward_model"] = {"reward_kwargs": {"reward_min": -1.0, "reward_max": 2.0}}
    m = load(_printed_log(tmp_path, cfg)).manifest
    assert (m.reward_min, m.reward_max) == (-1.0, 2.0)


def test_printed_config_problems_are_warnings_not_errors(tmp_path, monkeypatch):
    import rlvitals_tests_format_producers as F

    from rlvitals.importers import _console

    cfg = F.verl_config()
    # cut off by the end of the log: the steps are still read
    p = tmp_path / "cut.log"
    p.write_text(
        "\n".join([step_line(1, {"critic/score/mean": 0.5}), *F.verl_printed_config(cfg)[:20]])
    )
    run = load(p)
    assert run.steps.tolist() == [1] and run.manifest.group_size is None
    assert any("cut off" in w and "line 2" in w for w in run.warnings)
    # not a literal: a repr of an object
    bad = F.verl_printed_config(cfg)
    bad[2] = bad[2].replace("False", "<object at 0x7f>")
    q = tmp_path / "bad.log"
    q.write_text("\n".join([*bad, step_line(1, {"critic/score/mean": 0.5})]) + "\n")
    run = load(q)
    assert run.n_steps == 1 and any("could not be read" in w for w in run.warnings)
    # a call is no literal: it reads as None, the rest stays
    calls = [
        line.replace("'reward'", "MetricEnum('reward')") for line in F.verl_printed_config(cfg)
    ]
    c = tmp_path / "call.log"
    c.write_text("\n".join([*calls, step_line(1, {"critic/score/mean": 0.5})]) + "\n")
    m = load(c).manifest
    assert m.group_size == 5 and m.config["algorithm.filter_groups.metric"] is None
    # longer than the cap
    monkeypatch.setattr(_console, "MAX_PRINTED_DICT_CHARS", 500)
    run = load(_printed_log(tmp_path, cfg, name="long.log"))
    assert run.manifest.group_size is None and run.n_steps == 3
    assert any("longer than 500" in w for w in run.warnings)


def test_printed_config_braces_inside_strings_do_not_end_it(tmp_path):
    import rlvitals_tests_format_producers as F

    cfg = F.verl_config(n=7)
    cfg["actor_rollout_ref"]["model"]["path"] = "odd}name{with'quotes\"]"
    cfg["data"]["prompt_key"] = "}}}"
    m = load(_printed_log(tmp_path, cfg)).manifest
    assert m.group_size == 7 and m.config["data.prompt_key"] == "}}}"
    assert m.config["actor_rollout_ref.model.path"] == "odd}name{with'quotes\"]"


def test_printed_config_fuzzed_never_breaks_the_import(tmp_path):
    """A printed config cut anywhere, or with bytes overwritten, is a warning or nothing:
    the import gives a Run (or a one-line InputError for a broken step line), never a crash."""
    import rlvitals_tests_format_producers as F
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    base = _printed_log(tmp_path, F.verl_config(), name="base.log").read_bytes()
    cfg_end = base.index(b"step:1")

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
    @given(
        cut=st.integers(0, len(base)),
        edits=st.lists(
            st.tuples(st.integers(0, cfg_end - 1), st.binary(min_size=1, max_size=3)), max_size=6
        ),
    )
    def check(cut, edits):
        data = bytearray(base[:cut] if cut > cfg_end else base)
        for at, b in edits:
            data[at : at + len(b)] = b
        p = tmp_path / "fuzz.log"
        p.write_bytes(bytes(data))
        try:
            run = load(p, "verl_console")
        except InputError as e:
            assert str(p) in str(e) and "\n" not in str(e)
            return
        assert run.n_steps >= 0

    check()


def test_a_cut_off_printed_config_never_swallows_step_lines(tmp_path):
    """The process printing the config dies mid-dict: the restart's lines (another pid) and the
    step lines that follow are read; the config is a warning."""
    import rlvitals_tests_format_producers as F

    cut = F.verl_printed_config(F.verl_config(n=6), RAY)[:30]
    other = "\x1b[36m(TaskRunner pid=99)\x1b[0m "
    rng = random.Random(1)
    for prefix, name in ((other, "restart.log"), (RAY, "same.log")):
        lines = [*cut] + [step_line(s, train_metrics(rng, s), prefix=prefix) for s in (1, 2, 3)]
        p = tmp_path / name
        p.write_text("\n".join(lines) + "\n")
        run = load(p)
        assert run.steps.tolist() == [1, 2, 3], name
        assert run.manifest.group_size is None
        assert any("cut off" in w for w in run.warnings), name

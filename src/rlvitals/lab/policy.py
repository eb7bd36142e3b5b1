"""The lab's policy: a tiny causal LM built from a config, warm-started, measured, cached.

``prepare_base(task)`` returns a :class:`BasePolicy`: a Hugging Face model directory, the base
policy's pass rate at every task size, and the size mixture of every level (L0-L6, see
:mod:`rlvitals.lab.tasks`). For the built-in tiny model it:

1. builds a 2-layer Qwen2 (hidden 64, about 80k parameters) from a ``transformers`` config with a
   character-level tokenizer (no hub download);
2. warm-starts it with plain next-token training on answers of the task's training split
   (sizes weighted ``size_decay ** (size - 1)``, so large problems are seen less and the pass
   rate falls smoothly with size);
3. measures the pass rate of every size at temperature 1.0 (sampled, ``samples`` per prompt)
   and derives the level mixtures;
4. measures every level on held-out evaluation prompts, to say how close the levels came.

The result is deterministic for the seeds (one torch thread, fixed seeds) and cached under
``cache_dir`` (default ``$RLVITALS_LAB_CACHE`` or ``~/.cache/rlvitals/lab``), keyed by a hash of
every setting; building it takes about a minute on one CPU core (``meta["seconds"]``).

Any local Hugging Face causal-LM directory can stand in for the tiny model
(``prepare_base(task, model="path/to/model")``): steps 1-2 are skipped, 3-4 run on it and are
cached the same way.

One module on purpose (about 600 lines): the model, its warm start, the measurement and the
cache are one pipeline whose settings form one cache key.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvitals.lab.tasks import (
    LEVEL_TARGETS,
    MIXED_LEVEL,
    MIXED_MIXTURE,
    Problem,
    Task,
    get_task,
    level_mixture,
    make_prompts,
    split_of,
)

__all__ = [
    "ALPHABET",
    "BasePolicy",
    "Calibration",
    "TinyModel",
    "WarmStart",
    "default_cache_dir",
    "generate",
    "load_policy",
    "pass_rates",
    "prepare_base",
    "tiny_tokenizer",
]

ALPHABET = "0123456789+-*=>:,.|abcdefghijklmnopqrstuvwxyz "
"""Characters of the tiny tokenizer (one token each), after ``<pad>``, ``<eos>``, ``<unk>``."""
CACHE_ENV = "RLVITALS_LAB_CACHE"
"""Environment variable naming the cache directory."""
LAB_FORMAT = 1
"""Bumped when a cached base policy would no longer be what this code builds."""

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``."""


@dataclass(frozen=True)
class TinyModel:
    """Shape of the tiny Qwen2 policy.

    Attributes:
        hidden_size (int, default 64): width.
        layers (int, default 2): decoder layers.
        heads (int, default 4): attention heads.
        kv_heads (int, default 2): key/value heads (grouped-query attention).
        intermediate_size (int, default 128): MLP width.
        max_positions (int, default 64): longest prompt + completion in tokens.
    """

    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate_size: int = 128
    max_positions: int = 64


@dataclass(frozen=True)
class WarmStart:
    """The supervised warm start of the tiny model.

    Attributes:
        steps (int, default 1000): optimizer steps of next-token training.
        batch_size (int, default 64): problems per step.
        learning_rate (float, default 3e-3): AdamW peak rate (linear warm-up, cosine decay to
            10%).
        warmup (int, default 50): warm-up steps.
        size_decay (float, default 0.8): a problem of size k is drawn with weight
            ``size_decay ** (k - 1)`` over the task's ``sft_sizes``: the smaller it is, the
            faster the pass rate falls with size.
        seed (int, default 0): seed of the initial weights and of the data.
    """

    steps: int = 1000
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup: int = 50
    size_decay: float = 0.8
    seed: int = 0


@dataclass(frozen=True)
class Calibration:
    """How the base policy's pass rates are measured.

    Attributes:
        prompts_per_size (int, default 128): prompts drawn per task size (training split).
        samples (int, default 8): sampled completions per prompt.
        temperature (float, default 1.0): sampling temperature of the measurement (the paper's
            T); the levels are defined at it whatever temperature a run trains with.
        eval_prompts (int, default 256): held-out prompts per level for the check of step 4.
        seed (int, default 0): seed of the prompts and of the sampling.
    """

    prompts_per_size: int = 128
    samples: int = 8
    temperature: float = 1.0
    eval_prompts: int = 256
    seed: int = 0


@dataclass
class BasePolicy:
    """A base policy ready for RL: where it is and what it can do.

    Attributes:
        path: Hugging Face model directory (weights, config, tokenizer).
        task: the task name it was measured on.
        pass_rates: size -> pass rate at ``calibration.temperature``.
        levels: per level L0..L6, the size mixture ``{size: weight}``.
        level_rates: per level, the pass rate measured on held-out evaluation prompts.
        meta: settings, seconds spent, versions.
        tiny: True for the lab's own tiny model (character tokenizer).
    """

    path: Path
    task: str
    pass_rates: dict[int, float]
    levels: list[dict[int, float]]
    level_rates: list[float]
    meta: dict[str, Any] = field(default_factory=dict)
    tiny: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "task": self.task,
            "pass_rates": {str(k): v for k, v in self.pass_rates.items()},
            "levels": [{str(k): v for k, v in m.items()} for m in self.levels],
            "level_rates": self.level_rates,
            "level_targets": list(LEVEL_TARGETS),
            "meta": self.meta,
            "tiny": self.tiny,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BasePolicy:
        return cls(
            path=Path(d["path"]),
            task=d["task"],
            pass_rates={int(k): float(v) for k, v in d["pass_rates"].items()},
            levels=[{int(k): float(v) for k, v in m.items()} for m in d["levels"]],
            level_rates=[float(x) for x in d["level_rates"]],
            meta=dict(d.get("meta", {})),
            tiny=bool(d.get("tiny", True)),
        )

    def mixture(self, level: int) -> dict[int, float]:
        """The size mixture of level ``level``: 0..6 calibrated, 7 the mixed level
        (:data:`~rlvitals.lab.tasks.MIXED_MIXTURE`, the same sizes whatever the policy)."""
        if level == MIXED_LEVEL:
            return dict(MIXED_MIXTURE)
        if not 0 <= level < len(self.levels):
            raise ValueError(
                f"level must be in 0..{len(self.levels) - 1} or {MIXED_LEVEL}, got {level!r}"
            )
        return self.levels[level]

    def level_rate(self, level: int) -> float:
        """The base pass rate of level ``level``: measured on held-out prompts for 0..6; for the
        mixed level the mixture's weighted mean of the measured per-size pass rates."""
        if level == MIXED_LEVEL:
            mix = self.mixture(level)
            return sum(w * self.pass_rates.get(s, float("nan")) for s, w in mix.items())
        self.mixture(level)
        return self.level_rates[level]


def default_cache_dir() -> Path:
    """``$RLVITALS_LAB_CACHE``, else ``~/.cache/rlvitals/lab``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "rlvitals" / "lab"


# --------------------------------------------------------------------------------------------
# Tokenizer and model


def tiny_tokenizer():
    """Character-level ``PreTrainedTokenizerFast`` over :data:`ALPHABET` (decodes without
    spaces between characters)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in ALPHABET:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )


def _tiny_model(tok: Any, shape: TinyModel, seed: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=len(tok),
            hidden_size=shape.hidden_size,
            intermediate_size=shape.intermediate_size,
            num_hidden_layers=shape.layers,
            num_attention_heads=shape.heads,
            num_key_value_heads=shape.kv_heads,
            max_position_embeddings=shape.max_positions,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
            bos_token_id=tok.eos_token_id,
            tie_word_embeddings=True,
        )
    )
    _fix_generation_config(model, tok)
    return model


def _fix_generation_config(model: Any, tok: Any) -> None:
    gc = model.generation_config
    gc.pad_token_id = tok.pad_token_id
    gc.eos_token_id = tok.eos_token_id
    # Plain sampling: no top-k / top-p a model's own generation config may carry.
    gc.top_k, gc.top_p = None, None


def load_policy(path: str | os.PathLike, device: str = "cpu") -> tuple[Any, Any]:
    """``(model, tokenizer)`` from a Hugging Face causal-LM directory, on ``device``.

    A tokenizer without a pad token pads with its end-of-sequence token (left padding).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: not a Hugging Face model directory (no config.json)")
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(path)
    _fix_generation_config(model, tok)
    return model.to(device), tok


# --------------------------------------------------------------------------------------------
# Generation and pass rates


def generate(
    model: Any,
    tok: Any,
    prompts: Sequence[str],
    *,
    samples: int = 1,
    temperature: float = 1.0,
    max_new_tokens: int = 4,
    seed: int = 0,
    batch_prompts: int = 256,
) -> list[str]:
    """``len(prompts) * samples`` completions, prompt-major (all samples of prompt 0 first).

    ``temperature=0`` is greedy decoding. Sampling runs under a forked torch RNG seeded with
    ``seed``, so it neither depends on nor disturbs the caller's random state (a training run
    evaluated at step 50 trains on exactly as if it had not been).
    """
    import torch

    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[str] = []
    devices = [device] if device.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=devices), torch.no_grad():
            torch.manual_seed(seed)
            for i in range(0, len(prompts), batch_prompts):
                chunk = list(prompts[i : i + batch_prompts])
                enc = tok(chunk, return_tensors="pt", padding=True, padding_side="left")
                enc = {k: v.to(device) for k, v in enc.items() if k != "token_type_ids"}
                kw: dict[str, Any] = dict(
                    max_new_tokens=max_new_tokens,
                    pad_token_id=tok.pad_token_id,
                    eos_token_id=tok.eos_token_id,
                )
                if temperature > 0:
                    kw.update(
                        do_sample=True,
                        temperature=float(temperature),
                        top_k=None,
                        top_p=None,
                        num_return_sequences=samples,
                    )
                else:
                    kw.update(do_sample=False, num_return_sequences=1)
                ids = model.generate(**enc, **kw)
                new = ids[:, enc["input_ids"].shape[1] :]
                texts = tok.batch_decode(new, skip_special_tokens=True)
                if temperature <= 0 and samples > 1:
                    texts = [t for t in texts for _ in range(samples)]
                out.extend(texts)
    finally:
        model.train(was_training)
    return out


def pass_rates(
    model: Any,
    tok: Any,
    task: Task,
    problems: Sequence[Problem],
    *,
    samples: int,
    temperature: float,
    seed: int = 0,
    partial: bool = False,
    max_new_tokens: int | None = None,
) -> list[float]:
    """Per problem, the mean reward of ``samples`` completions (greedy when temperature 0)."""
    texts = generate(
        model,
        tok,
        [p.prompt for p in problems],
        samples=samples,
        temperature=temperature,
        max_new_tokens=max_new_tokens or task.answer_chars + 1,
        seed=seed,
    )
    out = []
    for i, p in enumerate(problems):
        rs = [task.reward(p, t, partial=partial) for t in texts[i * samples : (i + 1) * samples]]
        out.append(sum(rs) / samples)
    return out


# --------------------------------------------------------------------------------------------
# The warm start


def _warm_start(model: Any, tok: Any, task: Task, cfg: WarmStart, progress: Progress) -> float:
    """Next-token training on answers (prompt tokens masked); returns the last loss."""
    import torch

    rng = random.Random(f"sft:{task.name}:{cfg.seed}")
    sizes = list(task.sft_sizes)
    weights = [cfg.size_decay ** (s - sizes[0]) for s in sizes]
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    model.train()
    loss_value = math.nan
    eos = tok.eos_token_id
    for step in range(cfg.steps):
        # batch: (B, L) token ids, right-padded; labels -100 on prompt and padding
        seqs, starts = [], []
        while len(seqs) < cfg.batch_size:
            p = task.make(rng.choices(sizes, weights)[0], rng)
            if split_of(p.prompt) != "train":
                continue  # the base policy never sees a held-out prompt
            ids = tok(p.prompt)["input_ids"]
            seqs.append([*ids, *tok(p.answer)["input_ids"], eos])
            starts.append(len(ids))
        width = max(map(len, seqs))
        x = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        labels = torch.full((len(seqs), width), -100, dtype=torch.long)
        for i, (s, a) in enumerate(zip(seqs, starts)):
            x[i, : len(s)] = torch.tensor(s)
            mask[i, : len(s)] = 1
            labels[i, a : len(s)] = x[i, a : len(s)]
        loss = model(input_ids=x, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        loss_value = float(loss.detach())
        if step % 25 == 0 or step == cfg.steps - 1:
            progress("warm start", step + 1, cfg.steps)
    model.eval()
    return loss_value


# --------------------------------------------------------------------------------------------
# Measuring the levels


def _calibrate(
    model: Any, tok: Any, task: Task, cfg: Calibration, progress: Progress
) -> tuple[dict[int, float], list[dict[int, float]], list[float]]:
    rates: dict[int, float] = {}
    zeros = 0
    sizes = list(task.sizes)
    for i, size in enumerate(sizes):
        probs = make_prompts(
            task, {size: 1.0}, cfg.prompts_per_size, seed=cfg.seed * 1000 + size, split="train"
        )
        r = pass_rates(
            model, tok, task, probs, samples=cfg.samples, temperature=cfg.temperature, seed=size
        )
        rates[size] = round(sum(r) / len(r), 6)
        progress("pass rate per size", i + 1, len(sizes))
        zeros = zeros + 1 if rates[size] == 0.0 else 0
        if zeros >= 2:  # larger sizes are only harder
            break
    levels = [level_mixture(rates, t) for t in LEVEL_TARGETS]
    checked = []
    for i, mix in enumerate(levels):
        probs = make_prompts(task, mix, cfg.eval_prompts, seed=cfg.seed, split="eval")
        r = pass_rates(
            model, tok, task, probs, samples=cfg.samples, temperature=cfg.temperature, seed=i
        )
        checked.append(round(sum(r) / len(r), 6))
        progress("pass rate per level (held out)", i + 1, len(levels))
    return rates, levels, checked


# --------------------------------------------------------------------------------------------
# Build or load, with a cache


def _key(payload: dict[str, Any]) -> str:
    blob = json.dumps(payload, sort_keys=True, default=str).encode("utf-8")
    return hashlib.sha1(blob).hexdigest()[:12]


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (``flock``) where the platform has it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            import fcntl

            fcntl.flock(f, fcntl.LOCK_EX)
        except ImportError:  # pragma: no cover - Windows
            pass
        yield


def _no_progress(phase: str, done: int, total: int) -> None:
    return None


def prepare_base(
    task: str | Task = "sum",
    *,
    model: str | os.PathLike | None = None,
    device: str = "cpu",
    cache_dir: str | os.PathLike | None = None,
    shape: TinyModel | None = None,
    warm: WarmStart | None = None,
    calibration: Calibration | None = None,
    progress: Progress | None = None,
) -> BasePolicy:
    """The base policy of ``task``: built, warm-started and measured once, then read from cache.

    Args:
        task: a task name or :class:`~rlvitals.lab.tasks.Task`.
        model: a local Hugging Face causal-LM directory to use instead of the tiny model
            (it is measured, not trained).
        device: where to measure (``"cpu"``, ``"cuda"``, ...).
        cache_dir: default :func:`default_cache_dir`.
        shape, warm, calibration: settings of the tiny model, its warm start and the
            measurement (defaults: :class:`TinyModel`, :class:`WarmStart`, :class:`Calibration`).
        progress: ``progress(phase, done, total)`` callback.
    """
    task = get_task(task) if isinstance(task, str) else task
    shape, warm = shape or TinyModel(), warm or WarmStart()
    calibration = calibration or Calibration()
    progress = progress or _no_progress
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    spec: dict[str, Any] = {
        "format": LAB_FORMAT,
        "task": dataclasses.asdict(task),
        "calibration": dataclasses.asdict(calibration),
    }
    if model is None:
        spec.update(shape=dataclasses.asdict(shape), warm=dataclasses.asdict(warm))
        name = f"{task.name}-tiny-{_key(spec)}"
    else:
        src = Path(model).resolve()
        cfg = src / "config.json"
        if not cfg.is_file():
            raise FileNotFoundError(f"{model}: not a Hugging Face model directory (no config.json)")
        spec.update(model=str(src), config_sha=hashlib.sha1(cfg.read_bytes()).hexdigest())
        name = f"{task.name}-{src.name}-{_key(spec)}"
    folder = cache / name
    info = folder / "base.json"
    with _locked(cache / f".{name}.lock"):
        if info.is_file():
            return BasePolicy.from_dict(json.loads(info.read_text()))
        return _build(task, model, device, folder, spec, shape, warm, calibration, progress)


def _build(
    task: Task,
    model_path: Any,
    device: str,
    folder: Path,
    spec: dict[str, Any],
    shape: TinyModel,
    warm: WarmStart,
    calibration: Calibration,
    progress: Progress,
) -> BasePolicy:
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    start = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic, and fair to a shared machine
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=folder.parent))
    try:
        meta: dict[str, Any] = {
            "spec": spec,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        if model_path is None:
            tok = tiny_tokenizer()
            model = _tiny_model(tok, shape, warm.seed)
            meta["parameters"] = sum(p.numel() for p in model.parameters())
            t0 = time.perf_counter()
            meta["warm_start_loss"] = _warm_start(model, tok, task, warm, progress)
            meta["warm_start_seconds"] = round(time.perf_counter() - t0, 2)
            path = folder / "model"
            model.save_pretrained(tmp / "model")
            tok.save_pretrained(tmp / "model")
            model = model.to(device)
        else:
            path = Path(model_path).resolve()
            model, tok = load_policy(path, device)
        t0 = time.perf_counter()
        rates, levels, checked = _calibrate(model, tok, task, calibration, progress)
        meta["calibration_seconds"] = round(time.perf_counter() - t0, 2)
        meta["seconds"] = round(time.perf_counter() - start, 2)
        base = BasePolicy(
            path=path,
            task=task.name,
            pass_rates=rates,
            levels=levels,
            level_rates=checked,
            meta=meta,
            tiny=model_path is None,
        )
        text = json.dumps(base.to_dict(), indent=1)
        (tmp / "base.json").write_text(text)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        return BasePolicy.from_dict(json.loads(text))  # exactly what the cache gives back
    finally:
        torch.set_num_threads(threads)
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)

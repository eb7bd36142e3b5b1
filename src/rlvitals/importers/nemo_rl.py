"""NeMo-RL per-sample dumps: ``logs/exp_NNN/train_data_step{N}.jsonl`` → exact per-group ACR.

The writer (NVIDIA-NeMo/RL ``nemo_rl/algorithms/grpo.py`` @ 002cdc27, ``grpo_train``, and
``nemo_rl/utils/logger.py`` @ 0275e758, ``Logger.log_batched_dict_as_jsonl``): after each step,
one JSON line per sample, every value a one-element list (``make_microbatch_iterator(1)``), and
a bare row number ``idx`` last::

    {"content": ["<prompt + response>"], "rewards": [1.0], "input_lengths": [412],
     "token_ids": [[...]], "token_loss_mask": [[0, ..., 1]], "sample_loss_mask": [1.0],
     "advantages": [[0.0, ..., 0.968]], "generation_logprobs": [[...]], ..., "idx": 0}

- **Step**: N of the file name (``total_steps + 1``, 1-based); a file read from a stream or
  renamed has none and is step 1 (warning). ``idx`` is a row number, never a step.
- **Groups**: ``repeat_interleave(num_generations_per_prompt)`` puts the G samples of a prompt
  in consecutive rows. G is ``grpo.num_generations_per_prompt`` from a YAML/JSON config found
  beside the dumps (or one or two folders up); else it is inferred from the advantages: the G
  for which NeMo-RL's own estimator (leave-one-out mean, divided by the others' population std
  where > 0; or plain GRPO / RLOO / Dr. GRPO) reproduces the logged advantages; else (no
  advantages in the dump, as in newer NeMo-RL) consecutive rows with the same prompt are the
  groups. An inferred G is said in a warning and in ``manifest.config["group_size_source"]``
  (the report's "G from").
- **Prompts**: the token ids before the first trained token (``token_ids`` up to the first 1 of
  ``token_loss_mask``), else the messages of ``content`` but the last (the reply; ``content`` is
  ``message_log_to_flat_messages``' list of the message texts). Used as the groups' prompt ids
  when every run of one prompt is a multiple of G (at least 2) long; a dump whose prompts do not
  repeat that way (a multi-turn one) keeps step-wide groups of G.
- **Rewards**: ``rewards`` (with dynamic sampling on, ``filtered_rewards``, aligned with the
  rows; the rows are then the kept samples only). **Advantages**: the value at the first
  position of ``token_loss_mask`` (newer, token-level), or the one value per sample (older).
- A directory: every ``train_data_step*.jsonl`` in it; a ``logs`` directory holding several
  ``exp_NNN`` folders holds several runs (``run="exp_002"``; default the latest, with a
  warning). ``val_data_step*.jsonl`` (validation) are not read.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, note_runs, register
from rlvitals.importers._groups import Samples
from rlvitals.importers._lines import iter_json_lines, json_float
from rlvitals.importers._siblings import find_config, numbered_entries
from rlvitals.importers._source import is_regular, is_stream
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import nemo_rl as nemo_facts

__all__ = ["load_nemo_rl"]

CONF = 0.9
_NAME = re.compile(r"^train_data_step([0-9]{1,18})\.jsonl$")
_EXP = re.compile(r"^exp_([0-9]{1,9})$")
_HEAD = re.compile(rb'\A\s*\{(?:"agent_ref": .{0,4096}?, )?"content": \[')
_MAX_CONFIG_BYTES = 4 << 20
_MAX_G = 4096
_MATCH_TOL = 1e-3


def _sniff(path: Path, head: bytes) -> float:
    if not head:
        return _sniff_dir(path)
    if _HEAD.match(head) and b'"rewards": [' in head:
        return CONF
    return 0.0


def _sniff_dir(path: Path) -> float:
    try:
        if _step_files(path) or _exp_dirs(path):
            return CONF
    except OSError:
        return 0.0
    return 0.0


def _step_files(d: Path) -> list[tuple[int, Path]]:
    return numbered_entries(d, _NAME, is_regular) if d.is_dir() else []


def _exp_dirs(d: Path) -> list[Path]:
    if not d.is_dir():
        return []
    return [p for _, p in numbered_entries(d, _EXP, Path.is_dir) if _step_files(p)]


def _first(v: Any) -> Any:
    """NeMo-RL wraps every value in a one-element list."""
    while isinstance(v, list) and len(v) == 1:
        v = v[0]
    return v


def _number(v: Any) -> float | None:
    v = _first(v)
    return math.nan if v is None else json_float(v)


def _advantage(row: dict[str, Any]) -> float | None:
    adv = row.get("advantages")
    if adv is None:
        return None
    if isinstance(adv, list) and len(adv) == 1 and isinstance(adv[0], list):
        tokens = adv[0]
        mask = row.get("token_loss_mask")
        mask = (
            mask[0]
            if isinstance(mask, list) and len(mask) == 1 and isinstance(mask[0], list)
            else None
        )
        if mask is not None:
            for a, m in zip(tokens, mask):
                if m:
                    return _number(a)
            return 0.0
        for a in tokens:
            x = _number(a)
            if x:
                return x
        return 0.0
    return _number(adv)


def _config_near(start: Path) -> dict[str, Any] | None:
    """A YAML/JSON config with ``grpo.num_generations_per_prompt`` beside ``start`` or up to
    two folders above it."""
    folders = [start, *list(start.parents)[:2]]
    needle = "num_generations_per_prompt"
    found = find_config(folders, _MAX_CONFIG_BYTES, needle, nemo_facts.recognise)
    return found[1] if found is not None else None


def _choose_run(path: Path, run: str | None, builder: RunBuilder) -> Path:
    exps = _exp_dirs(path)
    if not exps:
        return path
    names = [p.name for p in exps]
    listing = [{"name": n, "read": False} for n in names]
    if run is None:
        chosen = exps[-1]
        if len(exps) > 1:
            builder.warn(
                f"{path}: {len(exps)} NeMo-RL experiments ({', '.join(names)}); read the latest, "
                f"{chosen.name}; choose one with --run NAME"
            )
    elif run in names:
        chosen = exps[names.index(run)]
    else:
        raise InputError(path, f"no run {run!r} here (runs: {', '.join(names)})")
    listing[names.index(chosen.name)]["read"] = True
    note_runs(builder, listing)
    builder.manifest.config["experiment"] = chosen.name
    return chosen


def load_nemo_rl(path: Path, progress: Progress | None = None, *, run: str | None = None) -> Run:
    """Read NeMo-RL ``train_data_step{N}.jsonl`` dumps (a file or a folder) into a ``Run``."""
    builder = RunBuilder(
        Manifest(source=str(path), trainer="nemo_rl", step_key="N of train_data_step{N}.jsonl")
    )
    if is_stream(path) or not path.is_dir():
        m = _NAME.match(path.name)
        if m is None:
            builder.warn(
                f"{path}: not named train_data_step{{N}}.jsonl: its step is unknown, read as step 1"
            )
            builder.manifest.step_key = "none (one dump, step 1 assumed)"
        files = [(int(m.group(1)) if m else 1, path)]
        where = None if is_stream(path) else path.parent
    else:
        folder = _choose_run(path, run, builder)
        files = _step_files(folder)
        where = folder
        if not files:
            raise InputError(path, "no train_data_step{N}.jsonl files here")
    if run is not None and "experiment" not in builder.manifest.config:
        raise InputError(path, "this NeMo-RL path holds one run; --run does not apply")
    cfg = _config_near(where) if where is not None else None
    if cfg is not None:
        apply_facts(builder.manifest, nemo_facts.facts(cfg), overwrite=True)
        builder.manifest.config["grpo"] = (
            cfg.get("grpo") if isinstance(cfg.get("grpo"), dict) else {}
        )
    samples = Samples()
    rows_per_step: dict[int, int] = {}
    for step, f in files:
        for lineno, row in iter_json_lines(f, builder.warnings, progress, objects=True):
            r = _number(row.get("filtered_rewards", row.get("rewards")))
            if r is None:
                raise InputError(f, "'rewards' is not a number", f"line {lineno}")
            samples.add(step, _prompt(row), r, _advantage(row))
            rows_per_step[step] = rows_per_step.get(step, 0) + 1
    if not len(samples):
        raise InputError(path, "no samples in the NeMo-RL dumps")
    g_prompts = samples.prompt_g()
    g = builder.manifest.group_size
    if g is None:
        g = _infer_group_size(path, builder, samples, rows_per_step, g_prompts)
    if g_prompts is None or g is None or g_prompts % g:
        samples.forget_prompts()  # groups of G cut from each step's rows, as NeMo-RL made them
    if g is not None:
        table, _, uneven = samples.table(g)
        builder.groups = table
        if uneven:
            builder.warn(
                f"{path}: {uneven} steps hold a number of rows that is not a multiple of G={g}"
            )
    for step, n in rows_per_step.items():
        builder.add_row(step, {"rlvitals/samples": float(n)})
    return builder.build()


def _infer_group_size(
    path: Path,
    builder: RunBuilder,
    samples: Samples,
    rows_per_step: dict[int, int],
    g_prompts: int | None,
) -> int | None:
    """G when no config gave it: from the advantages, else from runs of one prompt (module
    docstring); said in a warning and ``manifest.config["group_size_source"]``."""
    missing = "no config with grpo.num_generations_per_prompt was found"
    g, est = _infer_g(samples, rows_per_step)
    if g is not None:
        builder.warn(
            f"{path}: G = {g} inferred from the advantages (NeMo-RL's {est} reproduces them); "
            + missing
        )
        builder.manifest.config["group_size_source"] = f"inferred: NeMo-RL's {est} advantages"
        if builder.manifest.estimator is None:
            builder.manifest.estimator = est
    elif g_prompts is not None:
        g = g_prompts
        builder.warn(
            f"{path}: G = {g} inferred from the prompts: consecutive rows with the same prompt "
            f"are a group (NeMo-RL writes a prompt's G samples together); " + missing
        )
        builder.manifest.config["group_size_source"] = (
            "inferred: consecutive rows with the same prompt"
        )
    else:
        builder.warn(
            f"{path}: G (grpo.num_generations_per_prompt) is unknown: no config, the advantages "
            "do not tell it and no prompt repeats in consecutive rows; the groups were not "
            "formed (put the run's config beside the dumps)"
        )
        return None
    builder.manifest.group_size = g
    return g


def _prompt(row: dict[str, Any]) -> Any:
    """The prompt of a sample (module docstring), as a key; None when it cannot be told."""
    ids, mask = _first(row.get("token_ids")), _first(row.get("token_loss_mask"))
    if isinstance(ids, list) and isinstance(mask, list) and len(ids) == len(mask):
        n = next((i for i, m in enumerate(mask) if m), len(mask))
        digest = hashlib.blake2b(repr(ids[:n]).encode(), digest_size=8)
        return "tokens:" + digest.hexdigest()
    content = _first(row.get("content"))
    if isinstance(content, list) and len(content) >= 2 and all(isinstance(c, str) for c in content):
        return "\x00".join(content[:-1])
    return None


def _predict(r: np.ndarray, g: int, est: str) -> np.ndarray:
    """NeMo-RL's advantages of rewards ``r`` (``(k, g)``) under ``est``."""
    s = r.sum(1, keepdims=True)
    if est in ("grpo_loo", "rloo"):
        mean = (s - r) / (g - 1)
        var = ((r * r).sum(1, keepdims=True) - r * r) / (g - 1) - mean * mean
    else:
        mean = s / g
        var = (r * r).mean(1, keepdims=True) - mean * mean
    a = r - mean
    if est in ("grpo_loo", "grpo"):
        std = np.sqrt(np.maximum(var, 0.0))
        a = np.where(std > 1e-9, a / (std + 1e-6), a)
    return a


def _infer_g(samples: Samples, rows: dict[int, int]) -> tuple[int | None, str | None]:
    if not samples.has_adv:
        return None, None
    n = min(rows.values())
    steps, rew, adv = samples.arrays()
    best: tuple[float, int, str] | None = None
    for g in range(min(n, _MAX_G), 1, -1):
        if any(c % g for c in rows.values()):
            continue
        for est in ("grpo_loo", "grpo", "rloo", "dr_grpo"):
            err = 0.0
            for step in rows:
                sel = steps == step
                r, a = rew[sel].reshape(-1, g), adv[sel].reshape(-1, g)
                with np.errstate(invalid="ignore", divide="ignore"):
                    d = np.abs(_predict(r, g, est) - a)
                d = d[np.isfinite(d)]
                err = max(err, float(d.max()) if d.size else 0.0)
                if err > _MATCH_TOL:
                    break
            if err <= _MATCH_TOL and (best is None or err < best[0] - 1e-12):
                best = (err, g, est)
    if best is None:
        return None, None
    return best[1], best[2]


register(
    Importer(
        name="nemo_rl",
        description="NeMo-RL per-sample dumps (logs/exp_NNN/train_data_step{N}.jsonl)",
        sniff=_sniff,
        load=load_nemo_rl,
        multi_run=True,
        precheck=Precheck(starts=b"{[", marks=(b'"content": [',), within=8192, dirs=True),
        files=(".jsonl",),
    )
)

"""veRL logs: console lines, the ``file`` logger's JSONL, and rollout dumps.

Three formats, three importers:

``verl_console``
    What veRL's ``console`` logger prints once per step, one line each::

        (TaskRunner pid=678203) step:2 - actor/entropy:0.302 - critic/score/mean:0.679 - ...

    possibly wrapped in ANSI colour codes, interleaved with anything else the job printed (tqdm
    bars, warnings, shell traces), which is ignored. A line is a step line when, after colour
    codes and a Ray ``(Actor pid=...)`` prefix, it starts with ``step:N``; every ``key:value``
    field of such a line must then hold a number (``0.000``, ``-0.000``, ints, ``nan``, ``inf``)
    or the import fails naming the line. Validation keys (``val-core/...``, ``val-aux/...``,
    ``val/...``) become eval series. If the log holds the launch command
    (``python3 -m verl.trainer.main_ppo key=value ...``, one line or continued with ``\\``), its
    Hydra overrides land in ``manifest.config`` and set group size, estimator and KL coefficient.

``verl_file``
    veRL's ``file`` logger (``trainer.logger=[...,file]``, path from ``VERL_FILE_LOGGER_PATH``):
    one ``{"step": N, "data": {key: value}}`` object per line; NaN is written as ``null``.

``verl_rollouts``
    ``trainer.rollout_data_dir``: one ``<step>.jsonl`` file per step, one row per completion with
    ``input`` (prompt text), ``output``, ``score``, ``step`` (and ``gts`` plus reward extras in
    newer versions). Rows are grouped by ``uid`` when present, else by ``input`` within a step:
    the groups' rewards make ACR exact. The prompt id is a short stable hash of the input text.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shlex
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Progress, register
from rlvitals.importers._lines import iter_json_lines, iter_lines
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import GroupTable, Manifest, Run, RunBuilder

__all__ = [
    "load_verl_console",
    "load_verl_file",
    "load_verl_rollouts",
    "parse_hydra_overrides",
]

# --- shared limits and patterns -------------------------------------------------------------

MAX_STEP = 2**63 - 1
"""Steps are stored as int64; a larger step number is bad input."""
MAX_STEP_DIGITS = 19
MAX_COMMAND_CHARS = 256 * 1024
"""The launch command is read up to this many characters (continuation lines included)."""
SNIFF_SCAN_BYTES = 8 * 1024 * 1024
"""A log whose first 64 KiB look like veRL but hold no step line yet is scanned this far."""
PROMPT_ID_HEX = 12
"""Length of the prompt id (hex digits of a BLAKE2b hash of the prompt text)."""

CONF_CONSOLE = 0.9
CONF_CONSOLE_NO_STEPS = 0.3
CONF_FILE_LOGGER = 0.95
CONF_FILE_LOGGER_TORN = 0.9
CONF_ROLLOUTS = 0.9
CONF_ROLLOUTS_WEAK = 0.6
CONF_ROLLOUTS_NAMES_ONLY = 0.2

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RAY_PREFIX = re.compile(r"\([^()\n]{1,300}\)\s*")
_RAY_REPEAT = re.compile(r"\[repeated \d+x across cluster\]")
_STEP = re.compile(r"step:(\d+)(?= - |\s*$)")
_STEP_BYTES = re.compile(
    rb"(?m)^(?:\x1b\[[0-9;]*m)*(?:\([^()\n]{1,300}\))?(?:\x1b\[[0-9;]*m)*[ \t\r]*step:\d+ - "
)
_VERL_MARK = re.compile(
    rb"verl\.trainer|\(TaskRunner pid=|\(main_task pid=|val-core/|critic/score/"
)
_LAUNCH = re.compile(r"-m\s+((?:verl|recipe)\.[\w.]*main\w*)")
_OVERRIDE_KEY = re.compile(r"[+~]{0,2}([A-Za-z_][\w\-]*(?:\.[\w\-@]+)*)")
_ROLLOUT_NAME = re.compile(r"(\d{1,18})\.jsonl")
_NUMPY_REPR = re.compile(r"(?:np|numpy)\.(?:float|int|uint|bool)\d*_?\((.{1,64})\)")
_BOOLS = {"True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0, "np.True_": 1.0, "np.False_": 0.0}


def _check_step(path: Path, digits: str, where: str) -> int:
    if len(digits) > MAX_STEP_DIGITS or int(digits) > MAX_STEP:
        raise InputError(path, f"step number {digits[:24]} is out of range", where)
    return int(digits)


def _number(text: str) -> float | None:
    """A console value as float, or None when it is not a number (``nan``/``inf`` are).

    Accepts what veRL prints: ``0.302`` (``{v:.3f}``), ``-0.000``, ``5``, ``1e-06``, ``nan``,
    ``inf``, ``True``, and numpy 2 reprs (``np.float64(0.302)``, from ``pprint.pformat``).

    >>> _number("np.float64(-0.5)"), _number("True"), _number("abc")
    (-0.5, 1.0, None)
    """
    try:
        return float(text)
    except ValueError:
        pass
    m = _NUMPY_REPR.fullmatch(text)
    if m is not None:
        text = m.group(1)
        try:
            return float(text)
        except ValueError:
            pass
    return _BOOLS.get(text)


# --- Hydra overrides of the launch command --------------------------------------------------


def _hydra_value(text: str) -> Any:
    """A Hydra override value as Python: bools, null, ints and floats; anything else a string."""
    low = text.lower()
    if low == "true":
        return True
    if low == "false":
        return False
    if low in ("null", "none"):
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_hydra_overrides(command: str) -> dict[str, Any]:
    """Hydra overrides ``key=value`` of a command line → ``{dotted_key: value}``.

    Shell quoting is undone (``'a=[x]'`` → ``a=[x]``); ``+`` / ``++`` / ``~`` prefixes are
    dropped; values become bools, ints, floats, None or strings. Tokens that are not overrides
    (the program, flags, redirections, ``| tee log``) are skipped.

    >>> parse_hydra_overrides("python3 -m verl.trainer.main_ppo actor.rollout.n=5 +x.y=True 2>&1")
    {'actor.rollout.n': 5, 'x.y': True}
    """
    try:
        tokens = shlex.split(command, comments=False, posix=True)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        tokens = command.split()
    out: dict[str, Any] = {}
    for tok in tokens:
        key, sep, value = tok.partition("=")
        if not sep:
            continue
        m = _OVERRIDE_KEY.fullmatch(key)
        if m is None:
            continue
        out[m.group(1)] = _hydra_value(value)
    return out


MAX_GROUP_SIZE = 2**31 - 1
"""A stated group size above this is ignored (nobody samples that many completions)."""


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, int) and 0 < v <= MAX_GROUP_SIZE:
        return v
    return None


def _as_float(v: Any) -> float | None:
    """``v`` as a float when it is a number (ints beyond float range become ±inf)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _apply_verl_config(manifest: Manifest, entrypoint: str, cfg: dict[str, Any]) -> None:
    """Fill the manifest from veRL's Hydra overrides (only what the command states)."""
    manifest.config = {"entrypoint": entrypoint, **cfg}
    manifest.group_size = _as_int(cfg.get("actor_rollout_ref.rollout.n"))
    est = cfg.get("algorithm.adv_estimator")
    if isinstance(est, str) and est and not est.startswith("$"):
        manifest.estimator = est
    use_kl_loss = cfg.get("actor_rollout_ref.actor.use_kl_loss")
    kl_in_reward = cfg.get("algorithm.use_kl_in_reward")
    if use_kl_loss is True:
        manifest.kl_coef = _as_float(cfg.get("actor_rollout_ref.actor.kl_loss_coef"))
    elif kl_in_reward is True:
        manifest.kl_coef = _as_float(cfg.get("algorithm.kl_ctrl.kl_coef"))
    elif use_kl_loss is False and kl_in_reward is False:
        manifest.kl_coef = 0.0
    for key, value in cfg.items():
        last = key.rsplit(".", 1)[-1]
        x = _as_float(value)
        if x is None:
            continue
        if last in ("reward_min", "min_reward"):
            manifest.reward_min = x
        elif last in ("reward_max", "max_reward"):
            manifest.reward_max = x


class CommandCatcher:
    """Collects the first launch command of a log (matching ``pattern``), with ``\\`` continuations.

    ``pattern`` is searched in each fed line; its group 1 is the entry point and the text after
    the match is the command's arguments. At most :data:`MAX_COMMAND_CHARS` are kept.
    """

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.parts: list[str] = []
        self.size = 0
        self.entrypoint: str | None = None
        self.done = False
        self.capturing = False

    def feed(self, line: str) -> None:
        if self.done:
            return
        if not self.capturing:
            m = self.pattern.search(line)
            if m is None:
                return
            self.entrypoint = m.group(1)
            line = line[m.end() :]
            self.capturing = True
        text = line.rstrip()
        cont = text.endswith("\\")
        if cont:
            text = text[:-1]
        self.parts.append(text)
        self.size += len(text)
        if not cont or self.size > MAX_COMMAND_CHARS:
            self.done = True

    @property
    def command(self) -> str:
        """The arguments after the entry point, continuation lines joined."""
        return " ".join(self.parts)[:MAX_COMMAND_CHARS]


# --- console ------------------------------------------------------------------------------


def strip_ray_repeat(text: str) -> str:
    """``text`` without Ray's log-deduplication suffix ``[repeated 2x across cluster]``."""
    if not text.endswith("cluster]"):
        return text
    i = text.rfind("[repeated ")
    if i >= 0 and _RAY_REPEAT.fullmatch(text, i):
        return text[:i].rstrip()
    return text


def _segments(line: str) -> Iterator[str]:
    """The messages of one physical line: colour codes off, split at ``\\r``, Ray prefix off."""
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    for seg in line.split("\r"):
        seg = seg.strip()
        if seg.startswith("("):
            m = _RAY_PREFIX.match(seg)
            if m is not None:
                seg = seg[m.end() :]
        if seg.startswith("step:"):
            yield strip_ray_repeat(seg)


def _parse_step_line(path: Path, seg: str, where: str) -> tuple[int, dict[str, float]] | None:
    """``step:N - k:v - ...`` → ``(N, {k: v})``; None when ``seg`` is not a step line."""
    m = _STEP.match(seg)
    if m is None:
        return None
    step = _check_step(path, m.group(1), where)
    rest = seg[m.end() :]
    values: dict[str, float] = {}
    if not rest.strip():
        return step, values
    for field in rest[3:].split(" - "):
        key, sep, val = field.rpartition(":")
        key = key.strip()
        if not sep or not key:
            raise InputError(path, f"step line field {field[:60]!r} is not key:value", where)
        x = _number(val.strip())
        if x is None:
            raise InputError(
                path, f"value of {key[:80]!r} is not a number: {val.strip()[:40]!r}", where
            )
        values[key] = x
    return step, values


def load_verl_console(path: Path, progress: Progress | None = None) -> Run:
    """Read a veRL console log (``step:N - key:value - ...`` lines) into a ``Run``.

    Args:
        path: the log file.
        progress: ``progress(done_bytes, total_bytes)``, called now and then.

    Returns:
        A ``Run`` with one row per step line (eval keys in ``eval_series``), trainer ``verl``,
        and the launch command's configuration when the log holds it.

    Raises:
        InputError: a malformed step line (naming its line), or no step line at all.
    """
    builder = RunBuilder(Manifest(source=str(path), trainer="verl", logging_steps=1))
    catcher = CommandCatcher(_LAUNCH)
    eval_cache: dict[str, bool] = {}
    seen_train: set[int] = set()
    repeated: list[int] = []
    n_step_lines = 0
    for lineno, raw, complete in iter_lines(path, progress):
        want_cmd = not catcher.done and (catcher.capturing or b"main" in raw)
        has_step = b"step:" in raw
        if not has_step and not want_cmd:
            continue
        line = raw.decode("utf-8", "replace")
        if want_cmd:
            catcher.feed(line)
        if not has_step:
            continue
        where = f"line {lineno}"
        for seg in _segments(line):
            try:
                parsed = _parse_step_line(path, seg, where)
            except InputError:
                if complete:
                    raise
                builder.warn(f"{path}: {where}: torn last line ignored (file still being written?)")
                parsed = None
            if parsed is None:
                continue
            step, values = parsed
            n_step_lines += 1
            if not values:
                continue
            has_train = False
            for k in values:
                ev = eval_cache.get(k)
                if ev is None:
                    ev = eval_cache[k] = is_eval_key(k)
                if not ev:
                    has_train = True
                    break
            if has_train:
                if step in seen_train:
                    repeated.append(step)
                seen_train.add(step)
            builder.add_row(step, values)
    if n_step_lines == 0:
        raise InputError(
            path, "no veRL step lines found (expected lines like 'step:1 - key:value - ...')"
        )
    if repeated:
        builder.warn(
            f"{path}: {len(repeated)} training step line(s) repeat an earlier step "
            f"(first: step {repeated[0]}; a resumed run?); the later values were kept"
        )
    if catcher.entrypoint is not None:
        cfg = parse_hydra_overrides(catcher.command)
        _apply_verl_config(builder.manifest, catcher.entrypoint, cfg)
    return builder.build()


def _sniff_console(path: Path, head: bytes) -> float:
    if not head or path.is_dir():
        return 0.0
    if _STEP_BYTES.search(head):
        return CONF_CONSOLE
    if not _VERL_MARK.search(head):
        return 0.0
    # Looks like veRL but the first step may lie past the head (long start-up output).
    try:
        with open(path, "rb") as f:
            f.seek(len(head))
            done = len(head)
            tail = head[-4096:]
            while done < SNIFF_SCAN_BYTES:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                done += len(chunk)
                if _STEP_BYTES.search(tail + chunk):
                    return CONF_CONSOLE
                tail = chunk[-4096:]
    except OSError:
        return CONF_CONSOLE_NO_STEPS
    return CONF_CONSOLE_NO_STEPS


# --- file logger JSONL --------------------------------------------------------------------

_FILE_HEAD = re.compile(rb'\A\s*\{\s*"step"\s*:\s*-?\d+\s*,\s*"data"\s*:\s*\{')


def _json_step(path: Path, obj: Any, key: str, where: str) -> int:
    step = obj.get(key)
    if isinstance(step, bool) or not isinstance(step, int):
        raise InputError(path, f"'{key}' must be an integer, got {str(step)[:40]!r}", where)
    if not -MAX_STEP <= step <= MAX_STEP:
        raise InputError(path, f"step number {str(step)[:24]} is out of range", where)
    return step


def load_verl_file(path: Path, progress: Progress | None = None) -> Run:
    """Read veRL's ``file`` logger JSONL (``{"step": N, "data": {...}}`` per line).

    Non-numeric values in ``data`` are skipped (and counted in a warning); ``null`` is NaN.
    A torn last line is dropped with a warning.

    Raises:
        InputError: a line that is not such an object (naming the line), or no record at all.
    """
    builder = RunBuilder(Manifest(source=str(path), trainer="verl", logging_steps=1))
    n = 0
    for lineno, obj in iter_json_lines(path, builder.warnings, progress):
        where = f"line {lineno}"
        if not isinstance(obj, dict) or "step" not in obj or "data" not in obj:
            raise InputError(path, 'expected {"step": N, "data": {...}}', where)
        step = _json_step(path, obj, "step", where)
        data = obj["data"]
        if not isinstance(data, dict):
            raise InputError(path, "'data' must be an object", where)
        builder.add_row(step, data)
        n += 1
    if n == 0:
        raise InputError(path, 'no veRL file-logger records ({"step": N, "data": {...}}) found')
    if builder.skipped_values:
        builder.warn(f"{path}: {builder.skipped_values} non-numeric value(s) ignored")
    return builder.build()


def _sniff_file(path: Path, head: bytes) -> float:
    if not head or path.is_dir():
        return 0.0
    first = head.lstrip().split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except (ValueError, RecursionError):
        return CONF_FILE_LOGGER_TORN if _FILE_HEAD.match(head) else 0.0
    if (
        isinstance(obj, dict)
        and isinstance(obj.get("step"), int)
        and not isinstance(obj.get("step"), bool)
        and isinstance(obj.get("data"), dict)
    ):
        return CONF_FILE_LOGGER
    return 0.0


# --- rollout dumps -------------------------------------------------------------------------


def _rollout_files(path: Path) -> list[tuple[int, Path]]:
    out = []
    with os.scandir(path) as it:
        for entry in it:
            m = _ROLLOUT_NAME.fullmatch(entry.name)
            if m is not None and entry.is_file():
                out.append((int(m.group(1)), Path(entry.path)))
    out.sort()
    return out


def _prompt_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def _score(path: Path, v: Any, where: str) -> float:
    if isinstance(v, (bool, int, float)):
        return _as_float(v) if not isinstance(v, bool) else float(v)
    if v is None:
        return float("nan")
    if isinstance(v, str):
        x = _number(v.strip())
        if x is not None:
            return x
    raise InputError(path, f"'score' is not a number: {str(v)[:40]!r}", where)


def _read_rollout_file(
    path: Path,
    file_step: int | None,
    warnings: list[str],
    groups: dict[tuple[int, bytes], int],
    out: tuple[list[int], list[array], list[str]],
) -> None:
    steps, rewards, prompts = out
    for lineno, obj in iter_json_lines(path, warnings):
        where = f"line {lineno}"
        if not isinstance(obj, dict):
            raise InputError(path, "expected a JSON object per line", where)
        text = obj.get("input")
        if not isinstance(text, str):
            raise InputError(path, "row has no 'input' string (the prompt)", where)
        if "score" not in obj:
            raise InputError(path, "row has no 'score'", where)
        score = _score(path, obj["score"], where)
        if "step" in obj:
            step = _json_step(path, obj, "step", where)
        elif file_step is not None:
            step = file_step
        else:
            raise InputError(path, "row has no 'step' and the file name is not <step>.jsonl", where)
        uid = obj.get("uid")
        key = _prompt_digest(uid if isinstance(uid, str) else text)
        gi = groups.get((step, key))
        if gi is None:
            gi = groups[(step, key)] = len(steps)
            steps.append(step)
            rewards.append(array("d"))
            prompts.append(_prompt_digest(text).hex()[:PROMPT_ID_HEX])
        rewards[gi].append(score)


def load_verl_rollouts(path: Path, progress: Progress | None = None) -> Run:
    """Read veRL rollout dumps (a directory of ``<step>.jsonl``, or one such file).

    Rows with the same ``uid`` (else the same ``input`` text) in one step form a group; the
    group's ``score`` values are its rewards. Prompt ids are the first 12 hex digits of a
    BLAKE2b hash of the input text.

    Returns:
        A ``Run`` with ``groups`` set, no per-step scalars, trainer ``verl``; ``group_size``
        when every group has the same size.

    Raises:
        InputError: a bad row (naming file and line), or no rollout file.
    """
    builder = RunBuilder(Manifest(source=str(path), trainer="verl"))
    if path.is_dir():
        files: list[tuple[int | None, Path]] = list(_rollout_files(path))
        if not files:
            raise InputError(path, "no <step>.jsonl rollout files found")
    else:
        m = _ROLLOUT_NAME.fullmatch(path.name)
        files = [(int(m.group(1)) if m else None, path)]
    total = sum(os.path.getsize(f) for _, f in files)
    done = 0
    groups: dict[tuple[int, bytes], int] = {}
    out: tuple[list[int], list[array], list[str]] = ([], [], [])
    for file_step, f in files:
        _read_rollout_file(f, file_step, builder.warnings, groups, out)
        groups.clear()  # a group never spans two files
        done += os.path.getsize(f)
        if progress is not None:
            progress(done, total)
    steps, rewards, prompts = out
    if not steps:
        raise InputError(path, "no rollout rows found")
    builder.groups = GroupTable.from_lists(steps, rewards, prompts)
    sizes = builder.groups.sizes()
    lo, hi = int(sizes.min()), int(sizes.max())
    if lo == hi:
        builder.manifest.group_size = lo
    else:
        builder.warn(
            f"{path}: group sizes differ ({lo}..{hi}); rows with the same prompt text in one step "
            "are merged into one group"
        )
    return builder.build()


def _looks_like_rollout_row(line: bytes) -> float:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return CONF_ROLLOUTS_WEAK if line.lstrip().startswith(b'{"input"') else 0.0
    if isinstance(obj, dict) and isinstance(obj.get("input"), str) and "score" in obj:
        return CONF_ROLLOUTS
    return 0.0


def _sniff_rollouts(path: Path, head: bytes) -> float:
    if path.is_dir():
        try:
            files = _rollout_files(path)
            if not files:
                return 0.0
            with open(files[0][1], "rb") as f:
                first = f.read(65536).lstrip().split(b"\n", 1)[0]
        except OSError:
            return 0.0
        return _looks_like_rollout_row(first) or CONF_ROLLOUTS_NAMES_ONLY
    if not head:
        return 0.0
    return _looks_like_rollout_row(head.lstrip().split(b"\n", 1)[0])


register(
    Importer(
        name="verl_console",
        description="veRL console log ('step:N - key:value - ...' lines)",
        sniff=_sniff_console,
        load=load_verl_console,
    )
)
register(
    Importer(
        name="verl_file",
        description='veRL file logger JSONL ({"step": N, "data": {...}} per line)',
        sniff=_sniff_file,
        load=load_verl_file,
    )
)
register(
    Importer(
        name="verl_rollouts",
        description="veRL rollout dumps (trainer.rollout_data_dir: <step>.jsonl with input, score)",
        sniff=_sniff_rollouts,
        load=load_verl_rollouts,
    )
)

"""OpenRLHF console logs: the ``Global step N: {...}`` line its PPO/GRPO trainer logs per step.

OpenRLHF's Ray PPO trainer logs each step's status dict through Python ``logging``::

    INFO 05-12 10:11:12 ppo_trainer.py:412] ✨ Global step 7: {'policy_loss': -0.01, 'kl': 0.0003,
    'reward': 0.41, 'response_length': 312.5, 'actor_lr': 1e-06, ...}

(one line; the ✨ is absent in some versions), and evaluation results as
``Eval at step N: {...}``. The dict is a Python repr: single quotes, bare ``nan``/``inf``, and
sometimes ``tensor(0.5)`` or ``np.float64(0.5)``. It is parsed with :func:`ast.parse` and read
node by node — never evaluated. Numeric entries are kept; strings, lists and ``None`` are skipped.
Keys are the ones OpenRLHF also sends to TensorBoard / W&B under ``train/`` (``policy_loss``,
``kl``, ``reward``, ``response_length``, ``actor_lr``, ...); eval keys get an ``eval/`` prefix.
If the log holds the launch command (``python3 -m openrlhf.cli.train_ppo_ray --flag value ...``),
its flags land in ``manifest.config`` and set group size, estimator and KL coefficient.
"""

from __future__ import annotations

import ast
import math
import re
import shlex
import warnings
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Progress, register
from rlvitals.importers._lines import iter_lines
from rlvitals.importers.verl import CommandCatcher, _as_float, _as_int, strip_ray_repeat
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["load_openrlhf_console", "parse_cli_flags", "parse_status_dict"]

MAX_STEP = 2**63 - 1
MAX_STEP_DIGITS = 19
MAX_DICT_CHARS = 1024 * 1024
"""A status dict longer than this is bad input (it would cost too much memory to parse)."""
SNIFF_SCAN_BYTES = 8 * 1024 * 1024

CONF_CONSOLE = 0.9
CONF_CONSOLE_NO_STEPS = 0.3

ESTIMATOR_NAMES = {"group_norm": "grpo"}
"""OpenRLHF ``--advantage_estimator`` values whose rlvitals name differs."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ROW = re.compile(r"(Global step|Eval at step) (\d+): (\{.*)$")
_ROW_BYTES = re.compile(rb"Global step \d+: \{")
_MARK = re.compile(rb"openrlhf|OpenRLHF")
_LAUNCH = re.compile(r"-m\s+(openrlhf\.[\w.]+)")
_SHELL_STOP = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "1>&2"})
_NUMERIC_CALLS = frozenset(
    {"tensor", "float", "int", "float16", "float32", "float64", "bfloat16", "int32", "int64"}
)


def _literal_number(node: ast.AST) -> float | None:
    """The number a repr node stands for, or None. Reads the tree; evaluates nothing."""
    sign = 1.0
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        if isinstance(node.op, ast.USub):
            sign = -sign
        node = node.operand
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name not in _NUMERIC_CALLS:
            return None
        return _literal_number(node.args[0]) if len(node.args) == 1 else None
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            return sign * float(v)
        if isinstance(v, (int, float)):
            try:
                return sign * float(v)
            except OverflowError:  # an int beyond float range
                return sign * math.inf
        return None
    if isinstance(node, ast.Name):
        if node.id == "nan":
            return math.nan
        if node.id == "inf":
            return sign * math.inf
    return None


def parse_status_dict(text: str) -> dict[str, float]:
    """A logged status dict (Python repr) → ``{key: float}``, numeric entries only.

    Raises ValueError when ``text`` is not a dict display.

    >>> parse_status_dict("{'kl': nan, 'reward': tensor(0.5), 'lr': -1e-06, 'note': 'x'}")
    {'kl': nan, 'reward': 0.5, 'lr': -1e-06}
    """
    if len(text) > MAX_DICT_CHARS:
        raise ValueError(f"status dict longer than {MAX_DICT_CHARS} characters")
    try:
        with warnings.catch_warnings():  # odd literals warn on stderr; the error says enough
            warnings.simplefilter("ignore")
            tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        msg = e.msg if isinstance(e, SyntaxError) else (str(e) or type(e).__name__)
        raise ValueError(f"not a Python dict: {msg}") from None
    if not isinstance(tree.body, ast.Dict):
        raise ValueError("not a Python dict")
    out: dict[str, float] = {}
    for k, v in zip(tree.body.keys, tree.body.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            continue
        x = _literal_number(v)
        if x is not None:
            out[k.value] = x
    return out


def _flag_value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def parse_cli_flags(command: str) -> dict[str, Any]:
    """``--flag value`` / ``--flag=value`` / bare ``--flag`` arguments → ``{flag: value}``.

    A bare flag is True; several values make a list; shell operators end the command.

    >>> parse_cli_flags("-m openrlhf.cli.train_ppo_ray --n_samples_per_prompt 8 --use_kl_loss "
    ...                 "--eps_clip_low_high 0.2 0.28 | tee log")
    {'n_samples_per_prompt': 8, 'use_kl_loss': True, 'eps_clip_low_high': [0.2, 0.28]}
    """
    try:
        tokens = shlex.split(command, posix=True)
    except ValueError:
        tokens = command.split()
    out: dict[str, Any] = {}
    key: str | None = None
    values: list[Any] = []

    def flush() -> None:
        if key:
            out[key] = True if not values else values[0] if len(values) == 1 else list(values)

    for tok in tokens:
        if tok in _SHELL_STOP:
            break
        if tok.startswith("--"):
            flush()
            key, sep, value = tok[2:].partition("=")
            values = [_flag_value(value)] if sep else []
        elif key is not None:
            values.append(_flag_value(tok))
    flush()
    return out


def _apply_config(manifest: Manifest, entrypoint: str, flags: dict[str, Any]) -> None:
    manifest.config = {"entrypoint": entrypoint, **flags}
    manifest.group_size = _as_int(flags.get("n_samples_per_prompt"))
    est = flags.get("advantage_estimator")
    if isinstance(est, str) and est and not est.startswith("$"):
        manifest.estimator = ESTIMATOR_NAMES.get(est, est)
    manifest.kl_coef = _as_float(flags.get("init_kl_coef"))


def _step(path: Path, digits: str, where: str) -> int:
    if len(digits) > MAX_STEP_DIGITS or int(digits) > MAX_STEP:
        raise InputError(path, f"step number {digits[:24]} is out of range", where)
    return int(digits)


def load_openrlhf_console(path: Path, progress: Progress | None = None) -> Run:
    """Read an OpenRLHF console log (``Global step N: {...}`` lines) into a ``Run``.

    Args:
        path: the log file.
        progress: ``progress(done_bytes, total_bytes)``, called now and then.

    Returns:
        A ``Run`` with one row per ``Global step`` line, eval rows from ``Eval at step`` lines,
        trainer ``openrlhf``, and the launch command's flags when the log holds it.

    Raises:
        InputError: a status dict that cannot be read (naming its line), or no step line.
    """
    builder = RunBuilder(Manifest(source=str(path), trainer="openrlhf"))
    n_train = 0
    catcher = CommandCatcher(_LAUNCH)
    for lineno, raw, complete in iter_lines(path, progress):
        if not catcher.done and (catcher.capturing or b"openrlhf." in raw):
            catcher.feed(raw.decode("utf-8", "replace"))
        if b" step " not in raw:
            continue
        line = raw.decode("utf-8", "replace")
        if "\x1b" in line:
            line = _ANSI.sub("", line)
        line = strip_ray_repeat(line.rstrip())
        m = _ROW.search(line)
        if m is None:
            continue
        where = f"line {lineno}"
        step = _step(path, m.group(2), where)
        try:
            values = parse_status_dict(m.group(3))
        except ValueError as e:
            if not complete:
                builder.warn(f"{path}: {where}: torn last line ignored (file still being written?)")
                continue
            raise InputError(path, str(e), where) from None
        if m.group(1) == "Eval at step":
            values = {(k if is_eval_key(k) else f"eval/{k}"): v for k, v in values.items()}
        else:
            n_train += 1
        if values:
            builder.add_row(step, values)
    if n_train == 0:
        raise InputError(
            path, "no OpenRLHF step lines found (expected lines like 'Global step 1: {...}')"
        )
    if catcher.entrypoint is not None:
        _apply_config(builder.manifest, catcher.entrypoint, parse_cli_flags(catcher.command))
    return builder.build()


def _sniff(path: Path, head: bytes) -> float:
    if not head or path.is_dir():
        return 0.0
    if _ROW_BYTES.search(head):
        return CONF_CONSOLE
    if not _MARK.search(head):
        return 0.0
    try:
        with open(path, "rb") as f:
            f.seek(len(head))
            done, tail = len(head), head[-256:]
            while done < SNIFF_SCAN_BYTES:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                done += len(chunk)
                if _ROW_BYTES.search(tail + chunk):
                    return CONF_CONSOLE
                tail = chunk[-256:]
    except OSError:
        pass
    return CONF_CONSOLE_NO_STEPS


register(
    Importer(
        name="openrlhf_console",
        description="OpenRLHF console log ('Global step N: {...}' lines)",
        sniff=_sniff,
        load=load_openrlhf_console,
    )
)

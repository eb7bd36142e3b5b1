"""What every console-log importer shares: reading the numbers and dicts trainers print, and
the launch command at the top of a log (cleaning a printed line of colour codes and Ray
prefixes is :mod:`rlvitals.importers._console_lines`).

A console log is whatever a training job printed: colour codes, tqdm bars redrawn with ``\\r``,
Ray's ``(TaskRunner pid=...)`` prefixes and ``[repeated 2x across cluster]`` suffixes, warnings.
The importers (veRL, OpenRLHF, ...) find their step lines among them with these helpers. Nothing
read here is ever evaluated: Python reprs are parsed with :func:`ast.parse` and read node by node.
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
from rlvitals.importers._console_lines import RAY_PREFIX, strip_ansi
from rlvitals.importers._lines import MAX_STEP

__all__ = [
    "CommandCatcher",
    "PrintedDict",
    "check_step",
    "number_or_none",
    "parse_cli_flags",
    "parse_dict_repr",
    "parse_dict_values",
    "parse_hydra_overrides",
    "parse_literal",
    "parse_number",
]

MAX_STEP_DIGITS = 19
MAX_COMMAND_CHARS = 256 * 1024
"""A launch command is read up to this many characters (continuation lines included)."""
MAX_DICT_CHARS = 1024 * 1024
"""A status dict longer than this is bad input (it would cost too much memory to parse)."""

_NUMPY_REPR = re.compile(r"(?:np|numpy)\.(?:float|int|uint|bool)\d*_?\((.{1,64})\)")
_BOOLS = {"True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0, "np.True_": 1.0, "np.False_": 0.0}
_OVERRIDE_KEY = re.compile(r"[+~]{0,2}([A-Za-z_][\w\-]*(?:\.[\w\-@]+)*)")
_SHELL_STOP = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "2>&1", "1>&2"})
_NUMERIC_CALLS = frozenset(
    {"tensor", "float", "int", "float16", "float32", "float64", "bfloat16", "int32", "int64"}
)


def check_step(path: Path, digits: str, where: str) -> int:
    """A printed step number as int; InputError naming the place when it is out of range."""
    if len(digits) > MAX_STEP_DIGITS or int(digits) > MAX_STEP:
        raise InputError(path, f"step number {digits[:24]} is out of range", where)
    return int(digits)


def parse_number(text: str) -> float | None:
    """A console value as float, or None when it is not a number (``nan``/``inf`` are).

    Accepts what veRL prints: ``0.302`` (``{v:.3f}``), ``-0.000``, ``5``, ``1e-06``, ``nan``,
    ``inf``, ``True``, and numpy 2 reprs (``np.float64(0.302)``, from ``pprint.pformat``).

    >>> parse_number("np.float64(-0.5)"), parse_number("True"), parse_number("abc")
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


def parse_dict_repr(text: str) -> dict[str, float]:
    """A printed dict (Python repr) → ``{key: float}``, numeric entries only.

    Raises ValueError when ``text`` is not a dict display.

    >>> parse_dict_repr("{'kl': nan, 'reward': tensor(0.5), 'lr': -1e-06, 'note': 'x'}")
    {'kl': nan, 'reward': 0.5, 'lr': -1e-06}
    """
    return _dict_entries(text, texts=False)  # type: ignore[return-value]


def parse_dict_values(text: str) -> dict[str, float | str | None]:
    """A printed dict (Python repr) → ``{key: value}``: numbers as float, strings as they are
    (``'0.4g'`` strings of transformers 5, ``'12/500'``), ``None`` as None; other values
    (lists, calls that are not numbers) are left out. Raises ValueError when ``text`` is not a
    dict display. Nothing is evaluated.

    >>> parse_dict_values("{'loss': '-0.0326', 'kl': nan, 'x': None, 'n': 3, 'l': [1]}")
    {'loss': '-0.0326', 'kl': nan, 'x': None, 'n': 3.0}
    """
    return _dict_entries(text, texts=True)


def _parse(text: str, limit: int, kind: str, what: str = "") -> ast.expr:
    """The expression tree of ``text``, read and never evaluated; ValueError when it is longer
    than ``limit`` characters or not one Python expression (``kind`` names what was expected)."""
    if len(text) > limit:
        raise ValueError(f"{what}longer than {limit} characters")
    try:
        with warnings.catch_warnings():  # odd literals warn on stderr; the error says enough
            warnings.simplefilter("ignore")
            tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as e:
        msg = e.msg if isinstance(e, SyntaxError) else (str(e) or type(e).__name__)
        raise ValueError(f"not a Python {kind}: {msg}") from None
    return tree.body


def _dict_entries(text: str, texts: bool) -> dict[str, float | str | None]:
    """The string-keyed entries of a printed dict: numbers as float, and with ``texts`` string
    and ``None`` values as they are; other values are left out."""
    tree = _parse(text, MAX_DICT_CHARS, "dict", "status dict ")
    if not isinstance(tree, ast.Dict):
        raise ValueError("not a Python dict")
    out: dict[str, float | str | None] = {}
    for k, v in zip(tree.keys, tree.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            continue
        if texts and isinstance(v, ast.Constant) and (v.value is None or isinstance(v.value, str)):
            out[k.value] = v.value
            continue
        x = _literal_number(v)
        if x is not None:
            out[k.value] = x
    return out


def number_or_none(v: float | str | None) -> float | None:
    """A console value as float: numbers, numeric strings (``'6.228e-05'``, ``'nan'``), None as
    NaN; None for text that is not a number."""
    if v is None:
        return math.nan
    if isinstance(v, float):
        return v
    try:
        return float(v)
    except (ValueError, OverflowError):
        return None


# --- launch commands ---------------------------------------------------------------------


def _value(text: str, nulls: bool = True) -> Any:
    """A command-line value as Python: bools, ints and floats, and with ``nulls`` (Hydra's
    ``null``/``none``) None; anything else a string."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if nulls and low in ("null", "none"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
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
        out[m.group(1)] = _value(value)
    return out


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
            values = [_value(value, nulls=False)] if sep else []
        elif key is not None:
            values.append(_value(tok, nulls=False))
    flush()
    return out


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


# --- dicts printed over several lines (pprint) ----------------------------------------------

MAX_PRINTED_DICT_CHARS = 4 * 1024 * 1024
"""A printed configuration longer than this is left unread (a warning says so)."""
MAX_PRINTED_DICT_LINES = 100_000
MAX_INTERLEAVED_LINES = 10_000
"""This many lines in a row of other processes end a printed dict as cut off."""
_MAX_LITERAL_DEPTH = 64


class PrintedDict:
    """A Python dict printed over many lines (``pprint``), collected from a console log.

    :meth:`start` takes the line holding the opening ``{`` (the text from ``{`` on is the dict),
    :meth:`feed` every physical line after it, until :attr:`done`. A continuation line is one
    with the same Ray ``(Actor pid=...)`` prefix as the first line, or, when the first had none,
    an indented one (pprint indents every line after the first); other lines are another
    process's output interleaved with the dict and are skipped (past
    :data:`MAX_INTERLEAVED_LINES` of them in a row, or at a line of its own process starting
    with ``stop``, the dict is cut off). Brackets are counted outside string literals, so the
    end is found in one pass. At most :data:`MAX_PRINTED_DICT_CHARS` /
    :data:`MAX_PRINTED_DICT_LINES` are kept; past that :attr:`error` says why.
    """

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.lines = 0
        self.prefix: str | None = None
        self.lineno = 0
        self.capturing = False
        self.done = False
        self.error: str | None = None
        self._depth = 0
        self._quote: str | None = None
        self._escape = False
        self._skipped = 0

    def start(self, line: str, lineno: int, opener: str) -> bool:
        """Begin at ``line`` when, once cleaned, its message starts with ``opener``."""
        text = strip_ansi(line).rstrip("\r\n")
        prefix = ""
        if text.startswith("("):
            m = RAY_PREFIX.match(text)
            if m is not None:
                prefix, text = text[: m.end()].rstrip(), text[m.end() :]
        if not text.startswith(opener):
            return False
        self.prefix, self.lineno, self.capturing = prefix, lineno, True
        self._take(text)
        return True

    def feed(self, line: str, stop: str | None = None) -> bool:
        """The next physical line of the log; True when it was part of the dict. A line of
        the dict's process whose message starts with ``stop`` (a trainer's step line) means
        the dict was cut off: collecting ends there, with :attr:`error` set."""
        if not self.capturing:
            return False
        text = strip_ansi(line).rstrip("\r\n")
        if self.prefix:
            ours = text.startswith(self.prefix)
            text = text[len(self.prefix) :] if ours else text
        else:
            ours = text[:1].isspace()  # pprint indents every line after the first
        if not ours or (stop is not None and text.lstrip().startswith(stop)):
            self._skipped += 1
            if ours or self._skipped > MAX_INTERLEAVED_LINES:
                self.capturing, self.done, self.parts = False, True, []
                self.error = "cut off"
            return False
        self._skipped = 0
        self._take(text)
        return True

    def _take(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text) + 1
        self.lines += 1
        self._count(text)
        if self._depth <= 0:
            self.capturing, self.done = False, True
        elif self.size > MAX_PRINTED_DICT_CHARS or self.lines > MAX_PRINTED_DICT_LINES:
            self.capturing, self.done = False, True
            self.error = f"longer than {MAX_PRINTED_DICT_CHARS} characters"
            self.parts = []

    def _count(self, text: str) -> None:
        depth, quote, escape = self._depth, self._quote, self._escape
        for ch in text:
            if quote is not None:
                if escape:
                    escape = False
                elif ch == "\\":
                    escape = True
                elif ch == quote:
                    quote = None
            elif ch in "'\"":
                quote = ch
            elif ch in "{[(":
                depth += 1
            elif ch in "}])":
                depth -= 1
        self._depth, self._quote, self._escape = depth, quote, False

    @property
    def text(self) -> str:
        return "\n".join(self.parts)


def parse_literal(text: str) -> Any:
    """A printed Python literal (a ``pprint`` of a config: dicts, lists, strings, numbers,
    ``True``/``False``/``None``, ``inf``/``nan``, numpy scalar reprs) as Python values. Nothing
    is evaluated; anything else (a call, a name) becomes None. Raises ValueError when ``text``
    is not one expression or is longer than :data:`MAX_PRINTED_DICT_CHARS`.

    >>> parse_literal("{'a': {'n': 5, 'x': [1, -2.5]}, 'b': inf, 'c': None, 'd': f(1)}")
    {'a': {'n': 5, 'x': [1, -2.5]}, 'b': inf, 'c': None, 'd': None}
    """
    return _literal(_parse(text, MAX_PRINTED_DICT_CHARS, "literal"), 0)


def _literal(node: ast.AST, depth: int) -> Any:
    if depth > _MAX_LITERAL_DEPTH:
        return None
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values):
            key = _literal(k, depth + 1) if k is not None else None  # None: a ``**`` entry
            if isinstance(key, (str, int, float, bool)):
                out[key] = _literal(v, depth + 1)
        return out
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.Name) and node.id in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.id]
    x = _literal_number(node)
    if x is None:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        if isinstance(v, int) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    return x

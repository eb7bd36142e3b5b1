"""veRL console logs: the ``step:N - key:value - ...`` line veRL's ``console`` logger prints.

What veRL's ``console`` logger prints once per step, one line each::

    (TaskRunner pid=678203) step:2 - actor/entropy:0.302 - critic/score/mean:0.679 - ...

possibly wrapped in ANSI colour codes, interleaved with anything else the job printed (tqdm
bars, warnings, shell traces), which is ignored. A line is a step line when, after colour codes
and a Ray ``(Actor pid=...)`` prefix, it starts with ``step:N``; every ``key:value`` field of such
a line must then hold a number (``0.000``, ``-0.000``, ints, ``nan``, ``inf``) or the import fails
naming the line. Validation keys (``val-core/...``, ``val-aux/...``, ``val/...``) become eval
series. If the log holds the launch command (``python3 -m verl.trainer.main_ppo key=value ...``,
one line or continued with ``\\``), its Hydra overrides land in ``manifest.config`` and the
trainer facts (:mod:`rlvitals.trainers.verl`) set group size, estimator and KL coefficient.
The writer: ``verl/utils/tracking.py`` (``LocalLogger``) and ``verl/utils/logger``, veRL 0.9.1.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._console import (
    CommandCatcher,
    PrintedDict,
    check_step,
    parse_hydra_overrides,
    parse_literal,
    parse_number,
)
from rlvitals.importers._console_lines import ESC, messages, sniff_log
from rlvitals.importers._lines import iter_lines
from rlvitals.recording.memory import JSON_CHECK_BYTES, check_fields
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import verl as verl_facts

__all__ = ["load_verl_console"]

CONF_CONSOLE = 0.9
CONF_CONSOLE_NO_STEPS = 0.3

_STEP = re.compile(r"step:(\d+)(?= - |\s*$)")
# Linear by construction: each alternative starts with its own byte (ESC, "(", blank), and each
# matches one way only, so a failed line costs one pass (two adjacent ``(?:ESC...)*`` groups
# made a line of colour codes quadratic: 64 KB took seconds).
_STEP_BYTES = re.compile(rb"(?m)^(?:\x1b\[[0-9;]*m|\([^()\n]{1,300}\)|[ \t\r])*step:\d+ - ")
_VERL_MARK = re.compile(
    rb"verl\.trainer|\(TaskRunner pid=|\(main_task pid=|val-core/|critic/score/"
)
_LAUNCH = re.compile(r"-m\s+((?:verl|recipe)\.[\w.]*main\w*)")
_CONFIG_OPENER = "{'actor_rollout_ref': "
"""How veRL's printed configuration starts: ``pprint`` sorts the keys, and this one is first."""
MAX_LAYOUTS = 1024
"""Key layouts (the keys of a step line, in order) remembered for the fast path; a log with more
distinct layouts reads the rest of them the general way."""
BATCH_VALUES = 1 << 16
"""Values of fast-path rows held before they go to the builder (32 bytes each: float objects)."""
MIN_BATCH_ROWS = 8
"""Fewer rows go to the builder one by one: handing over columns costs ~50 us, a row ~7 us."""


def _parse_step_line(path: Path, seg: str, where: str) -> tuple[int, dict[str, float]] | None:
    """``step:N - k:v - ...`` → ``(N, {k: v})``; None when ``seg`` is not a step line."""
    m = _STEP.match(seg)
    if m is None:
        return None
    step = check_step(path, m.group(1), where)
    rest = seg[m.end() :]
    values: dict[str, float] = {}
    if not rest.strip():
        return step, values
    check_fields(path, rest.count(" - "), len(rest), where)  # memory: a line of tiny fields
    for field in rest[3:].split(" - "):
        key, sep, val = field.rpartition(":")
        key = key.strip()
        if not sep or not key:
            raise InputError(path, f"step line field {field[:60]!r} is not key:value", where)
        x = parse_number(val.strip())
        if x is None:
            raise InputError(
                path, f"value of {key[:80]!r} is not a number: {val.strip()[:40]!r}", where
            )
        values[key] = x
    return step, values


class _Layout:
    """A step line's keys as :func:`_split_fields` gives them (``raw``) and as read (``keys``:
    stripped, unique), and whether any is a training key: what the fast path needs to read
    another line with the same keys."""

    __slots__ = ("has_train", "keys", "raw")

    def __init__(self, raw: list[str], keys: list[str], has_train: bool) -> None:
        self.raw, self.keys, self.has_train = raw, keys, has_train


def _split_fields(seg: str) -> tuple[int, list[str], list[str]] | None:
    r"""``step:N - k:v - ...`` → ``(N, keys, values)`` as printed, split in C; None when the
    line needs the general reading (a step that is not 1 to 18 ASCII digits, a long line, not
    one ``:`` for each field).

    The split: ``" - "`` becomes ``":\n"``, then the text is split at ``":"``. When there
    are as many colons as fields (and one for ``step:``), the pieces are ``step``, the step,
    then key, value, key, value...; each key starts with ``"\n"``, which no line holds, so it
    marks a field boundary. Such a list of keys equals that of a line read the general way
    (one colon per field) only when the boundaries fall where that line's did (every
    ``"\n"`` starts a key piece, none is left inside a value or the step), so the step and
    the values are those :func:`_parse_step_line` reads.

    >>> _split_fields("step:3 - a:0.5 - b/c:nan")
    (3, ['\na', '\nb/c'], ['0.5', 'nan'])
    """
    if len(seg) >= JSON_CHECK_BYTES:  # the memory check of a dense line: the general way
        return None
    text = seg.replace(" - ", ":\n")
    pieces = text.split(":")
    if len(pieces) != 2 * (len(seg) - len(text)) + 2:  # one character less for each " - "
        return None
    digits = pieces[1]
    if len(digits) > 18 or not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits), pieces[2::2], pieces[3::2]


def _numbers(vals: list[str]) -> list[float] | None:
    """Each printed value as :func:`_parse_step_line` reads it; None when one is not a number.

    ``float(v)`` equals ``float(v.strip())`` whenever it succeeds (both strip the same
    whitespace), so the C loop is tried first and this one runs only when a value is not
    plain (``np.float64(0.3)``, ``True``, a value padded with a control character)."""
    try:
        return list(map(float, vals))
    except ValueError:
        pass
    xs = [parse_number(v.strip()) for v in vals]
    return None if None in xs else xs  # type: ignore[return-value]


class _Batch:
    """Consecutive fast-path rows of one layout, handed to the builder column by column
    (:meth:`RunBuilder.add_block`, counted against the memory budget as ``add_row`` counts):
    per row two list appends instead of a dict and a loop over its keys."""

    def __init__(self, builder: RunBuilder) -> None:
        self.builder = builder
        self.layout: _Layout | None = None
        self.steps: list[int] = []
        self.values: list[float] = []  # not array("d"): its extend converts each item twice

    def add(self, layout: _Layout, step: int, xs: list[float]) -> None:
        if layout is not self.layout:
            self.flush()
            self.layout = layout
        self.steps.append(step)
        self.values.extend(xs)
        if len(self.values) >= BATCH_VALUES:
            self.flush()

    def flush(self) -> None:
        """Hand the rows held to the builder (before any other row reaches it: file order)."""
        if self.steps:
            keys = self.layout.keys  # type: ignore[union-attr]
            self.builder.add_block(keys, self.steps, self.values, min_rows=MIN_BATCH_ROWS)
            self.steps, self.values = [], []


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
    # Two readings of a step line give the same row. The general one (_parse_step_line, then
    # RunBuilder.add_row) reads any line; it costs a few Python operations per field. A line
    # whose keys, as printed, are those of an earlier line read the general way (veRL prints
    # the same keys every step) takes the fast one: split in C (_split_fields), values read
    # by float() in C (_numbers), the row appended to a batch of rows of that layout.
    builder = RunBuilder(
        Manifest(
            source=str(path), trainer="verl", logging_steps=1, step_key="step:N (veRL global_steps)"
        )
    )
    catcher = CommandCatcher(_LAUNCH)
    printed = PrintedDict()
    eval_cache: dict[str, bool] = {}
    seen_train: set[int] = set()
    repeated: list[int] = []
    n_step_lines = 0
    layouts: dict[tuple[str, ...], _Layout] = {}
    last: _Layout | None = None
    batch = _Batch(builder)
    for lineno, raw, complete in iter_lines(path, progress):
        # Each line decoded, then tested with ``in`` on text: on bytes, ``in`` first tries its
        # operand as an integer and raises and clears a TypeError (1.8k instructions), and
        # ``find`` parses its arguments; the tests are the same (an ASCII needle is in the
        # text exactly when it is in the bytes: "replace" turns no ASCII byte into another).
        line = raw.decode("utf-8", "replace")
        if not printed.done:
            # Lines of other processes, and step lines, are never swallowed by the dict.
            if printed.capturing and printed.feed(line, "step:"):
                continue
            if not printed.capturing and _CONFIG_OPENER in line:
                printed.start(line, lineno, _CONFIG_OPENER)
                if printed.capturing or printed.done:
                    continue
        if not catcher.done and (catcher.capturing or "main" in line):
            catcher.feed(line)
        if "step:" not in line:
            continue
        for seg in messages(line, "step:"):
            split = _split_fields(seg)
            if split is not None:
                step, raw_keys, raw_vals = split
                layout = last if last is not None and raw_keys == last.raw else None
                if layout is None:
                    layout = layouts.get(tuple(raw_keys))
                xs = None if layout is None else _numbers(raw_vals)
                if layout is not None and xs is not None:  # the fast path
                    n_step_lines += 1
                    if layout.has_train:
                        if step in seen_train:
                            repeated.append(step)
                        seen_train.add(step)
                    batch.add(layout, step, xs)
                    last = layout
                    continue
            where = f"line {lineno}"
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
            batch.flush()
            builder.add_row(step, values)
            # Its keys are now the builder's: later lines printing the same ones are fast.
            if split is not None and len(values) == len(split[1]) and len(layouts) < MAX_LAYOUTS:
                layouts.setdefault(tuple(split[1]), _Layout(split[1], list(values), has_train))
    batch.flush()
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
        builder.manifest.config = {"entrypoint": catcher.entrypoint, **cfg}
        builder.manifest.config["config_source"] = "launch command (Hydra overrides)"
        apply_facts(builder.manifest, verl_facts.facts(cfg), overwrite=True)
    _apply_printed(path, printed, builder)
    return builder.build()


def _apply_printed(path: Path, printed: PrintedDict, builder: RunBuilder) -> None:
    """The configuration veRL printed at start (``pprint`` of the resolved Hydra config): its
    settings in ``manifest.config`` (flattened, dotted; they win over the launch command's
    overrides, being the resolved whole), its facts in the manifest."""
    if not printed.lineno:
        return
    where = f"line {printed.lineno}"
    if printed.capturing:  # the log ended inside it
        builder.warn(f"{path}: {where}: the printed configuration is cut off; not read")
        return
    if printed.error is not None:
        builder.warn(f"{path}: {where}: the printed configuration is {printed.error}; not read")
        return
    try:
        cfg = parse_literal(printed.text)
    except ValueError as e:
        builder.warn(f"{path}: {where}: the printed configuration could not be read ({e})")
        return
    if not isinstance(cfg, dict) or not verl_facts.recognise(cfg):
        return
    flat = _flatten(cfg)
    builder.manifest.config.update(flat)
    builder.manifest.config["config_source"] = f"printed configuration ({where})"
    apply_facts(builder.manifest, verl_facts.facts(cfg), overwrite=True)


def _flatten(cfg: dict, prefix: str = "", depth: int = 0) -> dict[str, object]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}`` (the dotted names of Hydra overrides)."""
    out: dict[str, object] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v and depth < 16:
            out.update(_flatten(v, key + ".", depth + 1))
        else:
            out[key] = v
    return out


def _sniff_console(path: Path, head: bytes) -> float:
    # Looks like veRL but the first step may lie past the head (long start-up output): scanned.
    return sniff_log(
        path,
        head,
        _STEP_BYTES,
        _VERL_MARK,
        CONF_CONSOLE,
        needle=b"step:",
        unsure=CONF_CONSOLE_NO_STEPS,
    )


register(
    Importer(
        name="verl_console",
        description="veRL console log ('step:N - key:value - ...' lines)",
        sniff=_sniff_console,
        load=load_verl_console,
        precheck=Precheck(
            text=True,
            marks=(
                b"step:",
                b"verl",
                b"TaskRunner",
                b"main_task",
                b"val-core/",
                b"critic/score/",
                ESC,
            ),
        ),
        files=(".log", ".txt", ".out", ".err"),
    )
)

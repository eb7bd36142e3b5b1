"""TRL console printout: the dict transformers prints for every ``GRPOTrainer`` log call.

The writer: ``transformers/trainer_callback.py`` 5.24.0, ``ProgressCallback.on_log`` (tqdm on)
and ``PrinterCallback.on_log`` (``disable_tqdm=True``): ``str({k: f"{v:.4g}" for floats})``, one
line per log call, e.g.::

    {'loss': '-0.0326', 'grad_norm': '0.0007585', ..., 'reward': '0.9375', 'reward_std': '0.1768',
     'frac_reward_zero_std': '0.75', 'kl': '6.228e-05', ..., 'epoch': '0.1667'}

(transformers 4.x printed bare floats: both are read), interleaved with tqdm bars redrawn with
``\\r`` and ``\\x1b[A`` when stderr is merged, warnings and anything else the job printed. Eval
lines (``{'eval_...``) become eval series; the summary line (``train_runtime``) is not a step.
Values are 4 significant digits.

**The step.** The printed dict has no step (the callbacks get ``logs``, not the
``log_history`` row that has it). The k-th training line of a run is step
``k x logging_steps``, where ``logging_steps`` comes from, in order: the ``logging_steps``
argument; a printed config (``logging_steps=N``, e.g. ``print(training_args)``); the run's
total steps (the tqdm training bar ``N/M``, checked against the summary line's
``train_runtime x train_steps_per_second``) divided by the number of training lines; else
GRPOConfig's default, 10 — and a warning says which. ``manifest.step_key`` names the source.
A printed config also gives ``num_generations``, ``beta``, ``scale_rewards``, ``loss_type``; a
``trl==X.Y.Z`` line (pip freeze) the TRL version.

Two ``trainer.train()`` calls in one log (a summary line, then training lines again) are two
runs: the last is read unless ``run="1"`` chooses another (``--run``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._console import (
    number_or_none,
    parse_dict_values,
    scan_file,
    strip_ansi,
)
from rlvitals.importers._console_lines import clean_bytes, strip_ray_repeat
from rlvitals.importers._lines import iter_lines
from rlvitals.importers._rows import RowStore
from rlvitals.importers._trl_files import HistoryReader, choose_segment
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import trl as trl_facts

__all__ = ["DEFAULT_LOGGING_STEPS", "load_trl_console"]

DEFAULT_LOGGING_STEPS = 10
"""``GRPOConfig.logging_steps`` (TRL 1.16 overrides transformers' 500)."""
CONF = 0.85
_FIRST_KEYS = rb"(?:loss|eval_[^'\n]{1,80}|train_runtime|grad_norm|learning_rate|reward)"
_LINE_BYTES = re.compile(rb"(?:^|[\r\n\]A])\{'" + _FIRST_KEYS + rb"': ")
_MARKS = re.compile(rb"it/s\]|s/it\]|transformers|GRPOTrainer|trl\b")
_BAR = re.compile(r"\|\s*([0-9]{1,12})/([0-9]{1,12}) \[[^\]]*(?:it/s|s/it)\]")
_CONFIG = re.compile(
    r"\b(logging_steps|num_generations|beta|scale_rewards|loss_type|max_steps)"
    r"""['"]?\s*[=:]\s*['"]?([A-Za-z0-9_.+-]{1,40})"""
)
_TRL_VERSION = re.compile(r"\btrl(?:==|\s+version:?\s*v?)([0-9]+\.[0-9]+(?:\.[0-9]+)?)", re.I)
_SUMMARY = ("train_runtime", "train_loss")


def _sniff(path: Path, head: bytes) -> float:
    if not head:
        return 0.0
    if b"Global step" in head:  # OpenRLHF prints dict reprs too
        return 0.0
    if _LINE_BYTES.search(clean_bytes(head)):
        return CONF
    if _MARKS.search(head) and scan_file(path, head, _LINE_BYTES, needle=b"{'"):
        return CONF
    return 0.0


def _dict_of(seg: str) -> str | None:
    i = seg.find("{'")
    if i < 0:
        return None
    text = seg[i:].rstrip()
    return text if text.endswith("}") else None


class _Scan:
    """What the non-dict lines say: printed config values, tqdm bar totals, TRL version."""

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.bars: Counter[int] = Counter()
        self.version: str | None = None

    def feed(self, line: str) -> None:
        if "/" in line and "it" in line:
            for m in _BAR.finditer(line):
                total = int(m.group(2))
                if total > 0:
                    self.bars[total] += 1
        if "=" in line or ":" in line:
            for m in _CONFIG.finditer(line):
                self.config.setdefault(m.group(1), m.group(2))
            if self.version is None and "trl" in line.lower():
                m = _TRL_VERSION.search(line)
                if m:
                    self.version = m.group(1)


def load_trl_console(
    path: Path,
    progress: Progress | None = None,
    *,
    run: str | None = None,
    logging_steps: int | None = None,
) -> Run:
    """Read a TRL console printout into a ``Run`` (module docstring).

    Args:
        path: the log (compressed or a stream too).
        progress: ``progress(done_bytes, total_bytes)``.
        run: which ``trainer.train()`` of the log to read (``"1"``, ...); default the last.
        logging_steps: training steps between printed lines, when the caller knows it.

    Raises:
        InputError: a dict line that cannot be read (naming it), or no TRL dict line.
    """
    # Rows are held until every line is seen (the step depends on how many lines a run
    # printed): compactly, as (kind, values, own step) with values a Row (8 bytes a value).
    segments: list[list[tuple[str, Mapping[str, Any], int | None]]] = [[]]
    store = RowStore()
    scan = _Scan()
    closed = False
    for lineno, raw, complete in iter_lines(path, progress):
        line = raw.decode("utf-8", "replace")
        if "\x1b" in line:
            line = strip_ansi(line)
        for seg in line.split("\r"):
            text = _dict_of(strip_ray_repeat(seg.rstrip())) if "{'" in seg else None
            if text is None:
                scan.feed(seg)
                continue
            try:
                values = parse_dict_values(text)
            except ValueError as e:
                if not complete:
                    continue  # a torn last line
                raise InputError(path, str(e), f"line {lineno}") from None
            keys = values.keys()
            if any(k in keys for k in _SUMMARY) and "loss" not in keys:
                kind = "summary"
                closed = True
            elif keys and all(k.startswith("eval_") or k == "epoch" for k in keys):
                kind = "eval"
            elif "loss" in keys or "reward" in keys or "grad_norm" in keys:
                kind = "train"
                if closed:
                    segments.append([])
                    closed = False
            else:
                continue  # some other dict someone printed
            own = _own_step(values) if kind == "train" else None
            row = values if kind == "summary" else store.row(values, number_or_none)
            segments[-1].append((kind, row, own))
    segments = [s for s in segments if s]
    if not any(k == "train" for s in segments for k, _, _ in s):
        raise InputError(
            path, "no TRL log lines found (expected lines like {'loss': ..., 'reward': ...})"
        )

    manifest = Manifest(source=str(path), trainer="trl")
    builder = RunBuilder(manifest)
    total_lines = sum(1 for s in segments for k, _, _ in s if k == "train")
    step_every, why = _logging_steps(logging_steps, scan, segments, total_lines)
    reader = HistoryReader()
    for seg in segments:
        k = 0
        step = 0
        for kind, values, own in seg:
            if kind == "summary":
                row = _numbers(values, builder)
            else:
                row = values
                builder.skipped_values += values.skipped
            if kind == "train":
                k += 1
                step = own or k * step_every
            reader.add(max(step, 0) if kind != "summary" else step, row)
    idx = choose_segment(path, reader, run, builder)
    reader.fill(builder, idx)
    manifest.logging_steps = step_every
    manifest.step_key = why
    if why.startswith("line count") and "global_step/max_steps" not in why:
        builder.warn(
            f"{path}: the console lines carry no step: step = line count x logging_steps "
            f"({step_every}, {why.split('; ', 1)[-1]})"
        )
    cfg = dict(scan.config)
    if cfg:
        manifest.config["printed_config"] = cfg
    if scan.version:
        cfg["trl_version"] = scan.version
    apply_facts(manifest, trl_facts.facts(cfg), overwrite=True)
    manifest.logging_steps = step_every
    if builder.skipped_values:
        builder.warn(f"{path}: {builder.skipped_values} non-numeric values ignored")
    return builder.build()


def _own_step(values: dict[str, Any]) -> int | None:
    """ms-swift adds ``'global_step/max_steps': '12/500'`` to the same line: the real step."""
    v = values.get("global_step/max_steps")
    if isinstance(v, str):
        head = v.partition("/")[0].strip()
        if head.isascii() and head.isdigit() and len(head) < 19:
            return int(head)
    return None


def _numbers(values: dict[str, Any], builder: RunBuilder) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for k, v in values.items():
        x = number_or_none(v)
        if x is None:
            builder.skipped_values += 1
        else:
            row[k] = x
    return row


def _logging_steps(
    given: int | None, scan: _Scan, segments: list[Any], lines: int
) -> tuple[int, str]:
    """``(logging_steps, where it came from)`` (module docstring)."""
    if any(own is not None for s in segments for k, _, own in s if k == "train"):
        return 1, "'global_step/max_steps' (ms-swift)"
    if given:
        return given, "line count x logging_steps; logging_steps given by the caller"
    printed = scan.config.get("logging_steps", "")
    if printed.isascii() and printed.isdigit() and 0 < int(printed) < 10**9:
        return int(printed), "line count x logging_steps; logging_steps from the printed config"
    total = _total_steps(scan, segments)
    last_lines = sum(1 for k, _, _ in segments[-1] if k == "train") if segments else lines
    if total and last_lines:
        step = max(1, round(total / last_lines))
        if abs(total / step - last_lines) <= 1:
            return (
                step,
                f"line count x logging_steps; logging_steps = {total} total steps / {last_lines} lines",
            )
    return (
        DEFAULT_LOGGING_STEPS,
        f"line count x logging_steps; logging_steps unknown, GRPOConfig's default "
        f"{DEFAULT_LOGGING_STEPS} assumed",
    )


def _total_steps(scan: _Scan, segments: list[Any]) -> int | None:
    """The last run's total optimizer steps: the tqdm training bar, checked against the
    summary line (runtime x steps per second), or either alone."""
    est = None
    for kind, values, _ in reversed(segments[-1] if segments else []):
        if kind == "summary":
            rt = number_or_none(values.get("train_runtime"))
            sps = number_or_none(values.get("train_steps_per_second"))
            if rt and sps and rt > 0 and sps > 0:
                est = rt * sps
            break
    printed = scan.config.get("max_steps", "")
    if printed.isascii() and printed.isdigit() and int(printed) > 0:
        return int(printed)
    if est is not None:
        near = [m for m in scan.bars if abs(m - est) <= max(0.1 * est, 1)]
        return max(near, key=lambda m: scan.bars[m]) if near else round(est)
    if scan.bars:
        return scan.bars.most_common(1)[0][0]
    return None


register(
    Importer(
        name="trl_console",
        description="TRL console printout (one dict per logging step; transformers 4.x or 5.x)",
        sniff=_sniff,
        load=load_trl_console,
        multi_run=True,
        precheck=Precheck(
            text=True,
            marks=(b"{'", b"it/s]", b"s/it]", b"trl", b"transformers", b"GRPOTrainer"),
        ),
        files=(".log", ".txt", ".out", ".err"),
    )
)

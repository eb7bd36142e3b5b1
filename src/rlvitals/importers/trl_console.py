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
argument; a printed config (``logging_steps=N``, e.g. ``print(training_args)``); then what
the lines say:

- the training bar's position drawn just before each line: ``on_step_end`` moves the bar, then
  ``on_log`` prints the line, so with unbuffered output each line follows a frame of its own
  step, and those positions are the steps;
- a run that stopped before its planned total ``M`` (the bar's last position ``N`` of
  ``N/M`` short of it): the lines over the ``N`` steps it reached, the lines' ``epoch``
  choosing when several intervals fit (:func:`_stopped_early`);
- the planned total (the bar's ``M``, a printed ``max_steps``, or the summary line's
  ``train_runtime x train_steps_per_second``) over the lines, only when the bar reached it
  (or no bar says how far the run got);

else GRPOConfig's default, 10 — and a warning says which. ``manifest.step_key`` names the
source. (A planned total spread over the lines of a run stopped early stretches every
duration: 49 lines of a run stopped at step 499 of 29,790 were read as one line per 608.)
A printed config also gives ``num_generations``, ``beta``, ``scale_rewards``, ``loss_type``; a
``trl==X.Y.Z`` line (pip freeze) the TRL version.

Two ``trainer.train()`` calls in one log (a summary line, then training lines again) are two
runs: the last is read unless ``run="1"`` chooses another (``--run``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register, warn_skipped
from rlvitals.importers._console import number_or_none, parse_dict_values
from rlvitals.importers._console_lines import ESC, sniff_log, strip_ansi, strip_ray_repeat
from rlvitals.importers._lines import iter_lines
from rlvitals.importers._rows import RowStore
from rlvitals.importers._trl_files import HistoryReader, choose_segment
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import trl as trl_facts

__all__ = ["DEFAULT_LOGGING_STEPS", "load_trl_console"]

DEFAULT_LOGGING_STEPS = 10
"""``GRPOConfig.logging_steps`` (TRL 1.16 overrides transformers' 500)."""
_MAX_EPOCHS = 20
"""The most ``num_train_epochs`` tried when a run's epochs tell its logging interval."""
_EPOCH_TOL = 0.01
"""How close to a whole number of steps an interval read from the epochs must be (the
epoch is printed to 4 significant digits)."""
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
    if b"Global step" in head:  # OpenRLHF prints dict reprs too
        return 0.0
    return sniff_log(path, head, _LINE_BYTES, _MARKS, CONF, needle=b"{'")


def _dict_of(seg: str) -> str | None:
    i = seg.find("{'")
    if i < 0:
        return None
    text = seg[i:].rstrip()
    return text if text.endswith("}") else None


class _Scan:
    """What the non-dict lines say: printed config values, tqdm bar totals, TRL version; per
    run (segment), the farthest position of each bar and, per training line, the last
    position of each bar drawn since the line before."""

    def __init__(self) -> None:
        self.config: dict[str, str] = {}
        self.bars: Counter[int] = Counter()
        self.version: str | None = None
        self.reached: list[dict[int, int]] = [{}]
        self.before: list[list[dict[int, int]]] = [[]]
        self._since: dict[int, int] = {}

    def new_segment(self) -> None:
        self.reached.append({})
        self.before.append([])

    def train_line(self) -> None:
        self.before[-1].append(self._since)
        self._since = {}

    def feed(self, line: str) -> None:
        if "/" in line and "it" in line:
            reached = self.reached[-1]
            for m in _BAR.finditer(line):
                total = int(m.group(2))
                if total > 0:
                    pos = int(m.group(1))
                    self.bars[total] += 1
                    if pos > reached.get(total, -1):
                        reached[total] = pos
                    self._since[total] = pos
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
                    scan.new_segment()
                    closed = False
                scan.train_line()
            else:
                continue  # some other dict someone printed
            own = _own_step(values) if kind == "train" else None
            segments[-1].append((kind, store.row(values, number_or_none), own))
    segments = [s for s in segments if s]
    if not any(k == "train" for s in segments for k, _, _ in s):
        raise InputError(
            path, "no TRL log lines found (expected lines like {'loss': ..., 'reward': ...})"
        )

    manifest = Manifest(source=str(path), trainer="trl")
    builder = RunBuilder(manifest)
    total_lines = sum(1 for s in segments for k, _, _ in s if k == "train")
    step_every, why, bar_steps = _logging_steps(logging_steps, scan, segments, total_lines)
    reader = HistoryReader()
    for i, seg in enumerate(segments):
        k = 0
        step = 0
        for kind, row, own in seg:
            builder.skipped_values += row.skipped
            if kind == "train":
                k += 1
                own = own or (bar_steps[k - 1] if bar_steps and i == len(segments) - 1 else None)
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
    warn_skipped(builder, path)
    return builder.build()


def _own_step(values: dict[str, Any]) -> int | None:
    """ms-swift adds ``'global_step/max_steps': '12/500'`` to the same line: the real step."""
    v = values.get("global_step/max_steps")
    if isinstance(v, str):
        head = v.partition("/")[0].strip()
        if head.isascii() and head.isdigit() and len(head) < 19:
            return int(head)
    return None


def _logging_steps(
    given: int | None, scan: _Scan, segments: list[Any], lines: int
) -> tuple[int, str, list[int] | None]:
    """``(logging_steps, where it came from, the last run's steps from its bar or None)``
    (module docstring)."""
    if any(own is not None for s in segments for k, _, own in s if k == "train"):
        return 1, "'global_step/max_steps' (ms-swift)", None
    if given:
        return given, "line count x logging_steps; logging_steps given by the caller", None
    printed = scan.config.get("logging_steps", "")
    if printed.isascii() and printed.isdigit() and 0 < int(printed) < 10**9:
        return (
            int(printed),
            "line count x logging_steps; logging_steps from the printed config",
            None,
        )
    total = _total_steps(scan, segments)
    last_lines = sum(1 for k, _, _ in segments[-1] if k == "train") if segments else lines
    if total and last_lines:
        steps = _bar_steps(scan.before[-1], total)
        if steps is not None:
            every = Counter(b - a for a, b in itertools.pairwise(steps)).most_common(1)
            step = every[0][0] if every else steps[0]
            return step, "the training bar's position at each line", steps
        reached = scan.reached[-1].get(total)
        if reached is not None and 0 < reached < total - 1 and last_lines <= reached:
            step = _stopped_early(reached, last_lines, total, _last_epoch(segments[-1]))
            return (
                step,
                f"line count x logging_steps; logging_steps = {step}: {last_lines} lines over "
                f"the {reached} steps the training bar reached (the run stopped before its "
                f"planned {total})",
                None,
            )
        step = max(1, round(total / last_lines))
        if abs(total / step - last_lines) <= 1:
            return (
                step,
                f"line count x logging_steps; logging_steps = {total} total steps / {last_lines} lines",
                None,
            )
    return (
        DEFAULT_LOGGING_STEPS,
        f"line count x logging_steps; logging_steps unknown, GRPOConfig's default "
        f"{DEFAULT_LOGGING_STEPS} assumed",
        None,
    )


def _bar_steps(before: list[dict[int, int]], total: int) -> list[int] | None:
    """The steps of a run's training lines from the training bar (of ``total`` steps) drawn
    just before each: every line has one and they rise, else None (buffered output prints the
    lines in bursts, with no frame between them)."""
    steps = [b.get(total) for b in before]
    if len(steps) < 2 or any(s is None for s in steps):
        return None
    known = [s for s in steps if s is not None]
    if known[0] < 1 or any(b <= a for a, b in itertools.pairwise(known)):
        return None
    return known


def _stopped_early(reached: int, lines: int, planned: int, epoch: float | None) -> int:
    """``logging_steps`` of ``lines`` lines logged over the first ``reached`` of ``planned``
    steps: an L with ``lines x L <= reached < (lines + 1) x L``. When several fit, the lines'
    ``epoch`` (the last line's, ``lines x L / steps_per_epoch``) chooses: a run planned by
    epochs has ``planned = E x steps_per_epoch`` for a whole number E of epochs, so L is
    ``epoch / lines x planned / E`` for one E; else GRPOConfig's default when it fits, else the
    largest. None fits (lines lost): ``reached // lines``."""
    fits = [s for s in range(reached // (lines + 1) + 1, reached // lines + 1) if s > 0]
    if len(fits) > 1 and epoch is not None and epoch > 0:
        for epochs in range(1, _MAX_EPOCHS + 1):
            est = epoch / lines * planned / epochs
            if round(est) in fits and abs(est - round(est)) <= _EPOCH_TOL * est:
                return round(est)
    if DEFAULT_LOGGING_STEPS in fits:
        return DEFAULT_LOGGING_STEPS
    return fits[-1] if fits else max(1, reached // lines)


def _last_epoch(segment: list[Any]) -> float | None:
    """The ``epoch`` of a run's last training line, when it printed one."""
    for kind, values, _ in reversed(segment):
        if kind == "train":
            v = values.get("epoch")
            return v if isinstance(v, float) and math.isfinite(v) else None
    return None


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
            marks=(b"{'", b"it/s]", b"s/it]", b"trl", b"transformers", b"GRPOTrainer", ESC),
        ),
        files=(".log", ".txt", ".out", ".err"),
    )
)

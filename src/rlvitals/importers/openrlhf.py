"""OpenRLHF console logs: the ``Global step N: {...}`` line its PPO/GRPO trainer logs per step.

OpenRLHF's Ray PPO trainer logs each step's status dict through Python ``logging``::

    INFO 05-12 10:11:12 ppo_trainer.py:412] ✨ Global step 7: {'policy_loss': -0.01, 'kl': 0.0003,
    'reward': 0.41, 'response_length': 312.5, 'actor_lr': 1e-06, ...}

(one line; the ✨ is absent in some versions), and evaluation results as
``Eval at step N: {...}``. The dict is a Python repr: single quotes, bare ``nan``/``inf``, and
sometimes ``tensor(0.5)`` or ``np.float64(0.5)``. It is parsed with :func:`ast.parse` and read
node by node — never evaluated (:func:`rlvitals.importers._console.parse_dict_repr`). Numeric entries are kept; strings, lists and ``None`` are skipped.
Keys are the ones OpenRLHF also sends to TensorBoard / W&B under ``train/`` (``policy_loss``,
``kl``, ``reward``, ``response_length``, ``actor_lr``, ...); eval keys get an ``eval/`` prefix.
If the log holds the launch command (``python3 -m openrlhf.cli.train_ppo_ray --flag value ...``),
its flags land in ``manifest.config`` and the trainer facts (:mod:`rlvitals.trainers.openrlhf`) set
group size, estimator and KL coefficient.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._console import CommandCatcher, check_step, parse_cli_flags, parse_dict_repr
from rlvitals.importers._console_lines import ESC, sniff_log, strip_ansi, strip_ray_repeat
from rlvitals.importers._lines import iter_lines
from rlvitals.recording.metrics import is_eval_key
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts
from rlvitals.trainers import openrlhf as openrlhf_facts

__all__ = ["load_openrlhf_console"]

CONF_CONSOLE = 0.9
CONF_CONSOLE_NO_STEPS = 0.3

_ROW = re.compile(r"(Global step|Eval at step) (\d+): (\{.*)$")
_ROW_BYTES = re.compile(rb"Global step \d+: \{")
_MARK = re.compile(rb"openrlhf|OpenRLHF")
_LAUNCH = re.compile(r"-m\s+(openrlhf\.[\w.]+)")


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
    builder = RunBuilder(
        Manifest(source=str(path), trainer="openrlhf", step_key="'Global step N' (global_step)")
    )
    n_train = 0
    catcher = CommandCatcher(_LAUNCH)
    for lineno, raw, complete in iter_lines(path, progress):
        if not catcher.done and (catcher.capturing or b"openrlhf." in raw):
            catcher.feed(raw.decode("utf-8", "replace"))
        if b" step " not in raw:
            continue
        line = strip_ray_repeat(strip_ansi(raw.decode("utf-8", "replace")).rstrip())
        m = _ROW.search(line)
        if m is None:
            continue
        where = f"line {lineno}"
        step = check_step(path, m.group(2), where)
        try:
            values = parse_dict_repr(m.group(3))
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
        flags = parse_cli_flags(catcher.command)
        builder.manifest.config = {"entrypoint": catcher.entrypoint, **flags}
        apply_facts(builder.manifest, openrlhf_facts.facts(flags), overwrite=True)
    return builder.build()


def _sniff(path: Path, head: bytes) -> float:
    return sniff_log(path, head, _ROW_BYTES, _MARK, CONF_CONSOLE, unsure=CONF_CONSOLE_NO_STEPS)


register(
    Importer(
        name="openrlhf_console",
        description="OpenRLHF console log ('Global step N: {...}' lines)",
        sniff=_sniff,
        load=load_openrlhf_console,
        precheck=Precheck(text=True, marks=(b"Global step", b"openrlhf", b"OpenRLHF", ESC)),
        files=(".log", ".txt", ".out", ".err"),
    )
)

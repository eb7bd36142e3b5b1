"""Importers: one module per foreign format, each turning a file or directory into a ``Run``.

The format is chosen by content sniffing (``load(path)``) or forced (``load(path, fmt="...")``).
Each importer module registers an :class:`Importer` in :data:`IMPORTERS` at import time; the
modules listed in :data:`_MODULES` are imported lazily on first use.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.recording.run import Run
from rlvitals.registry import Plugins, Registry

__all__ = ["IMPORTERS", "Importer", "Progress", "formats", "load", "sniff"]

SNIFF_BYTES = 65536
"""How much of a file sniffers see."""

Progress = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``; importers call it now and then on long inputs."""


@dataclass(frozen=True)
class Importer:
    """A foreign format.

    Attributes:
        name: the ``--format`` name.
        description: one line for ``rlvitals inspect --help`` and the docs.
        sniff: ``(path, head) -> confidence in [0, 1]``; ``head`` is the first 64 KiB of a file,
            or ``b""`` for a directory. 0 means "not mine".
        load: ``(path, progress) -> Run``; raises :class:`InputError` for bad input.
    """

    name: str
    description: str
    sniff: Callable[[Path, bytes], float]
    load: Callable[[Path, Progress | None], Run]


IMPORTERS: Registry[Importer] = Registry("format")

_MODULES = (
    "groups_jsonl", "verl_console", "verl_file", "verl_rollouts", "openrlhf", "trl_state", "trl_completions", "generic", "recording",
    "tensorboard", "wandb", "mlflow",
)
_ensure_loaded = Plugins(__name__, _MODULES).load


def register(importer: Importer) -> Importer:
    IMPORTERS.add(importer.name, importer)
    return importer


def formats() -> list[Importer]:
    _ensure_loaded()
    return [IMPORTERS.get(n) for n in IMPORTERS.names()]


def _head(path: Path) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as f:
        return f.read(SNIFF_BYTES)


def sniff(path: str | os.PathLike) -> Importer:
    """The importer most confident it can read ``path``; InputError when none is."""
    _ensure_loaded()
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or directory")
    try:
        head = _head(p)
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror or e}") from None
    if p.is_file() and not head:
        raise InputError(p, "file is empty")
    best, score = None, 0.0
    for name in IMPORTERS.names():
        imp = IMPORTERS.get(name)
        s = imp.sniff(p, head)
        if s > score:
            best, score = imp, s
    if best is None:
        what = "directory holds no run rlvitals can read" if p.is_dir() else "unknown format"
        names = ", ".join(IMPORTERS.names())
        raise InputError(p, f"{what} (known formats: {names}; force one with --format)")
    return best


def load(path: str | os.PathLike, fmt: str | None = None, progress: Progress | None = None) -> Run:
    """Read ``path`` into a ``Run``, sniffing the format unless ``fmt`` names one."""
    _ensure_loaded()
    p = Path(path)
    if fmt is None:
        imp = sniff(p)
    else:
        try:
            imp = IMPORTERS.get(fmt)
        except KeyError as e:
            raise InputError(p, str(e.args[0])) from None
        if not p.exists():
            raise InputError(p, "no such file or directory")
    try:
        run = imp.load(p, progress)
    except InputError:
        raise
    except IsADirectoryError:
        raise InputError(p, f"is a directory; the {imp.name} format reads a file") from None
    except (OSError, MemoryError) as e:
        raise InputError(p, f"cannot read: {e}") from None
    except RecursionError:
        raise InputError(p, "input nested too deeply to read") from None
    except OverflowError as e:
        raise InputError(p, f"number out of range: {e}") from None
    run.manifest.source = run.manifest.source or str(p)
    run.manifest.format = imp.name
    return run

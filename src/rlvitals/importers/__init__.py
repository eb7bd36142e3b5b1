"""Importers: one module per foreign format, each turning a file or directory into a ``Run``.

The format is chosen by content sniffing (``load(path)``) or forced (``load(path, fmt="...")``).
Each importer module registers an :class:`Importer` in :data:`IMPORTERS` at import time. The
built-in formats are listed in ``_FORMATS`` with their module and a cheap byte test, so
sniffing a file imports only the importers that could claim it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.recording.run import Run
from rlvitals.registry import Plugins, Registry, import_module

__all__ = [
    "IMPORTERS",
    "Importer",
    "Progress",
    "format_description",
    "formats",
    "load",
    "sniff",
]

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


def _text_json(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def _binary(head: bytes) -> bool:
    return b"\x00" in head[:4096]


def _text(head: bytes) -> bool:
    return bool(head) and not _binary(head)


@dataclass(frozen=True)
class _Format:
    """Where a format's importer lives and a cheap test of whether a file could be one.

    ``could_be(path, head)`` is a necessary condition of the importer's own sniffer (``head``
    is ``b""`` for a directory), checked on bytes alone so that sniffing a file imports only
    the importer modules that might claim it.
    """

    module: str
    could_be: Callable[[Path, bytes], bool]
    dirs: bool = False


_VERL_MARKS = (b"step:", b"verl", b"TaskRunner", b"main_task", b"val-core/", b"critic/score/")
_STREAM_PREFIXES = ("scalars.rank", "events.rank", "groups.rank")

_FORMATS: dict[str, _Format] = {
    "groups_jsonl": _Format("groups_jsonl", lambda p, h: _text_json(h) and b'"rewards"' in h),
    "verl_console": _Format(
        "verl_console", lambda p, h: _text(h) and any(m in h for m in _VERL_MARKS)
    ),
    "verl_file": _Format("verl_file", lambda p, h: _text_json(h) and b'"data"' in h),
    "verl_rollouts": _Format(
        "verl_rollouts", lambda p, h: _text_json(h) and b'"input"' in h, dirs=True
    ),
    "openrlhf_console": _Format(
        "openrlhf",
        lambda p, h: _text(h) and (b"Global step" in h or b"openrlhf" in h or b"OpenRLHF" in h),
    ),
    "trl_state": _Format("trl_state", lambda p, h: _text_json(h), dirs=True),
    "trl_completions": _Format("trl_completions", lambda p, h: h.startswith(b"PAR1"), dirs=True),
    "jsonl": _Format("generic", lambda p, h: _text_json(h)),
    "csv": _Format("generic", lambda p, h: _text(h) and not _text_json(h)),
    "recording": _Format(
        "recording",
        lambda p, h: p.name == "manifest.json" or p.name.startswith(_STREAM_PREFIXES),
        dirs=True,
    ),
    "tensorboard": _Format(
        "tensorboard", lambda p, h: "tfevents" in p.name or b"brain.Event" in h[:256], dirs=True
    ),
    "wandb": _Format("wandb", lambda p, h: h[:4] == b":W&B", dirs=True),
    "mlflow": _Format("mlflow", lambda p, h: h.startswith(b"SQLite format 3\x00"), dirs=True),
}
"""Every built-in format: importer module and cheap test (see :class:`_Format`)."""

_PLUGINS = Plugins(__name__, tuple(dict.fromkeys(f.module for f in _FORMATS.values())))
_ensure_loaded = _PLUGINS.load


def _import(name: str) -> Importer:
    """The importer registered under ``name`` (importing only its module)."""
    spec = _FORMATS.get(name)
    if spec is not None and name not in IMPORTERS:
        import_module(f"{__name__}.{spec.module}")
    return IMPORTERS.get(name)


def register(importer: Importer) -> Importer:
    IMPORTERS.add(importer.name, importer)
    return importer


def formats() -> list[Importer]:
    _ensure_loaded()
    return [IMPORTERS.get(n) for n in IMPORTERS.names()]


def format_names() -> list[str]:
    """Names of every importer (built-in and registered), without loading any of them."""
    return sorted({*_FORMATS, *IMPORTERS.names()})


def format_description(name: str | None) -> str | None:
    """The one-line description of importer ``name``, or None for an unknown name."""
    if name not in _FORMATS and name not in IMPORTERS:
        return None
    return _import(name).description


def _head(path: Path) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as f:
        return f.read(SNIFF_BYTES)


def sniff(path: str | os.PathLike) -> Importer:
    """The importer most confident it can read ``path``; InputError when none is.

    Only the importers whose cheap test passes are imported and asked (plus any registered
    from outside the built-in table).
    """
    p = Path(path)
    if not p.exists():
        raise InputError(p, "no such file or directory")
    try:
        head = _head(p)
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror or e}") from None
    is_dir = p.is_dir()
    if not is_dir and not head:
        raise InputError(p, "file is empty")
    candidates = [
        name for name, spec in _FORMATS.items() if (spec.dirs if is_dir else spec.could_be(p, head))
    ]
    best, score = None, 0.0
    for name in sorted({*candidates, *(n for n in IMPORTERS.names() if n not in _FORMATS)}):
        imp = _import(name)
        s = imp.sniff(p, head)
        if s > score:
            best, score = imp, s
    if best is None:
        what = "directory holds no run rlvitals can read" if is_dir else "unknown format"
        names = ", ".join(format_names())
        raise InputError(p, f"{what} (known formats: {names}; force one with --input-format)")
    return best


def load(path: str | os.PathLike, fmt: str | None = None, progress: Progress | None = None) -> Run:
    """Read ``path`` into a ``Run``, sniffing the format unless ``fmt`` names one."""
    p = Path(path)
    if fmt is None:
        imp = sniff(p)
    else:
        if fmt not in _FORMATS and fmt not in IMPORTERS:
            raise InputError(p, f"unknown format {fmt!r}; valid: {', '.join(format_names())}")
        imp = _import(fmt)
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

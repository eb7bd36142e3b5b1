"""Importers: one module per foreign format, each turning a file or directory into a ``Run``.

The format is chosen by content sniffing (``load(path)``) or forced (``load(path, fmt="...")``).
Each importer module registers an :class:`Importer` in :data:`IMPORTERS` at import time. The
built-in formats are listed in ``_FORMATS`` with their module and a cheap byte test, so
sniffing a file imports only the importers that could claim it.

Any path may be ``-`` (standard input), a pipe (``<(cat log)``), a FIFO, or a gzip / zstd file:
:mod:`rlvitals.importers._source` reads a buffered prefix for the sniffers and lets the importer
continue the same stream. A store holding several runs (MLflow, a W&B folder, trackio, appended
log histories) reads the one ``run=`` names; without it, the most recent, with a warning naming
the others (a ``runs`` event lists them all (:func:`runs_of`)).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from rlvitals._record import record
from rlvitals.errors import InputError
from rlvitals.importers._source import (
    decompress_errors,
    input_bytes,
    input_context,
    is_stream,
    lenient_reading,
    read_notes,
    read_prefix,
)
from rlvitals.recording import _memory
from rlvitals.recording.run import Run
from rlvitals.registry import Plugins, Registry, import_module

__all__ = [
    "IMPORTERS",
    "Importer",
    "Progress",
    "format_description",
    "formats",
    "load",
    "note_runs",
    "runs_of",
    "sniff",
]


SNIFF_BYTES = 65536
"""How much of a file sniffers see."""

Progress = Callable[[int, int], None]
"""``progress(done_bytes, total_bytes)``; importers call it now and then on long inputs."""


@record(frozen=True)
class Importer:
    """A foreign format.

    Attributes:
        name: the ``--format`` name.
        description: one line for ``rlvitals inspect --help`` and the docs.
        sniff: ``(path, head) -> confidence in [0, 1]``; ``head`` is the first 64 KiB of a file,
            or ``b""`` for a directory. 0 means "not mine".
        load: ``(path, progress) -> Run``; raises :class:`InputError` for bad input. With
            ``multi_run``, also ``run=NAME`` (None: the most recent run, with a warning).
        multi_run: the format can hold several runs (``--run`` chooses one).
        list_runs: the runs of a store, listed without reading them (optional).
    """

    name: str
    description: str
    sniff: Callable[[Path, bytes], float]
    load: Callable[[Path, Progress | None], Run]
    multi_run: bool = False
    """True when ``load`` takes ``run=`` (a store holding several runs)."""
    list_runs: Callable[[Path], list[dict]] | None = None
    """For a store: ``path -> [{"name", "id", ...}]``, its runs without reading them (``rlvitals
    scan`` lists a store with it, then reads each with ``run=`` its id, else its name)."""


IMPORTERS: Registry[Importer] = Registry("format")


def _text_json(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")


def _binary(head: bytes) -> bool:
    return b"\x00" in head[:4096]


def _text(head: bytes) -> bool:
    return bool(head) and not _binary(head)


@record(frozen=True)
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
_TRL_CONSOLE_MARKS = (b"{'", b"it/s]", b"s/it]", b"trl", b"transformers")
_SLIME_MARKS = (b": {'rollout/", b": {'perf/", b"slime", b"RolloutManager")

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
    "trl_state": _Format(
        "trl_state",
        lambda p, h: _text_json(h) and (b'"log_history"' in h or p.name == "trainer_state.json"),
        dirs=True,
    ),
    "trl_log_history": _Format(
        "trl_log_history", lambda p, h: _text_json(h) and b'"step"' in h and b"[" in h[:64]
    ),
    "trl_console": _Format(
        "trl_console", lambda p, h: _text(h) and any(m in h for m in _TRL_CONSOLE_MARKS)
    ),
    "trl_completions": _Format("trl_completions", lambda p, h: h.startswith(b"PAR1"), dirs=True),
    "ms_swift": _Format(
        "ms_swift",
        lambda p, h: _text_json(h) and (b'"global_step/max_steps"' in h or b'"iteration": "' in h),
    ),
    "ms_swift_completions": _Format(
        "ms_swift_completions", lambda p, h: _text_json(h) and b'"step": ["' in h[:256]
    ),
    "nemo_rl": _Format(
        "nemo_rl", lambda p, h: _text_json(h) and b'"content": [' in h[:8192], dirs=True
    ),
    "prime_rl": _Format("prime_rl", lambda p, h: _text_json(h) and b'"time": ' in h[:256]),
    "prime_rl_traces": _Format(
        "prime_rl_traces", lambda p, h: _text_json(h) and b'"traces":' in h[:65536], dirs=True
    ),
    "skyrl_console": _Format(
        "skyrl_console", lambda p, h: _text(h) and (b"Step " in h or b"skyrl" in h)
    ),
    "slime_console": _Format(
        "slime_console",
        lambda p, h: _text(h) and any(m in h for m in _SLIME_MARKS),
    ),
    "trackio": _Format("trackio", lambda p, h: h.startswith(b"SQLite format 3\x00"), dirs=True),
    "wandb_chart": _Format(
        "wandb_chart", lambda p, h: _text(h) and h.lstrip(b"\xef\xbb\xbf")[:1] == b'"'
    ),
    "wandb_history": _Format(
        "wandb_history",
        lambda p, h: h.startswith(b"PAR1") or (_text(h) and b"_step" in h[:8192]),
    ),
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


def note_runs(builder, runs: list[dict]) -> None:
    """Record the runs a multi-run store holds (``[{"name", "id", ..., "read": bool}]``) as a
    ``runs`` event of the run being built; ``rlvitals inspect`` lists them."""
    from rlvitals.recording.run import Event

    if len(runs) > 1:
        read = next((r.get("name") for r in runs if r.get("read")), None)
        builder.add_event(
            Event(None, "runs", f"{len(runs)} runs here; read {read}", {"runs": runs})
        )


def runs_of(run: Run) -> list[dict]:
    """The runs of the store ``run`` was read from (:func:`note_runs`), or ``[]``."""
    for e in run.events:
        if e.kind == "runs" and isinstance(e.data.get("runs"), list):
            return e.data["runs"]
    return []


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
    if not is_stream(path) and path.is_dir():
        return b""
    return read_prefix(path, SNIFF_BYTES)


def _exists(p: Path) -> bool:
    return is_stream(p) or p.exists()


def sniff(path: str | os.PathLike) -> Importer:
    """The importer most confident it can read ``path``; InputError when none is.

    Only the importers whose cheap test passes are imported and asked (plus any registered
    from outside the built-in table).
    """
    with input_context(path) as p:
        return _sniff(p)


def _sniff(p: Path) -> Importer:
    if not _exists(p):
        raise InputError(p, "no such file or directory")
    try:
        head = _head(p)
    except decompress_errors() as e:
        raise InputError(p, f"cannot decompress: {e or type(e).__name__}") from None
    except OSError as e:
        raise InputError(p, f"cannot read: {e.strerror or e}") from None
    is_dir = not is_stream(p) and p.is_dir()
    if not is_dir and not head:
        raise InputError(p, "file is empty")
    candidates = [
        name for name, spec in _FORMATS.items() if (spec.dirs if is_dir else spec.could_be(p, head))
    ]
    best, score = None, 0.0
    for name in sorted({*candidates, *(n for n in IMPORTERS.names() if n not in _FORMATS)}):
        imp = _import(name)
        try:
            s = imp.sniff(p, head)
        except Exception as e:  # a sniffer is a guess: one that cannot decide says "not mine"
            import logging  # only when a sniffer fails: logging is ~2 ms of start-up

            logging.getLogger(__name__).debug("sniffer %s failed on %s: %r", name, p, e)
            continue
        if s > score:
            best, score = imp, s
    if best is None:
        what = "directory holds no run rlvitals can read" if is_dir else "unknown format"
        names = ", ".join(format_names())
        raise InputError(p, f"{what} (known formats: {names}; force one with --input-format)")
    return best


def load(
    path: str | os.PathLike,
    fmt: str | None = None,
    progress: Progress | None = None,
    run: str | None = None,
    *,
    lenient: bool = False,
) -> Run:
    """Read ``path`` into a ``Run``, sniffing the format unless ``fmt`` names one.

    Args:
        path: a file, a directory, ``-`` for standard input, a pipe or a FIFO; gzip / zstd
            files are decompressed.
        fmt: the format name, to skip sniffing.
        progress: ``progress(done_bytes, total_bytes)`` now and then.
        run: the run to read from a store that holds several (a name or id; see
            ``rlvitals inspect``, which lists them); an InputError for a single-run format.
        lenient: skip damaged records that strict reading refuses (a corrupt record in the
            middle of a recording stream, an invalid line of a JSONL log) instead of raising;
            each skip is said in ``Run.warnings``. A torn last record is always only a warning.

    Memory is bounded by a small multiple of the input (:mod:`rlvitals.recording._memory`):
    an input that would need more is an :class:`InputError` saying which limit it hit.
    """
    with (
        input_context(path) as p,
        lenient_reading(lenient),
        _memory.reading(input_bytes(p)),
        read_notes() as notes,
    ):
        before = _identity(p)
        out = _load(p, fmt, progress, run)
        after = _identity(p)
    if before is not None and after is not None and after[0] == before[0] and after[1] < before[1]:
        # Like tar's "file shrank": what was read may end anywhere (a log cut by copytruncate).
        raise InputError(
            p,
            f"the file shrank from {before[1]:,} to {after[1]:,} bytes while it was read "
            "(truncated, or rotated with copytruncate): what was read may be cut; read it again",
        )
    out.warnings.extend(n for n in notes if n not in out.warnings)
    return out


def _identity(p: Path) -> tuple[tuple[int, int], int] | None:
    """``((st_dev, st_ino), size)`` of a regular file, else None (a folder, a stream)."""
    if is_stream(p):
        return None
    try:
        st = os.stat(p)
    except (OSError, ValueError):
        return None
    return ((st.st_dev, st.st_ino), st.st_size) if stat.S_ISREG(st.st_mode) else None


def _load(p: Path, fmt: str | None, progress: Progress | None, run: str | None) -> Run:
    if fmt is None:
        imp = _sniff(p)
    else:
        if fmt not in _FORMATS and fmt not in IMPORTERS:
            raise InputError(p, f"unknown format {fmt!r}; valid: {', '.join(format_names())}")
        imp = _import(fmt)
        if not _exists(p):
            raise InputError(p, "no such file or directory")
    if run is not None and not imp.multi_run:
        raise InputError(p, f"the {imp.name} format holds one run; --run does not apply")
    try:
        out = imp.load(p, progress, run=run) if imp.multi_run else imp.load(p, progress)
    except InputError:
        raise
    except IsADirectoryError:
        raise InputError(p, f"is a directory; the {imp.name} format reads a file") from None
    except decompress_errors() as e:
        raise InputError(p, f"cannot decompress: {e or type(e).__name__}") from None
    except MemoryError:
        raise InputError(
            p, f"out of memory reading it (the {imp.name} reader needed more than was free)"
        ) from None
    except OSError as e:
        what = f" {e.filename}" if e.filename and os.fspath(e.filename) != os.fspath(p) else ""
        raise InputError(p, f"cannot read{what}: {e.strerror or e or type(e).__name__}") from None
    except RecursionError:
        raise InputError(p, "input nested too deeply to read") from None
    except OverflowError as e:
        raise InputError(p, f"number out of range: {e}") from None

    out.manifest.source = out.manifest.source or str(p)
    out.manifest.format = imp.name
    return out

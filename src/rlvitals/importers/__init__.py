"""Importers: one module per foreign format, each turning a file or directory into a ``Run``.

The format is chosen by content sniffing (``load(path)``) or forced (``load(path, fmt="...")``).
Each importer module registers an :class:`Importer` in :data:`IMPORTERS` at import time, and
declares there everything else needs to know of its format: its names, its cheap byte test
(:class:`Precheck`), the file names a folder walk sniffs, how it claims folders. The built-in
ones are copied into :mod:`rlvitals.importers._catalogue` (``scripts/gen_importers.py``; a test
fails when it differs), so sniffing a file imports only the importers that could claim it.

Any path may be ``-`` (standard input), a pipe (``<(cat log)``), a FIFO, or a gzip / zstd file:
:mod:`rlvitals.importers._source` reads a buffered prefix for the sniffers and lets the importer
continue the same stream. What other packages need of the importers' input handling is public
here: :func:`read_prefix`, :func:`compression_of`, :func:`walk_tree`, :func:`connect_sqlite`,
:func:`is_sqlite`. A store holding several runs (MLflow, a W&B folder, trackio, appended
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
from rlvitals.importers._precheck import SNIFF_BYTES, Precheck
from rlvitals.importers._source import (
    compression_of,
    decompress_errors,
    input_bytes,
    input_context,
    is_stream,
    lenient_reading,
    read_notes,
    read_prefix,
    walk_tree,
)
from rlvitals.recording import memory as _memory
from rlvitals.recording.run import Run
from rlvitals.registry import Plugins, Registry, import_module

__all__ = [
    "IMPORTERS",
    "Importer",
    "Precheck",
    "Progress",
    "candidate_file",
    "compression_of",
    "connect_sqlite",
    "format_description",
    "formats",
    "get_importer",
    "is_sqlite",
    "is_url",
    "load",
    "note_runs",
    "read_prefix",
    "runs_of",
    "sniff",
    "walk_tree",
    "warn_skipped",
]


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
    phases: bool = False
    """True when ``load`` takes ``split_phases=`` (a log whose runs may be a curriculum's
    phases, joined into one run unless split)."""
    list_runs: Callable[[Path], list[dict]] | None = None
    """For a store: ``path -> [{"name", "id", ...}]``, its runs without reading them (``rlvitals
    scan`` lists a store with it, then reads each with ``run=`` its id, else its name)."""
    precheck: Precheck | None = None
    """The cheap byte test of whether a file could be this format, a necessary condition of
    ``sniff`` (None: always ask ``sniff``). A built-in importer's is copied into the catalogue,
    so that sniffing imports only the importers whose pre-check passes."""
    files: tuple[str, ...] = ()
    """File names a folder walk (``rlvitals scan``) sniffs for this format: suffixes (``.log``)
    or, without a leading dot, fragments of the name (``tfevents``)."""
    folder_claim: Callable[[Path], bool] | None = None
    """For a format that claims folders: whether its claim on folder ``d`` is on ``d`` itself
    (True) or only on something inside it (False: a scan walks in and claims that). None: a
    folder it claims is one run."""
    companion_of: str | None = None
    """A file of this format is part of the run a file of that format in the same folder stands
    for (ms-swift's ``completions.jsonl`` beside the ``logging.jsonl`` that reads it)."""
    walk_confidence: float = 0.0
    """In a folder walk, a file of this format is a run only when ``sniff`` is at least this sure
    (a generic JSONL / CSV file needs a step column: a model's ``config.json`` is not a run)."""


IMPORTERS: Registry[Importer] = Registry("format")


def connect_sqlite(db: str | os.PathLike, *, copy: bool = True):
    """A read-only connection to the SQLite store ``db`` that creates nothing next to it, as a
    context manager (MLflow's and trackio's stores; ``rlvitals scan`` asks whether one can be
    listed). ``copy=False`` reads in place (cheap, for sniffing)."""
    from rlvitals.importers import _sqlite

    return _sqlite.connect(db, copy=copy)


def is_sqlite(path: str | os.PathLike) -> bool:
    """Whether the file ``path`` starts as an SQLite database does (OSError when it cannot be
    read)."""
    from rlvitals.importers import _sqlite

    return _sqlite.is_sqlite(path)


def _declared() -> dict[str, tuple[str, Precheck, tuple[str, ...]]]:
    """Every built-in format's module, pre-check and file patterns, as the importers declare
    them (copied by ``scripts/gen_importers.py``), read without importing any importer."""
    from rlvitals.importers._catalogue import CATALOGUE

    return CATALOGUE


def _builtin_modules() -> tuple[str, ...]:
    return tuple(dict.fromkeys(module for module, _, _ in _declared().values()))


class _BuiltinPlugins(Plugins):
    """:class:`Plugins` whose module list is read from the catalogue when first needed."""

    def load(self) -> None:
        if not self.modules:
            self.modules = _builtin_modules()
        super().load()


_PLUGINS = _BuiltinPlugins(__name__, ())
_ensure_loaded = _PLUGINS.load


def _import(name: str) -> Importer:
    """The importer registered under ``name`` (importing only its module)."""
    spec = _declared().get(name)
    if spec is not None and name not in IMPORTERS:
        import_module(f"{__name__}.{spec[0]}")
    return IMPORTERS.get(name)


def get_importer(name: str) -> Importer:
    """The importer of format ``name``, importing only its module; KeyError listing the valid
    names for an unknown one."""
    if name not in _declared() and name not in IMPORTERS:
        raise KeyError(f"unknown format {name!r}; valid: {', '.join(format_names())}")
    return _import(name)


def candidate_file(name: str) -> bool:
    """Whether a file called ``name`` could be a log of some format (``rlvitals scan`` sniffs
    only those): its name ends with a suffix, or contains a fragment, that an importer declares
    in ``files`` (``.gz`` / ``.zst`` / ``.zstd`` removed first)."""
    suffixes, fragments = _file_patterns()
    if any(f in name for f in fragments):
        return True
    low = name.lower()
    for c in COMPRESSED_SUFFIXES:
        if low.endswith(c):
            low = low[: -len(c)]
            break
    return os.path.splitext(low)[1] in suffixes


COMPRESSED_SUFFIXES = (".gz", ".zst", ".zstd")
_PATTERNS: dict[int, tuple[frozenset[str], tuple[str, ...]]] = {}


def _file_patterns() -> tuple[frozenset[str], tuple[str, ...]]:
    """(suffixes, name fragments) of every importer's ``files``, built-in and registered."""
    got = _PATTERNS.get(len(IMPORTERS))
    if got is None:
        catalogue = _declared()
        files = [f for _, _, fs in catalogue.values() for f in fs]
        files += [
            f for n in IMPORTERS.names() if n not in catalogue for f in IMPORTERS.get(n).files
        ]
        got = (
            frozenset(f for f in files if f.startswith(".")),
            tuple(dict.fromkeys(f for f in files if not f.startswith("."))),
        )
        _PATTERNS.clear()
        _PATTERNS[len(IMPORTERS)] = got
    return got


def note_runs(builder, runs: list[dict]) -> None:
    """Record the runs a multi-run store holds (``[{"name", "id", ..., "read": bool}]``) as a
    ``runs`` event of the run being built; ``rlvitals inspect`` lists them."""
    from rlvitals.recording.run import Event

    if len(runs) > 1:
        read = next((r.get("name") for r in runs if r.get("read")), None)
        builder.add_event(
            Event(None, "runs", f"{len(runs)} runs here; read {read}", {"runs": runs})
        )


def warn_skipped(builder, path: object) -> None:
    """Say in one warning of the run being built how many values read from ``path`` were
    left out for not being numbers (``builder.skipped_values``), when any were."""
    if builder.skipped_values:
        builder.warn(f"{path}: {builder.skipped_values} non-numeric values ignored")


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
    return sorted({*_declared(), *IMPORTERS.names()})


def format_description(name: str | None) -> str | None:
    """The one-line description of importer ``name``, or None for an unknown name."""
    if name not in _declared() and name not in IMPORTERS:
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
    catalogue = _declared()
    candidates = [
        name for name, (_, pre, _) in catalogue.items() if (pre.dirs if is_dir else pre(p, head))
    ]
    for name in IMPORTERS.names():  # registered from outside: their own pre-check, if any
        pre = IMPORTERS.get(name).precheck
        if name not in catalogue and (pre is None or (pre.dirs if is_dir else pre(p, head))):
            candidates.append(name)
    best, score = None, 0.0
    for name in sorted(candidates):
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


def is_url(path: object) -> bool:
    """Whether ``path`` is a URL (``scheme://...`` naming no file here), not a path: what
    :func:`load` reads as an MLflow tracking server's (a URL of another kind is refused there
    in one line).

    >>> is_url("mlflow://127.0.0.1:5000/0a1b"), is_url("s3://bucket/run"), is_url("run.jsonl")
    (True, True, False)
    """
    return isinstance(path, str) and "://" in path and not os.path.exists(path)


def load(
    path: str | os.PathLike,
    fmt: str | None = None,
    progress: Progress | None = None,
    run: str | None = None,
    *,
    lenient: bool = False,
    split_phases: bool = False,
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
        split_phases: read the phases of a curriculum (a TRL ``log_history`` whose runs carry
            a ``phase`` field) as separate runs; by default they are one run, steps continuing.
            Formats that hold no phases ignore it.

    Memory is bounded by a small multiple of the input (:mod:`rlvitals.recording.memory`):
    an input that would need more is an :class:`InputError` saying which limit it hit.
    A URL (``mlflow://HOST:PORT/RUN_ID``) is an MLflow tracking server's, read by the ``mlflow``
    importer (:mod:`rlvitals.importers._mlflow_server`).
    """
    if is_url(path):
        if fmt not in (None, "mlflow"):
            raise InputError(path, f"a URL is read as an MLflow server, not as {fmt!r}")
        return _import("mlflow").load(path, progress, run=run)
    with (
        input_context(path) as p,
        lenient_reading(lenient),
        _memory.reading(input_bytes(p)),
        read_notes() as notes,
    ):
        before = _identity(p)
        out = _load(p, fmt, progress, run, split_phases)
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


def _load(
    p: Path, fmt: str | None, progress: Progress | None, run: str | None, split: bool = False
) -> Run:
    if fmt is None:
        imp = _sniff(p)
    else:
        if fmt not in _declared() and fmt not in IMPORTERS:
            raise InputError(p, f"unknown format {fmt!r}; valid: {', '.join(format_names())}")
        imp = _import(fmt)
        if not _exists(p):
            raise InputError(p, "no such file or directory")
    if run is not None and not imp.multi_run:
        raise InputError(p, f"the {imp.name} format holds one run; --run does not apply")
    try:
        options = {"split_phases": True} if split and imp.phases else {}
        if imp.multi_run:
            options["run"] = run
        out = imp.load(p, progress, **options)
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

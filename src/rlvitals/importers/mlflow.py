"""MLflow tracking stores, read without the ``mlflow`` package: SQLite (``mlflow.db``) and ``mlruns/``.

A path is an ``mlflow.db`` file, a directory holding one, or a legacy file store: the ``mlruns``
directory, one experiment directory in it, one run directory, or a directory holding
``mlruns/``. A directory holding both reads ``mlflow.db`` (MLflow 3 keeps only artifacts in
``mlruns/`` then).

**SQLite store**: opened read-only, creating nothing next to it: ``immutable=1``, or a copy in a
temporary directory when a ``-wal``/``-journal`` beside it still holds data
(:func:`rlvitals.importers._sqlite.connect`). Tables read: ``runs`` (run_uuid, name, start_time, lifecycle_stage), ``metrics``
(key, value, timestamp, run_uuid, step, is_nan), ``params`` (key, value, run_uuid). A NaN is
stored as 0 with ``is_nan = 1``; ±inf as ±1.7976931348623157e308, read back as ±inf.

**File store**: ``<exp>/<run>/meta.yaml`` (run_id, run_name, start_time, lifecycle_stage),
``metrics/<key>`` with lines ``timestamp value step`` (a key with ``/`` is a sub-directory),
``params/<key>`` holding the value.

**Which run**: a store may hold many. :func:`load_mlflow` takes ``run_id``; without it (the
CLI's content sniffing cannot pass one) the most recently started active run is read and a
warning names the others. Params become ``manifest.config`` (strings, as MLflow stores them) and
reveal the trainer; metric keys map through ``canonical_key``. For one key and step logged more
than once, the latest timestamp wins.
"""

from __future__ import annotations

import os
import re
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, _sqlite, is_url, register
from rlvitals.importers._lines import iter_lines
from rlvitals.importers._mlflow_runs import RunInfo, add_params, add_sorted_rows, choose, finish
from rlvitals.importers._source import file_mode, is_regular
from rlvitals.importers._steps import as_step
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["find_mlflow_store", "list_mlflow_runs", "load_mlflow"]

DB_NAME = "mlflow.db"
_REQUIRED_TABLES = frozenset({"metrics", "runs"})
_MAX_PARAM_BYTES = 1 << 20
_MAX_WALK = 200_000
_SNIFF_MAX_WALK = 2_000
_META_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*):\s*(.*?)\s*$")


# --- SQLite store ----------------------------------------------------------------------------
def is_mlflow_db(db: Path) -> bool:
    """True when ``db`` is an SQLite file with MLflow's ``metrics`` and ``runs`` tables."""
    try:
        if not _sqlite.is_sqlite(db):
            return False
        with _sqlite.connect(db, copy=False) as con:
            return _sqlite.tables(con) >= _REQUIRED_TABLES
    except (OSError, *_sqlite.ERRORS):
        return False


def _load_sqlite(db: Path, run_id: str | None, progress: Progress | None) -> Run:
    builder = RunBuilder(Manifest(source=str(db), step_key="the MLflow step column"))
    try:
        with _sqlite.connect(db) as con:
            return _read_sqlite(con, db, builder, run_id, progress)
    except _sqlite.ERRORS as e:
        raise InputError(db, f"SQLite error: {_sqlite.problem(e)}") from None


def _read_sqlite(
    con: sqlite3.Connection,
    db: Path,
    builder: RunBuilder,
    run_id: str | None,
    progress: Progress | None,
) -> Run:
    tables = _sqlite.tables(con)
    missing = _REQUIRED_TABLES - tables
    if missing:
        raise InputError(
            db, f"SQLite database is not an MLflow store (no table {sorted(missing)[0]!r})"
        )
    chosen = choose(db, _sqlite_runs(con, db), run_id, builder)
    if "params" in tables and {"key", "value", "run_uuid"} <= _sqlite.columns(con, "params"):
        params = {
            str(k): v
            for k, v in con.execute(
                "SELECT key, value FROM params WHERE run_uuid = ?", (chosen.where,)
            )
        }
        add_params(builder, params)
    mcols = _sqlite.columns(con, "metrics")
    if not {"key", "value", "run_uuid", "step"} <= mcols:
        raise InputError(db, "MLflow 'metrics' table lacks key/value/run_uuid/step columns")
    nan_col = "is_nan" if "is_nan" in mcols else "0"
    order = "step, timestamp" if "timestamp" in mcols else "step"
    total = 0
    if progress is not None:
        total = con.execute(
            "SELECT COUNT(*) FROM metrics WHERE run_uuid = ?", (chosen.where,)
        ).fetchone()[0]
    rows = con.execute(
        f"SELECT key, value, step, {nan_col} FROM metrics WHERE run_uuid = ? ORDER BY {order}",
        (chosen.where,),
    )
    return finish(builder, db, chosen, add_sorted_rows(builder, rows, progress, total))


def _sqlite_runs(con: sqlite3.Connection, db: Path) -> list[RunInfo]:
    cols = _sqlite.columns(con, "runs")
    if "run_uuid" not in cols:
        raise InputError(db, "MLflow 'runs' table has no run_uuid column")
    pick = ["run_uuid"] + [
        c if c in cols else "NULL" for c in ("name", "start_time", "lifecycle_stage")
    ]
    runs = []
    for rid, name, start, stage in con.execute(f"SELECT {', '.join(pick)} FROM runs"):
        start = start if isinstance(start, int) else 0
        runs.append(
            RunInfo(
                str(rid), name if isinstance(name, str) else None, start, stage != "deleted", rid
            )
        )
    return runs


# --- file store ------------------------------------------------------------------------------
def _read_meta(path: Path) -> dict[str, str]:
    """Top-level ``key: value`` lines of an MLflow ``meta.yaml`` (quotes stripped)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(_MAX_PARAM_BYTES)
    except OSError:
        return out
    for line in text.splitlines():
        m = _META_LINE.match(line)
        if m:
            out[m.group(1)] = m.group(2).strip("'\"")
    return out


def _is_dir(p: Path) -> bool:
    return stat.S_ISDIR(file_mode(p))


def _is_run_dir(p: Path) -> bool:
    return is_regular(p / "meta.yaml") and _is_dir(p / "metrics")


def _file_store_runs(root: Path, max_entries: int) -> list[Path]:
    """Run directories of a file store root, an experiment directory or a run directory."""
    if _is_run_dir(root):
        return [root]
    out: list[Path] = []
    seen = 0

    def children(p: Path) -> Iterator[Path]:
        nonlocal seen
        try:
            entries = sorted(p.iterdir())
        except OSError:
            return
        for c in entries:
            seen += 1
            if seen > max_entries:
                return
            # a real directory (no symlink), not hidden; unreadable ones are skipped
            if not c.name.startswith(".") and stat.S_ISDIR(file_mode(c, follow=False)):
                yield c

    if is_regular(root / "meta.yaml"):  # an experiment
        return [c for c in children(root) if _is_run_dir(c)]
    for exp in children(root):
        if is_regular(exp / "meta.yaml"):
            out.extend(c for c in children(exp) if _is_run_dir(c))
    return out


def _read_text(p: Path) -> str:
    with open(p, "rb") as f:
        return f.read(_MAX_PARAM_BYTES).decode("utf-8", "replace")


def _files_under(d: Path, builder: RunBuilder) -> list[tuple[str, Path]]:
    out = []

    def unreadable(e: OSError) -> None:
        builder.warn(f"{e.filename}: unreadable ({e.strerror or e}); skipped")

    for dirpath, dirnames, filenames in os.walk(d, onerror=unreadable):
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if not is_regular(p):  # a FIFO or socket would block or fail in open()
                continue
            out.append((p.relative_to(d).as_posix(), p))
        if len(out) > _MAX_WALK:
            raise InputError(d, f"more than {_MAX_WALK} files")
    return out


def _file_runs(root: Path) -> list[RunInfo]:
    runs = []
    for d in _file_store_runs(root, _MAX_WALK):
        meta = _read_meta(d / "meta.yaml")
        st = meta.get("start_time", "")
        # ASCII digits only: "²".isdigit() is True but int("²") raises
        start = int(st) if st.isascii() and st.isdigit() and len(st) < 20 else 0
        runs.append(
            RunInfo(
                meta.get("run_id") or d.name,
                meta.get("run_name") or None,
                start,
                meta.get("lifecycle_stage", "active") != "deleted",
                d,
            )
        )
    return runs


def _load_file_store(root: Path, run_id: str | None, progress: Progress | None) -> Run:
    builder = RunBuilder(Manifest(source=str(root), step_key="the MLflow step column"))
    chosen = choose(root, _file_runs(root), run_id, builder)
    run_dir: Path = chosen.where
    builder.manifest.source = str(run_dir)
    if _is_dir(run_dir / "params"):
        params = {k: _read_text(p) for k, p in _files_under(run_dir / "params", builder)}
        add_params(builder, params)
    metric_files = _files_under(run_dir / "metrics", builder)
    total = sum(p.stat().st_size for _, p in metric_files)
    done = 0
    n = 0
    for key, p in metric_files:
        n += _read_metric_file(builder, key, p)
        done += p.stat().st_size
        if progress is not None:
            progress(done, total)
    return finish(builder, run_dir, chosen, n)


def _read_metric_file(builder: RunBuilder, key: str, path: Path) -> int:
    """Lines ``timestamp value step`` (``timestamp value`` before MLflow 1.0: step 0).

    MLflow writes each line with its newline in one call, so a last line without one is torn
    (``1700000000000 0.5`` may be the start of ``... 0.5 12``): ignored with a warning.
    """
    n = 0
    for lineno, raw, complete in iter_lines(path):
        if not complete:
            builder.warn(f"{path}: line {lineno}: torn last line ignored (run still writing?)")
            break
        parts = raw.split()
        if not parts:
            continue
        try:
            if len(parts) not in (2, 3):
                raise ValueError
            int(parts[0])  # timestamp
            value = float(parts[1])
            step = int(parts[2]) if len(parts) == 3 else 0
        except ValueError:
            raise InputError(path, "expected 'timestamp value step'", f"line {lineno}") from None
        if as_step(step) is None:  # MLflow stores a signed 64-bit step
            raise InputError(path, f"step {step} out of range", f"line {lineno}")
        builder.add_row(step, {key: value})
        n += 1
    return n


# --- entry points ----------------------------------------------------------------------------
def find_mlflow_store(path: Path, max_entries: int = _MAX_WALK) -> tuple[str, Path] | None:
    """``("sqlite", db)`` or ``("file", root)`` for the store ``path`` designates, else None."""
    if is_regular(path):
        return ("sqlite", path) if is_mlflow_db(path) else None
    if not _is_dir(path):
        return None
    db = path / DB_NAME
    if is_regular(db) and is_mlflow_db(db):
        return "sqlite", db
    for root in (path, path / "mlruns"):
        if _is_dir(root) and _file_store_runs(root, max_entries):
            return "file", root
    return None


def load_mlflow(
    path: Path,
    progress: Progress | None = None,
    *,
    run_id: str | None = None,
    run: str | None = None,
) -> Run:
    """Read one run of an MLflow store (SQLite or file store, see above) into a ``Run``.

    Args:
        path: ``mlflow.db``, a directory holding it, or a file store (root, experiment, run).
        progress: ``progress(done, total)``.
        run_id: the run to read (its id or name); default: the most recently started active
            run, with a warning naming the others (all are listed in a ``runs`` event).
        run: the same as ``run_id`` (the name every multi-run importer takes).
    """
    run_id = run_id if run_id is not None else run
    if is_url(path):
        from rlvitals.importers._mlflow_server import load_server

        return load_server(path, progress, run=run_id)
    path = Path(path)
    if is_regular(path):
        if not _sqlite.is_sqlite(path):
            raise InputError(path, "not an SQLite database (MLflow stores are mlflow.db)", "byte 0")
        return _load_sqlite(path, run_id, progress)
    found = find_mlflow_store(path)
    if found is None:
        raise InputError(path, "no MLflow store (mlflow.db or mlruns/<experiment>/<run>/) found")
    kind, where = found
    if kind == "sqlite":
        return _load_sqlite(where, run_id, progress)
    return _load_file_store(where, run_id, progress)


def list_mlflow_runs(path: Path) -> list[dict[str, Any]]:
    """The runs of the MLflow store ``path`` designates, without reading their metrics:
    ``[{"name", "id", "active"}]`` (``active`` is False for a deleted run); ``load_mlflow(path,
    run=id)`` reads one. An MLflow server's URL lists its runs (:mod:`._mlflow_server`)."""
    if is_url(path):
        from rlvitals.importers._mlflow_server import list_server_runs

        return list_server_runs(path)
    path = Path(path)
    found = ("sqlite", path) if is_regular(path) else find_mlflow_store(path)
    if found is None:
        raise InputError(path, "no MLflow store (mlflow.db or mlruns/<experiment>/<run>/) found")
    kind, where = found
    if kind == "sqlite":
        try:
            with _sqlite.connect(where) as con:
                if not _sqlite.tables(con) >= _REQUIRED_TABLES:
                    raise InputError(where, "SQLite database is not an MLflow store")
                runs = _sqlite_runs(con, where)
        except _sqlite.ERRORS as e:
            raise InputError(where, f"SQLite error: {_sqlite.problem(e)}") from None
    else:
        runs = _file_runs(where)
    return [r.entry() for r in runs]


def _sniff(path: Path, head: bytes) -> float:
    if head:
        if not head.startswith(_sqlite.MAGIC):
            return 0.0
        return 0.95 if is_mlflow_db(path) else 0.0
    found = find_mlflow_store(path, _SNIFF_MAX_WALK)
    if found is None:
        return 0.0
    return 0.8 if found[0] == "sqlite" else 0.75


def _is_store_root(d: Path) -> bool:
    """A folder's claim is its own when it is the root of an ``mlruns/`` file store."""
    found = find_mlflow_store(d)
    return found is not None and found[0] == "file" and found[1] == d


register(
    Importer(
        name="mlflow",
        description="MLflow store (mlflow.db SQLite, or the mlruns/ file store; most recent run)",
        sniff=_sniff,
        load=load_mlflow,
        multi_run=True,
        list_runs=list_mlflow_runs,
        precheck=Precheck(magic=(_sqlite.MAGIC,), dirs=True),
        files=(".db", ".sqlite", ".sqlite3"),
        folder_claim=_is_store_root,
    )
)

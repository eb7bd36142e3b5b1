"""trackio local project databases (``~/.cache/huggingface/trackio/<project>.db``), read without
the ``trackio`` package.

The writer (trackio 0.43.0, ``trackio/sqlite_storage.py``): one SQLite file per project, WAL
journal; table ``metrics(id, run_id, timestamp, run_name, step, metrics, log_id, space_id)``
with ``metrics`` an orjson blob (nested dicts kept, non-finite floats as the strings ``"NaN"``,
``"Infinity"``, media/tables as ``{"_type": "trackio.table", ...}``); ``configs(run_id,
run_name, config)``. Opened read-only (``mode=ro``; the user's database is never written).

- **Step**: for TRL (``report_to="trackio"``, transformers' ``TrackioCallback``) the JSON key
  ``train/global_step``: the ``step`` column is trackio's own counter there (TRL logs without
  ``step=``), and TRL's profiling timers log with their own step. Rows without
  ``train/global_step`` in such a run join the next row that has it. For runs that log their
  step (veRL's trackio backend: ``trackio.log(data, step=global_steps)``) the ``step`` column.
- **Runs**: a database holds many (``run_id``, ``run_name``); a directory may hold several
  project databases. All are listed in a ``runs`` event; ``run=`` (``--run``) names
  one by run name, run id or ``project/run``; without it the most recent is read, with a
  warning naming the others.
- The run's config (minus trackio's ``_Username``, ``_Created``, ``_Group``) reveals the trainer
  (:func:`rlvitals.trainers.facts_from_config`).
"""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, note_runs, register, warn_skipped
from rlvitals.importers._source import is_regular
from rlvitals.importers._sqlite import MAGIC, columns, connect, is_sqlite, tables
from rlvitals.recording.run import Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts, facts_from_config

__all__ = ["list_trackio_runs", "load_trackio"]

CONF = 0.96
_GLOBAL_STEP = "train/global_step"
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_CONFIG_DROP = ("_Username", "_Created", "_Group")
_MAX_LISTED = 8
_MAX_DBS = 200
_PROGRESS_ROWS = 50_000
_MAX_DEPTH = 8


def is_trackio_db(db: Path) -> bool:
    """True for an SQLite file with trackio's ``metrics`` (run_name, step, metrics) table."""
    try:
        if not is_sqlite(db):
            return False
        with connect(db, copy=False) as con:  # the schema is in the main file
            cols = columns(con, "metrics")
            names = tables(con)
    except (OSError, sqlite3.Error):
        return False
    return {"run_id", "run_name", "step", "metrics"} <= cols and "runs" not in names


def _dbs(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    try:
        found = sorted(p for p in path.iterdir() if p.suffix == ".db" and is_regular(p))
    except OSError:
        return []
    return [p for p in found[:_MAX_DBS] if is_trackio_db(p)]


def _sniff(path: Path, head: bytes) -> float:
    if head:
        return CONF if head.startswith(MAGIC) and is_trackio_db(path) else 0.0
    return 0.8 if path.is_dir() and _dbs(path) else 0.0


def _runs(dbs: list[Path]) -> list[dict[str, Any]]:
    out = []
    for db in dbs:
        with connect(db) as con:
            rows = con.execute(
                "SELECT run_id, run_name, MIN(id), MIN(timestamp), COUNT(*) FROM metrics "
                "GROUP BY run_id ORDER BY MIN(id)"
            ).fetchall()
        for rid, name, first, started, count in rows:
            out.append(
                {
                    "id": str(rid),
                    "name": str(name),
                    "project": db.stem,
                    "started": str(started),
                    "rows": int(count),
                    "db": db,
                    "order": (str(started), int(first)),
                }
            )
    multi_db = len({r["db"] for r in out}) > 1
    for r in out:  # how messages and listings name it
        r["label"] = f"{r['project']}/{r['name']}" if multi_db else r["name"]
    return out


def _choose(
    path: Path, runs: list[dict[str, Any]], run: str | None, builder: RunBuilder
) -> dict[str, Any]:
    if not runs:
        raise InputError(path, "trackio database holds no runs")
    listing = [{"name": r["label"], "id": r["id"], "rows": r["rows"], "read": False} for r in runs]
    note_runs(builder, listing)
    if run is None:
        chosen = max(runs, key=lambda r: r["order"])
        if len(runs) > 1:
            others = [r["label"] for r in runs if r is not chosen]
            more = f" and {len(others) - _MAX_LISTED} more" if len(others) > _MAX_LISTED else ""
            builder.warn(
                f"{path}: {len(runs)} trackio runs; read the most recent, {chosen['label']} "
                f"(others: {', '.join(others[:_MAX_LISTED])}{more}; choose one with --run NAME)"
            )
    else:
        hits = [r for r in runs if run in (r["id"], r["name"], f"{r['project']}/{r['name']}")]
        if not hits:
            names = ", ".join(r["label"] for r in runs[:_MAX_LISTED])
            raise InputError(path, f"no run {run!r} here (runs: {names})")
        if len(hits) > 1:
            ids = ", ".join(r["id"] for r in hits)
            raise InputError(path, f"{len(hits)} runs are named {run!r}; choose one by id: {ids}")
        chosen = hits[0]
    listing[runs.index(chosen)]["read"] = True
    return chosen


def _flat(obj: dict[str, Any], prefix: str, out: dict[str, Any], depth: int) -> None:
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            if "_type" not in v and depth < _MAX_DEPTH:  # media and tables are not metrics
                _flat(v, key + "/", out, depth + 1)
        elif isinstance(v, str):
            if v in _NONFINITE:
                out[key] = _NONFINITE[v]
        elif (isinstance(v, (int, float)) and not isinstance(v, bool)) or v is None:
            out[key] = v


def list_trackio_runs(path: Path) -> list[dict[str, Any]]:
    """The runs of a trackio database (or a directory of them), without reading their rows:
    ``[{"name", "id", "project", "rows"}]`` (``load_trackio(path, run=id)`` reads one)."""
    try:
        runs = _runs(_dbs(Path(path)))
    except sqlite3.Error as e:
        raise InputError(path, f"SQLite error: {e}") from None
    return [
        {"name": r["label"], "id": r["id"], "project": r["project"], "rows": r["rows"]}
        for r in runs
    ]


def load_trackio(path: Path, progress: Progress | None = None, *, run: str | None = None) -> Run:
    """Read one run of a trackio database (or a directory of them) into a ``Run``."""
    path = Path(path)
    dbs = _dbs(path)
    if not dbs:
        raise InputError(path, "no trackio database (<project>.db with a metrics table) here")
    builder = RunBuilder(Manifest(source=str(path)))
    try:
        chosen = _choose(path, _runs(dbs), run, builder)
        _read(chosen, builder, progress)
    except sqlite3.Error as e:
        raise InputError(path, f"SQLite error: {e}") from None
    builder.manifest.source = str(chosen["db"])
    builder.manifest.config["run"] = {
        "id": chosen["id"],
        "name": chosen["name"],
        "project": chosen["project"],
    }
    warn_skipped(builder, path)
    return builder.build()


def _read(chosen: dict[str, Any], builder: RunBuilder, progress: Progress | None) -> None:
    db: Path = chosen["db"]
    with connect(db) as con:
        if "configs" in tables(con):
            row = con.execute(
                "SELECT config FROM configs WHERE run_id = ?", (chosen["id"],)
            ).fetchone()
            cfg = _json(row[0]) if row else None
            if isinstance(cfg, dict):
                cfg = {k: v for k, v in cfg.items() if k not in _CONFIG_DROP}
                builder.manifest.config = {**cfg, **builder.manifest.config}
                apply_facts(builder.manifest, facts_from_config(cfg))
        total = chosen["rows"]
        gstep_mode = (
            con.execute(
                "SELECT 1 FROM metrics WHERE run_id = ? AND instr(CAST(metrics AS TEXT), ?) > 0 LIMIT 1",
                (chosen["id"], f'"{_GLOBAL_STEP}"'),
            ).fetchone()
            is not None
        )
        held: list[dict[str, Any]] = []
        last_g = None
        n = 0
        for i, (step, blob) in enumerate(
            con.execute(
                "SELECT step, metrics FROM metrics WHERE run_id = ? ORDER BY id", (chosen["id"],)
            ),
            1,
        ):
            if progress is not None and i % _PROGRESS_ROWS == 0:
                progress(i, total)
            obj = _json(blob)
            if not isinstance(obj, dict):
                builder.skipped_values += 1
                continue
            row: dict[str, Any] = {}
            _flat(obj, "", row, 0)
            if gstep_mode:
                g = row.pop(_GLOBAL_STEP, None)
                if isinstance(g, (int, float)) and math.isfinite(g) and g == int(g):
                    last_g = int(g)
                    for h in held:
                        builder.add_row(last_g, h)
                    held.clear()
                    builder.add_row(last_g, row)
                    n += 1
                elif row:
                    held.append(row)
            elif isinstance(step, int) and not isinstance(step, bool) and row:
                builder.add_row(step, row)
                n += 1
        for h in held:
            if last_g is not None:
                builder.add_row(last_g, h)
        if progress is not None:
            progress(total, total)
    builder.manifest.step_key = _GLOBAL_STEP if gstep_mode else "the step column"
    if n == 0:
        raise InputError(db, f"trackio run {chosen['name']} has no numeric metrics")


def _json(blob: Any) -> Any:
    if isinstance(blob, (bytes, bytearray)):
        try:
            blob = blob.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(blob, str):
        return None
    try:
        return json.loads(blob)
    except (ValueError, RecursionError):
        return None


def _claims_no_folder(d: Path) -> bool:
    """A trackio folder is a place to look for ``.db`` files, never a run itself."""
    return False


register(
    Importer(
        name="trackio",
        description="trackio project database (<project>.db; TRL report_to='trackio', veRL)",
        sniff=_sniff,
        load=load_trackio,
        multi_run=True,
        list_runs=list_trackio_runs,
        precheck=Precheck(magic=(MAGIC,), dirs=True),
        files=(".db", ".sqlite", ".sqlite3"),
        folder_claim=_claims_no_folder,
    )
)

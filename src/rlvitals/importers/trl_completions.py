"""TRL completions tables (``log_completions=True``) on their own: per-group rewards and advantages.

A ``completions_<step>.parquet`` file, or a folder of them (``<output_dir>/completions``). How a
table becomes groups is said in :mod:`rlvitals.importers._trl_files`; a ``trainer_state.json``
next to the folder (and a sibling config) supply the hints: eval steps, reward functions and
weights, G.

``pyarrow`` is an optional dependency (``pip install 'rlvitals[parquet]'``), imported on use.
"""

from __future__ import annotations

import os
from pathlib import Path

from rlvitals.errors import InputError, MissingExtraError
from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._trl_files import (
    apply_args_file,
    state_hints_near,
)
from rlvitals.importers._trl_tables import (
    PARQUET_MAGIC,
    attach_groups,
    pyarrow_parquet,
    table_files,
)
from rlvitals.recording.run import Manifest, Run, RunBuilder

__all__ = ["load_trl_completions"]


def _sniff(path: Path, head: bytes) -> float:
    if path.is_dir():
        if table_files(path):
            return 0.85
        return 0.8 if table_files(path / "completions") else 0.0
    if not head.startswith(PARQUET_MAGIC):
        return 0.0
    try:
        pq = pyarrow_parquet()
    except MissingExtraError:
        return 0.5  # a parquet file; loading it will say what to install
    try:
        names = set(pq.read_schema(path).names)
    except Exception:  # unreadable footer: still ours to report on
        return 0.3
    if {"step", "prompt", "advantage"} <= names:
        return 0.95
    return 0.6 if {"step", "prompt"} <= names else 0.2


def load_trl_completions(path: Path, progress: Progress | None = None) -> Run:
    """Read one completions parquet, or a folder of them, into a ``Run`` with a GroupTable."""
    pyarrow_parquet()

    if path.is_dir():
        folder = path if table_files(path) else path / "completions"
        files = table_files(folder)
        if not files:
            raise InputError(path, "no completions_<step>.parquet files here")
    elif path.stat().st_size == 0:
        raise InputError(path, "file is empty")
    else:
        folder, files = path.parent, [path]
    manifest = Manifest(source=str(path), trainer="trl")
    near = state_hints_near(folder)
    hints = None
    if near is not None:
        state_path, hints = near
        manifest.config["trainer_state"] = str(state_path)
        apply_args_file(manifest, state_path)
    builder = RunBuilder(manifest)
    if not attach_groups(files, builder, hints, progress):
        why = " (every table holds eval completions)" if hints is not None else ""
        raise InputError(path, f"no training completions in these tables{why}")
    return builder.build()


def _parquet_here(d: Path) -> bool:
    """A folder's claim is its own when a parquet table sits in it, not only deeper."""
    try:
        return any(e.name.endswith(".parquet") for e in os.scandir(d))
    except OSError:
        return False


register(
    Importer(
        name="trl_completions",
        description="TRL completions parquet (log_completions=True): per-group rewards",
        sniff=_sniff,
        load=load_trl_completions,
        precheck=Precheck(magic=(b"PAR1",), dirs=True),
        files=(".parquet",),
        folder_claim=_parquet_here,
    )
)

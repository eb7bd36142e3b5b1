"""After the rows are in: one row per run, paths relative to the scan's root.

**One run, one row.** A run is often found twice in one folder: a recording and the
``trainer_state.json`` of the same run, a W&B folder and its CSV export. Rows in one folder,
read from different files in different formats, with the same
:attr:`~rlvitals.scan.ScanRow.identity` (the same steps and train rewards) are one run; the row
kept is the one with the best evidence (a measured ACR over an estimate, the better collapse
evidence tier, more steps, then walk order), and it lists where else the run was found
(``merged``). Runs without an identity (fewer than a handful of rewards, unreadable) are never
merged, and neither are copies in one format or runs in different folders (a sweep may hold
the same data twice on purpose: both are listed).

**The root.** Paths are shown relative to the deepest folder holding everything scanned
(:func:`scan_root`); the page says which folder that is.

>>> scan_root(["/data/sweep/a", "/data/sweep/b/run.jsonl"])
'/data/sweep'
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

from rlvitals.scan._row import ScanRow
from rlvitals.vitals import EVIDENCE_TIERS

__all__ = ["EVIDENCE_RANK", "merge_duplicates", "scan_root", "set_relative"]

EVIDENCE_RANK = EVIDENCE_TIERS
"""Collapse evidence tiers, best first (DESIGN.md 3.6); a row with a better one is kept."""


def scan_root(paths: Sequence[str | os.PathLike]) -> str:
    """The deepest folder that holds every path (a folder is its own; a file or a glob its
    folder), absolute."""
    dirs = []
    for p in paths:
        p = os.fspath(p)
        if "://" in p:
            continue
        if glob.has_magic(p):
            head = p
            while glob.has_magic(head):
                head = os.path.dirname(head)
            p = head or "."
        ap = os.path.abspath(p)
        dirs.append(ap if os.path.isdir(ap) else os.path.dirname(ap))
    if not dirs:
        return os.path.abspath(".")
    try:
        return os.path.commonpath(dirs)
    except ValueError:  # different drives
        return dirs[0]


def set_relative(rows: Sequence[ScanRow], root: str) -> None:
    """Set each row's ``rel``: its path relative to ``root`` (``.`` for the root itself)."""
    for r in rows:
        if "://" in r.path:  # a tracking server's run, not a file
            r.rel = r.path
            continue
        ap = os.path.abspath(r.path)
        try:
            rel = os.path.relpath(ap, root)
        except ValueError:
            rel = ap
        r.rel = ap if rel.startswith("..") else rel


def _rank(r: ScanRow) -> tuple:
    tier = EVIDENCE_RANK.index(r.evidence) if r.evidence in EVIDENCE_RANK else len(EVIDENCE_RANK)
    return (r.acr_100_from != "measured", tier, -(r.steps or 0))


def merge_duplicates(rows: Sequence[ScanRow]) -> list[ScanRow]:
    """``rows`` with each run found more than once kept once (module docstring), in walk
    order; the kept row's ``merged`` lists the others as ``"label (format)"``."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        if r.identity and not r.error and "://" not in r.path:
            folder = os.path.dirname(os.path.abspath(r.path))
            groups.setdefault((r.identity, folder), []).append(i)
    drop: set[int] = set()
    for idx in groups.values():
        paths = {rows[i].path for i in idx}
        formats = {rows[i].format for i in idx}
        if len(paths) < len(idx) or len(formats) < len(idx):
            continue  # runs of one store, or copies in one format: not one run read twice
        keep = min(idx, key=lambda i: (_rank(rows[i]), i))
        rows[keep].merged = [f"{rows[i].label} ({rows[i].format})" for i in idx if i != keep]
        drop.update(i for i in idx if i != keep)
    return [r for i, r in enumerate(rows) if i not in drop]

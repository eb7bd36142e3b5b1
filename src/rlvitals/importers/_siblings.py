"""What importers read around the path they are given: the numbered entries of a folder
(``step_12/``, ``12.jsonl``, ``checkpoint-12/``) and a small config file beside a run.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rlvitals.importers._source import is_regular

__all__ = ["CONFIG_SUFFIXES", "find_config", "numbered_entries", "read_config"]

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
"""The files :func:`find_config` reads (by name, case-insensitive)."""


def numbered_entries(
    folder: Path, pattern: re.Pattern[str], keep: Callable[[Path], bool]
) -> list[tuple[int, Path]]:
    """``(N, path)`` of the entries of ``folder`` whose whole name ``pattern`` matches (its group
    1 the digits of N: ``step_12``, ``12.jsonl``, ``checkpoint-12``) and that ``keep`` accepts,
    in order of N. OSError when ``folder`` cannot be listed."""
    out = []
    with os.scandir(folder) as it:
        for e in it:
            m = pattern.fullmatch(e.name)
            if m is not None and keep(Path(e.path)):
                out.append((int(m.group(1)), Path(e.path)))
    return sorted(out)


def find_config(
    folders: list[Path],
    limit: int,
    needle: str,
    accept: Callable[[dict[str, Any]], bool],
    skip: str = "",
) -> tuple[Path, dict[str, Any]] | None:
    """``(file, mapping)`` of the first JSON/YAML file of ``folders`` (in turn; files in name
    order, regular ones only, not one named ``skip``) whose :func:`read_config` mapping
    ``accept`` takes, or None. A folder that cannot be listed is passed over."""
    for d in folders:
        try:
            files = sorted(p for p in d.iterdir() if p.suffix.lower() in CONFIG_SUFFIXES)
        except OSError:
            continue
        for p in files:
            if p.name != skip and is_regular(p):
                cfg = read_config(p, limit, needle)
                if cfg is not None and accept(cfg):
                    return p, cfg
    return None


def read_config(path: Path, limit: int, needle: str | None = None) -> dict[str, Any] | None:
    """The mapping a small JSON or YAML file holds (YAML unless its name ends in ``.json``;
    ``pyyaml`` is then needed), or None: a file over ``limit`` bytes, unreadable, not UTF-8,
    without ``needle`` in its text (a cheap test before parsing every sibling), not parsed, or
    not a mapping. Never a pickle, never evaluated."""
    try:
        if path.stat().st_size > limit:
            return None
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError):
        return None
    if needle is not None and needle not in text:
        return None
    try:
        if path.suffix.lower() == ".json":
            obj = json.loads(text)
        else:
            import yaml

            obj = yaml.safe_load(text)
    except Exception:  # any parse error, or no pyyaml: not a config we can use
        return None
    return obj if isinstance(obj, dict) else None

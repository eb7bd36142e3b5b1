"""Doctor configuration from ``rlvitals.toml`` or ``[tool.rlvitals]`` in ``pyproject.toml``.

Keys (all optional)::

    # rlvitals.toml (or the same under [tool.rlvitals] in pyproject.toml)
    select = ["ALL"]              # detector IDs or families to run (default: all)
    ignore = ["ACR_VOLATILE"]     # detector IDs or families to skip
    fail-on = "warn"              # info | warn | critical | never  (fail_on also accepted)
    tau = 1e-6                    # collapse tolerance on a group's reward std
    window = 25                   # window W for windowed ACR and volatility
    group-size = 8                # completions per prompt, when the log does not say it
    reward-range = [0.0, 1.0]     # the reward's min and max, when the log does not say it
    allow-unjudged = false        # true: a run the collapse family could not judge passes

    [metrics]                     # keys your trainer logs under custom names -> rlvitals metric
    "my/pass_rate" = "reward_mean"      # (names and aliases: the metrics page; eval twins too)

    [detectors.ADV_COLLAPSE]      # [tool.rlvitals.detectors.ADV_COLLAPSE] in pyproject.toml
    collapse_below = 0.05         # any knob of the detector (rlvitals explain ADV_COLLAPSE)
    enabled = false               # switch one detector off

Unknown keys, unknown detector IDs and unknown knobs are errors that list the valid ones; a value
of the wrong type is an error that quotes it. Errors are :class:`~rlvitals.errors.InputError`
naming the file and the table.

Without an explicit path the search starts in ``start_dir`` and walks up: in each directory the
first of ``rlvitals.toml``, ``.rlvitals.toml``, or a ``pyproject.toml`` holding
``[tool.rlvitals]`` wins; the walk stops at the directory holding ``.git`` (the project root).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError

__all__ = ["CONFIG_NAMES", "TOP_KEYS", "config_from_dict", "find_config", "load_config"]

CONFIG_NAMES = ("rlvitals.toml", ".rlvitals.toml")
"""Dedicated config files, in order of preference within one directory."""
TOP_KEYS = (
    "select",
    "ignore",
    "fail-on",
    "fail_on",
    "tau",
    "window",
    "group-size",
    "group_size",
    "reward-range",
    "reward_range",
    "allow-unjudged",
    "allow_unjudged",
    "metrics",
    "detectors",
)
"""Valid keys at the top of the rlvitals table."""
_MAX_CONFIG_BYTES = 1 << 20


def find_config(start_dir: str | os.PathLike = ".") -> Path | None:
    """The config file that applies to ``start_dir``, or None."""
    d = Path(start_dir).resolve()
    for folder in (d, *d.parents):
        for name in CONFIG_NAMES:
            p = folder / name
            if p.is_file():
                return p
        py = folder / "pyproject.toml"
        if py.is_file() and _has_tool_table(py):
            return py
        if (folder / ".git").exists():
            return None
    return None


def _has_tool_table(path: Path) -> bool:
    try:
        raw = _read_bytes(path)
    except InputError:
        return False
    if b"rlvitals" not in raw:  # no [tool.rlvitals] without the word: no TOML parser needed
        return False
    try:
        data = _parse_toml(path, raw)
    except InputError:
        return False
    return isinstance(data.get("tool"), dict) and "rlvitals" in data["tool"]


def _read_bytes(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > _MAX_CONFIG_BYTES:
            raise InputError(path, f"config file larger than {_MAX_CONFIG_BYTES} bytes")
        return path.read_bytes()
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    return _parse_toml(path, _read_bytes(path))


def _parse_toml(path: Path, raw: bytes) -> dict[str, Any]:
    # Imported here, not at the top: most runs have no config file, and every start-up paid it.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(path, "not UTF-8 text", f"byte {e.start}") from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(path, f"invalid TOML: {e}") from None


def load_config(path: str | os.PathLike | None = None, start_dir: str | os.PathLike = "."):
    """Read the doctor configuration.

    Args:
        path: a config file (``rlvitals.toml``-style, or a ``pyproject.toml`` whose
            ``[tool.rlvitals]`` table is used). None: search from ``start_dir`` upward.
        start_dir: where the search starts.

    Returns:
        A :class:`~rlvitals.doctor.DoctorConfig` (defaults when no file applies).
    """
    from rlvitals.doctor import DoctorConfig

    if path is None:
        found = find_config(start_dir)
        if found is None:
            return DoctorConfig()
        p = found
    else:
        p = Path(path)
        if not p.is_file():
            raise InputError(p, "no such config file")
    data = _read_toml(p)
    if p.name == "pyproject.toml":
        tool = data.get("tool", {})
        table = tool.get("rlvitals", {}) if isinstance(tool, dict) else {}
        where = "[tool.rlvitals]"
    else:
        table = data
        if set(data) == {"tool"} and isinstance(data["tool"], dict) and "rlvitals" in data["tool"]:
            table = data["tool"]["rlvitals"]
            where = "[tool.rlvitals]"
        else:
            where = "top level"
    if not isinstance(table, dict):
        raise InputError(p, "the rlvitals table must be a table", where)
    return config_from_dict(table, source=str(p), where=where)


def config_from_dict(table: dict[str, Any], source: str | None = None, where: str = "config"):
    """Validate a parsed rlvitals table and build the :class:`~rlvitals.doctor.DoctorConfig`.

    >>> c = config_from_dict({"ignore": ["ACR_VOLATILE"], "detectors": {"ADV_COLLAPSE":
    ...     {"collapse_below": 0.05}}})
    >>> c.ignore, c.knobs
    (['ACR_VOLATILE'], {'ADV_COLLAPSE': {'collapse_below': 0.05}})
    """
    from rlvitals.detectors import DETECTORS, load_all
    from rlvitals.doctor import FAIL_ON_CHOICES, DoctorConfig, select_detectors

    load_all()
    unknown = sorted(set(table) - set(TOP_KEYS))
    if unknown:
        raise InputError(
            source, f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(TOP_KEYS)}", where
        )
    cfg = DoctorConfig(source=source)
    for key in ("select", "ignore"):
        if key in table:
            v = table[key]
            if isinstance(v, str):
                v = [s.strip() for s in v.split(",") if s.strip()]
            if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
                raise InputError(
                    source, f"'{key}' must be a list of detector IDs, got {v!r}", where
                )
            setattr(cfg, key, list(v))
    fail_on = table.get("fail-on", table.get("fail_on"))
    if fail_on is not None:
        if fail_on not in FAIL_ON_CHOICES:
            raise InputError(
                source, f"fail-on {fail_on!r} is not one of {', '.join(FAIL_ON_CHOICES)}", where
            )
        cfg.fail_on = fail_on
    if "tau" in table:
        tau = table["tau"]
        if not _is_number(tau) or not math.isfinite(tau) or tau < 0:
            raise InputError(source, f"tau must be a finite number >= 0, got {tau!r}", where)
        cfg.tau = float(tau)
    if "window" in table:
        w = table["window"]
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise InputError(source, f"window must be an integer >= 1, got {w!r}", where)
        cfg.window = w
    g = table.get("group-size", table.get("group_size"))
    if g is not None:
        if isinstance(g, bool) or not isinstance(g, int) or g < 1:
            raise InputError(source, f"group-size must be an integer >= 1, got {g!r}", where)
        cfg.group_size, cfg.group_size_source = g, source
    rr = table.get("reward-range", table.get("reward_range"))
    if rr is not None:
        ok = isinstance(rr, list) and len(rr) == 2 and all(_is_number(x) for x in rr)
        if not ok or not (math.isfinite(rr[0]) and math.isfinite(rr[1]) and rr[0] < rr[1]):
            raise InputError(
                source, f"reward-range must be [MIN, MAX] with MIN < MAX, got {rr!r}", where
            )
        cfg.reward_range = (float(rr[0]), float(rr[1]))
    au = table.get("allow-unjudged", table.get("allow_unjudged"))
    if au is not None:
        if not isinstance(au, bool):
            raise InputError(source, f"allow-unjudged must be true or false, got {au!r}", where)
        cfg.allow_unjudged = au
    if "metrics" in table:
        from rlvitals.recording.metrics import metric_names

        m = table["metrics"]
        t = _subtable(where, "metrics")
        if not isinstance(m, dict):
            raise InputError(source, '\'metrics\' must be a table of "run key" = "metric"', where)
        try:
            cfg.metrics = metric_names(m)
        except ValueError as e:
            raise InputError(source, str(e), t) from None
    dets = table.get("detectors", {})
    if not isinstance(dets, dict):
        raise InputError(source, "'detectors' must be a table of detector tables", where)
    valid_ids = DETECTORS.names()
    for det_id, knobs in dets.items():
        t = _subtable(where, f"detectors.{det_id}")
        if det_id not in DETECTORS:
            raise InputError(
                source, f"unknown detector {det_id!r}; valid: {', '.join(valid_ids)}", t
            )
        if not isinstance(knobs, dict):
            raise InputError(source, f"[detectors.{det_id}] must be a table", t)
        knobs = dict(knobs)
        enabled = knobs.pop("enabled", True)
        if not isinstance(enabled, bool):
            raise InputError(source, f"'enabled' must be true or false, got {enabled!r}", t)
        if not enabled:
            cfg.disabled.append(det_id)
        cls = DETECTORS.get(det_id)
        cfg.knobs[det_id] = _check_knobs(cls, knobs, source, t)
    cfg.knobs = {k: v for k, v in cfg.knobs.items() if v}
    try:
        select_detectors(cfg)
    except ValueError as e:
        raise InputError(source, str(e), where) from None
    return cfg


def _subtable(where: str, name: str) -> str:
    """How errors name table ``name`` of the rlvitals table found at ``where``."""
    return f"{where[:-1]}.{name}]" if where.startswith("[") else f"[{name}]"


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_knobs(cls, knobs: dict[str, Any], source: str | None, where: str) -> dict[str, Any]:
    """Type-check knob overrides against the detector's Knobs defaults."""
    fields = {f.name: f for f in dataclasses.fields(cls.Knobs)}
    unknown = sorted(set(knobs) - set(fields))
    if unknown:
        valid = ", ".join(["enabled", *fields]) if fields else "enabled"
        raise InputError(source, f"unknown knob(s) {', '.join(unknown)}; valid: {valid}", where)
    defaults = cls.Knobs()
    out: dict[str, Any] = {}
    for name, value in knobs.items():
        default = getattr(defaults, name)
        if isinstance(default, bool):
            ok = isinstance(value, bool)
            want = "true or false"
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
            want = "an integer"
        elif isinstance(default, float):
            ok = _is_number(value) and math.isfinite(value)
            want = "a finite number"
            value = float(value) if ok else value
        else:
            ok = isinstance(value, type(default))
            want = type(default).__name__
        if not ok:
            raise InputError(source, f"knob {name} must be {want}, got {value!r}", where)
        out[name] = value
    try:
        cls.with_knobs(defaults, out)
    except (ValueError, TypeError) as e:
        raise InputError(source, str(e), where) from None
    return out

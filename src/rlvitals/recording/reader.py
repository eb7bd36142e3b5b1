"""Read a recording directory (written by :class:`rlvitals.recording.Recorder`) into a ``Run``.

All ranks are merged by step: scalar rows of one step are merged key by key (on a conflict the
higher rank wins), per-group records are concatenated (each rank's groups stay distinct groups),
events are ordered by wall time. ``docs/recording.md`` is the format.

Damage policy:

- a torn or corrupt **last** record of a stream (a writer killed mid-write, a file being
  written right now) is ignored with a message in ``Run.warnings``, never an error;
- a corrupt record **followed by valid ones** cannot come from a kill; with ``strict=True``
  (default) it is an :class:`InputError` naming the file and the line or byte offset, with
  ``strict=False`` it is skipped and counted in ``Run.warnings``;
- a missing or unreadable manifest, a newer format version, or a stream that is not a regular
  file is an :class:`InputError`.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from rlvitals.errors import InputError
from rlvitals.recording import layout as fmt
from rlvitals.recording import memory as _memory
from rlvitals.recording._resync import Resync
from rlvitals.recording.run import Event, GroupTable, Manifest, Run, RunBuilder

__all__ = ["read_recording"]

MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer JSONL record is corrupt rather than a memory blow-up."""
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


Progress = Callable[[int, int], None]
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def read_recording(
    path: str | os.PathLike, *, strict: bool = True, progress: Progress | None = None
) -> Run:
    """Read a recording directory (or its ``manifest.json``) into a :class:`Run`.

    Args:
        path: the directory, or the ``manifest.json`` inside it.
        strict: raise on a corrupt record in the middle of a stream (default); False skips it
            with a warning.
        progress: ``progress(done_bytes, total_bytes)``, called after each stream.

    Returns:
        A ``Run`` with scalar series, ``groups`` (None when no groups were recorded), events,
        the manifest (``format="recording"``) and warnings (torn tails, dropped records).

    Raises:
        InputError: not a recording, no manifest, or a corrupt record (see the module doc).
    """
    p = Path(path)
    if p.name == fmt.MANIFEST_NAME and p.is_file():
        p = p.parent
    if not p.exists():
        raise InputError(p, "no such file or directory")
    if not p.is_dir():
        raise InputError(p, "not a recording directory (expected a directory with manifest.json)")
    try:
        names = sorted(os.listdir(p))
    except OSError as e:
        raise InputError(p, f"cannot list directory: {e.strerror or e}") from None

    streams: dict[str, list[tuple[int, Path]]] = {k: [] for k in fmt.STREAM_EXT}
    warnings: list[str] = []
    for name in names:
        m = fmt.STREAM_RE.match(name)
        if m and m.group(3) == fmt.STREAM_EXT[m.group(1)]:
            streams[m.group(1)].append((int(m.group(2)), p / name))
        elif name.split(".", 1)[0] in fmt.STREAM_EXT:
            warnings.append(f"{p / name}: ignored: not a stream name (<kind>.rank<r>.<ext>)")
    for kind in streams:
        streams[kind].sort()

    manifest, world_size = _read_manifest(p, names, any(streams.values()))
    builder = RunBuilder(manifest)
    builder.warnings.extend(warnings)
    total = sum(_size(f) for lst in streams.values() for _, f in lst)
    done = 0

    def report(f: Path) -> None:
        nonlocal done
        done += _size(f)
        if progress is not None:
            progress(done, total)

    for _rank, f in streams["scalars"]:
        for step, values in _iter_jsonl(f, _parse_scalars, strict, builder.warnings):
            builder.add_row(step, values)
        report(f)

    events: list[tuple[float, int, int, Event]] = []
    for rank, f in streams["events"]:
        for ev_time, ev in _iter_jsonl(f, _parse_event, strict, builder.warnings):
            events.append((ev_time, rank, len(events), ev))
            if ev.kind in ("dropped", "writer_conflict"):
                builder.warn(f"{f}: {ev.message}")
        report(f)
    events.sort(key=lambda t: t[:3])
    builder.events.extend(e for *_, e in events)

    blocks: list[tuple[int, int, int, fmt.GroupBlock]] = []
    for rank, f in streams["groups"]:
        for block in _iter_groups(f, strict, builder.warnings):
            blocks.append((block.step, rank, len(blocks), block))
        report(f)
    if blocks:
        blocks.sort(key=lambda t: t[:3])
        builder.groups = _group_table([b for *_, b in blocks])
        if manifest.group_size is None:
            sizes = np.unique(builder.groups.sizes())
            if sizes.shape[0] == 1:
                manifest.group_size = int(sizes[0])

    ranks = {r for lst in streams.values() for r, _ in lst}
    if ranks and max(ranks) >= world_size:
        builder.warn(
            f"{p}: streams of rank {max(ranks)} but the manifest says world_size {world_size}"
        )
    run = builder.build()
    run.manifest.source = str(p)
    run.manifest.format = "recording"
    return run


# ------------------------------------------------------------------------------------------
# Manifest.


def _read_manifest(p: Path, names: list[str], has_streams: bool) -> tuple[Manifest, int]:
    mp = p / fmt.MANIFEST_NAME
    if fmt.MANIFEST_NAME not in names:
        if has_streams:
            raise InputError(
                p, f"no {fmt.MANIFEST_NAME} next to the streams: not a complete rlvitals recording"
            )
        if not names:
            raise InputError(p, "empty directory: no recording here")
        raise InputError(p, f"no {fmt.MANIFEST_NAME}: not an rlvitals recording")
    raw = _read_bytes(mp, MAX_MANIFEST_BYTES)
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InputError(mp, f"invalid JSON: {e.msg}", f"line {e.lineno}") from None
    except (UnicodeDecodeError, RecursionError) as e:
        raise InputError(mp, f"invalid JSON: {type(e).__name__}") from None
    if not isinstance(doc, dict) or doc.get("format") != fmt.FORMAT_NAME:
        raise InputError(
            mp, f'not an rlvitals recording manifest (no "format": "{fmt.FORMAT_NAME}")'
        )
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise InputError(mp, f"'version' must be an integer, got {version!r:.40}")
    if version > fmt.FORMAT_VERSION:
        raise InputError(
            mp,
            f"recording format version {version} is newer than this rlvitals reads "
            f"({fmt.FORMAT_VERSION}); upgrade rlvitals",
        )
    world_size = doc.get("world_size", 1)
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise InputError(mp, f"'world_size' must be a positive integer, got {world_size!r:.40}")
    fields = doc.get("manifest", {})
    if not isinstance(fields, dict):
        raise InputError(mp, "'manifest' must be an object")
    _check_fields(mp, fields)
    return Manifest.from_dict(fields), world_size


def _check_fields(mp: Path, d: dict[str, Any]) -> None:
    for k, v in d.items():
        try:
            Manifest.check_field(k, v)
        except TypeError as e:
            raise InputError(mp, f"{e} (or null)") from None
    if "config" in d and not isinstance(d["config"], dict):
        raise InputError(mp, f"manifest field 'config' must be an object, got {d['config']!r:.40}")


# ------------------------------------------------------------------------------------------
# Files.


def _size(f: Path) -> int:
    try:
        return f.stat().st_size
    except OSError:
        return 0


def _open(f: Path) -> BinaryIO:
    """``f`` opened for reading if it is a regular file: never through a symbolic link (a
    recording never holds one) and never blocking on a FIFO; InputError otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(f, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if os.path.islink(f):
            raise InputError(
                f, "not a regular file but a symbolic link (a recording never holds one)"
            ) from None
        raise InputError(f, f"cannot read: {e.strerror or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(f, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def _read_bytes(f: Path, limit: int | None = None) -> bytes:
    with _open(f) as fh:
        try:
            data = fh.read() if limit is None else fh.read(limit + 1)
        except OSError as e:
            raise InputError(f, f"cannot read: {e.strerror or e}") from None
    if limit is not None and len(data) > limit:
        raise InputError(f, f"larger than {limit} bytes")
    return data


class _Bad(ValueError):
    """A record that is not what the stream promises."""


def _corrupt(f: Path, where: str, why: str, strict: bool, tail: bool, warnings: list[str]) -> None:
    """Handle a bad record: tail → warning; middle → InputError (strict) or warning."""
    if tail:
        warnings.append(
            f"{f}:{where}: {why}: ignored the last record (writer killed, or still writing?)"
        )
    elif strict:
        raise InputError(
            f,
            f"corrupt record ({why}) followed by valid ones; read with strict=False "
            "(rlvitals doctor/inspect/acr --lenient) to skip it",
            where,
        )
    else:
        warnings.append(f"{f}:{where}: corrupt record skipped ({why})")


def _iter_jsonl(
    f: Path, parse: Callable[[Any], Any], strict: bool, warnings: list[str]
) -> Iterator[Any]:
    """Yield ``parse(obj)`` for each line of a JSONL stream, applying the damage policy.

    A line without its newline is a torn tail. A bad line is only known to be in the middle
    once a later valid line turns up, so it is held until then.
    """
    pending: tuple[str, str] | None = None  # (where, why) of a bad line not yet judged
    offset = lineno = 0
    with _open(f) as fh:
        while True:
            try:
                line = fh.readline(MAX_LINE_BYTES + 1)
            except OSError as e:
                raise InputError(f, f"cannot read: {e.strerror or e}", f"byte {offset}") from None
            if not line:
                break
            lineno += 1
            where = f"line {lineno} (byte {offset})"
            offset += len(line)
            if line.endswith(b"\n") and not line.strip():
                continue  # a blank line tells nothing about the bad one held
            if pending:  # a record follows the bad one held: that one was in the middle
                _corrupt(f, *pending, strict, False, warnings)
                pending = None
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:
                    pending = (where, f"record longer than {MAX_LINE_BYTES} bytes")
                    while line and not line.endswith(b"\n"):  # skip the rest, in bounded reads
                        line = fh.readline(MAX_LINE_BYTES)
                        offset += len(line)
                    continue
                warnings.append(
                    f"{f}:{where}: torn last record ignored ({len(line)} bytes; "
                    "writer killed, or still writing?)"
                )
                break
            try:
                if len(line) >= _memory.JSON_CHECK_BYTES:
                    _memory.check_json(f, line, where)  # [{},{},...] would be 25x its size
                rec = parse(json.loads(line))
            except InputError as e:
                pending = (where, e.problem)
                continue
            except (ValueError, UnicodeDecodeError, RecursionError) as e:
                why = e.msg if isinstance(e, json.JSONDecodeError) else str(e) or type(e).__name__
                pending = (where, why)
                continue
            yield rec
    if pending:
        _corrupt(f, *pending, strict, True, warnings)


def _parse_step(obj: dict[str, Any], allow_none: bool = False) -> int | None:
    if "step" not in obj:
        raise _Bad("no 'step'")
    step = obj["step"]
    if step is None and allow_none:
        return None
    if isinstance(step, bool) or not isinstance(step, int):
        raise _Bad(f"'step' must be an integer, got {step!r:.40}")
    if not _I64_MIN <= step <= _I64_MAX:
        raise _Bad("'step' is out of the 64-bit range")
    return step


def _parse_scalars(obj: Any) -> tuple[int, dict[str, Any]]:
    if not isinstance(obj, dict):
        raise _Bad("expected a JSON object")
    values = obj.get("values")
    if not isinstance(values, dict):
        raise _Bad("'values' must be an object")
    return _parse_step(obj), values  # type: ignore[return-value]


def _parse_event(obj: Any) -> tuple[float, Event]:
    if not isinstance(obj, dict):
        raise _Bad("expected a JSON object")
    step = _parse_step(obj, allow_none=True)
    kind, message, data = obj.get("kind"), obj.get("message"), obj.get("data", {})
    if not isinstance(kind, str) or not isinstance(message, str):
        raise _Bad("'kind' and 'message' must be strings")
    if not isinstance(data, dict):
        raise _Bad("'data' must be an object")
    t = obj.get("time", 0.0)
    if isinstance(t, bool) or not isinstance(t, (int, float)):
        raise _Bad("'time' must be a number")
    return float(t), Event(step, kind, message, data)


def _iter_groups(f: Path, strict: bool, warnings: list[str]) -> Iterator[fmt.GroupBlock]:
    """Yield the decoded records of a groups stream, applying the damage policy."""
    buf = _read_bytes(f)
    view = memoryview(buf)
    resync = Resync(buf)  # one index for every resynchronisation: linear in the file
    pos = 0
    while True:
        resume = None
        for item in fmt.scan_frames(buf, pos):
            if isinstance(item, fmt.Frame):
                try:
                    yield fmt.decode_groups(view[item.start : item.end])
                except ValueError as e:
                    tail = item.end == len(buf)
                    _corrupt(f, f"byte {item.offset}", str(e), strict, tail, warnings)
                continue
            if item.offset == len(buf):
                return
            nxt = resync.after(item.offset)
            if nxt is None:
                n = len(buf) - item.offset
                why = "torn last record" if item.torn else "unreadable bytes at the end"
                warnings.append(
                    f"{f}:byte {item.offset}: {why} ignored ({n} bytes; writer "
                    "killed, or still writing?)"
                )
                return
            why = "bad frame header or checksum"
            _corrupt(f, f"byte {item.offset}", why, strict, False, warnings)
            resume = nxt.offset
        if resume is None:
            return
        pos = resume


def _group_table(blocks: list[fmt.GroupBlock]) -> GroupTable:
    """Concatenate per-step records (already in merge order) into one CSR table."""
    sizes = np.concatenate([b.sizes for b in blocks])
    offsets = np.zeros(sizes.shape[0] + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    steps = np.concatenate([np.full(b.sizes.shape[0], b.step, dtype=np.int64) for b in blocks])
    rewards = np.concatenate([b.rewards for b in blocks]).astype(np.float64, copy=False)

    def rows(attr: str) -> np.ndarray | None:
        if all(getattr(b, attr) is None for b in blocks):
            return None
        parts = [
            np.full(b.rewards.shape[0], np.nan) if getattr(b, attr) is None else getattr(b, attr)
            for b in blocks
        ]
        return np.concatenate([np.asarray(x, dtype=np.float64) for x in parts])

    prompt = None
    if any(b.prompts is not None for b in blocks):
        prompt = np.empty(sizes.shape[0], dtype=object)
        at = 0
        for b in blocks:
            k = b.sizes.shape[0]
            if isinstance(b.prompts, np.ndarray):  # 64-bit ids → Python ints
                prompt[at : at + k] = b.prompts.astype(object)
            elif b.prompts is not None:
                prompt[at : at + k] = b.prompts
            at += k
    return GroupTable(
        step=steps,
        offsets=offsets,
        rewards=rewards,
        prompt=prompt,
        lengths=rows("lengths"),
        advantages=rows("advantages"),
    )

"""W&B offline runs (``wandb/offline-run-*/run-<id>.wandb``), read without the ``wandb`` package.

A path is a ``.wandb`` file, a run directory holding one (``offline-run-*`` or ``run-*``), a
``wandb/`` directory, or a directory holding ``wandb/``. When several runs are found the most
recent one (by the timestamp in the directory name) is read and a warning names the others;
``run=`` (``--run ID``) chooses one, and a ``runs`` event lists them all (:func:`runs_of`).

**Framing** (wandb's ``sdk/internal/datastore.py``, after LevelDB's log format): a 7-byte file
header ``":W&B"``, uint16 0xBEE1, version 0; then 32 KiB blocks of records, each a 7-byte header
(``uint32`` CRC-32 — zlib's, *not* CRC-32C — of the type byte followed by the data, unmasked;
``uint16`` length; ``uint8`` type FULL=1, FIRST=2, MIDDLE=3, LAST=4) and its data. A record never
straddles a block: a long one is cut into FIRST, MIDDLE…, LAST fragments; fewer than 7 bytes left
in a block are zero padding. Decisions on damage:

- a bad checksum or an impossible header: the rest of that block is skipped and reading resumes
  at the next block boundary, as LevelDB readers do; fragments orphaned by the skip are dropped;
  one warning gives the count and the first byte offset;
- a last record cut short (a live run) is ignored with a warning;
- a reassembled record over :data:`MAX_RECORD_BYTES` is skipped (counted in a warning);
- a record whose checksum is right but whose protobuf is malformed is an :class:`InputError`
  naming the record number and byte offset.

**Records** (``wandb_internal.proto``): ``Record.history`` (2) holds ``HistoryItem``s — ``key``
(1) or ``nested_key`` (2, repeated; wandb 0.19+ uses it even for flat keys) and ``value_json``
(16) — plus ``HistoryStep`` (2). ``Record.config`` (5) and ``Record.run`` (17) → ``config`` (4)
hold ``ConfigItem``s (update/remove, same key fields).

**Steps**: the trainer's step key (:mod:`rlvitals.importers._steps`: ``train/global_step``,
``trainer/``, veRL's ``training/``, slime's ``rollout/step``, open-instruct's ``training_step``,
bare ``global_step``)
when the row has it — TRL and OpenRLHF log it and let ``_step`` count ``wandb.log`` calls — else
``_step``, else ``HistoryStep.num``. In a run that logs the trainer's step, rows without it
(TRL's profiling timers) join the next row that has it (the step they happened in). Nested dicts logged as ``{"a": {"b": x}}`` are named ``a.b`` as in the W&B
UI (``a/b`` when only that spelling is a known metric). Keys starting with ``_`` (``_runtime``,
``_timestamp``, ``_wandb``) are dropped; non-numeric values (media, tables, strings) are
skipped. The config (minus ``_wandb``) becomes ``manifest.config`` and reveals the trainer.

One module, a little over 500 lines: the block framing, the record schema and the recovery
rules for torn and corrupted blocks explain each other; the protobuf decoder lives in
``_protobuf``.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rlvitals.errors import InputError
from rlvitals.importers import Importer, Precheck, Progress, note_runs, register
from rlvitals.importers._lines import json_float
from rlvitals.importers._protobuf import Field, Message, ProtobufError, decode
from rlvitals.importers._steps import SIDE_AXES, TRAINER_STEP_KEYS, as_step, pick_step
from rlvitals.recording.memory import protobuf_bytes
from rlvitals.recording.metrics import canonical_key
from rlvitals.recording.run import Event, Manifest, Run, RunBuilder
from rlvitals.trainers import apply_facts, facts_from_config

__all__ = [
    "MAX_RECORD_BYTES",
    "find_wandb_runs",
    "iter_wandb_records",
    "list_wandb_runs",
    "load_wandb",
]

MAX_RECORD_BYTES = 16 << 20
"""A reassembled record longer than this is skipped (W&B history rows are a few KiB); decoded,
a record may take at most :func:`rlvitals.recording.memory.protobuf_bytes` of memory."""
BLOCK = 32768
_FILE_HEAD = struct.Struct("<4sHB")
_IDENT, _MAGIC, _VERSION = b":W&B", 0xBEE1, 0
_REC_HEAD = struct.Struct("<IHB")
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (_FULL, _FIRST, _MIDDLE, _LAST)}
_STEP_KEY_SET = frozenset(TRAINER_STEP_KEYS)
MAX_HELD_ROWS = 10_000
"""Rows without a trainer step held back waiting for one; past this the run counts in _step."""
_MAX_CONFIG_JSON = 1 << 20
_MAX_LISTED_RUNS = 5
_RUN_DIR = re.compile(r"^(offline-)?run-(\d{8}_\d{6})-[A-Za-z0-9]+$")
_SNIFF_MAX_ENTRIES = 2_000
_LOAD_MAX_ENTRIES = 1_000_000
_PROGRESS_BLOCKS = 256

# --- the protobuf messages read (field numbers from wandb/proto/wandb_internal.proto) ----------
_ITEM = Message(
    "HistoryItem",
    {
        1: Field("key", "string"),
        2: Field("nested_key", "string", repeated=True),
        3: Field("none", "enum"),
        4: Field("boolean", "bool"),
        5: Field("integer", "sint64"),
        6: Field("number", "double"),
        16: Field("value_json", "string"),
    },
)
_HISTORY = Message(
    "HistoryRecord",
    {
        1: Field("item", _ITEM, repeated=True),
        2: Field("step", Message("HistoryStep", {1: Field("num", "int64")})),
    },
)
_CONFIG_ITEM = Message(
    "ConfigItem",
    {
        1: Field("key", "string"),
        2: Field("nested_key", "string", repeated=True),
        16: Field("value_json", "string"),
    },
)
_CONFIG = Message(
    "ConfigRecord",
    {
        1: Field("update", _CONFIG_ITEM, repeated=True),
        2: Field("remove", _CONFIG_ITEM, repeated=True),
    },
)
_RUN = Message(
    "RunRecord",
    {
        1: Field("run_id", "string"),
        3: Field("project", "string"),
        4: Field("config", _CONFIG),
        8: Field("display_name", "string"),
    },
)
_RECORD = Message(
    "Record", {2: Field("history", _HISTORY), 5: Field("config", _CONFIG), 17: Field("run", _RUN)}
)
_SKIP = object()


class _Stats:
    def __init__(self) -> None:
        self.corrupt = 0
        self.first_corrupt: int | None = None
        self.orphans = 0
        self.too_large = 0
        self.torn: int | None = None

    def corrupted(self, offset: int) -> None:
        self.corrupt += 1
        if self.first_corrupt is None:
            self.first_corrupt = offset


def _check_header(path: Path, head: bytes) -> None:
    if len(head) < _FILE_HEAD.size:
        raise InputError(path, "too short for a W&B file header", "byte 0")
    ident, magic, version = _FILE_HEAD.unpack_from(head)
    if ident != _IDENT or magic != _MAGIC:
        raise InputError(path, "not a W&B run file (no ':W&B' header)", "byte 0")
    if version != _VERSION:
        raise InputError(path, f"unsupported W&B file version {version}", "byte 6")


def iter_wandb_records(
    path: Path, stats: _Stats | None = None, progress: Progress | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(record_number, byte_offset, payload)`` for each intact record of a ``.wandb`` file.

    Memory stays within one 32 KiB block plus the record being reassembled.
    """
    stats = stats or _Stats()
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        block = f.read(BLOCK)
        _check_header(path, block)
        block_start, at = 0, _FILE_HEAD.size
        pending: bytearray | None = None
        pending_at = 0
        oversize = False
        number = 0
        while True:
            room = BLOCK - at
            left = len(block) - at
            if room < _REC_HEAD.size or left <= 0:
                if len(block) < BLOCK:  # end of file
                    if left > 0 and block[at:].count(0) != left:
                        stats.torn = block_start + at
                    break
                block_start += BLOCK
                block, at = f.read(BLOCK), 0
                if progress is not None and block_start % (BLOCK * _PROGRESS_BLOCKS) == 0:
                    progress(min(block_start, total), total)
                continue
            offset = block_start + at
            if left < _REC_HEAD.size:
                stats.torn = offset
                break
            crc, length, rtype = _REC_HEAD.unpack_from(block, at)
            end = at + _REC_HEAD.size + length
            if crc == 0 and length == 0 and rtype == 0:  # zeroed area: skip the block
                at = BLOCK
                continue
            if end > len(block) and len(block) < BLOCK and end <= BLOCK:
                stats.torn = offset
                break
            data = block[at + _REC_HEAD.size : end]
            if (
                end > len(block)
                or rtype not in _TYPE_CRC
                or zlib.crc32(data, _TYPE_CRC[rtype]) != crc
            ):
                stats.corrupted(offset)
                pending, oversize = None, False
                at = BLOCK  # resynchronise at the next block
                continue
            at = end
            if rtype == _FULL:
                if pending is not None:
                    stats.orphans += 1
                pending = None
                number += 1
                yield number, offset, data
            elif rtype == _FIRST:
                if pending is not None:
                    stats.orphans += 1
                pending, pending_at, oversize = bytearray(data), offset, False
            elif pending is None:
                stats.orphans += 1
            else:
                if not oversize:
                    if len(pending) + len(data) > MAX_RECORD_BYTES:
                        oversize = True
                        pending = bytearray()
                    else:
                        pending += data
                if rtype == _LAST:
                    number += 1
                    if oversize:
                        stats.too_large += 1
                    else:
                        yield number, pending_at, bytes(pending)
                    pending, oversize = None, False
        if pending is not None and stats.torn is None:
            stats.torn = pending_at
    if progress is not None:
        progress(total, total)


# --- values ----------------------------------------------------------------------------------
def _item_key(item: dict[str, Any]) -> str:
    key = item.get("key")
    if key:
        return key
    parts = item.get("nested_key") or []
    if len(parts) <= 1:
        return parts[0] if parts else ""
    dotted = ".".join(parts)
    if not canonical_key(dotted)[2] and canonical_key("/".join(parts))[2]:
        return "/".join(parts)
    return dotted


def _item_value(item: dict[str, Any]) -> Any:
    vj = item.get("value_json")
    if vj is not None:
        s = vj.lstrip()
        if not s or s[0] in "{[":
            return _SKIP  # media, tables, histograms, lists
        try:
            v = json.loads(s)
        except (ValueError, RecursionError):
            return _SKIP
        if v is None or isinstance(v, float):
            return v
        if isinstance(v, int):  # true / false as 1 / 0; beyond float range ±inf
            return json_float(int(v))
        return _SKIP
    for name in ("number", "integer", "boolean"):
        if name in item:
            return item[name]
    return None if "none" in item else _SKIP


def _config_value(vj: str | None) -> Any:
    if vj is None:
        return None
    if len(vj) > _MAX_CONFIG_JSON:
        return vj[:200] + "..."
    try:
        return json.loads(vj)
    except (ValueError, RecursionError):
        return vj


def _apply_config_record(config: dict[str, Any], rec: dict[str, Any]) -> None:
    for item in rec.get("update", ()):
        parts = [item["key"]] if item.get("key") else list(item.get("nested_key") or [])
        if not parts:
            continue
        node = config
        for p in parts[:-1]:
            child = node.get(p)
            if not isinstance(child, dict):
                child = node[p] = {}
            node = child
        node[parts[-1]] = _config_value(item.get("value_json"))
    for item in rec.get("remove", ()):
        parts = [item["key"]] if item.get("key") else list(item.get("nested_key") or [])
        node = config
        for p in parts[:-1]:
            node = node.get(p) if isinstance(node.get(p), dict) else {}
        if parts:
            node.pop(parts[-1], None)


# --- files and directories -------------------------------------------------------------------
def _wandb_file(run_dir: Path) -> Path | None:
    try:
        files = [p for p in run_dir.iterdir() if p.suffix == ".wandb" and p.is_file()]
    except OSError:
        return None
    if not files:
        return None
    return max(files, key=lambda p: (p.stat().st_size, p.name))


def _run_dirs(wandb_dir: Path, max_entries: int) -> list[Path]:
    out = []
    try:
        entries = sorted(wandb_dir.iterdir())
    except OSError:
        return []
    for i, p in enumerate(entries):
        if i > max_entries:
            break
        if _RUN_DIR.match(p.name) and not p.is_symlink() and p.is_dir() and _wandb_file(p):
            out.append(p)

    def started(p: Path) -> tuple[str, float, str]:
        # the name has the start second; the file's mtime breaks ties within a second
        f = _wandb_file(p)
        return _RUN_DIR.match(p.name).group(2), f.stat().st_mtime if f else 0.0, p.name

    return sorted(out, key=started)


def find_wandb_runs(path: Path, max_entries: int = _LOAD_MAX_ENTRIES) -> tuple[list[Path], int]:
    """The ``.wandb`` files ``path`` designates, oldest first, and how deep the match was.

    Depth 0: ``path`` is a file or a run directory; 1: a ``wandb/`` directory of runs; 2: a
    directory holding ``wandb/``. Returns ``([], -1)`` when there is none.
    """
    if path.is_file():
        return [path], 0
    if not path.is_dir():
        return [], -1
    own = _wandb_file(path)
    if own is not None:
        return [own], 0
    runs = _run_dirs(path, max_entries)
    if runs:
        return [_wandb_file(r) for r in runs], 1
    sub = path / "wandb"
    if sub.is_dir():
        runs = _run_dirs(sub, max_entries)
        if runs:
            return [_wandb_file(r) for r in runs], 2
    return [], -1


def _run_names(f: Path) -> tuple[str, str]:
    """``(run directory name, run id)`` of a ``.wandb`` file."""
    return f.parent.name, f.stem[len("run-") :] if f.stem.startswith("run-") else f.stem


def list_wandb_runs(path: Path) -> list[dict[str, Any]]:
    """The runs ``path`` designates, oldest first, without reading them: ``[{"name": run
    directory, "id": run id}]`` (``load_wandb(path, run=id)`` reads one)."""
    files, _ = find_wandb_runs(Path(path))
    return [{"name": d, "id": i} for d, i in map(_run_names, files)]


def load_wandb(path: Path, progress: Progress | None = None, *, run: str | None = None) -> Run:
    """Read a W&B offline run (a ``.wandb`` file or a directory, see above) into a ``Run``.

    Args:
        run: which run of a ``wandb/`` folder to read (its id, or its directory name);
            default the most recent, with a warning naming the others.

    Raises:
        InputError: no run found, not a W&B file, a malformed record, or no history rows.
    """
    path = Path(path)
    files, _ = find_wandb_runs(path)
    if not files:
        raise InputError(path, "no W&B run (wandb/*run-*/run-<id>.wandb) found")
    listing = [{"name": d, "id": i, "read": False} for d, i in map(_run_names, files)]
    if run is not None:
        hits = [k for k, f in enumerate(files) if run in _run_names(f)]
        if not hits:
            names = ", ".join(x["id"] for x in listing[-_MAX_LISTED_RUNS:])
            raise InputError(path, f"no W&B run {run!r} here (runs: {names})")
        idx = hits[-1]
    else:
        idx = len(files) - 1
    file = files[idx]
    listing[idx]["read"] = True
    builder = RunBuilder(Manifest(source=str(file)))
    if len(files) > 1 and run is None:
        others = [f.parent.name for f in files[:-1]]
        listed = ", ".join(others[-_MAX_LISTED_RUNS:])
        more = (
            f" and {len(others) - _MAX_LISTED_RUNS} more" if len(others) > _MAX_LISTED_RUNS else ""
        )
        builder.warn(
            f"{path}: {len(files)} W&B runs found; read the most recent, {file.parent.name} "
            f"(others: {listed}{more}; choose one with --run ID)"
        )
    config: dict[str, Any] = {}
    stats = _Stats()
    rows = 0
    last_step = -1
    mode = "undecided"  # do the rows carry the trainer's step ("gstep") or only _step ("step")?
    held: list[tuple[int, dict[str, Any]]] = []
    last_gstep: int | None = None
    gkeys: dict[str, None] = {}
    for number, offset, payload in iter_wandb_records(file, stats, progress):
        try:
            rec = decode(payload, _RECORD, max_bytes=protobuf_bytes(len(payload)))
        except ProtobufError as e:
            raise InputError(
                file, f"malformed record: {e.problem}", f"record {number} (byte {offset})"
            ) from None
        if "run" in rec:
            rrec = rec["run"]
            _apply_config_record(config, rrec.get("config", {}))
            if rrec.get("run_id"):
                msg = f"W&B run {rrec['run_id']}"
                if rrec.get("project"):
                    msg += f" (project {rrec['project']})"
                builder.add_event(Event(None, "note", msg, {"run_id": rrec["run_id"]}))
        if "config" in rec:
            _apply_config_record(config, rec["config"])
        hist = rec.get("history")
        if hist is None:
            continue
        step, gkey, gstep, row = _history_row(hist)
        if step is None:
            step = last_step + 1
        last_step = step
        if not row:
            continue
        rows += 1
        side = any(k in row for k in SIDE_AXES)
        for k in SIDE_AXES:
            row.pop(k, None)
        if gkey is not None:
            gkeys[gkey] = None
        if gstep is None and side and mode == "gstep":
            builder.add_row(last_gstep, row)  # slime: a train/step row joins its rollout
        elif gstep is not None:
            # Rows logged without the trainer's step (TRL's profiling timers call wandb.log
            # directly) belong to the training step they happened in: the next one logged.
            mode, last_gstep = "gstep", gstep
            for _, held_row in held:
                builder.add_row(gstep, held_row)
            held.clear()
            builder.add_row(gstep, row)
        elif mode == "step":
            builder.add_row(step, row)
        else:
            held.append((step, row))
            if mode == "undecided" and len(held) > MAX_HELD_ROWS:
                mode = "step"  # no trainer step in sight: wandb's own _step counts
                for held_step, held_row in held:
                    builder.add_row(held_step, held_row)
                held.clear()
    for held_step, held_row in held:  # rows after the last trainer step stay with it
        builder.add_row(last_gstep if mode == "gstep" else held_step, held_row)
    _report(builder, file, stats)
    if rows == 0:
        why = "nothing numeric logged with wandb.log"
        if stats.too_large:
            why += f"; {stats.too_large} record(s) over {MAX_RECORD_BYTES} bytes were skipped"
        raise InputError(file, f"no numeric history rows ({why})")
    config.pop("_wandb", None)
    builder.manifest.config = config
    note_runs(builder, listing)
    builder.manifest.step_key = step_key_used(mode, gkeys)
    apply_facts(builder.manifest, facts_from_config(config))
    return builder.build()


def _history_row(
    hist: dict[str, Any],
) -> tuple[int | None, str | None, int | None, dict[str, Any]]:
    """``(_step, trainer step key, trainer step, row)`` of a history record (:mod:`._steps`)."""
    step = None
    row: dict[str, Any] = {}
    steps: dict[str, Any] = {}
    for item in hist.get("item", ()):
        key = _item_key(item)
        value = _item_value(item)
        if key == "_step":
            step = as_step(value)
        elif key in _STEP_KEY_SET:
            steps[key] = value
        elif key and not key.startswith("_") and value is not _SKIP:
            row[key] = value
    if step is None:
        step = hist.get("step", {}).get("num")
    gkey, gstep = pick_step(steps)
    for k, v in steps.items():  # a lower-ranked step key (open-instruct global_step) is data
        if k != gkey and isinstance(v, (int, float)):
            row[k] = v
    return step, gkey, gstep, row


def step_key_used(mode: str, gkeys: dict[str, None]) -> str:
    """How the steps of a W&B run were numbered (for ``manifest.step_key``)."""
    if mode == "gstep" and gkeys:
        return ", ".join(gkeys)
    return "_step (wandb.log call count; the run logs no trainer step)"


def _report(builder: RunBuilder, file: Path, stats: _Stats) -> None:
    if stats.corrupt:
        builder.warn(
            f"{file}: byte {stats.first_corrupt}: {stats.corrupt} corrupted block(s); the rest "
            "of each was skipped"
        )
    if stats.orphans:
        builder.warn(f"{file}: {stats.orphans} incomplete multi-block record(s) dropped")
    if stats.too_large:
        builder.warn(f"{file}: {stats.too_large} record(s) over {MAX_RECORD_BYTES} bytes skipped")
    if stats.torn is not None:
        builder.warn(
            f"{file}: byte {stats.torn}: torn last record ignored (run still being written?)"
        )


def _sniff(path: Path, head: bytes) -> float:
    if head:
        if head[:4] != _IDENT:
            return 0.0
        return 0.99 if head[: _FILE_HEAD.size] == _FILE_HEAD.pack(_IDENT, _MAGIC, _VERSION) else 0.6
    files, depth = find_wandb_runs(path, _SNIFF_MAX_ENTRIES)
    if not files:
        return 0.0
    return 0.8 if depth <= 1 else 0.65


def _claims_own_runs(d: Path) -> bool:
    """A folder's claim is its own when it is a W&B folder of runs or one run's folder."""
    return find_wandb_runs(d)[1] in (0, 1)


register(
    Importer(
        name="wandb",
        description="W&B offline run (wandb/offline-run-*/run-<id>.wandb, or the directory)",
        sniff=_sniff,
        load=load_wandb,
        multi_run=True,
        list_runs=list_wandb_runs,
        precheck=Precheck(magic=(b":W&B",), dirs=True),
        files=(".wandb",),
        folder_claim=_claims_own_runs,
    )
)

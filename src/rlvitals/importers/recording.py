"""The rlvitals recording directory (``manifest.json`` + per-rank streams), as the
:class:`rlvitals.recording.Recorder` writes it. ``docs/recording.md`` is the format.

Sniffing: a directory whose ``manifest.json`` names the format (or that manifest itself, or one
of the streams next to it) is certainly ours; a directory holding only stream files is probably
ours, so that loading it says plainly that the manifest is missing.
"""

from __future__ import annotations

from pathlib import Path

from rlvitals.importers import Importer, Precheck, Progress, register
from rlvitals.importers._source import is_lenient
from rlvitals.recording import layout as fmt
from rlvitals.recording.reader import read_recording
from rlvitals.recording.run import Run

__all__ = ["load_recording"]

_SNIFF_MANIFEST_BYTES = 4096
"""The format marker is in the first lines of the manifest."""
CERTAIN = 0.98
PROBABLE = 0.6


def _marked(head: bytes) -> bool:
    return f'"format": "{fmt.FORMAT_NAME}"'.encode() in head or (
        f'"format":"{fmt.FORMAT_NAME}"'.encode() in head
    )


def _sniff(path: Path, head: bytes) -> float:
    if path.is_dir():
        manifest = path / fmt.MANIFEST_NAME
        if manifest.is_file():
            try:
                with open(manifest, "rb") as f:
                    return CERTAIN if _marked(f.read(_SNIFF_MANIFEST_BYTES)) else 0.0
            except OSError:
                return 0.0
        try:
            names = [p.name for p in path.iterdir()]
        except OSError:
            return 0.0
        return PROBABLE if any(fmt.STREAM_RE.match(n) for n in names) else 0.0
    if path.name == fmt.MANIFEST_NAME and _marked(head[:_SNIFF_MANIFEST_BYTES]):
        return CERTAIN
    if fmt.STREAM_RE.match(path.name) and _sniff(path.parent, b"") == CERTAIN:
        return CERTAIN  # one stream of a recording: read the whole recording
    return 0.0


def load_recording(path: Path, progress: Progress | None = None) -> Run:
    """Read a recording directory (or its manifest, or one of its streams) into a ``Run``."""
    if path.is_file() and fmt.STREAM_RE.match(path.name):
        path = path.parent
    # --lenient (load(lenient=True)) skips a corrupt record in the middle, with a warning.
    return read_recording(path, strict=not is_lenient(), progress=progress)


register(
    Importer(
        name="recording",
        description="rlvitals recording directory (manifest.json + per-rank streams)",
        sniff=_sniff,
        load=load_recording,
        precheck=Precheck(
            names=("manifest.json", "scalars.rank", "events.rank", "groups.rank"), dirs=True
        ),
    )
)

""":class:`Precheck`: the cheap byte test each importer declares beside its sniffer.

Plain data (comparable, printable as source), so that ``scripts/gen_importers.py`` can copy every
importer's declaration into :mod:`rlvitals.importers._catalogue`, and sniffing a file imports
only the importers whose pre-check passes. A pre-check is a *necessary* condition of its
sniffer: whatever the sniffer accepts, the pre-check passes (``tests/test_declarations.py``
proves it on every fixture). A weaker pre-check only costs an import.
"""

from __future__ import annotations

from pathlib import Path

from rlvitals._record import record

__all__ = ["Precheck"]

SNIFF_BYTES = 65536
"""How much of a file sniffers see."""
_BLANKS = b"\xef\xbb\xbf \t\r\n"


def is_binary(head: bytes) -> bool:
    """A NUL byte in the first 4 KiB."""
    return b"\x00" in head[:4096]


@record(frozen=True)
class Precheck:
    """Whether a file could be one format, from its name and first bytes alone.

    It passes when the file name contains one of ``names``, or the head starts with one of
    ``magic``, or the head meets every content condition declared (``text``, ``starts``,
    ``marks``; with none declared, only ``names`` and ``magic`` can pass it).

    Attributes:
        text: the head is text (no NUL byte in its first 4 KiB).
        starts: the first byte after a BOM and blanks is one of these bytes (implies text).
        marks: one of these occurs in ``head[:within]``.
        within: how far ``marks`` are looked for.
        magic: the head starts with one of these (enough on its own).
        names: the file name contains one of these (enough on its own).
        dirs: a folder may be one (its importer is then asked).

    >>> p = Precheck(starts=b"{[", marks=(b'"rewards"',))
    >>> p(Path("g.jsonl"), b'{"rewards": [1]}'), p(Path("g.jsonl"), b"step 1")
    (True, False)
    """

    text: bool = False
    starts: bytes = b""
    marks: tuple[bytes, ...] = ()
    within: int = SNIFF_BYTES
    magic: tuple[bytes, ...] = ()
    names: tuple[str, ...] = ()
    dirs: bool = False

    def __call__(self, path: Path, head: bytes) -> bool:
        """True when a file at ``path`` whose first bytes are ``head`` could be the format."""
        if self.names and any(n in path.name for n in self.names):
            return True
        if self.magic and head.startswith(self.magic):
            return True
        if not (self.text or self.starts or self.marks):
            return False
        if (self.text or self.starts) and (not head or is_binary(head)):
            return False
        if self.starts:
            first = head.lstrip(_BLANKS)[:1]
            if not first or first not in self.starts:
                return False
        if self.marks:
            window = head[: self.within]
            return any(m in window for m in self.marks)
        return True

    def source(self) -> str:
        """The constructor call that builds this pre-check (its non-default fields)."""
        default = Precheck()
        args = [
            f"{f}={getattr(self, f)!r}"
            for f in ("text", "starts", "marks", "within", "magic", "names", "dirs")
            if getattr(self, f) != getattr(default, f)
        ]
        return f"Precheck({', '.join(args)})"

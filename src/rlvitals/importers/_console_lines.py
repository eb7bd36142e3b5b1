"""A console line as the trainer printed it: without terminal colour codes and Ray's prefixes.

A job run under Ray, or with a coloured logger (loguru, rich, Ray's own colouring), adds to
every line what the trainer never printed::

    \\x1b[2m\\x1b[36m(skyrl_entrypoint pid=2411, ip=10.0.0.7)\\x1b[0m \\x1b[32m2026-12-01 ...\\x1b[0m

Every console importer cleans its lines, and its sniffer its bytes, with these helpers, so a
log captured with colour and through Ray reads as the plain one does (issue 25.2). Ray's prefix
is ``(name pid=N)``, ``(pid=N)`` or ``(name pid=N, ip=A)`` (``ray/_private/worker.py``,
``print_worker_logs``), its de-duplication suffix ``[repeated 2x across cluster]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from rlvitals.errors import InputError
from rlvitals.importers._source import decompress_errors, is_stream, open_input, read_prefix

__all__ = [
    "ANSI",
    "ESC",
    "RAY_PREFIX",
    "SCAN_BYTES",
    "clean_bytes",
    "messages",
    "scan_file",
    "sniff_log",
    "split_ray_prefix",
    "strip_ansi",
    "strip_ray_repeat",
]

SCAN_BYTES = 8 * 1024 * 1024
"""A log whose first bytes look like a trainer's but hold no step line yet is scanned this far."""

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
"""A terminal colour or cursor sequence (CSI)."""
ESC = b"\x1b["
"""How a colour code starts: a console importer's pre-check passes a head holding one, since its
sniffer searches the head without them (a code may sit inside what it looks for)."""
_ANSI_BYTES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
RAY_PREFIX = re.compile(r"\([^()\n]{1,300}\)\s*")
"""Any parenthesised prefix of a message, as :func:`messages` drops it (Ray's and others')."""
_RAY_PID = re.compile(r"\((?:[^()\n]{0,200} )?pid=[0-9]{1,10}(?:, ?ip=[^()\s]{1,64})?\) ?")
"""Ray's worker prefix only: ``(name pid=N)``, ``(pid=N)``, ``(name pid=N, ip=A)``."""
_RAY_PID_BYTES = re.compile(
    rb"(?m)^[ \t]*\((?:[^()\n]{0,200} )?pid=[0-9]{1,10}(?:, ?ip=[^()\s]{1,64})?\) ?"
)
_RAY_REPEAT = re.compile(r"\[repeated \d+x across cluster\]")


def strip_ansi(text: str) -> str:
    r"""``text`` without terminal escape sequences.

    >>> strip_ansi("\x1b[36m(TaskRunner pid=1)\x1b[0m step:1 - a:0.5")
    '(TaskRunner pid=1) step:1 - a:0.5'
    """
    j = text.rfind("\x1b")
    if j < 0:
        return text
    # A sequence holds no second ESC, so none crosses the last one: the text before it is
    # cleaned by a search, the text after by one anchored match, not a scan of the whole line
    # (colour codes sit in the Ray prefix, before hundreds of characters of plain fields).
    m = ANSI.match(text, j)
    return ANSI.sub("", text[:j]) + text[j if m is None else m.end() :]


def strip_ray_repeat(text: str) -> str:
    """``text`` without Ray's log-deduplication suffix ``[repeated 2x across cluster]``."""
    if not text.endswith("cluster]"):
        return text
    i = text.rfind("[repeated ")
    if i >= 0 and _RAY_REPEAT.fullmatch(text, i):
        return text[:i].rstrip()
    return text


def split_ray_prefix(text: str) -> tuple[str, str]:
    """``(Ray's prefix, the rest)`` of a line already without colour codes; ``("", text)``
    when it has none.

    >>> split_ray_prefix("(Worker pid=7, ip=10.0.0.1)  'a': 1,")
    ('(Worker pid=7, ip=10.0.0.1)', " 'a': 1,")
    >>> split_ray_prefix("(a) b")
    ('', '(a) b')
    """
    if not text.startswith("(") or "pid=" not in text:
        return "", text
    m = _RAY_PID.match(text)
    if m is None:
        return "", text
    return text[: m.end()].rstrip(), text[m.end() :]


def messages(line: str, start: str) -> Iterator[str]:
    """The messages of one physical line that begin with ``start`` once colour codes are off,
    the line is split at ``\\r`` (tqdm redraws) and a Ray ``(Actor pid=...)`` prefix is dropped."""
    line = strip_ansi(line)
    for seg in line.split("\r") if "\r" in line else (line,):  # ``in`` is a memchr, split is not
        seg = seg.strip()
        if seg.startswith("("):
            m = RAY_PREFIX.match(seg)
            if m is not None:
                seg = seg[m.end() :]
        if seg.startswith(start):
            yield strip_ray_repeat(seg)


def clean_bytes(data: bytes) -> bytes:
    r"""``data`` (a file's head, a chunk) without colour codes and without Ray's prefix at the
    start of each line: what sniffers search. Plain data is returned as it is, uncopied.

    >>> clean_bytes(b"\x1b[36m(W pid=1, ip=10.0.0.2)\x1b[0m - \x1b[1mStep 3: \n(W pid=1) {'a': 1}")
    b"- Step 3: \n{'a': 1}"
    """
    if b"\x1b" in data:
        data = _ANSI_BYTES.sub(b"", data)
    if b"pid=" in data:
        data = _RAY_PID_BYTES.sub(b"", data)
    return data


def scan_file(
    path: Path,
    head: bytes,
    pattern: re.Pattern[bytes],
    limit: int = SCAN_BYTES,
    needle: bytes | None = None,
) -> bool:
    """True when ``pattern`` matches in ``head`` or in the next bytes of the file up to ``limit``,
    each searched as :func:`clean_bytes` leaves it.

    Read in 1 MiB chunks with a 4 KiB overlap, so a match across a chunk boundary is found and
    the work is linear in the bytes read. An unreadable file is False. ``needle``: bytes every
    match holds; a chunk without them is not searched (``bytes.find`` runs at memory speed, a
    pattern that does not start with a literal costs ~30 ns a byte: 0.25 s for 8 MiB).
    """

    def search(data: bytes) -> bool:
        if needle is not None and data.find(needle) < 0:
            return False
        return pattern.search(clean_bytes(data)) is not None

    if search(head):
        return True
    try:
        if is_stream(path):  # sniffing must not consume it: look at its buffered prefix
            return search(read_prefix(path, limit))
        with open_input(path) as f:
            skip = len(head)
            while skip > 0:  # also works on a decompressed file or a stream's replay
                got = len(f.read(min(skip, 1 << 20)))
                if not got:
                    return False
                skip -= got
            done, tail = len(head), head[-4096:]
            while done < limit:
                chunk = f.read(1 << 20)
                if not chunk:
                    return False
                done += len(chunk)
                if search(tail + chunk):
                    return True
                tail = chunk[-4096:]
    except (OSError, InputError, ValueError, *decompress_errors()):
        return False
    return False


def sniff_log(
    path: Path,
    head: bytes,
    pattern: re.Pattern[bytes],
    marks: re.Pattern[bytes],
    conf: float,
    *,
    needle: bytes | None = None,
    unsure: float = 0.0,
) -> float:
    """A console importer's sniff: ``conf`` when its step line (``pattern``, searched as
    :func:`clean_bytes` leaves the bytes) is in ``head``, or, when ``marks`` (words of the
    trainer's start-up lines) are in it, further in the file (:func:`scan_file`, ``needle``);
    ``unsure`` when only the marks are; else 0."""
    if not head:
        return 0.0
    if pattern.search(clean_bytes(head)):
        return conf
    if not marks.search(head):
        return 0.0
    return conf if scan_file(path, head, pattern, needle=needle) else unsure

"""What every rlvitals HTML page shares: its one script, its Content-Security-Policy, its head.

The pages (the doctor's report, scan, compare) are single files that make no network request.
Their script, ``page.js`` beside this module (hover values, zoom and log scale on plots,
sortable tables), is inlined, and the policy allows exactly that script by its SHA-256 hash:
no other script runs, and the browser refuses every request (``default-src 'none'``).

>>> CSP.startswith("default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-")
True
"""

from __future__ import annotations

import base64
import hashlib
from html import escape
from importlib.resources import files

__all__ = ["CSP", "SCRIPT", "TIP_CSS", "head", "script_tag"]

SCRIPT = files("rlvitals.report").joinpath("page.js").read_text(encoding="utf-8")
"""The pages' script (``page.js``), inlined verbatim."""
if "</script" in SCRIPT.lower():  # it is inlined: it must not end its own element
    raise RuntimeError("page.js must not contain '</script'")
_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{_HASH}'"
"""The policy of every page: inline styles, this one script, nothing fetched."""

TIP_CSS = """
.plot-tip { position:absolute; z-index:10; pointer-events:none; white-space:pre;
            font:12px/1.35 ui-monospace,"DejaVu Sans Mono",monospace; background:#111827;
            color:#f9fafb; padding:4px 8px; border-radius:4px; opacity:.92; }
svg.plot[data-frame] { cursor:crosshair; user-select:none; -webkit-user-select:none; }
svg .ctl { font-size:10px; fill:#1d6fb8; cursor:pointer; text-decoration:underline; }
svg .guide { stroke:#94a3b8; stroke-width:1; } svg .band { fill:#1d6fb8; fill-opacity:.12; }
table.sortable th { cursor:pointer; } table.sortable th[aria-sort=ascending]::after
{ content:" \\25B2"; } table.sortable th[aria-sort=descending]::after { content:" \\25BC"; }
.scroll { overflow-x:auto; max-width:100%; -webkit-overflow-scrolling:touch; }
"""
"""Styles of what the script draws (tooltip, buttons, guide, sort arrows) and of table scrollers."""


def script_tag() -> str:
    """The ``<script>`` element the policy allows (its text must stay byte for byte)."""
    return f"<script>{SCRIPT}</script>"


def head(title: str, css: str) -> list[str]:
    """The lines of a page up to ``<body>``: charset, viewport, policy, ``title`` (escaped) and
    ``css`` plus :data:`TIP_CSS`."""
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        f"<title>{escape(title)}</title>",
        f"<style>{css}{TIP_CSS}</style></head><body>",
    ]

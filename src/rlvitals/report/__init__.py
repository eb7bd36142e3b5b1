"""Reports: renderers that turn a :class:`~rlvitals.doctor.Diagnosis` into text, JSON, Markdown
or a self-contained HTML page. Renderers format; they never decide anything.

The registry has the shape of the others (a plain dict, a ``register`` call, a ``str`` Enum of
the built-in names). ``render(diagnosis, "md")`` returns the report as a string.

>>> sorted(ReportFormat)
[<ReportFormat.GITHUB: 'github'>, <ReportFormat.HTML: 'html'>, <ReportFormat.JSON: 'json'>, <ReportFormat.MD: 'md'>, <ReportFormat.TEXT: 'text'>]
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

from rlvitals._array import quiet_numerics
from rlvitals._record import record
from rlvitals.registry import Plugins, Registry, import_module

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = [
    "RENDERERS",
    "RenderOptions",
    "Renderer",
    "ReportFormat",
    "formats",
    "register",
    "render",
    "suffix_format",
]


@record(frozen=True)
class RenderOptions:
    """How to render.

    Attributes:
        color: ANSI colours in the text report (the CLI passes "stdout is a terminal").
        width: text report width in columns; None = the terminal's (80 when not a terminal).
    """

    color: bool = False
    width: int | None = None


@record(frozen=True)
class Renderer:
    """A report format.

    Attributes:
        name: the ``--format`` name.
        description: one line for help texts.
        suffix: file suffix, for guessing the format from ``-o report.html``.
        render: ``(diagnosis, options) -> str``.
    """

    name: str
    description: str
    suffix: str
    render: Callable[[Diagnosis, RenderOptions], str]


RENDERERS: Registry[Renderer] = Registry("report format")

_BUILTIN = {
    "text": ("text", ".txt"),
    "json": ("json_report", ".json"),
    "md": ("markdown", ".md"),
    "html": ("html_page", ".html"),
    "github": ("github", ".annotations"),
}
"""Built-in format → (module, file suffix): rendering one format imports only its module (a
JSON report never loads rich or the HTML renderer)."""
ReportFormat = enum.Enum("ReportFormat", {name.upper(): name for name in _BUILTIN}, type=str)
"""The built-in report formats (a ``str`` Enum of the names above)."""
_ensure_loaded = Plugins(__name__, tuple(m for m, _ in _BUILTIN.values())).load


def _renderer(fmt: str) -> Renderer:
    if fmt in _BUILTIN and fmt not in RENDERERS:
        import_module(f"{__name__}.{_BUILTIN[fmt][0]}")
    return RENDERERS.get(fmt)


def register(renderer: Renderer) -> Renderer:
    """Add a renderer under its name (twice raises)."""
    RENDERERS.add(renderer.name, renderer)
    return renderer


def formats() -> list[Renderer]:
    """Every registered renderer, by name."""
    _ensure_loaded()
    return [RENDERERS.get(n) for n in RENDERERS.names()]


def render(diagnosis: Diagnosis, fmt: str = "text", options: RenderOptions | None = None) -> str:
    """``diagnosis`` as a ``fmt`` report (``text``, ``json``, ``md``, ``html``).

    Raises KeyError listing the valid formats for an unknown ``fmt``. Extreme values (inf,
    1e308) never print numpy warnings, nor raise under ``-W error``: a report formats them.
    """
    renderer = _renderer(fmt)
    with quiet_numerics():
        return renderer.render(diagnosis, options or RenderOptions())


def suffix_format(path: str) -> str | None:
    """The report format a file name asks for (``report.html`` → ``html``), or None."""
    low = path.lower()
    suffixes = {s: name for name, (_, s) in _BUILTIN.items()}
    suffixes.update({r.suffix: n for n in RENDERERS.names() if (r := RENDERERS.get(n))})
    for suffix, name in suffixes.items():
        if low.endswith(suffix):
            return name
    return None

"""orjson, where rlvitals may use it: installed (a dependency) and ``RLVITALS_JSON`` not
``stdlib``. Its callers fall back to :mod:`json` for what orjson refuses."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

__all__ = ["orjson_function"]


def orjson_function(name: str) -> Callable[..., Any] | None:
    """``orjson.<name>`` (``loads``, ``dumps``), or None when it is off or missing."""
    if os.environ.get("RLVITALS_JSON", "").lower() == "stdlib":
        return None
    try:
        import orjson
    except ImportError:
        return None
    return getattr(orjson, name)

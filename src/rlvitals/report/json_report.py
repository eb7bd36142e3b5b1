"""The JSON report: :meth:`Diagnosis.to_dict` (schema 1, documented in docs/report-json.md).

Non-finite floats become ``null`` so the output is strict JSON that any parser reads.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from rlvitals.report import Renderer, RenderOptions, register

if TYPE_CHECKING:
    from rlvitals.doctor import Diagnosis

__all__ = ["render_json", "strict"]


def strict(obj: Any) -> Any:
    """``obj`` with NaN/inf floats replaced by None and tuples by lists, recursively.

    >>> strict({"a": float("nan"), "b": (1, 2.5)})
    {'a': None, 'b': [1, 2.5]}
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return strict(obj.item())
    return obj


def render_json(diagnosis: Diagnosis, options: RenderOptions) -> str:
    """The JSON report, indented, with a trailing newline."""
    return (
        json.dumps(strict(diagnosis.to_dict()), indent=2, allow_nan=False, ensure_ascii=False)
        + "\n"
    )


register(
    Renderer("json", "the JSON contract (schema 1, docs/report-json.md)", ".json", render_json)
)

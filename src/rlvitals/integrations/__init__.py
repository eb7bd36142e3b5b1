"""Integrations with trainers: TRL (``rlvitals.integrations.trl``), data-parallel estimation
(``rlvitals.integrations.distributed``) and a trainer-agnostic live :class:`Monitor`.

Submodules are imported on use, so ``import rlvitals.integrations`` needs neither torch nor TRL.
"""

from __future__ import annotations

from typing import Any

from rlvitals.registry import import_module

__all__ = ["Monitor", "estimate_distributed"]

_LAZY = {
    "Monitor": "rlvitals.guard.monitor",
    "estimate_distributed": "rlvitals.integrations.distributed",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlvitals.integrations' has no attribute {name!r}")

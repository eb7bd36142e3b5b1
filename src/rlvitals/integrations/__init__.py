"""Integrations with trainers: TRL (``rlvitals.integrations.trl``), data-parallel estimation
(``rlvitals.integrations.distributed``) and a trainer-agnostic live :class:`Monitor`.

Submodules are imported on use, so ``import rlvitals.integrations`` needs neither torch nor TRL.
"""

from __future__ import annotations

from rlvitals.registry import lazy_exports

__all__ = ["Monitor", "estimate_distributed"]

_LAZY = {
    "Monitor": "rlvitals.guard.monitor",
    "estimate_distributed": "rlvitals.integrations.distributed",
}

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)

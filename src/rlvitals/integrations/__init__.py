"""Integrations with trainers: TRL (``rlvitals.integrations.trl``), veRL
(``rlvitals.integrations.verl``, ``verl_sampler``) and data-parallel estimation
(``rlvitals.integrations.distributed``). The trainer-agnostic live guard is
:class:`rlvitals.Monitor` (``rlvitals.guard``).

Submodules are imported on use, so ``import rlvitals.integrations`` needs neither torch nor TRL.
"""

from __future__ import annotations

from rlvitals.registry import lazy_exports

__all__ = ["estimate_distributed"]

_LAZY = {"estimate_distributed": "rlvitals.integrations.distributed"}

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)

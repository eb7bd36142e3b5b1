"""The detector catalogue. See :mod:`rlvitals.detectors.base` for the framework.

Every module named in :data:`_MODULES` defines (and ``@register``\\s) one detector; they are
imported on first use of :func:`catalogue`, so ``import rlvitals.detectors`` stays cheap.
"""

from __future__ import annotations

from rlvitals.detectors.base import DETECTORS, Detector, Finding, Severity, register
from rlvitals.registry import Plugins

__all__ = [
    "DETECTORS",
    "Detector",
    "Finding",
    "Severity",
    "catalogue",
    "load_all",
    "register",
]

# One module per detector. The collapse family first (the product's heart), then the others.
_MODULES: tuple[str, ...] = (
    "adv_collapse",
    "degenerate_groups",
    "reward_std_death",
    "acr_stall",
    "acr_volatile",
    "excess_collapse",
    "saturation",
    # other families
    "entropy_collapse",
    "kl_blowup",
    "length_explosion",
    "truncation",
    "clip_saturation",
    "grad_nonfinite",
    "grad_spike",
    "zero_grad_steps",
    "reward_hacking",
    "throughput_rot",
    # the set-up
    "group_size_one",
    # the recording itself
    "recording_loss",
)

_PLUGINS = Plugins(__name__, _MODULES)


def load_all() -> None:
    """Import every detector module in :data:`_MODULES` (idempotent)."""
    _PLUGINS.load()


_CATALOGUE: list[type[Detector]] = []
_CATALOGUE_SIZE = -1


def catalogue() -> list[type[Detector]]:
    """Every registered detector class, collapse family first, then by ID (built once, and
    again only when a detector was registered since)."""
    global _CATALOGUE, _CATALOGUE_SIZE
    load_all()
    if len(DETECTORS) != _CATALOGUE_SIZE:
        classes = [DETECTORS.get(n) for n in DETECTORS.names()]
        _CATALOGUE = sorted(classes, key=lambda c: (c.family != "collapse", c.id))
        _CATALOGUE_SIZE = len(DETECTORS)
    return list(_CATALOGUE)

"""The lab: real GRPO training on CPU that measures the paper's claims at equal rollouts.

A tiny causal LM (a Qwen2 built from a config, character tokenizer, warm-started and cached) is
trained with TRL's ``GRPOTrainer`` through :class:`rlvitals.integrations.trl.RlvitalsGRPOTrainer`
on generated tasks with verifiable rewards and a difficulty dial (levels L0-L6 defined by the
base policy's pass rate, as in He et al., ICML 2026). Every run is recorded with per-group
rewards and prompt ids, so the doctor and every report read it.

    from rlvitals.lab import Args, train, predict, compare, ablate, demo

    result = train(Args(method="avspo", level=5))      # one run -> dict
    doc = compare("quick", out="lab-out")              # an experiment -> its folder

Modules: :mod:`~rlvitals.lab.tasks` (tasks, levels), :mod:`~rlvitals.lab.policy` (the tiny
model, warm start, cache, pass rates), :mod:`~rlvitals.lab.train` (``Args``, presets, one run),
:mod:`~rlvitals.lab.experiments` (predict, compare, ablate), :mod:`~rlvitals.lab.stats`,
:mod:`~rlvitals.lab.report`, :mod:`~rlvitals.lab.demo`, :mod:`~rlvitals.lab.failure_zoo` (the failure
zoo: one known failure injected into each real run). Needs the ``lab`` extra (``pip install -e '.[lab]'`` in a checkout, docs/install.md)
(TRL, torch, matplotlib, scipy). See docs/lab.md.
"""

from __future__ import annotations

from rlvitals.registry import lazy_exports

_LAZY = {
    "Args": "rlvitals.lab.train",
    "METHODS": "rlvitals.lab.train",
    "PRESETS": "rlvitals.lab.train",
    "train": "rlvitals.lab.train",
    "Setup": "rlvitals.lab.experiments",
    "predict": "rlvitals.lab.experiments",
    "compare": "rlvitals.lab.experiments",
    "ablate": "rlvitals.lab.experiments",
    "demo": "rlvitals.lab.demo",
    "zoo": "rlvitals.lab.failure_zoo",
    "BasePolicy": "rlvitals.lab.policy",
    "prepare_base": "rlvitals.lab.policy",
    "TASKS": "rlvitals.lab.tasks",
    "LEVEL_TARGETS": "rlvitals.lab.tasks",
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_exports(globals(), _LAZY)

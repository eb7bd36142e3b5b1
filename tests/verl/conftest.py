"""veRL adapter tests: run in the veRL environment only (see tests/verl/setup_venv.sh).

Imported by pytest before the test module: ``import verl`` here, before anything imports
``rlvitals.integrations.verl``, so the test can check that veRL's own plugin loading (the
``verl.plugins`` entry point rlvitals declares) registered the estimators.
"""

import sys

assert "rlvitals.integrations.verl" not in sys.modules, "import order: veRL must load the plugin"

import verl  # noqa: E402, F401  (loads every "verl.plugins" entry point)
from verl.trainer.ppo import core_algos  # noqa: E402

LOADED_BY_VERL = (
    "rlvitals.integrations.verl" in sys.modules,
    "rlvitals_avspo" in core_algos.ADV_ESTIMATOR_REGISTRY,
)


import pytest  # noqa: E402


@pytest.fixture
def loaded_by_verl() -> tuple[bool, bool]:
    """(adapter module imported by ``import verl``, rlvitals_avspo registered by then)."""
    return LOADED_BY_VERL

"""TRL integration: advantages from any rlvitals estimator, and a callback that records the run
and guards it live (alerts, halting).

    from rlvitals.integrations.trl import RlvitalsCallback, RlvitalsGRPOTrainer

    trainer = RlvitalsGRPOTrainer(
        model=model, reward_funcs=[accuracy], args=GRPOConfig(...), train_dataset=ds,
        estimator="avspo", estimator_config={"r_max": 1.0},
        callbacks=[RlvitalsCallback("runs/rec", halt_on="collapse:20")],
    )

Tested against TRL 1.16 (``pip install -e '.[trl]'`` in a checkout, docs/install.md), its ``AsyncGRPOTrainer`` included
(``RlvitalsCallback(...).attach(trainer)``). See docs/trl.md and docs/guard.md.
"""

from rlvitals.errors import MissingExtraError

try:
    import transformers  # noqa: F401
    import trl  # noqa: F401
except ImportError as err:  # pragma: no cover - the CI installs the extra
    raise MissingExtraError("the TRL integration", "trl", "trl") from err

from rlvitals.integrations.trl._batch import GroupBatch
from rlvitals.integrations.trl._callback import (
    DEFAULT_DOCTOR_EVERY,
    RECORDING_SUBDIR,
    RlvitalsCallback,
)
from rlvitals.integrations.trl._sampler import PosteriorSampler
from rlvitals.integrations.trl._trainer import (
    STATE_FILE,
    RlvitalsGRPOMixin,
    RlvitalsGRPOTrainer,
    default_estimator,
    with_estimator,
)

__all__ = [
    "DEFAULT_DOCTOR_EVERY",
    "RECORDING_SUBDIR",
    "STATE_FILE",
    "GroupBatch",
    "PosteriorSampler",
    "RlvitalsCallback",
    "RlvitalsGRPOMixin",
    "RlvitalsGRPOTrainer",
    "default_estimator",
    "with_estimator",
]

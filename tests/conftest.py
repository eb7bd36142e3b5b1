"""The helper modules beside the tests, loaded once per process under stable names.

The suite runs with ``--import-mode=importlib``, so tests/ is not on ``sys.path`` (putting it
there would also let the tests/verl folder pass for the ``verl`` package), and a test file cannot
``import _binary_producers``. pytest imports this file before any test module below it; it loads
each helper from its file and registers it in ``sys.modules``, so a test file writes
``import rlvitals_tests_binary_producers as P``. One module object per process also means one
cache of produced files (one real TRL run, one set of binary logs) per process.

The helpers import only the standard library at import time (TRL, torch, wandb... are imported
inside their functions), so loading them here is cheap and has no side effects.

The labelled corpus and the detectors' test runs are the package ``rlvitals_corpus`` in the
repository's ``dev/`` folder (development only: the wheel does not ship it); ``dev/`` goes on
``sys.path`` here, so test files write ``from rlvitals_corpus.fixtures import PAIRS``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

DEV = Path(__file__).resolve().parents[1] / "dev"
"""Where ``rlvitals_corpus`` lives."""
if str(DEV) not in sys.path:
    sys.path.insert(0, str(DEV))

HELPERS = {
    "rlvitals_tests_trl_harness": "trl_ddp_script.py",
    "rlvitals_tests_trl_producer": "_trl_producer.py",
    "rlvitals_tests_binary_producers": "_binary_producers.py",
    "rlvitals_tests_format_producers": "_format_producers.py",
    "rlvitals_tests_ranges": "_ranges.py",
}
"""Module name -> file in tests/; in load order (the TRL producer uses the TRL harness)."""


def _load(name: str, filename: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)


for _name, _filename in HELPERS.items():
    _load(_name, _filename)


# Hypothesis: random examples on a developer's machine (new ones every run, to find bugs), the
# same examples on every CI run (``.ci/run`` sets RLVITALS_HYPOTHESIS=ci), so a landing is
# decided by the code and not by the draw. Profiles set here are inherited by the tests'
# own ``@settings(max_examples=...)``. The veRL venv does not install hypothesis.
try:
    from hypothesis import settings as _hyp_settings
except ImportError:  # pragma: no cover - the veRL venv
    pass
else:
    _hyp_settings.register_profile("ci", derandomize=True, print_blob=True)
    _hyp_settings.load_profile(os.environ.get("RLVITALS_HYPOTHESIS", "default"))

"""Lists derived from one declaration (issue 24.4): every list of formats, estimators and
trainers is read from what each one declares, and a test fails where a declaration lacks its
fixture, its docs entry or its advice knobs."""

from __future__ import annotations

import dataclasses

import pytest

from rlvitals.estimators import ESTIMATORS, EstimatorName, register_estimator
from rlvitals.estimators._base import _BUILTIN_PACKAGE


def _builtin_estimators() -> set[str]:
    return {
        n
        for n in ESTIMATORS.names()
        if ESTIMATORS.get(n).fn.__module__.startswith(_BUILTIN_PACKAGE)
    }


def test_estimator_name_is_the_built_in_registry():
    """Regression: history_baseline was registered but missing from EstimatorName, so the veRL
    adapter (which read the enum) never registered rlvitals_history_baseline."""
    assert {e.value for e in EstimatorName} == _builtin_estimators()
    assert "history_baseline" in _builtin_estimators()


def test_a_built_in_estimator_missing_from_the_enum_fails_to_register():
    @dataclasses.dataclass(frozen=True)
    class Cfg:
        pass

    def fn(rewards, group_ids, config, state):
        return rewards, {}, None

    fn.__module__ = _BUILTIN_PACKAGE + "made_up"
    with pytest.raises(ValueError, match="EstimatorName"):
        register_estimator("made_up_builtin", Cfg)(fn)
    assert "made_up_builtin" not in ESTIMATORS


def test_every_estimator_is_documented_with_a_scale():
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "estimators.md").read_text()
    for name in _builtin_estimators():
        assert f"`{name}`" in page, name
        assert ESTIMATORS.get(name).scale is not None, name

"""Lists derived from one declaration (issue 24.4): every list of formats, estimators and
trainers is read from what each one declares, and a test fails where a declaration lacks its
fixture, its docs entry or (a trainer) its advice knobs."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

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
    page = (Path(__file__).parents[1] / "docs" / "estimators.md").read_text()
    for name in _builtin_estimators():
        assert f"`{name}`" in page, name
        assert ESTIMATORS.get(name).scale is not None, name


ROOT = Path(__file__).resolve().parents[1]


def test_the_importer_catalogue_is_what_the_importers_declare():
    """``_catalogue.py`` is generated from each importer's ``register(Importer(...))`` call."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_importers.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_declared_format_has_a_docs_entry_and_file_patterns_or_folders():
    from rlvitals.importers._catalogue import CATALOGUE

    page = (ROOT / "docs" / "importers.md").read_text()
    table = page.split("## Every format", 1)[1].split("\n\n", 2)[1]
    rows = {line.split(" | ")[0] for line in table.splitlines()}
    for name, (_module, pre, files) in CATALOGUE.items():
        assert any(f"`{name}`" in r for r in rows), f"{name}: no row in docs/importers.md"
        assert files or pre.dirs, f"{name}: a folder walk would never find it"


def test_a_registered_importer_s_precheck_gates_its_sniffer(tmp_path):
    """An importer from outside the package may declare a pre-check; sniffing honours it."""
    from rlvitals.importers import IMPORTERS, Importer, Precheck, register, sniff

    if "toy_gated" not in IMPORTERS:
        register(
            Importer(
                "toy_gated",
                "a toy",
                lambda p, h: 0.99 if p.suffix == ".toygate" else 0.0,
                lambda p, progress=None: None,
                precheck=Precheck(magic=(b"TOYGATE",)),
            )
        )
    yes, no = tmp_path / "a.toygate", tmp_path / "b.toygate"
    yes.write_bytes(b"TOYGATE 1\n")
    no.write_bytes(b"\x00\x01 not it\n")
    assert sniff(yes).name == "toy_gated"
    with pytest.raises(Exception, match="unknown format"):
        sniff(no)


def _trainer_modules() -> list[str]:
    import pkgutil

    import rlvitals.trainers as trainers

    return [m.name for m in pkgutil.iter_modules(trainers.__path__) if m.name[0] != "_"]


def test_every_trainer_module_declares_itself_and_is_tried():
    """``trainers/<name>.py`` declares ``TRAINER`` under its own name, and is one of the
    modules :func:`facts_from_config` tries (a module left out of ``_TRAINERS`` would declare
    knobs no run could ever reach)."""
    import importlib

    from rlvitals.trainers import TRAINERS

    names = _trainer_modules()
    assert names
    for name in names:
        mod = importlib.import_module(f"rlvitals.trainers.{name}")
        assert mod.TRAINER.name == name, f"{name}: TRAINER.name is {mod.TRAINER.name!r}"
    assert sorted(TRAINERS) == sorted(names)


def test_every_trainer_has_advice_knobs():
    """A trainer names the settings of the advice's concepts, so the doctor's advice can say
    which of its settings to change; a knob of a concept the advice does not have is a typo."""
    from rlvitals.advice import CONCEPTS, KNOBS, MITIGATIONS
    from rlvitals.trainers import TRAINERS

    for name, t in TRAINERS.items():
        assert t.knobs, f"{name}: no advice knobs in its TRAINER declaration"
        assert "group_size" in t.knobs, f"{name}: the group size has no knob"
        assert set(t.knobs) <= set(CONCEPTS), f"{name}: {set(t.knobs) - set(CONCEPTS)}"
        assert set(t.mitigations) <= set(MITIGATIONS), name
        for concept, setting in t.knobs.items():
            assert KNOBS[concept][name] == setting
        steps, marks = t.log_keys  # an export is recognised by both, or not at all
        assert bool(steps) == bool(marks), name


def test_every_trainer_has_a_configuration_fixture_it_recognises():
    """``tests/trainer_configs/<name>.json``: a configuration as the trainer writes it (its
    source cited) and the facts it states; recognition goes through every trainer in order."""
    import json

    from rlvitals.trainers import TRAINERS, facts_from_config

    folder = ROOT / "tests" / "trainer_configs"
    assert sorted(p.stem for p in folder.glob("*.json")) == sorted(TRAINERS)
    for name in TRAINERS:
        case = json.loads((folder / f"{name}.json").read_text())
        assert case["source"], name
        facts = facts_from_config(case["config"])
        assert facts is not None and facts.trainer == name, (name, facts)
        for key, value in case["facts"].items():
            assert getattr(facts, key) == value, (name, key, getattr(facts, key), value)


def test_every_trainer_has_a_docs_entry():
    from rlvitals.trainers import TRAINERS

    page = (ROOT / "docs" / "trainers.md").read_text()
    for name in TRAINERS:
        assert f"\n## `{name}`\n" in page, f"{name}: no section in docs/trainers.md"


def test_post_filter_trainers_are_read_from_the_declarations():
    from rlvitals.trainers import POST_FILTER_TRAINERS, TRAINERS
    from rlvitals.vitals import filtering

    assert filtering.POST_FILTER_TRAINERS is POST_FILTER_TRAINERS
    assert {n for n, t in TRAINERS.items() if t.post_filter} == POST_FILTER_TRAINERS
    assert "verl" in POST_FILTER_TRAINERS and "trl" not in POST_FILTER_TRAINERS

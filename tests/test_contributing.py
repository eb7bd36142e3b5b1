"""CONTRIBUTING.md's steps, followed once: a format of one's own (an importer registered from
outside the package) and an estimator of one's own are found, read and judged like the built-in
ones, and every file, folder and script the recipes name exists. (Its detector and importer
scaffolders are followed by tests/test_scaffold.py.)"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import rlvitals
from rlvitals.errors import InputError
from rlvitals.importers import IMPORTERS, Importer, register, sniff
from rlvitals.recording.run import Manifest, Run, RunBuilder


def _sniff_toy(path: Path, head: bytes) -> float:
    return 0.99 if head.startswith(b"TOYLOG 1\n") else 0.0


def _load_toy(path: Path, progress=None) -> Run:
    """One 'step reward zero_frac' line per step after a 'TOYLOG 1' header."""
    b = RunBuilder(Manifest(source=str(path), trainer="toy", group_size=4))
    for lineno, line in enumerate(path.read_text().splitlines()[1:], start=2):
        try:
            step, reward, zero = line.split()
            b.add_row(int(step), {"reward": float(reward), "frac_reward_zero_std": float(zero)})
        except ValueError:
            raise InputError(path, "expected 'step reward zero_frac'", f"line {lineno}") from None
    return b.build()


def test_an_importer_of_ones_own_is_sniffed_and_diagnosed(tmp_path):
    if "toy" not in IMPORTERS:
        register(Importer("toy", "a toy log (CONTRIBUTING.md)", _sniff_toy, _load_toy))
    p = tmp_path / "run.toy"
    p.write_text(
        "TOYLOG 1\n" + "".join(f"{s} 0.5 {0.2 if s < 60 else 1.0}\n" for s in range(1, 101))
    )
    assert sniff(p).name == "toy"
    d = rlvitals.diagnose(rlvitals.load(p))
    assert d.run.manifest.format == "toy"
    assert [f.onset_step for f in d.by_id("DEGENERATE_GROUPS")] == [60]
    bad = tmp_path / "bad.toy"
    bad.write_text("TOYLOG 1\n1 0.5\n")
    try:
        rlvitals.load(bad)
    except InputError as e:
        assert str(e) == f"{bad}:line 2: expected 'step reward zero_frac'"
    else:
        raise AssertionError("bad input must raise InputError")


@dataclass(frozen=True)
class HalfGrpoConfig:
    """Knobs of ``half_grpo`` (a toy).

    Attributes:
        tau (float, default 1e-6): collapse tolerance.
    """

    tau: float = 1e-6


def test_an_estimator_of_ones_own_states_its_scale(tmp_path):
    from rlvitals.estimators import ESTIMATORS, register_estimator
    from rlvitals.estimators.common import common_metrics
    from rlvitals.signal import advantages_from_stats, group_stats

    if "half_grpo" not in ESTIMATORS:

        @register_estimator("half_grpo", HalfGrpoConfig, scale="none", summary="GRPO / 2")
        def half_grpo(rewards, group_ids, config, state=None):
            stats = group_stats(rewards, group_ids, tau=config.tau)
            adv = advantages_from_stats(stats, "dr_grpo") / 2
            return adv, common_metrics(stats, adv, tau=config.tau, r_min=0.0, r_max=1.0), None

    adv, metrics, _ = rlvitals.estimate(
        "half_grpo", np.array([1.0, 0.0, 1.0, 1.0]), np.array([0, 0, 1, 1])
    )
    assert adv.tolist() == [0.25, -0.25, 0.0, 0.0] and metrics["acr"] == 0.5
    # A run recorded with it is judged by its scale: advantages about the reward std (Dr. GRPO
    # gates, scaled by the run's own level), not GRPO's ~1.
    b = RunBuilder(Manifest(trainer="mine", estimator="half_grpo"))
    for s in range(1, 121):
        b.add_row(s, {"adv_std": 0.2 if s < 60 else 0.01, "loss": 0.1, "grad_norm": 0.3})
    d = rlvitals.diagnose(b.build())
    assert d.vitals.adv_scale == "none"
    assert [f.onset_step for f in d.by_id("ADV_COLLAPSE")] == [60]
    json.dumps(d.to_dict())


def test_every_path_and_script_contributing_names_exists():
    """CONTRIBUTING.md's recipes match the code: every file, folder and script it names is
    there (names with a placeholder, ``my_id`` or ``<trainer>``, are what a recipe creates)."""
    import re

    root = Path(__file__).resolve().parents[1]
    bases = (root, root / "src", root / "src" / "rlvitals", root / "dev" / "rlvitals_corpus")
    named = []
    for token in re.findall(r"`([^`\n]+)`", (root / "CONTRIBUTING.md").read_text()):
        word = token.split()[1] if token.startswith("python ") else token
        if ("/" in word or word.endswith(".py")) and not re.search(r"<|my_|MY_|\.\./", word):
            named.append(word)
    assert len(named) > 20, named
    missing = [w for w in named if not any((b / w).exists() for b in bases)]
    assert not missing, f"CONTRIBUTING.md names what does not exist: {missing}"

"""SkyRL and slime console logs (byte-faithful to ``ConsoleLogger.log`` of skyrl 0.3.0 and to
slime's ``perf {rollout_id}: {log_dict}`` lines: ``write_skyrl``, ``write_slime``)."""

from __future__ import annotations

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, sniff
from rlvitals.vitals import compute_vitals


def test_skyrl_console(tmp_path):
    run = F.simulate(40)
    for ansi in (False, True):
        p = F.write_skyrl(tmp_path / f"sky{ansi}.log", run, ansi=ansi)
        assert sniff(p).name == "skyrl_console"
        r = load(p)
        assert r.steps.tolist() == list(range(1, 41)) and r.manifest.group_size == 4
        assert "trainer/global_step" not in r.series
        v = compute_vitals(r)
        assert np.allclose(v.series["filtered_frac"], [s.zero_std_frac for s in run])
        assert v.evidence == "zero_std_frac"


def test_slime_console_rollout_axis(tmp_path):
    run = F.simulate(40)
    p = F.write_slime(tmp_path / "slime.log", run)
    assert sniff(p).name == "slime_console"
    r = load(p)
    assert r.steps.tolist() == list(range(40)) and "rollout/step" in r.manifest.step_key
    assert r.manifest.group_size == 4 and r.has("pg_loss")
    v = compute_vitals(r)
    assert np.allclose(v.series["acr"], [s.zero_std_frac for s in run])


def test_slime_without_launch_says_the_denominator_is_unknown(tmp_path):
    p = F.write_slime(tmp_path / "slime.log", F.simulate(10), launch=False)
    v = compute_vitals(load(p))
    assert any("rollout_batch_size" in n and "unknown" in n for n in v.notes)

"""prime-rl FileMonitor ``metrics.jsonl`` (byte-faithful: ``write_prime_rl``)."""

from __future__ import annotations

import json

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, sniff
from rlvitals.vitals import compute_vitals


def test_solve_splits_are_the_collapse_evidence(tmp_path):
    run = F.simulate(40)
    p = F.write_prime_rl(tmp_path / "metrics.jsonl", run)
    assert sniff(p).name == "prime_rl"
    r = load(p)
    assert r.steps.tolist() == list(range(40)) and any("null" in w for w in r.warnings)
    assert r.manifest.filters_zero_var is True
    v = compute_vitals(r)
    assert v.evidence == "zero_std_frac"
    assert np.allclose(v.series["acr"], [s.solve_all + s.solve_none for s in run])
    assert np.allclose(v.series["acr_solve_all"], [s.solve_all for s in run])


def test_older_key_names_and_solved_spelling(tmp_path):
    p = tmp_path / "m.jsonl"
    rows = [{"step": s, "time": 1.0, "batch/solve_none": 0.25, "solved_all": 0.5} for s in range(3)]
    p.write_text("".join(json.dumps(x) + "\n" for x in rows))
    v = compute_vitals(load(p))
    assert v.series["acr"].tolist() == [0.75] * 3

"""NeMo-RL ``train_data_step{N}.jsonl`` dumps (byte-faithful to ``Logger.log_batched_dict_as_jsonl``
of NVIDIA-NeMo/RL @ 0275e758: ``tests/_format_producers.py`` ``write_nemo_rl``)."""

from __future__ import annotations

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, runs_of, sniff
from rlvitals.vitals import compute_vitals


def test_exp_dir_with_config(tmp_path):
    run = F.simulate(12)
    exp = F.write_nemo_rl(tmp_path / "logs" / "exp_001", run)
    assert sniff(exp).name == "nemo_rl"
    r = load(exp)
    assert r.manifest.group_size == 4 and r.manifest.estimator == "grpo_loo"
    assert r.groups.unique_steps().tolist() == list(range(1, 13))
    v = compute_vitals(r)
    assert np.allclose(v.series["acr"], [s.zero_std_frac for s in run])


def test_g_inferred_from_the_advantages(tmp_path):
    exp = F.write_nemo_rl(tmp_path / "exp_001", F.simulate(6, g=8), g=8, config=False)
    r = load(exp)
    assert r.manifest.group_size == 8 and any("inferred" in w for w in r.warnings)


def test_one_dump_and_several_experiments(tmp_path):
    F.write_nemo_rl(tmp_path / "logs" / "exp_001", F.simulate(3))
    F.write_nemo_rl(tmp_path / "logs" / "exp_002", F.simulate(5))
    r = load(tmp_path / "logs")
    assert len(runs_of(r)) == 2 and r.groups.unique_steps().size == 5
    assert load(tmp_path / "logs", run="exp_001").groups.unique_steps().size == 3
    one = load(tmp_path / "logs" / "exp_001" / "train_data_step2.jsonl")
    assert one.groups.unique_steps().tolist() == [2]

"""ms-swift ``logging.jsonl`` / ``completions.jsonl`` (byte-faithful to ms-swift 4.6.0's writers:
``tests/_format_producers.py`` ``write_ms_swift``)."""

from __future__ import annotations

import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, sniff


def test_logging_jsonl_with_args_and_completions(tmp_path):
    run = F.simulate(30)
    p = F.write_ms_swift(tmp_path / "out", run)
    assert sniff(p).name == "ms_swift"
    r = load(p)
    assert r.steps.tolist() == list(range(1, 31))
    assert "global_step/max_steps" in r.manifest.step_key
    assert r.manifest.group_size == 4 and r.manifest.kl_coef == 0.04
    assert r.groups is not None and r.groups.n_groups == 30 * 8
    assert r.manifest.reward_std_kind == "group_mean"
    assert "elapsed_time" not in r.unknown_keys


def test_completions_alone(tmp_path):
    F.write_ms_swift(tmp_path / "out", F.simulate(10))
    c = tmp_path / "out" / "completions.jsonl"
    assert sniff(c).name == "ms_swift_completions"
    r = load(c)
    assert r.groups.n_groups == 80 and set(r.groups.sizes().tolist()) == {4}

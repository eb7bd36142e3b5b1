"""The live Monitor: a sliding window of a run, diagnosed by the real doctor."""

from __future__ import annotations

import numpy as np
import pytest

from rlvitals.integrations.monitor import Monitor
from rlvitals.recording import Manifest

G, K = 8, 6


def _healthy(rng: np.random.Generator) -> np.ndarray:
    """Every group holds both outcomes: nothing collapsed."""
    r = (rng.random((K, G)) < 0.5).astype(float)
    r[:, 0], r[:, 1] = 1.0, 0.0
    return r.reshape(-1)


def _feed(mon: Monitor, steps: range, rewards_fn) -> None:
    ids = np.repeat(np.arange(K), G)
    for s in steps:
        r = rewards_fn()
        mon.feed_groups(s, r, ids, prompts=[f"p{j}" for j in range(K)], advantages=r - 0.5)
        mon.feed_scalars(s, {"reward": float(r.mean()), "loss": 0.1, "note": "text is ignored"})


def test_new_findings_are_reported_once_per_episode():
    rng = np.random.default_rng(0)
    mon = Monitor(Manifest(trainer="test", group_size=G), window=40)
    _feed(mon, range(1, 41), lambda: np.zeros(K * G))  # every group fails
    first = mon.check()
    assert first.step == 40
    assert "DEGENERATE_GROUPS" in {f.id for f in first.new}
    again = mon.check()
    assert "DEGENERATE_GROUPS" in {f.id for f in again.findings}
    assert "DEGENERATE_GROUPS" not in {f.id for f in again.new}
    _feed(mon, range(41, 81), lambda: _healthy(rng))  # the window now holds healthy steps only
    healed = mon.check()
    assert "DEGENERATE_GROUPS" not in {f.id for f in healed.findings}
    _feed(mon, range(81, 121), lambda: np.zeros(K * G))
    assert "DEGENERATE_GROUPS" in {f.id for f in mon.check().new}


def test_window_bounds_memory_and_builds_a_run():
    mon = Monitor(window=5)
    _feed(mon, range(1, 13), lambda: np.ones(K * G))
    assert mon.n_steps == 5
    run = mon.run()
    assert run.steps.tolist() == [8, 9, 10, 11, 12]
    assert run.groups.n_groups == 5 * K and run.groups.unique_steps().tolist() == [8, 9, 10, 11, 12]
    assert run.groups.prompt.tolist()[:K] == [f"p{j}" for j in range(K)]
    np.testing.assert_array_equal(run.groups.advantages, 0.5)
    assert "note" not in run.series


def test_bad_arguments():
    with pytest.raises(ValueError, match="window"):
        Monitor(window=0)
    with pytest.raises(ValueError, match="differ"):
        Monitor().feed_groups(1, np.zeros(4), np.zeros(3, dtype=int))

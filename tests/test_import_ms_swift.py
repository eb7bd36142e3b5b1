"""ms-swift ``logging.jsonl`` / ``completions.jsonl`` (byte-faithful to ms-swift 4.6.0's writers:
``tests/_format_producers.py`` ``write_ms_swift``)."""

from __future__ import annotations

import math

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py
from hypothesis import given, settings
from hypothesis import strategies as st

from rlvitals.importers import load, sniff
from rlvitals.importers._groups import Samples


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


# --- the columnar per-sample path equals the plain definition --------------------------------

_row = st.tuples(st.integers(0, 4), st.sampled_from(["a", "b", "c" * 100, None]), st.floats(0, 1))


def _reference(rows, g):
    """Runs of one (step, prompt), cut into chunks of g (or the runs' gcd), sorted by step."""
    runs = []
    for s, p, r in rows:
        if runs and runs[-1][0] == s and runs[-1][1] == p:
            runs[-1][2].append(r)
        else:
            runs.append((s, p, [r]))
    if g is None:
        g = math.gcd(*(len(x[2]) for x in runs)) or None
    groups = []
    for s, p, rs in runs:
        c = g or len(rs)
        groups += [(s, p, rs[i : i + c]) for i in range(0, len(rs), c)]
    groups.sort(key=lambda x: x[0])  # stable, as GroupTable.from_lists
    return groups, g


@settings(max_examples=200, deadline=None, database=None)
@given(
    blocks=st.lists(st.lists(_row, max_size=12), max_size=5),
    one_by_one=st.lists(st.booleans(), max_size=5),
    g=st.sampled_from([None, 1, 2, 3]),
)
def test_samples_table_is_runs_cut_into_groups(blocks, one_by_one, g):
    """``Samples`` (blocks through numpy, single rows through a buffer) groups exactly as the
    plain definition: consecutive rows of one step and prompt, cut into chunks of G."""
    s = Samples()
    for i, block in enumerate(blocks):
        if i < len(one_by_one) and one_by_one[i]:
            for st_, p, r in block:
                s.add(st_, p, r, r - 0.5)
        elif block:
            s.add_block(
                np.array([b[0] for b in block]),
                [b[1] for b in block],
                np.array([b[2] for b in block]),
                np.array([b[2] - 0.5 for b in block]),
            )
    rows = [r for block in blocks for r in block]
    table, g_used, _ = s.table(g)
    if not rows:
        assert table is None
        return
    want, want_g = _reference(rows, g)
    assert g_used == want_g
    assert table.step.tolist() == [x[0] for x in want]
    got = [table.rewards[a:b].tolist() for a, b in zip(table.offsets[:-1], table.offsets[1:])]
    assert got == [x[2] for x in want]
    np.testing.assert_allclose(table.advantages, table.rewards - 0.5)
    for (_, p, _), got_p in zip(
        want, table.prompt if table.prompt is not None else [None] * len(want)
    ):
        if p is None or len(p) <= 64:
            assert got_p == p
        else:  # a long prompt is kept as a digest
            assert got_p.startswith("blake2b:")
    assert (table.prompt is None) == all(p is None for _, p, _ in want)

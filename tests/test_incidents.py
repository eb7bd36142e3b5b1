"""Incidents (issue 10, item 1): findings that share a cause and a time are one incident, with
the root cause named by the evidence chain, and every finding in exactly one incident."""

from __future__ import annotations

import numpy as np

from rlvitals.detectors import Finding, Severity
from rlvitals.doctor import diagnose, diagnose_path
from rlvitals.doctor.incidents import group_findings
from rlvitals.examples import example_path
from rlvitals.recording import RunBuilder
from rlvitals.recording.run import Manifest


def _every_finding_once(d) -> None:
    ids = [id(f) for inc in d.incidents for f in inc.findings]
    assert sorted(ids) == sorted(id(f) for f in d.findings)


def test_the_demo_collapse_is_one_incident_not_five_warnings():
    d = diagnose_path(example_path("collapse"))
    assert len(d.findings) >= 4
    assert len(d.incidents) == 1
    inc = d.incidents[0]
    assert inc.theme == "collapse" and inc.severity == "warn"
    # identical completions: more collapse than the pass rate explains is the root
    assert inc.root == "EXCESS_COLLAPSE" and inc.findings[0].id == "EXCESS_COLLAPSE"
    assert inc.onset_step == min(f.onset_step for f in d.findings)
    assert inc.actions[0] == inc.findings[0].actions[0]
    _every_finding_once(d)


def _gpg_math_rows() -> dict[int, dict[str, float]]:
    """Shaped like a real veRL GPG math run: at step ~157 the response length runs into the
    limit, truncation follows a step later and entropy collapses at the same time."""
    rng = np.random.default_rng(3)
    rows = {}
    for s in range(1, 301):
        late = s >= 157
        length = (900 if not late else 2950) * np.exp(rng.normal(0, 0.03))
        rows[s] = {
            "critic/score/mean": 0.5 + 0.001 * s + rng.normal(0, 0.02),
            "response_length/mean": float(min(length, 3072)),
            "response_length/max": 3072.0,
            "response_length/clip_ratio": float(0.02 if s < 158 else 0.6 + rng.normal(0, 0.03)),
            "actor/entropy": float((0.45 if not late else 0.02) * np.exp(rng.normal(0, 0.03))),
            "actor/grad_norm": float(0.3 * np.exp(rng.normal(0, 0.2))),
            "actor/pg_loss": float(rng.normal(0, 0.01)),
        }
    return rows


def _run(manifest: Manifest, rows: dict[int, dict[str, float]]):
    b = RunBuilder(manifest)
    for s, row in rows.items():
        b.add_row(s, row)
    return b.build()


def test_length_runaway_with_entropy_collapse_is_one_incident_rooted_in_length():
    d = diagnose(_run(Manifest(trainer="verl"), _gpg_math_rows()))
    ids = {f.id for f in d.findings}
    assert {"LENGTH_EXPLOSION", "TRUNCATION", "ENTROPY_COLLAPSE"} <= ids
    length = [i for i in d.incidents if "LENGTH_EXPLOSION" in i.ids]
    assert len(length) == 1
    inc = length[0]
    assert {"TRUNCATION", "ENTROPY_COLLAPSE"} <= set(inc.ids)
    assert inc.root == "LENGTH_EXPLOSION"
    assert "repetition" in inc.title.lower() or "repetition" in inc.cause.lower()
    assert "temperature" not in inc.actions[0]  # not "raise the temperature" first
    _every_finding_once(d)


def _f(det_id, onset, end=None, severity=Severity.WARN, **metrics):
    return Finding(
        det_id,
        severity,
        f"{det_id} fired",
        onset_step=onset,
        end_step=end,
        metrics=metrics,
        actions=[f"fix {det_id}"],
    )


def test_all_three_collapse_detectors_start_from_reward_variance():
    fs = [
        _f("ADV_COLLAPSE", 62),
        _f("REWARD_STD_DEATH", 60, verdict="not at the ceiling"),
        _f("DEGENERATE_GROUPS", 61, kind="too hard"),
    ]
    (inc,) = group_findings(fs)
    assert inc.root in ("DEGENERATE_GROUPS", "REWARD_STD_DEATH")
    assert "too hard" in inc.title
    assert "reward variance" in inc.cause.lower()
    assert inc.actions[0] == f"fix {inc.root}"


def test_only_adv_collapse_points_at_the_plumbing():
    b = RunBuilder(Manifest(trainer="trl", group_size=8))
    for s in range(1, 121):
        b.add_row(s, {"reward": 0.5, "reward_std": 0.4, "adv_std": 0.95 if s < 60 else 0.01})
    d = diagnose(b.build())
    incs = [i for i in d.incidents if "ADV_COLLAPSE" in i.ids]
    assert len(incs) == 1
    assert "plumbing" in (incs[0].title + incs[0].cause)


def test_findings_far_apart_in_time_are_separate_incidents():
    fs = [_f("DEGENERATE_GROUPS", 10, 20, kind="too hard"), _f("DEGENERATE_GROUPS", 400, None)]
    assert len(group_findings(fs)) == 2


def test_unrelated_findings_at_the_same_time_stay_apart():
    fs = [_f("KL_BLOWUP", 50), _f("DEGENERATE_GROUPS", 50, kind="too easy")]
    incs = group_findings(fs)
    assert sorted(len(i.findings) for i in incs) == [1, 1]


def test_grad_nonfinite_is_the_root_of_an_instability():
    fs = [_f("KL_BLOWUP", 48), _f("GRAD_NONFINITE", 50, severity=Severity.CRITICAL)]
    (inc,) = group_findings(fs)
    assert inc.root == "GRAD_NONFINITE" and inc.severity == "critical"


def test_incidents_sort_worst_first():
    fs = [_f("TRUNCATION", 5, severity=Severity.INFO), _f("KL_BLOWUP", 90)]
    assert [i.root for i in group_findings(fs)] == ["KL_BLOWUP", "TRUNCATION"]

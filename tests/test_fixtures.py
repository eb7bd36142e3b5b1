"""Every detector of the catalogue has its pair of test runs (``rlvitals_corpus.fixtures``): the
``bad`` run makes it fire (at the labelled onset, where the label has one), the ``good`` run
leaves it silent. A detector without a pair fails here."""

from __future__ import annotations

import pytest

from rlvitals.detectors import Detector, Severity, catalogue
from rlvitals.vitals import compute_vitals
from rlvitals_corpus.fixtures import PAIRS, Pair, pair, register

END_TOLERANCE = 5.0
"""Least allowed error of a reported end step, in logged steps (ends are judged looser than
onsets: a collapse clears gradually)."""


def _silent_below(cls: type[Detector]) -> int:
    """Findings from this rank up break the silence of a good run: warn or above, or the
    detector's own severity when it only ever reports info (SATURATION)."""
    return min(cls.severity.rank, Severity.WARN.rank)


def _problems(cls: type[Detector], p: Pair) -> list[str]:
    out = []
    lr = p.bad()
    found = [
        f
        for f in cls().check(compute_vitals(p.bad_run()))
        if Severity(f.severity).rank >= cls.severity.rank
    ]
    if not found:
        out.append(f"{cls.id}: silent on its bad run {lr.name}")
    lab = next((x for x in lr.expect if x.id == cls.id), None)
    if p.onset is not None and (lab is None or (lab.onset, lab.end) != (p.onset, p.end)):
        out.append(
            f"{cls.id}: the pair says onset {p.onset}, end {p.end}; the bad run's label says {lab}"
        )
    if found and lab is not None and lab.onset is not None:
        tol = lab.tolerance * lr.log_every
        best = min(found, key=lambda f: abs(f.onset_step - lab.onset))
        if abs(best.onset_step - lab.onset) > tol:
            out.append(f"{cls.id}: onset {best.onset_step}, labelled {lab.onset} (± {tol:g})")
        if lab.end is not None and not any(
            f.end_step is not None
            and abs(f.end_step - lab.end) <= max(lab.tolerance, END_TOLERANCE) * lr.log_every
            for f in found
        ):
            out.append(
                f"{cls.id}: no finding ends near step {lab.end}: "
                f"{[(f.onset_step, f.end_step) for f in found]}"
            )
    loud = [
        f
        for f in cls().check(compute_vitals(p.good_run()))
        if Severity(f.severity).rank >= _silent_below(cls)
    ]
    if loud:
        out.append(f"{cls.id}: fires on its good run {p.good().name}: {loud[0].message}")
    return out


def test_every_detector_has_a_bad_and_a_good_run():
    """One loop over the catalogue: the pair exists, the bad run fires, the good run is silent."""
    problems = []
    for cls in catalogue():
        if cls.id not in PAIRS:
            problems.append(
                f"{cls.id} has no test runs: register a Pair (a bad run that must "
                "fire, a good run that must stay silent) in "
                "dev/rlvitals_corpus/fixtures.py"
            )
            continue
        problems += _problems(cls, PAIRS[cls.id])
    stale = sorted(set(PAIRS) - {cls.id for cls in catalogue()})
    problems += [f"{i}: a pair for a detector that is not in the catalogue" for i in stale]
    assert problems == [], "\n".join(problems)


def test_pairs_are_reproducible_and_seeded():
    p = PAIRS["KL_BLOWUP"]
    a, b = p.bad_run(), p.bad_run(seed=0)
    assert (a.series["kl"] == b.series["kl"]).all()
    assert not (p.bad_run(seed=1).series["kl"] == a.series["kl"]).all()
    assert p.label() is not None and p.label().onset == p.onset
    c = PAIRS["ADV_COLLAPSE"]
    assert c.bad().params["seed"] == 11 and c.bad(seed=5).params["seed"] == 5


def test_the_recording_loss_pair_is_a_real_recording():
    p = PAIRS["RECORDING_LOSS"]
    bad, good = p.bad_run(), p.good_run()
    drops = [e for e in bad.events if e.kind == "dropped"]
    assert drops and sum(e.data["groups"] for e in drops) == bad.n_steps
    assert bad.groups is None and good.groups is not None and good.events == []
    assert good.groups.sizes().size == bad.n_steps * 8


def test_unknown_detector_and_a_second_pair_are_refused():
    with pytest.raises(KeyError, match=r"no test runs for 'NOPE'; valid: .*KL_BLOWUP"):
        pair("NOPE")
    with pytest.raises(ValueError, match="already registered"):
        register(PAIRS["KL_BLOWUP"])

"""The differential diagnosis: from the detectors' signs to the cause an RL engineer names first.

Detectors find signs (reward variance died, lengths at the cap); this layer turns the run's
series into a ranked list of conditions from the closed vocabulary of :mod:`rlvitals.conditions`,
each with its onset, the signs for it and against it, and what to do in the trainer's own keys.

Three steps:

1. **Events** (:class:`Events`): for each vitals series, its level at the first logged steps
   (before anything happened), its level late in the run, the step from which it held a new
   level (:func:`_onset`), and the state at the first logged step.
2. **Candidates**: one rule per condition reads the events (a cause is a pattern over several
   series: an ACR jump *at a constant pass rate*, truncation *with short terminated
   completions*), and gives an onset and a confidence.
3. **Order in time**: a cause precedes its consequences. A candidate that another one with an
   earlier (or equal) onset explains (:data:`EXPLAINS`: entropy blow-up -> run-away length ->
   reward floor) is kept as secondary; the primary is the earliest unexplained one.

Thresholds are module constants; each says what it was calibrated on: the failure zoo's
development seeds (:mod:`rlvitals.lab.failure_zoo`, ``python benchmarks/zoo.py --preset dev``)
and the 16 real logs of ``shared/real-logs`` (``python benchmarks/real_logs.py``), never the
synthetic corpus.
"""

from __future__ import annotations

import math
from typing import Any

from rlvitals.doctor.differential.actions import actions_for
from rlvitals.doctor.differential.calls import ConditionCall
from rlvitals.doctor.differential.rules import candidates, from_findings
from rlvitals.doctor.differential.signs import critic_baseline
from rlvitals.vitals.events import Events

__all__ = [
    "EXPLAINS",
    "SIGN_DETECTORS",
    "ConditionCall",
    "Events",
    "condition_severity",
    "differential",
]

TIE = 2
"""Onsets this many logged steps apart count as simultaneous when ordering causes."""
LAG = 0.2
"""A cause explains a consequence whose onset is up to this share of the run *earlier*: an
onset is where a series crosses a band around its early level, and a slow series (entropy,
truncation) crosses later than it starts to move (zoo dev: entropy rises from ~step 44 and
crosses 1.5x at 52 while the pass rate crosses at 40-56)."""

INFO_ONLY = {"SMALL_GROUPS"}
"""Conditions that inform but never lead when another condition is present (chance ties at a
small G are a fact of the set-up, not the cause of another failure)."""

EXPLAINS: dict[str, set[str]] = {
    "KL_BLOWUP": {"POLICY_DEGRADATION", "ENTROPY_BLOWUP", "ENTROPY_COLLAPSE", "RUNAWAY_LENGTH"},
    "ENTROPY_BLOWUP": {"RUNAWAY_LENGTH", "POLICY_DEGRADATION", "LENGTH_LIMIT", "TOO_HARD"},
    "VERIFIER_CONSTANT": {"POLICY_DEGRADATION", "TOO_HARD", "IDENTICAL_COMPLETIONS"},
    "IDENTICAL_COMPLETIONS": {"ENTROPY_COLLAPSE", "POLICY_DEGRADATION"},
    "RUNAWAY_LENGTH": {"POLICY_DEGRADATION", "TOO_HARD"},
    "LENGTH_LIMIT": {"TOO_HARD"},
    "ENTROPY_COLLAPSE": {"POLICY_DEGRADATION"},
    "SATURATED": {"ENTROPY_COLLAPSE"},
    "POLICY_DEGRADATION": {"TOO_HARD"},
    "ADVANTAGE_PIPELINE": {"POLICY_DEGRADATION"},
    "REWARD_HACKING": {"POLICY_DEGRADATION", "SATURATED"},
}
"""Cause -> the conditions it brings about (a consequence never leads when its cause came
first or at the same time)."""


SIGN_DETECTORS: dict[str, set[str]] = {
    "VERIFIER_CONSTANT": {"EXCESS_COLLAPSE", "REWARD_STD_DEATH", "DEGENERATE_GROUPS", "ACR_STALL"},
    "IDENTICAL_COMPLETIONS": {"EXCESS_COLLAPSE", "REWARD_STD_DEATH", "DEGENERATE_GROUPS"},
    "SATURATED": {"SATURATION", "DEGENERATE_GROUPS", "REWARD_STD_DEATH"},
    "TOO_HARD": {"DEGENERATE_GROUPS", "REWARD_STD_DEATH"},
    "SMALL_GROUPS": {"REWARD_STD_DEATH", "DEGENERATE_GROUPS", "EXCESS_COLLAPSE"},
    "NO_GROUP_BASELINE": {"GROUP_SIZE_ONE"},
    "ADVANTAGE_PIPELINE": {"ADV_COLLAPSE", "EXCESS_COLLAPSE"},
    "POLICY_DEGRADATION": {"DEGENERATE_GROUPS", "GRAD_SPIKE", "REWARD_HACKING"},
    "ENTROPY_COLLAPSE": {"ENTROPY_COLLAPSE"},
    "ENTROPY_BLOWUP": {"ENTROPY_COLLAPSE", "LENGTH_EXPLOSION"},
    "RUNAWAY_LENGTH": {"LENGTH_EXPLOSION", "TRUNCATION"},
    "LENGTH_LIMIT": {"TRUNCATION"},
    "KL_BLOWUP": {"KL_BLOWUP"},
    "REWARD_HACKING": {"REWARD_HACKING"},
}
"""The detectors whose family a condition belongs to: a condition is not named when the user
deselected all of them (``--select``/``--ignore``: a run checked for lengths only is not told
about its learning rate)."""


def condition_severity(cid: str) -> str:
    """``info`` for conditions that inform (chance ties at a small G), ``warn`` for the others
    (the run is failing, whatever its detectors' own severities); HEALTHY has none."""
    return "info" if cid in INFO_ONLY else "warn"


# -- 3. order in time --------------------------------------------------------------------------


def differential(diagnosis: Any) -> list[ConditionCall]:
    """The ranked conditions of a diagnosed run; the first is the primary.

    ``diagnosis`` is a :class:`rlvitals.doctor.Diagnosis` (its vitals and findings). A run with
    nothing wrong gives one ``HEALTHY`` call; a run the doctor could not judge gives none.
    """
    if diagnosis.not_judged():
        return []
    ev = Events.of(diagnosis.vitals)
    found = {f.id for f in diagnosis.findings}
    ran = set(diagnosis.detectors)
    calls = [c for c in candidates(ev, found) if SIGN_DETECTORS.get(c.id, ran) & ran]
    if not calls:
        calls = from_findings(diagnosis, ev)
    if not calls:
        return [
            ConditionCall(
                "HEALTHY",
                None,
                0.6,
                ["no condition's signs in the pass rate, ACR, entropy, lengths, KL or advantages"],
                primary=True,
            )
        ]
    tie = max(TIE * ev.step_gap(), LAG * (ev.steps[-1] - ev.steps[0]) if ev.steps.size else 0)

    def explained(c: ConditionCall) -> bool:
        for other in calls:
            if other is c or c.id not in EXPLAINS.get(other.id, ()):
                continue
            if other.onset_step is None or c.onset_step is None:
                return True
            if other.onset_step <= c.onset_step + tie:
                return True
        return False

    v = diagnosis.vitals
    ppo = critic_baseline(v)
    trainer = getattr(v.run.manifest, "trainer", None)
    for c in calls:
        c.actions = actions_for(c.id, trainer, group_relative=not ppo and v.group_size != 1)
    roots = (
        [c for c in calls if not explained(c) and c.id not in INFO_ONLY]
        or [c for c in calls if c.id not in INFO_ONLY]
        or calls
    )
    order = {cid: i for i, cid in enumerate(_PRIORITY)}
    roots.sort(
        key=lambda c: (
            c.onset_step if c.onset_step is not None else math.inf,
            -c.confidence,
            order.get(c.id, 99),
        )
    )
    primary = roots[0]
    primary.primary = True
    rest = sorted(
        (c for c in calls if c is not primary),
        key=lambda c: (c.onset_step if c.onset_step is not None else math.inf, order.get(c.id, 99)),
    )
    for c in rest:
        if c.id in EXPLAINS.get(primary.id, ()):
            c.against.append(f"follows {primary.id} (since step {primary.onset_step})")
    return [primary, *rest]


_PRIORITY = (
    "NO_GROUP_BASELINE",
    "VERIFIER_CONSTANT",
    "KL_BLOWUP",
    "ENTROPY_BLOWUP",
    "IDENTICAL_COMPLETIONS",
    "ADVANTAGE_PIPELINE",
    "RUNAWAY_LENGTH",
    "LENGTH_LIMIT",
    "SATURATED",
    "ENTROPY_COLLAPSE",
    "REWARD_HACKING",
    "POLICY_DEGRADATION",
    "TOO_HARD",
    "SMALL_GROUPS",
)
"""Order among causes with the same onset: the more specific, and the one a fix of which would
remove the others, first."""

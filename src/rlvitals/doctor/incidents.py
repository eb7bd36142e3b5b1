"""Incidents: the findings that share a cause and a time, told as one story with its root cause.

A collapse seldom fires one detector. When the prompts become too easy, DEGENERATE_GROUPS,
REWARD_STD_DEATH, ADV_COLLAPSE, ACR_STALL and ZERO_GRAD_STEPS can all fire within a few steps;
a length runaway fires LENGTH_EXPLOSION, TRUNCATION and often ENTROPY_COLLAPSE. Five warnings
read as five problems. An :class:`Incident` groups findings of related detectors whose episodes
meet in time, names the finding that is the likely root cause by the evidence chain
(DESIGN.md 4: when reward variance died, start there; when only the advantages died, the bug is
in the reward→advantage plumbing), and leads with that finding's advice.

Every finding belongs to exactly one incident (a lone finding is an incident of one), so the
incident list is a complete summary and the findings stay beneath it, each complete.

>>> from rlvitals.detectors import Finding, Severity
>>> fs = [
...     Finding("ACR_STALL", Severity.WARN, "ACR > 0.35 for 80 steps", onset_step=62),
...     Finding("DEGENERATE_GROUPS", Severity.WARN, "ACR >= 0.8", onset_step=60,
...             metrics={"kind": "too hard"}),
... ]
>>> [(i.root, i.onset_step, len(i.findings)) for i in group_findings(fs)]
[('DEGENERATE_GROUPS', 60, 2)]
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import field
from typing import TYPE_CHECKING, Any

from rlvitals._record import record
from rlvitals.detectors.base import Finding, Severity

if TYPE_CHECKING:
    from rlvitals.vitals import Vitals

__all__ = ["THEMES", "Incident", "group_findings"]

THEMES: dict[str, str] = {
    "ADV_COLLAPSE": "collapse",
    "DEGENERATE_GROUPS": "collapse",
    "REWARD_STD_DEATH": "collapse",
    "EXCESS_COLLAPSE": "collapse",
    "SATURATION": "collapse",
    "ACR_STALL": "collapse",
    "ACR_VOLATILE": "collapse",
    "ZERO_GRAD_STEPS": "collapse",
    "LENGTH_EXPLOSION": "length",
    "TRUNCATION": "length",
    "GRAD_NONFINITE": "instability",
    "GRAD_SPIKE": "instability",
    "KL_BLOWUP": "instability",
    "CLIP_SATURATION": "instability",
}
"""Detector ID → the theme whose findings can share a cause. ENTROPY_COLLAPSE and
THROUGHPUT_ROT join whichever incident they meet in time (entropy falls with a saturating or
looping policy; steps slow down as completions lengthen); other detectors stand alone."""

JOINERS = ("ENTROPY_COLLAPSE", "THROUGHPUT_ROT")
"""Detectors that join an incident of another theme when their episodes meet."""

GAP_STEPS = 10
"""Findings whose onset lies within this many logged steps after an incident's episodes (or
inside them) join it."""
GAP_SHARE = 0.05
"""... or within this share of the run's span, when that is larger."""

_PLUMBING_OK = ("DEGENERATE_GROUPS", "REWARD_STD_DEATH", "SATURATION")
"""Findings that say the reward variance itself died (the collapse is upstream of the
advantages)."""


@record
class Incident:
    """Findings that share a cause and a time.

    Attributes:
        theme: ``collapse``, ``length``, ``instability``, or the lone finding's detector family.
        title: what happened, in a few words ("Learning signal lost: the prompts are too easy").
        root: ID of the finding named as the likely root cause (first in :attr:`findings`).
        cause: one or two sentences: the root cause and the evidence chain that names it.
        severity: the highest severity among the findings.
        onset_step: the earliest onset (None when no finding has one).
        end_step: the last end step when every finding cleared, else None (ongoing).
        findings: the findings, root first, then by onset.
        actions: what to try, the root's advice first, without repeats.
    """

    theme: str
    title: str
    root: str
    cause: str
    severity: Severity
    onset_step: int | None
    end_step: int | None
    findings: list[Finding] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [f.id for f in self.findings]

    def to_dict(self, index: dict[int, int] | None = None) -> dict[str, Any]:
        """JSON form; ``index`` maps ``id(finding)`` to its position in the report's findings."""
        out: dict[str, Any] = {
            "theme": self.theme,
            "title": self.title,
            "root": self.root,
            "cause": self.cause,
            "severity": Severity(self.severity).value,
            "onset_step": self.onset_step,
            "end_step": self.end_step,
            "detectors": self.ids,
            "actions": list(self.actions),
        }
        if index is not None:
            out["findings"] = [index[id(f)] for f in self.findings]
        return out


def _theme(f: Finding, family: dict[str, str]) -> str:
    return THEMES.get(f.id) or family.get(f.id, "other")


def _by_onset(f: Finding) -> tuple[int, str]:
    """Sort key: onset step (none last), then ID."""
    return (f.onset_step if f.onset_step is not None else 2**62, f.id)


def _span(f: Finding, first: int, last: int) -> tuple[int, int]:
    start = f.onset_step if f.onset_step is not None else first
    return start, f.end_step if f.end_step is not None else last


def group_findings(
    findings: Sequence[Finding],
    vitals: Vitals | None = None,
    families: dict[str, str] | None = None,
) -> list[Incident]:
    """The incidents of ``findings`` (every finding in exactly one), worst first then by onset.

    ``vitals`` gives the run's span (for the time gap) and what it logs (for the root cause);
    ``families`` maps detector IDs to families (the registry's, by default).
    """
    if not findings:
        return []
    if families is None:
        families = _families()
    steps = [f.onset_step for f in findings if f.onset_step is not None]
    steps += [f.end_step for f in findings if f.end_step is not None]
    if vitals is not None and vitals.n_steps:
        first, last = int(vitals.steps[0]), int(vitals.steps[-1])
        every = max(1, vitals.log_every or 1)
    else:
        first, last, every = (min(steps), max(steps), 1) if steps else (0, 0, 1)
    gap = max(GAP_STEPS * every, int(GAP_SHARE * (last - first + 1)))

    clusters: list[tuple[str, list[Finding], int]] = []  # theme, members, end of their episodes
    by_onset = sorted(findings, key=lambda f: _span(f, first, last)[0])
    for f in by_onset:
        if f.id in JOINERS:
            continue
        theme = _theme(f, families)
        start, end = _span(f, first, last)
        if theme in ("collapse", "length", "instability"):
            for i, (t, members, c_end) in enumerate(clusters):
                if t == theme and start <= c_end + gap:
                    members.append(f)
                    clusters[i] = (t, members, max(c_end, end))
                    break
            else:
                clusters.append((theme, [f], end))
        else:
            clusters.append((theme, [f], end))
    for f in by_onset:  # the joiners go to the incident they meet, the collapse/length ones first
        if f.id not in JOINERS:
            continue
        start, end = _span(f, first, last)
        best = None
        for i, (t, members, c_end) in enumerate(clusters):
            c_start = min(_span(m, first, last)[0] for m in members)
            meets = t in ("collapse", "length") and c_start - gap <= start <= c_end + gap
            if meets and (best is None or (t == "length" and clusters[best][0] != "length")):
                best = i
        if best is None:
            clusters.append((_theme(f, families), [f], end))
        else:
            t, members, c_end = clusters[best]
            members.append(f)
            clusters[best] = (t, members, max(c_end, end))

    incidents = [_incident(t, members, vitals) for t, members, _ in clusters]
    incidents.sort(
        key=lambda i: (
            -Severity(i.severity).rank,
            i.onset_step if i.onset_step is not None else 2**62,
            i.root,
        )
    )
    return incidents


def _families() -> dict[str, str]:
    from rlvitals.detectors import DETECTORS, load_all

    load_all()
    return {name: DETECTORS.get(name).family for name in DETECTORS.names()}


def _first(members: list[Finding], *ids: str) -> Finding | None:
    for det_id in ids:
        for f in members:
            if f.id == det_id:
                return f
    return None


def _kind(f: Finding | None) -> str | None:
    return None if f is None else f.metrics.get("kind")


def _incident(theme: str, members: list[Finding], vitals: Vitals | None) -> Incident:
    root, title, cause = _root(theme, members, vitals)
    rest = sorted((f for f in members if f is not root), key=_by_onset)
    ordered = [root, *rest]
    actions: list[str] = []
    for f in ordered:
        for a in f.actions:
            if a not in actions:
                actions.append(a)
    onsets = [f.onset_step for f in members if f.onset_step is not None]
    ends = [f.end_step for f in members]
    return Incident(
        theme=theme,
        title=title,
        root=root.id,
        cause=cause,
        severity=max((Severity(f.severity) for f in members), key=lambda s: s.rank),
        onset_step=min(onsets) if onsets else None,
        end_step=None if any(e is None for e in ends) else max(e for e in ends if e is not None),
        findings=ordered,
        actions=actions,
    )


def _root(theme: str, members: list[Finding], vitals: Vitals | None) -> tuple[Finding, str, str]:
    """``(root finding, title, cause)`` by the evidence chain of ``theme``."""
    ids = {f.id for f in members}
    if theme == "collapse":
        return _collapse_root(members, ids, vitals)
    if theme == "length":
        le = _first(members, "LENGTH_EXPLOSION", "TRUNCATION")
        assert le is not None
        if "ENTROPY_COLLAPSE" in ids and le.id == "LENGTH_EXPLOSION":
            return (
                le,
                "Length runaway with entropy collapse: likely repetition loops",
                "completions grew into the length limit while the policy's entropy collapsed at "
                "the same time: the signature of a policy that repeats itself until it is cut "
                "off. The length growth is the root; truncation and the entropy drop follow it. "
                "Read completions from just after the onset before changing the temperature.",
            )
        if le.id == "LENGTH_EXPLOSION":
            tail = " and hit the limit (truncation follows it)" if "TRUNCATION" in ids else ""
            return le, "Length runaway", f"completions grew far past their early length{tail}."
        return (
            le,
            "Completions cut off at the length limit",
            "a large share of completions ends at the length limit; what is truncated gets a "
            "reward for an unfinished answer.",
        )
    if theme == "instability":
        root = _first(members, "GRAD_NONFINITE")
        if root is not None:
            return (
                root,
                "Numerical failure",
                "gradients became non-finite: the other instabilities follow from it.",
            )
        root = min(members, key=_by_onset)
        if len(members) == 1:
            return root, _title(root), root.message
        others = ", ".join(sorted(ids - {root.id}))
        return (
            root,
            "Training instability",
            f"{root.id} came first; {others} followed within the same stretch: the policy moved "
            "too far per update (learning rate, PPO epochs, clip range).",
        )
    root = members[0]
    return root, _title(root), root.message


def _collapse_root(
    members: list[Finding], ids: set[str], vitals: Vitals | None
) -> tuple[Finding, str, str]:
    plumbing = next(
        (f for f in members if f.id == "EXCESS_COLLAPSE" and _kind(f) == "plumbing"), None
    )
    if plumbing is not None:
        return (
            plumbing,
            "Advantages dead while rewards vary: reward→advantage plumbing",
            "the reward variance is alive while the advantages are flat: the rewards are fine "
            "and the bug is between them and the loss (normalisation, a scaling wrapper, "
            "advantages overwritten or detached).",
        )
    excess = next((f for f in members if f.id == "EXCESS_COLLAPSE" and _kind(f) == "excess"), None)
    died = _first(members, *_PLUMBING_OK)
    if excess is not None:
        if "ENTROPY_COLLAPSE" in ids:
            ent = _first(members, "ENTROPY_COLLAPSE")
            assert ent is not None
            return (
                ent,
                "Learning signal lost: the policy turned deterministic",
                "entropy collapsed and more groups collapsed than their pass rate explains: the "
                "completions of a group became identical, so their rewards agree.",
            )
        return (
            excess,
            "Learning signal lost: groups collapse more than their pass rate explains",
            "groups collapse far more often than completions that differ would by chance: "
            "check that the completions of a group differ and that the verifier can return "
            "both answers.",
        )
    if (
        died is not None
        and died.id == "SATURATION"
        and not (ids & {"DEGENERATE_GROUPS", "REWARD_STD_DEATH"})
    ):
        chain = ""
        if ids & {"ADV_COLLAPSE", "ACR_STALL", "ZERO_GRAD_STEPS", "ENTROPY_COLLAPSE"}:
            others = ", ".join(sorted(ids - {"SATURATION"}))
            verb = "follows" if len(ids) == 2 else "follow"
            chain = (
                f" {others} {verb} from it: a solved prompt set drains the signal and the entropy."
            )
        return (
            died,
            "Saturation: the policy solves its prompt set",
            "most groups are solved by every completion (or the reward sits at its ceiling), so "
            "little is left to learn: every further step on this prompt set buys less." + chain,
        )
    if died is not None:
        kind = _kind(_first(members, "DEGENERATE_GROUPS")) or (
            "too easy" if died.id == "SATURATION" else None
        )
        if kind is None and died.id == "REWARD_STD_DEATH":
            verdict = died.metrics.get("verdict")
            kind = "too easy" if verdict == "at the ceiling" else None
        what = {
            "too easy": ("the prompts became too easy", "the policy solves most groups outright"),
            "too hard": ("the prompts are too hard", "most groups fail every completion"),
            "flat": ("rewards agree within groups", "groups share one partial-credit reward"),
        }.get(kind or "", ("reward variance died", "the rewards of a group stopped differing"))
        chain = "; the flat advantages, stalled ACR and zero-gradient steps follow from it"
        if not (ids & {"ADV_COLLAPSE", "ACR_STALL", "ACR_VOLATILE", "ZERO_GRAD_STEPS"}):
            chain = ""
        return (
            died,
            f"Learning signal lost: {what[0]}",
            f"{what[1]}, so their advantages are zero{chain}. Start from the reward variance.",
        )
    adv = _first(members, "ADV_COLLAPSE")
    if adv is not None:
        if vitals is not None and not vitals.reward_variance_logged:
            return (
                adv,
                "Advantages flattened",
                "the advantages flattened; the run logs no reward variance, so a dead reward "
                "signal cannot be told from a plumbing bug (log reward_std or per-group rewards).",
            )
        return (
            adv,
            "Advantages flattened while reward variance did not die",
            "only the advantages collapsed, the reward variance detectors stayed silent: the bug "
            "is almost certainly in the reward→advantage plumbing (normalisation, a scaling "
            "wrapper).",
        )
    root = min(members, key=_by_onset)
    if len(members) == 1:
        return root, _title(root), root.message
    return root, "Learning signal lost", root.message


def _title(f: Finding) -> str:
    """The detector's one-line title (its docstring's first line)."""
    from rlvitals.detectors import DETECTORS, Detector

    try:
        cls = DETECTORS.get(f.id)
    except KeyError:
        return f.id
    doc = cls.__doc__ or ""
    if doc == Detector.__doc__ or not doc.strip():  # the page lives on the module
        doc = getattr(sys.modules.get(cls.__module__), "__doc__", "") or ""
    line = doc.strip().splitlines()[0] if doc.strip() else f.id
    return line.rstrip(".")

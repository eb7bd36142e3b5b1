"""When to stop a run, and from where to resume it.

A :class:`HaltPolicy` is a list of :class:`HaltRule` s; a run halts at the first check where an
ongoing incident matches one of them. A rule names a minimum severity, optionally a theme
(``collapse``, ``length``, ``instability``, or a detector family) or detector IDs, and how many
steps the incident must have lasted. The :class:`Halt` it produces names the **last healthy
step** (the step before the incident's onset) and, when the trainer's checkpoints are known,
the checkpoint at or before it to resume from: a checkpoint written after the onset already
holds the collapsed policy.

Rules from text (configuration files, the veRL adapter): comma-separated, each
``[SEVERITY|THEME|DETECTOR_ID][:STEPS]``:

>>> HaltPolicy.parse("critical").rules
[HaltRule(severity='critical', theme=None, detectors=(), lasting=0)]
>>> HaltPolicy.parse("collapse:20, GRAD_NONFINITE").rules  # doctest: +NORMALIZE_WHITESPACE
[HaltRule(severity='warn', theme='collapse', detectors=(), lasting=20),
 HaltRule(severity='info', theme=None, detectors=('GRAD_NONFINITE',), lasting=0)]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlvitals.detectors.base import Severity

__all__ = [
    "DEFAULT_THEME_SEVERITY",
    "Halt",
    "HaltPolicy",
    "HaltRule",
    "RlvitalsHalt",
    "resume_checkpoint",
    "step_folders",
]

DEFAULT_THEME_SEVERITY = "warn"
"""Minimum severity of a rule that names a theme but no severity (an ``info`` finding alone
never stops a run by theme)."""
_THEMES = ("collapse", "length", "instability")


@dataclass(frozen=True)
class HaltRule:
    """One reason to stop.

    Attributes:
        severity: the incident's severity must be at least this (``info``, ``warn``,
            ``critical``).
        theme: the incident's theme (``collapse``, ``length``, ``instability``, or the family
            of a lone finding: ``gradient``, ``kl``, ...), or None for any.
        detectors: the incident must hold one of these detector IDs (empty: any).
        lasting: the incident must have lasted at least this many steps (onset to now).
    """

    severity: str = "critical"
    theme: str | None = None
    detectors: tuple[str, ...] = ()
    lasting: int = 0

    def __post_init__(self) -> None:
        Severity.parse(self.severity)
        if isinstance(self.lasting, bool) or not isinstance(self.lasting, int) or self.lasting < 0:
            raise ValueError(f"lasting must be an integer >= 0 (steps), got {self.lasting!r}")
        if isinstance(self.detectors, str):
            object.__setattr__(self, "detectors", (self.detectors,))
        else:
            object.__setattr__(self, "detectors", tuple(self.detectors))

    def matches(self, incident: Any, step: int) -> bool:
        """True when the ongoing ``incident`` (a :class:`LiveIncident`) meets this rule."""
        if not incident.ongoing:
            return False
        if Severity.parse(incident.severity).rank < Severity.parse(self.severity).rank:
            return False
        if self.theme is not None and incident.theme != self.theme:
            return False
        if self.detectors and not set(self.detectors) & set(incident.detectors):
            return False
        return incident.lasting(step) >= self.lasting

    def describe(self) -> str:
        """``"collapse incident >= warn lasting >= 20 steps"``."""
        what = self.theme + " incident" if self.theme else "incident"
        if self.detectors:
            what += " with " + "/".join(self.detectors)
        text = f"{what} >= {self.severity}"
        return text + (f" lasting >= {self.lasting} steps" if self.lasting else "")


@dataclass
class Halt:
    """The decision to stop a run.

    Attributes:
        step: the step of the check that decided it.
        rule: the rule that matched (:meth:`HaltRule.describe`).
        incident: the incident's summary.
        last_healthy_step: the step before the incident's onset (None without an onset).
        resume_from: the checkpoint to resume from (a path or a step), when checkpoints are
            known and one is at or before the last healthy step; else None.
        message: one line saying all of it.
    """

    step: int
    rule: str
    incident: dict[str, Any]
    last_healthy_step: int | None
    resume_from: Any = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "rule": self.rule,
            "last_healthy_step": self.last_healthy_step,
            "resume_from": None if self.resume_from is None else str(self.resume_from),
        }


class RlvitalsHalt(RuntimeError):
    """Raised to stop a training loop that has no gentler way to stop (veRL's ``fit``, a loop
    of your own): the run ends with an error that says why and where to resume.

    Attributes:
        halt: the :class:`Halt` (``last_healthy_step``, ``resume_from``, ``incident``).
    """

    def __init__(self, halt: Halt):
        super().__init__(f"rlvitals: {halt.message}")
        self.halt = halt


@dataclass
class HaltPolicy:
    """Rules for stopping a run (module docstring); no rules never halts."""

    rules: list[HaltRule] = field(default_factory=list)

    @classmethod
    def parse(cls, spec: Any) -> HaltPolicy:
        """A policy from None, a policy, a rule, a severity or rule text, a mapping of rule
        fields, or a list of any of these."""
        if spec is None:
            return cls()
        if isinstance(spec, HaltPolicy):
            return spec
        if isinstance(spec, HaltRule):
            return cls([spec])
        if isinstance(spec, str):
            return cls([_rule_from_text(part) for part in spec.split(",") if part.strip()])
        if isinstance(spec, Mapping):
            return cls([_rule_from_mapping(spec)])
        if isinstance(spec, Iterable):
            rules: list[HaltRule] = []
            for item in spec:
                rules.extend(cls.parse(item).rules)
            return cls(rules)
        raise TypeError(f"cannot make a halt policy from {spec!r}")

    def __bool__(self) -> bool:
        return bool(self.rules)

    def decide(
        self,
        incidents: Iterable[Any],
        step: int,
        checkpoints: Callable[[], Iterable[tuple[int, Any]]] | None = None,
    ) -> Halt | None:
        """The :class:`Halt` for the first ongoing incident (earliest onset) a rule matches."""
        for inc in incidents:
            for rule in self.rules:
                if rule.matches(inc, step):
                    return _halt(inc, rule, step, checkpoints)
        return None


def resume_checkpoint(last_healthy_step: int | None, checkpoints: Iterable[tuple[int, Any]]) -> Any:
    """The checkpoint of the largest step ``<= last_healthy_step``, or None.

    >>> resume_checkpoint(60, [(50, "ckpt-50"), (100, "ckpt-100"), (25, "ckpt-25")])
    'ckpt-50'
    >>> resume_checkpoint(10, [(50, "ckpt-50")]) is None
    True
    """
    if last_healthy_step is None:
        return None
    best = None
    for s, where in checkpoints:
        if s <= last_healthy_step and (best is None or s > best[0]):
            best = (s, where)
    return None if best is None else best[1]


def step_folders(root: str | None, prefix: str) -> list[tuple[int, str]]:
    """``(step, path)`` of each folder ``<prefix><step>`` in ``root``, a trainer's checkpoints
    (TRL's ``checkpoint-N``, veRL's ``global_step_N``) for :func:`resume_checkpoint`; ``[]``
    when ``root`` is None or not a directory."""
    out = []
    if root and os.path.isdir(root):
        for name in os.listdir(root):
            tail = name[len(prefix) :]
            if name.startswith(prefix) and tail.isascii() and tail.isdigit():
                out.append((int(tail), os.path.join(root, name)))
    return out


def _halt(inc: Any, rule: HaltRule, step: int, checkpoints: Any) -> Halt:
    last_healthy = None if inc.onset_step is None else int(inc.onset_step) - 1
    resume = None
    if checkpoints is not None:
        try:
            resume = resume_checkpoint(last_healthy, checkpoints())
        except Exception:  # listing checkpoints must not stop the halt itself
            resume = None
    since = f" since step {inc.onset_step}" if inc.onset_step is not None else ""
    where = (
        f"; resume from {resume}"
        if resume is not None
        else (
            f"; resume from a checkpoint at or before step {last_healthy}"
            if last_healthy is not None
            else ""
        )
    )
    healthy = f"; last healthy step {last_healthy}" if last_healthy is not None else ""
    message = (
        f"halting at step {step}: {inc.title} ({', '.join(inc.detectors)}){since}, "
        f"{inc.lasting(step)} steps; rule: {rule.describe()}{healthy}{where}"
    )
    return Halt(
        step=step,
        rule=rule.describe(),
        incident=inc.summary(),
        last_healthy_step=last_healthy,
        resume_from=resume,
        message=message,
    )


def _rule_from_text(text: str) -> HaltRule:
    head, _, n = text.strip().partition(":")
    head = head.strip()
    lasting = 0
    if n.strip():
        try:
            lasting = int(n)
        except ValueError:
            raise ValueError(
                f"halt rule {text.strip()!r}: steps after ':' must be an integer"
            ) from None
    sev = head.lower()
    if sev in ("info", "warn", "critical"):
        return HaltRule(severity=sev, lasting=lasting)
    if head.isupper() or "_" in head:
        _check_detector(head)
        return HaltRule(severity="info", detectors=(head,), lasting=lasting)
    if sev:
        _check_theme(sev)
        return HaltRule(severity=DEFAULT_THEME_SEVERITY, theme=sev, lasting=lasting)
    raise ValueError(f"empty halt rule in {text!r}")


def _rule_from_mapping(d: Mapping[str, Any]) -> HaltRule:
    valid = ("severity", "theme", "detectors", "lasting")
    unknown = sorted(set(d) - set(valid))
    if unknown:
        raise ValueError(
            f"unknown halt rule field(s) {', '.join(unknown)}; valid: {', '.join(valid)}"
        )
    dets = d.get("detectors") or ()
    dets = (dets,) if isinstance(dets, str) else tuple(dets)
    for det in dets:
        _check_detector(det)
    theme = d.get("theme")
    if theme is not None:
        _check_theme(str(theme))
    severity = d.get("severity") or (DEFAULT_THEME_SEVERITY if theme else "critical")
    if dets and "severity" not in d:
        severity = "info"
    return HaltRule(
        severity=str(severity), theme=theme, detectors=dets, lasting=int(d.get("lasting", 0))
    )


def _check_theme(theme: str) -> None:
    from rlvitals.detectors import DETECTORS, load_all

    load_all()
    valid = sorted({*_THEMES, *(DETECTORS.get(n).family for n in DETECTORS.names())})
    if theme not in valid:
        raise ValueError(
            f"unknown incident theme {theme!r} in a halt rule; valid: {', '.join(valid)}"
        )


def _check_detector(det_id: str) -> None:
    from rlvitals.detectors import DETECTORS, load_all

    load_all()
    if det_id not in DETECTORS:
        raise ValueError(
            f"unknown detector {det_id!r} in a halt rule; valid: {', '.join(DETECTORS.names())}"
        )

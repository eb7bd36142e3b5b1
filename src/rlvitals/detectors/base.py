"""The detector framework: severities, findings, knobs and the registry.

A detector is one class in one file (``adv_collapse.py`` → ``AdvCollapse``) with:

- ``id``: SCREAMING_SNAKE, never changes; ``severity``; ``family``; ``key_metrics``;
- ``Knobs``: a frozen dataclass, each default a named module constant, each field documented
  once (``#:`` comment above the field or the class docstring's Attributes section). The
  built-in ones use ``rlvitals._record.record(frozen=True)``, a dataclass that costs nothing to
  define (``dataclass`` compiles ~1 ms of methods per class at import); ``@dataclass(frozen=True)``
  works the same for a plug-in;
- ``check(vitals, found=None) -> list[Finding]``: a pure function of the
  :class:`~rlvitals.vitals.Vitals` (and of the findings of the detectors it ``requires``), so
  the same detector runs over a whole run or over a sliding window of a live one;
- a docstring that is its docs page, with four sections: What is happening · What it looks like
  in the recording · How the detector decides · What to try.

Register with ``@register`` (class decorator). Renderers format findings; they never decide.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar

from rlvitals._record import record
from rlvitals.registry import Registry

if TYPE_CHECKING:
    from rlvitals.vitals import Vitals

__all__ = ["DETECTORS", "Detector", "Finding", "Severity", "register"]


class Severity(str, enum.Enum):
    """How bad a finding is; ordered info < warn < critical."""

    INFO = "info"
    WARN = "warn"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return {"info": 0, "warn": 1, "critical": 2}[self.value]

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.lower())
        except ValueError:
            valid = ", ".join(s.value for s in cls)
            raise ValueError(f"unknown severity {text!r}; valid: {valid}") from None


@record
class Finding:
    """What a detector found.

    Attributes:
        id: the detector ID.
        severity: info, warn or critical.
        message: one sentence with the numbers, e.g.
            "adv_std 0.03 < 0.10 for 37 steps since step 112 (early mean 0.97)".
        onset_step: first step of the condition, or None when it has no onset (setup problems).
        end_step: last step of the condition when it cleared; None while ongoing.
        confidence: 0..1.
        evidence: the evidence tier used: ``groups``, ``zero_std_frac``, ``advantages``,
            ``reward_std``, ``loss_grad_zero``, or the series name for non-collapse detectors.
        metrics: measured numbers beside their thresholds (floats, ints, strings).
        actions: what to try, most useful first.
        series: the series the finding is about, most telling first (vitals names, ``eval/``
            ones included): renderers plot these under it, the ones the run has.
        thresholds: series name → the threshold the finding compared it with, drawn as a
            line on that series' plot.
        marks: steps of isolated events (gradient spikes) that renderers mark as points on
            the finding's first series, instead of shading onset → end as one episode.
    """

    id: str
    severity: Severity
    message: str
    onset_step: int | None = None
    end_step: int | None = None
    confidence: float = 1.0
    evidence: str = "none"
    metrics: dict[str, Any] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    series: list[str] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    marks: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": Severity(self.severity).value,
            "onset_step": self.onset_step,
            "end_step": self.end_step,
            "confidence": round(float(self.confidence), 4),
            "evidence": self.evidence,
            "message": self.message,
            "metrics": dict(self.metrics),
            "actions": list(self.actions),
            "series": list(self.series),
            "thresholds": {k: float(v) for k, v in self.thresholds.items()},
            "marks": [int(s) for s in self.marks],
        }


class Detector:
    """Base class: subclasses set the class attributes and implement :meth:`check`."""

    id: ClassVar[str]
    severity: ClassVar[Severity]
    family: ClassVar[str] = "other"
    key_metrics: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()
    """IDs of detectors whose findings this one reads (the doctor runs them first)."""

    @record(frozen=True)
    class Knobs:
        """No knobs."""

    def __init__(self, knobs: Any = None, **overrides: Any):
        base = knobs if knobs is not None else self.Knobs()
        if overrides:
            base = self.with_knobs(base, overrides)
        self.knobs = base

    @classmethod
    def knob_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls.Knobs)]

    @classmethod
    def with_knobs(cls, knobs: Any, overrides: dict[str, Any]) -> Any:
        """``knobs`` with ``overrides`` applied; unknown names raise listing the valid ones."""
        valid = cls.knob_names()
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise ValueError(
                f"{cls.id}: unknown knob(s) {', '.join(unknown)}; valid: {', '.join(valid) or '(none)'}"
            )
        defaults = cls.Knobs()
        for name, value in overrides.items():
            _check_knob(cls.id, name, value, getattr(defaults, name))
        return dataclasses.replace(knobs, **overrides)

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        """The findings of this detector on ``vitals``.

        ``found`` holds the findings of the detectors in :attr:`requires`, as the doctor
        computed them with the user's knobs; called on its own (None), a detector computes
        them with their default knobs (:meth:`required`).
        """
        raise NotImplementedError

    def required(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None, det_id: str
    ) -> list[Finding]:
        """The findings of detector ``det_id`` (one of :attr:`requires`) on ``vitals``."""
        if det_id not in self.requires:
            raise ValueError(f"{self.id} reads {det_id} without declaring it in requires")
        if found is not None and det_id in found:
            return found[det_id]
        return DETECTORS.get(det_id)().check(vitals)

    def needs(self, vitals: Vitals) -> str | None:
        """What this detector would need that the run lacks, or None when it can judge.

        The doctor reports the answer as a note when ``check`` found nothing, e.g.
        "needs adv_std, adv_zero_frac or loss and grad_norm". The default claims nothing.
        """
        return None

    def finding(self, message: str, **kw: Any) -> Finding:
        """A :class:`Finding` with this detector's id, severity and (as the series it is about)
        key metrics; ``kw`` overrides any of them."""
        kw.setdefault("severity", self.severity)
        kw.setdefault("series", list(self.key_metrics))
        return Finding(id=self.id, message=message, **kw)


def _check_knob(det_id: str, name: str, value: Any, default: Any) -> None:
    """Raise ValueError unless ``value`` fits knob ``name``: a count (an int knob) is an integer
    >= 1 (>= 0 when its default is 0), a float knob a finite number >= 0 (any finite number
    when its default is negative), a flag a bool."""
    bad = None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            bad = "true or false"
    elif isinstance(default, int):
        least = 0 if default == 0 else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            bad = f"an integer >= {least}"
    elif isinstance(default, float):
        num = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not num or not math.isfinite(value) or (default >= 0 and value < 0):
            bad = "a finite number" + (" >= 0" if default >= 0 else "")
    if bad:
        raise ValueError(f"{det_id}: knob {name} must be {bad}, got {value!r}")


DETECTORS: Registry[type[Detector]] = Registry("detector")


def register(cls: type[Detector]) -> type[Detector]:
    """Class decorator: add a detector to the catalogue under its ``id``."""
    if not cls.id.isupper() or " " in cls.id:
        raise ValueError(f"detector id must be SCREAMING_SNAKE, got {cls.id!r}")
    DETECTORS.add(cls.id, cls)
    return cls

"""One condition named for a run: :class:`ConditionCall`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlvitals.conditions import get_condition

__all__ = ["ConditionCall"]


@dataclass
class ConditionCall:
    """One condition named for a run.

    Attributes:
        id: the condition ID (:data:`rlvitals.conditions.CONDITIONS`).
        onset_step: the first step it shows at (the first logged step when present from the
            start); None when the evidence has no time.
        end_step: the last step it showed at when it cleared before the end, else None.
        confidence: 0-1, how strongly the signs point at it.
        for_: the signs for it, each with its numbers.
        against: the signs against it (or what would tell it from the runner-up).
        actions: what to try, in the trainer's own keys.
        findings: IDs of the detector findings that are its signs.
        primary: the cause to name first.
    """

    id: str
    onset_step: int | None
    confidence: float
    for_: list[str] = field(default_factory=list)
    against: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)
    end_step: int | None = None
    primary: bool = False

    @property
    def title(self) -> str:
        return get_condition(self.id).title

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "onset_step": self.onset_step,
            "end_step": self.end_step,
            "confidence": round(self.confidence, 2),
            "for": list(self.for_),
            "against": list(self.against),
            "actions": list(self.actions),
            "findings": list(self.findings),
        }

"""Recording loss: the flight recorder could not write everything the trainer handed it.

## What is happening
The recorder never blocks or crashes a training run for its own sake. When its disk fails
(full, read-only, gone) or its background queue overflows, it drops records, counts them, and
writes a ``dropped`` event saying how many and why. Every other finding on this run was judged
on what was left: steps or groups that were dropped are missing from the series, so a detector
may see a collapse later than it began, or not at all.

## What it looks like in the recording
``events.rank*.jsonl`` holds events of kind ``dropped`` with the rank, the number of records lost
(scalars, groups, events) and the reasons (e.g. ``OSError: [Errno 28] No space left on device``,
``queue full``). ``Recorder.stats`` showed the same counts during the run.

## How the detector decides
It adds up the ``records`` of every ``dropped`` event. At least :knob:`min_records` lost records
make a finding: a warning, because the recording is incomplete; the finding lists the counts per
rank and stream and the reasons. No onset step: the recorder counts losses between reports and
does not know their steps.

## What to try
- Free or change the recording disk; check that the directory is writable for every rank.
- With an asynchronous recorder (``max_pending > 0``), raise ``max_pending`` or record
  synchronously (the default), which applies back-pressure instead of dropping.
- Re-run the doctor on the trainer's own logs (``trainer_state.json``, TensorBoard) to cover the
  gap.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register

MIN_RECORDS = 1
"""Fewest lost records that make a finding. Not calibrated: one lost record is already a fact to
report; zoo dev, real logs and corpus healthy runs lose none (silent from 1 to 4)."""
STREAMS = ("scalars", "groups", "events")


@register
class RecordingLoss(Detector):
    id = "RECORDING_LOSS"
    severity = Severity.WARN
    family = "recording"
    key_metrics = ()

    @record(frozen=True)
    class Knobs:
        #: Fewest lost records that make a finding.
        min_records: int = MIN_RECORDS

    def needs(self, vitals) -> str | None:
        return None  # every run can be judged: no dropped events means nothing was lost

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        drops = [e for e in vitals.run.events if e.kind == "dropped"]
        total, per_stream, ranks, reasons = 0, Counter(), set(), {}
        for e in drops:
            data = e.data or {}
            n = data.get("records")
            total += int(n) if isinstance(n, (int, float)) and n > 0 else 0
            for s in STREAMS:
                v = data.get(s)
                if isinstance(v, (int, float)) and v > 0:
                    per_stream[s] += int(v)
            if isinstance(data.get("rank"), int):
                ranks.add(data["rank"])
            for r in data.get("reasons") or ():
                reasons[str(r)] = None
        if total < self.knobs.min_records:
            return []
        parts = ", ".join(f"{per_stream[s]} {s}" for s in STREAMS if per_stream[s])
        why = "; ".join(list(reasons)[:3]) or "reason not recorded"
        return [
            self.finding(
                f"the recorder dropped {total} record(s) ({parts or 'streams unknown'}) on "
                f"rank(s) {', '.join(map(str, sorted(ranks))) or '?'}: {why}; findings were "
                "judged on what was left",
                evidence="events",
                series=["reward_mean"],
                metrics={
                    "dropped_records": total,
                    **{f"dropped_{s}": per_stream[s] for s in STREAMS},
                    "drop_events": len(drops),
                    "min_records": self.knobs.min_records,
                },
                actions=[
                    "free or change the recording disk; check every rank can write the directory",
                    "record synchronously (max_pending=0, the default) or raise max_pending",
                    "cover the gap with the trainer's own logs (trainer_state.json, TensorBoard)",
                ],
            )
        ]

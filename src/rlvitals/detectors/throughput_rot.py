"""Throughput rot: training got slower per token (or per step) as the run went on.

## What is happening
The run processes fewer tokens per second, or takes longer per step, than it did early on, and
stays that way. Slower steps cost money and wall-clock without teaching more. Common causes: a
memory leak or growing fragmentation that forces the allocator or the offloading to work harder,
a growing replay buffer or dataloader cache, logging or checkpointing that gets heavier, stragglers
in a multi-node job, thermal throttling, or a rollout engine whose KV cache no longer fits.
When completions get longer each step takes longer for an honest reason; the detector prefers the
tokens-per-second series, and otherwise says when longer completions explain the slowdown.

## What it looks like in the recording
`throughput` (veRL `perf/throughput`, tokens per second) drifts down or drops to a lower level and
stays there; or `step_time` (veRL `timing_s/step`) climbs. Isolated slow steps (checkpoints,
evaluations) come and go and are not rot.

## How the detector decides
It uses `throughput` when logged, else `step_time`. The first :knob:`warmup_points` logged values
are skipped (compilation, cache warm-up); the median of the next :knob:`early_points` is the early
level. The series is smoothed by a centred rolling median over :knob:`smooth` points; an episode
starts when the smoothed value is worse than the early level by a factor of :knob:`slowdown` or
more for :knob:`sustain` consecutive logged points and ends when it is back within half that
factor. With `step_time` only, if `length_mean` grew over the episode by at least
:knob:`explained_share` of the slowdown, the finding is informational: longer completions explain
it.

## What to try
- Compare the per-phase timings (generation, reference, update) at the start and after the onset
  to find the phase that slowed down.
- Watch GPU and host memory over the run: steady growth points at a leak or a growing cache.
- Check checkpoint and logging frequency, the dataloader, and the health of every node.
"""

from __future__ import annotations

from collections.abc import Mapping

from rlvitals._median import median
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import (
    confidence,
    fmt,
    hysteresis,
    needs,
    points,
    rnd,
    rolling_median,
)

WARMUP_POINTS = 3
"""Logged values at the start skipped as warm-up. Not calibrated: a design choice; corpus (5/5
throughput failures), zoo dev and real logs findings are the same from 1 to 12."""
EARLY_POINTS = 10
"""Logged values after the warm-up whose median is the early level. Not calibrated: a design choice;
the findings are the same from 2 to 40 on every set."""
SLOWDOWN = 1.5
"""Factor by which throughput must fall (or step time grow) to count as rot. Calibrated on the
corpus and real logs: 5/5 corpus failures from 1.125 to 1.5, 4/5 at 2.25; no real log fires at 1.5
(the HEALTHY veRL log fires at 0.75, below any slowdown); no zoo dev run has the condition."""
SUSTAIN = 10
"""Consecutive logged points needed to start (or end) an episode. Not calibrated: a design choice;
5/5 corpus failures from 2 to 20, 4/5 at 40; never a healthy run."""
SMOOTH = 5
"""Window (logged points) of the centred rolling median applied to the series. Not calibrated: a
design choice; the findings are the same from 1 to 20 on every set."""
EXPLAINED_SHARE = 0.8
"""With step_time only: a length growth of at least this share of the slowdown explains it (info).
Not calibrated: a design choice; the findings are the same from 0.2 to 3.2 on every set."""
MIN_STEP_TIME = 1.0
"""With step_time only: steps faster than this many seconds are not judged. Calibrated on the zoo
dev runs and real logs: the CPU zoo runs step in 0.02-0.9 s (up to 5x jitter), the real logs in
10-700 s; the findings are the same from 0.25 to 4 on every set."""
MAX_EPISODES = 3


@register
class ThroughputRot(Detector):
    id = "THROUGHPUT_ROT"
    severity = Severity.WARN
    family = "throughput"
    key_metrics = ("throughput", "step_time")

    @record(frozen=True)
    class Knobs:
        #: Logged values at the start skipped as warm-up.
        warmup_points: int = WARMUP_POINTS
        #: Logged values after the warm-up whose median is the early level.
        early_points: int = EARLY_POINTS
        #: Factor by which throughput must fall (or step time grow) to count as rot.
        slowdown: float = SLOWDOWN
        #: Consecutive logged points needed to start (or end) an episode.
        sustain: int = SUSTAIN
        #: Window (logged points) of the centred rolling median applied to the series.
        smooth: int = SMOOTH
        #: With step_time only: a length growth of at least this share of the slowdown explains
        #: it, and the finding becomes informational.
        explained_share: float = EXPLAINED_SHARE
        #: With step_time only: steps that stay faster than this many seconds are not judged
        #: (the timing noise of a toy or CPU run, not rot).
        min_step_time: float = MIN_STEP_TIME

    def needs(self, vitals) -> str | None:
        k = self.knobs
        return needs(
            vitals, ["throughput", "step_time"], k.warmup_points + k.early_points + k.sustain
        )

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        p = points(vitals, "throughput")
        per_token = p is not None
        if p is None:
            p = points(vitals, "step_time")
        need = k.warmup_points + k.early_points + k.sustain
        if p is None or p.n < need or (p.values <= 0).any():
            return []
        early = float(median(p.values[k.warmup_points : k.warmup_points + k.early_points]))
        # "slowness" is 1 at the early level and grows as the run slows down
        slow = rolling_median(
            early / p.values if per_token else p.values / early, k.smooth, edges="pad"
        )
        slow[: k.warmup_points + k.early_points] = 1.0
        release = 1 + (k.slowdown - 1) / 2
        found = hysteresis(
            p, slow >= k.slowdown, lambda _i: slow < release, k.sustain, MAX_EPISODES
        )
        out = []
        for ep in found:
            factor = ep.median(slow)
            level = ep.median(p.values)
            if not per_token and level < k.min_step_time:
                continue  # 0.017 s -> 0.028 s a step is scheduler noise, not a slower run
            explained = (
                None
                if per_token
                else _length_growth(
                    vitals,
                    early_end=p.steps[k.warmup_points + k.early_points - 1],
                    first=ep.onset,
                    last=int(p.steps[ep.last]),
                )
            )
            info = explained is not None and explained >= k.explained_share * factor
            what = "throughput fell" if per_token else "step_time grew"
            msg = (
                f"{what} {fmt(factor)}x (>= {fmt(k.slowdown)}x) from early {fmt(early)} to "
                f"{fmt(level)} since step {ep.onset}"
                + ("" if ep.end is None else f", until step {ep.end}")
            )
            if explained is not None:
                msg += f"; length_mean grew {fmt(explained)}x over the same steps"
                if info:
                    msg += " (longer completions explain it)"
            threshold = early / k.slowdown if per_token else early * k.slowdown
            out.append(
                self.finding(
                    msg,
                    severity=Severity.INFO if info else self.severity,
                    onset_step=ep.onset,
                    end_step=ep.end,
                    confidence=confidence(ep.n, k.sustain, margin=factor / k.slowdown - 1),
                    evidence=p.name,
                    series=[p.name],
                    thresholds={p.name: threshold},
                    metrics={
                        "series": p.name,
                        f"{p.name}_early": rnd(early),
                        f"{p.name}_late": rnd(level),
                        f"{p.name}_threshold": rnd(threshold),
                        "slowdown_factor": rnd(factor),
                        "slowdown": k.slowdown,
                        "length_growth": None if explained is None else rnd(explained),
                    },
                    actions=_EXPLAINED_ACTIONS if info else _ACTIONS,
                )
            )
        return out


_ACTIONS = [
    "compare per-phase timings (generation, reference, update) before and after the onset",
    "watch GPU and host memory over the run: steady growth points at a leak or a growing cache",
    "check checkpoint / logging frequency, the dataloader, and every node's health",
]


_EXPLAINED_ACTIONS = [
    "the slowdown follows the completion length: treat the length growth first "
    "(LENGTH_EXPLOSION, TRUNCATION)",
    "log tokens per second (throughput) so rot can be told from longer completions",
]


def _length_growth(vitals, early_end: int, first: int, last: int) -> float | None:
    """Median length in ``[first, last]`` over median length up to ``early_end``."""
    length = points(vitals, "length_mean")
    if length is None:
        return None
    early = length.values[length.steps <= early_end]
    during = length.between(first, last)
    if early.size == 0 or during.size == 0 or median(early) <= 0:
        return None
    return float(median(during) / median(early))

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
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlvitals._median import median
from rlvitals.conditions import get_condition

__all__ = ["ConditionCall", "Events", "condition_severity", "differential"]

# -- thresholds (each: what it was calibrated on) ----------------------------------------------

EARLY_SHARE = 0.15
"""Share of the logged steps (at least 3) that make a series' early level (zoo dev: the first
~12 of 80 steps precede every injection at step 20)."""
ENTROPY_EARLY_SHARE = 0.05
"""Entropy's early level comes from a shorter start: on real runs it falls within the first
2% of the steps (real logs: 0.389 at step 1, 0.10 by step 20 of 1,100), and a baseline taken
after the fall hides the collapse."""
LATE_SHARE = 0.2
"""Share of the last logged steps that make its late level."""
JUMP_ACR = 0.95
"""ACR at or above this on a step counts as all groups agreeing (zoo dev: greedy and constant-
verifier runs sit at 1.0; healthy G=8 runs never reach 0.9)."""
SATURATED_PASS = 0.85
"""Pass rate over the second half of the run at or above this: saturated (real logs: GSM8K runs
at 0.93-0.98; the zoo's L0 run ~0.9)."""
TOO_HARD_PASS = 0.1
"""Early pass rate at or below this (and never much above): too hard (zoo L6: ~0.01-0.05)."""
FALL_RATIO = 0.5
"""Late pass rate at most this share of the early one: the policy got worse (zoo dev: lr 3x ends
at 0.15-0.3 of its early rate; healthy runs end at 0.8-1.3)."""
ENTROPY_FALL = 0.35
"""Late entropy at most this share of the early level: entropy collapse (real logs: 18%, 6% of
the first values are collapses to an engineer; a fall to 20-25% must count)."""
ENTROPY_RISE = 3.0
"""Late (or peak) entropy at least this multiple of the early level: a blow-up (zoo: 0.25 -> 3.6;
real logs: a 2x rise under an entropy bonus is not one)."""
TRUNCATED = 0.3
"""Share of completions cut at the cap, as a level, that makes truncation a condition (real
logs: run-away runs at 0.45-1.0; healthy runs below 0.05)."""
SHORT_TERMINATED = 0.6
"""Terminated completions shorter than this share of the cap: the cap is not what they need,
so truncation means run-away completions (real logs: 18-350 tokens of 512)."""
KL_HIGH = 1.0
"""A KL level (nats per token, as trainers log it) that is a blow-up whatever its start (real
logs: healthy runs stay below 0.2)."""
KL_RISE = 20.0
"""Peak KL at least this multiple of its early level (zoo dev: lr 100x gives >100x)."""
ADV_FALL = 0.2
"""Late advantage std at most this share of the early one with rewards still varying: the
pipeline flattened them (zoo dev: epsilon 1e4 gives ~1e-4 of the early std)."""
SMALL_G = 4
"""Groups of at most this many completions agree by chance often (p^G + (1-p)^G)."""
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
    "IDENTICAL_COMPLETIONS": {"ENTROPY_COLLAPSE"},
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


# -- 1. events ---------------------------------------------------------------------------------


class Events:
    """Levels and onsets of a run's vitals series (NaN = not logged)."""

    def __init__(self, vitals: Any):
        self.v = vitals
        self.steps = np.asarray(vitals.steps)
        self._cache: dict[str, tuple[np.ndarray, np.ndarray] | None] = {}

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(steps, values)`` of the finite points of a series (None: fewer than 3), cached."""
        if name in self._cache:
            return self._cache[name]
        x = self.v.series.get(name)
        out = None
        if x is not None:
            x = np.asarray(x, dtype=float)
            ok = np.isfinite(x)
            if ok.sum() >= 3:
                out = (self.steps[ok], x[ok])
        self._cache[name] = out
        return out

    def early(self, name: str, share: float = EARLY_SHARE) -> float | None:
        s = self.series(name)
        if s is None:
            return None
        n = max(3, int(len(s[1]) * share))
        return float(median(s[1][:n]))

    def late(self, name: str) -> float | None:
        s = self.series(name)
        if s is None:
            return None
        n = max(3, int(len(s[1]) * LATE_SHARE))
        return float(median(s[1][-n:]))

    def changepoint(self, name: str, min_seg: int = 5) -> int | None:
        """The step that best splits the series into two levels (largest between-segment
        variance), or None for a series too short."""
        s = self.series(name)
        if s is None or len(s[1]) < 2 * min_seg:
            return None
        st, x = s
        c = np.cumsum(x)
        n = len(x)
        i = np.arange(min_seg, n - min_seg + 1)
        left = c[i - 1] / i
        right = (c[-1] - c[i - 1]) / (n - i)
        score = i * (n - i) * (left - right) ** 2
        return int(st[i[int(np.argmax(score))]])

    def quarter(self, name: str, first: bool) -> tuple[float, float] | None:
        """(mean, median) of the first or last quarter of the run (at least 5 points)."""
        s = self.series(name)
        if s is None or len(s[1]) < 8:
            return None
        n = max(5, len(s[1]) // 4)
        x = s[1][:n] if first else s[1][-n:]
        return float(np.mean(x)), float(median(x))

    def half(self, name: str) -> float | None:
        """Median of the second half of the run."""
        s = self.series(name)
        return None if s is None else float(median(s[1][len(s[1]) // 2 :]))

    def first(self, name: str) -> float | None:
        s = self.series(name)
        return None if s is None else float(s[1][0])

    def onset(self, name: str, test: Any, hold: float = 0.7) -> int | None:
        """The first step from which ``test(value)`` holds on 3 logged steps in a row and on
        ``hold`` of the rest of the run."""
        s = self.series(name)
        return None if s is None else _onset(s[0], test(s[1]), hold)

    @property
    def first_step(self) -> int:
        return int(self.steps[0]) if self.steps.size else 0

    def step_gap(self) -> float:
        return float(median(np.diff(self.steps))) if self.steps.size > 1 else 1.0


def _onset(steps: np.ndarray, mask: np.ndarray, hold: float = 0.7, run: int = 3) -> int | None:
    """The first step where ``mask`` holds ``run`` times in a row and on ``hold`` of the rest
    (vectorised: a doctor run over 20,000 steps calls this a few dozen times)."""
    mask = np.asarray(mask, dtype=bool)
    n = mask.size
    if n == 0:
        return None
    run = min(run, n)
    streak = np.convolve(mask.astype(np.int32), np.ones(run, dtype=np.int32), "valid") == run
    rest = np.cumsum(mask[::-1])[::-1] / np.arange(n, 0, -1)  # share of mask[i:]
    ok = streak & (rest[: streak.size] >= hold)
    hit = np.flatnonzero(ok)
    return int(steps[hit[0]]) if hit.size else None


def _policy_moved(ev: Events, step: int, k: int = 5) -> str | None:
    """What says the policy itself changed around ``step`` (its entropy, KL or lengths), or
    None: a verifier or sampler fault leaves them where they were."""
    for name, lo, hi in (("entropy", 0.5, 2.0), ("length_mean", 0.67, 1.5), ("kl", 0.0, 10.0)):
        s = ev.series(name)
        if s is None:
            continue
        st, x = s
        before, after = x[st < step][-k:], x[st >= step][:k]
        if before.size < 2 or after.size < 2:
            continue
        b, a = float(median(before)), float(median(after))
        if name == "kl":
            if a > max(hi * b, 0.1):
                return f"KL {b:.3g} -> {a:.3g}"
        elif b > 0 and not lo <= a / b <= hi:
            return f"{name} {b:.3g} -> {a:.3g}"
    return None


def _cap(vitals: Any) -> float | None:
    """The completion-length cap: the trainer's setting, else the longest length logged when
    some completions were truncated."""
    cfg = getattr(vitals.run.manifest, "config", None) or {}
    for key in (
        "max_completion_length",
        "data.max_response_length",
        "max_response_length",
        "generate_max_len",
        "max_new_tokens",
    ):
        for k, v in _flat(cfg):
            if k.endswith(key):
                try:
                    return float(v)
                except (TypeError, ValueError):
                    pass
    mx = vitals.series.get("length_max")
    trunc = vitals.series.get("truncation_frac")
    if mx is not None and trunc is not None and np.nanmax(np.asarray(trunc, float)) > 0:
        return float(np.nanmax(np.asarray(mx, float)))
    for name in ("length_max", "length_mean"):
        # a length pinned at one maximum on many steps: the cap (real logs: a TRL console
        # whose mean length is exactly 256 on 18% of the steps, every completion cut)
        x = vitals.series.get(name)
        if x is None:
            continue
        x = np.asarray(x, float)
        x = x[np.isfinite(x)]
        # pinned on some steps, not most: a length that never varies is the answer's own
        if x.size >= 10 and 0.1 <= np.mean(x == x.max()) <= 0.6:
            return float(x.max())
    return None


def _flat(cfg: Any, prefix: str = ""):
    if isinstance(cfg, dict):
        for k, v in cfg.items():
            yield from _flat(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], cfg


# -- 2. candidates -----------------------------------------------------------------------------


def _candidates(ev: Events, found: set[str]) -> list[ConditionCall]:
    v = ev.v
    out: list[ConditionCall] = []
    first = ev.first_step
    p_early, p_late, p_half = ev.early("pass_rate"), ev.late("pass_rate"), ev.half("pass_rate")
    acr_early = ev.early("acr")
    G = v.group_size
    ppo = (v.estimator or "") in ("gae", "ppo") or (G == 1 and (v.adv_scale or "") == "batch_std")

    # One completion per prompt under a group-relative estimator.
    if "GROUP_SIZE_ONE" in found and not ppo:
        out.append(
            ConditionCall(
                "NO_GROUP_BASELINE",
                first,
                0.9,
                ["group size 1 with a group-relative estimator: no baseline"],
                findings=["GROUP_SIZE_ONE"],
            )
        )

    # ACR jumps to ~1 after a normal start: the completions or the verifier stopped differing.
    jump = None
    if acr_early is not None and acr_early < 0.7:
        jump = ev.onset("acr", lambda x: x >= JUMP_ACR, hold=0.9)
    acr_s = ev.series("acr")
    if jump is not None and acr_s is not None:
        before_acr = acr_s[1][acr_s[0] < jump][-5:]
        if before_acr.size < 2 or float(median(before_acr)) >= 0.6:
            jump = None  # not abrupt: a gradual rise is the pass rate's doing
    if jump is not None and jump > first:
        pass_s = ev.series("pass_rate")
        before = after = None
        constant = False
        if pass_s is not None:
            st, x = pass_s
            before = float(median(x[st < jump][-10:])) if (st < jump).any() else None
            after_x = x[st >= jump]
            after = float(median(after_x[:10])) if after_x.size else None
            constant = after_x.size >= 3 and float(np.ptp(after_x)) <= 1e-9
        moved = _policy_moved(ev, jump)
        if constant and before is not None and abs(after - before) > 0.05 and not moved:
            out.append(
                ConditionCall(
                    "VERIFIER_CONSTANT",
                    jump,
                    0.85,
                    [
                        f"from step {jump} every group agrees (ACR >= {JUMP_ACR}) and the reward "
                        f"is exactly {after:g} on every step (before: {before:.2f} on average)",
                        "in one step, with no decline before it: the policy cannot change that fast",
                    ],
                    ["identical completions would keep the pass rate, not fix it at one value"],
                    findings=sorted(found & {"EXCESS_COLLAPSE", "REWARD_STD_DEATH", "ACR_STALL"}),
                )
            )
        elif not moved and (before is None or after is None or 0.03 < after < 0.97):
            held = (
                f" while the pass rate holds ({before:.2f} -> {after:.2f})"
                if before is not None and after is not None
                else ""
            )
            out.append(
                ConditionCall(
                    "IDENTICAL_COMPLETIONS",
                    jump,
                    0.7,
                    [f"ACR jumps to >= {JUMP_ACR} at step {jump}{held}"],
                    [
                        "a verifier that scores a whole group alike looks the same in the scalars: "
                        "log completions; identical completions within a group mean the sampler, "
                        "different ones with one score mean the verifier"
                    ],
                    findings=sorted(found & {"EXCESS_COLLAPSE", "REWARD_STD_DEATH", "ACR_STALL"}),
                )
            )

    # Saturated: the policy solves its prompt set.
    if p_half is not None and p_half >= SATURATED_PASS:
        onset = ev.onset("pass_rate", lambda x: x >= SATURATED_PASS - 0.05, hold=0.8) or first
        out.append(
            ConditionCall(
                "SATURATED",
                onset,
                0.85,
                [f"pass rate {p_half:.2f} over the second half of the run (from step {onset})"],
                findings=sorted(found & {"SATURATION", "REWARD_STD_DEATH", "ACR_STALL"}),
            )
        )

    # Too hard: failed from the start.
    if p_early is not None and p_early <= TOO_HARD_PASS and (p_half or 0) <= 2 * TOO_HARD_PASS:
        out.append(
            ConditionCall(
                "TOO_HARD",
                first,
                0.8,
                [f"pass rate {p_early:.2f} from the first logged steps"],
                findings=sorted(found & {"DEGENERATE_GROUPS", "REWARD_STD_DEATH", "ACR_STALL"}),
            )
        )

    # The policy got worse: the training reward falls (quarter means and medians agree).
    q_early, q_late = ev.quarter("pass_rate", first=True), ev.quarter("pass_rate", first=False)
    falls = (
        p_early is not None
        and p_late is not None
        and q_early is not None
        and q_late is not None
        and q_early[0] >= 0.15
        and max(p_late, q_late[0], q_late[1]) <= FALL_RATIO * min(q_early[0], q_early[1], p_early)
    )
    if falls:
        onset = ev.changepoint("pass_rate")
        out.append(
            ConditionCall(
                "POLICY_DEGRADATION",
                onset or first,
                0.75,
                [f"pass rate falls {p_early:.2f} -> {p_late:.2f} (from step {onset})"],
                findings=sorted(found & {"DEGENERATE_GROUPS", "GRAD_SPIKE"}),
            )
        )

    # Entropy: collapse or blow-up.
    e_early, e_late = ev.early("entropy", ENTROPY_EARLY_SHARE), ev.late("entropy")
    e_s = ev.series("entropy")
    if e_early is not None and e_late is not None and e_early > 0:
        if e_late <= ENTROPY_FALL * e_early:
            onset = ev.onset("entropy", lambda x: x <= 0.75 * e_early, hold=0.8)
            out.append(
                ConditionCall(
                    "ENTROPY_COLLAPSE",
                    onset or first,
                    0.75,
                    [
                        f"entropy {e_early:.3g} -> {e_late:.3g} ({e_late / e_early:.0%} of its "
                        f"early level)"
                    ],
                    findings=sorted(found & {"ENTROPY_COLLAPSE"}),
                )
            )
        peak = float(np.max(e_s[1])) if e_s is not None else e_late
        if max(e_late, peak) >= ENTROPY_RISE * e_early and e_late >= 2 * e_early:
            onset = ev.onset("entropy", lambda x: x >= 1.5 * e_early, hold=0.8)
            out.append(
                ConditionCall(
                    "ENTROPY_BLOWUP",
                    onset or first,
                    0.8,
                    [f"entropy rises {e_early:.3g} -> {e_late:.3g} ({e_late / e_early:.1f}x)"],
                )
            )

    # Lengths at the cap: run-away completions or a cap that is too small.
    t_early, t_late, t_half = (
        ev.early("truncation_frac"),
        ev.late("truncation_frac"),
        ev.half("truncation_frac"),
    )
    cap = _cap(v)
    if t_late is not None and max(t_late, t_half or 0) >= TRUNCATED:
        term = ev.series("length_terminated_mean")
        term_med = float(median(term[1][term[1] > 0])) if term and (term[1] > 0).any() else None
        short = cap is not None and term_med is not None and term_med < SHORT_TERMINATED * cap
        from_start = t_early is not None and t_early >= TRUNCATED
        onset = ev.onset("truncation_frac", lambda x: x >= TRUNCATED, hold=0.6) or first
        if short or (not from_start and term_med is None):
            why = (
                f"terminated completions {term_med:.0f} tokens, far below the cap {cap:.0f}"
                if short
                else "truncation rose mid-run"
            )
            out.append(
                ConditionCall(
                    "RUNAWAY_LENGTH",
                    onset,
                    0.8 if short else 0.6,
                    [f"{t_late:.0%} of completions cut at the cap late in the run", why],
                    ["a cap below what the task needs would also cut the terminated ones"],
                    findings=sorted(found & {"TRUNCATION", "LENGTH_EXPLOSION"}),
                )
            )
        else:
            why = (
                f"terminated completions {term_med:.0f} tokens of a {cap:.0f} cap"
                if term_med is not None and cap is not None
                else "from the first logged step"
            )
            out.append(
                ConditionCall(
                    "LENGTH_LIMIT",
                    first if from_start else onset,
                    0.75 if from_start else 0.55,
                    [f"{t_late:.0%} of completions cut at the cap", why],
                    findings=sorted(found & {"TRUNCATION"}),
                )
            )
    elif cap is not None:  # no truncation logged: mean length pinned at the cap
        l_early, l_half = ev.early("length_mean"), ev.half("length_mean")
        if l_early is not None and l_early >= 0.85 * cap and (l_half or 0) >= 0.85 * cap:
            out.append(
                ConditionCall(
                    "LENGTH_LIMIT",
                    first,
                    0.6,
                    [f"mean completion length {l_early:.0f} of a {cap:.0f} cap from the start"],
                )
            )

    # KL to the reference.
    kl = ev.series("kl")
    if kl is not None:
        k_early, k_peak, k_first = ev.early("kl"), float(np.max(kl[1])), float(kl[1][0])
        if k_first >= 10 * KL_HIGH or (
            k_peak >= KL_HIGH and k_peak >= KL_RISE * max(k_early or 0.0, 1e-3)
        ):
            onset = (
                first
                if k_first >= 10 * KL_HIGH
                else int(kl[0][np.argmax(kl[1] >= max(KL_HIGH, 10 * (k_early or 0)))])
            )
            out.append(
                ConditionCall(
                    "KL_BLOWUP",
                    onset,
                    0.85,
                    [f"KL {k_early:.3g} early, peak {k_peak:.3g}"],
                    findings=sorted(found & {"KL_BLOWUP", "GRAD_SPIKE"}),
                )
            )

    # Advantages flattened while rewards still differ.
    a_early, a_late = ev.early("adv_std"), ev.late("adv_std")
    onset = None
    if a_early is not None and a_late is not None and a_early > 0 and a_late <= ADV_FALL * a_early:
        onset = ev.onset("adv_std", lambda x: x <= ADV_FALL * a_early, hold=0.8)
    acr_late = None
    if onset is not None and acr_s is not None:
        after_acr = acr_s[1][acr_s[0] >= onset][:5]
        acr_late = float(median(after_acr)) if after_acr.size else None
    if onset is not None and (acr_late is None or acr_late < 0.8):
        out.append(
            ConditionCall(
                "ADVANTAGE_PIPELINE",
                onset or first,
                0.8,
                [
                    f"advantage std {a_early:.3g} -> {a_late:.3g} while the groups still disagree "
                    f"(ACR {acr_late:.2f})"
                    if acr_late is not None
                    else f"advantage std {a_early:.3g} -> {a_late:.3g}"
                ],
                findings=sorted(found & {"ADV_COLLAPSE", "EXCESS_COLLAPSE"}),
            )
        )

    # Reward hacking: the evaluation falls while the training reward rises.
    p_s = ev.series("pass_rate")
    if "REWARD_HACKING" in found and p_s is not None and p_late is not None:
        start = float(median(p_s[1][:3]))
        if max(p_late, p_half or 0) >= start + 0.1:
            out.append(
                ConditionCall(
                    "REWARD_HACKING",
                    first,
                    0.75,
                    [
                        f"training reward {start:.2f} -> {p_late:.2f} (as a share of its range) "
                        "while the evaluation falls"
                    ],
                    findings=["REWARD_HACKING"],
                )
            )

    # Small groups: intermittent whole-step ties at a steady pass rate.
    small = _small_groups(ev, G, out)
    if small is not None:
        out.append(small)
    return out


def _small_groups(ev: Events, G: int | None, others: list[ConditionCall]) -> ConditionCall | None:
    if any(
        c.id in {"IDENTICAL_COMPLETIONS", "VERIFIER_CONSTANT", "SATURATED", "TOO_HARD"}
        for c in others
    ):
        return None
    acr = ev.series("acr")
    p = ev.series("pass_rate")
    if acr is None:  # no ACR: steps whose reward spread is exactly 0 are whole-step ties
        rs = ev.series("reward_std")
        if rs is None:
            return None
        acr = (rs[0], (rs[1] == 0).astype(float))
    if p is None:
        return None
    p_mid = float(median(p[1]))
    if not 0.15 <= p_mid <= 0.85:
        return None
    if G is not None and G > SMALL_G:
        return None
    ties = float(np.mean(acr[1] >= JUMP_ACR))
    if G is None:
        # no group size: a coarse ACR grid (few groups a step) with intermittent whole-step ties
        # (a set, not np.unique: np.unique imports numpy.ma, ~9 ms of the doctor's start-up)
        grid = len(set((np.round(acr[1] * 8) / 8).tolist())) <= 5 and ties >= 0.1
        if not grid or _onset(acr[0], acr[1] >= JUMP_ACR, 0.9) is not None:
            return None
        chance = None
    else:
        chance = p_mid**G + (1 - p_mid) ** G
    text = f"whole steps with every group tied on {ties:.0%} of steps at a steady pass rate {p_mid:.2f}"
    if chance is not None:
        text += f"; chance ties at G={G}: {chance:.2f} of groups"
    return ConditionCall("SMALL_GROUPS", ev.first_step, 0.6, [text])


_FINDING_CONDITION = {
    "EXCESS_COLLAPSE": "IDENTICAL_COMPLETIONS",
    "REWARD_STD_DEATH": "IDENTICAL_COMPLETIONS",
    "SATURATION": "SATURATED",
    "KL_BLOWUP": "KL_BLOWUP",
    "ENTROPY_COLLAPSE": "ENTROPY_COLLAPSE",
    "LENGTH_EXPLOSION": "RUNAWAY_LENGTH",
    "TRUNCATION": "LENGTH_LIMIT",
    "ADV_COLLAPSE": "ADVANTAGE_PIPELINE",
}
"""When no rule names a cause but a detector warns, the condition its sign points at most often
(symptoms of many causes, ACR_STALL, ZERO_GRAD_STEPS, GRAD_SPIKE, name none: a healthy zoo run
can show an ACR stall at its mid level and must stay HEALTHY)."""


def _from_findings(diagnosis: Any, ev: Events) -> list[ConditionCall]:
    for f in diagnosis.findings:
        if f.severity.value not in ("warn", "critical") or f.id not in _FINDING_CONDITION:
            continue
        cid = _FINDING_CONDITION[f.id]
        against = ["named from one detector's sign, not a pattern over several series"]
        if cid == "IDENTICAL_COMPLETIONS":
            against.append(
                "or a verifier that scores a group alike: log completions to tell them apart"
            )
        onset = f.onset_step if f.onset_step is not None else ev.first_step
        return [ConditionCall(cid, onset, 0.4, [f.message], against, findings=[f.id])]
    return []


# -- advice that fits the set-up ---------------------------------------------------------------


def _actions(cid: str, trainer: str | None, group_relative: bool) -> list[str]:
    """What to try for ``cid``, first things first, in the trainer's own keys; no group
    filtering or resampling where there are no groups (G = 1, PPO/GAE)."""
    from rlvitals.advice import knob

    k = lambda concept: knob(concept, trainer)  # noqa: E731
    table: dict[str, list[str]] = {
        "HEALTHY": [],
        "VERIFIER_CONSTANT": [
            "test the reward function on known-right and known-wrong completions of this "
            "step's prompts: it returns one value for everything (an answer parser, a format "
            "check or a reward server that fails closed)",
            "log the reward function's inputs and outputs for one batch",
        ],
        "IDENTICAL_COMPLETIONS": [
            f"check the sampler: {k('temperature')} > 0, do_sample on, top_k not 1, and that "
            "the G completions of a prompt get different seeds (a generation cache that "
            "returns one completion G times looks the same)",
            "log completions: identical ones within a group mean the sampler; different ones "
            "with one score mean the verifier",
        ],
        "SATURATED": [
            "stop here or move to harder prompts (filter the solved ones, a curriculum)",
            "pick the checkpoint by the held-out evaluation, not the training reward",
        ],
        "TOO_HARD": [
            "start from easier prompts (filter by the base model's pass rate, a curriculum) "
            "or a stronger base / an SFT warm-up",
            f"raise {k('group_size')} so a rare success lands in a group",
        ],
        "SMALL_GROUPS": [
            f"raise {k('group_size')} (G = 8-16): ties by chance fall as p^G + (1-p)^G",
        ],
        "NO_GROUP_BASELINE": [
            f"sample several completions per prompt ({k('group_size')} >= 4) for a group "
            "baseline, or use an estimator with a learned baseline (PPO/GAE)",
        ],
        "ADVANTAGE_PIPELINE": [
            f"print the advantages of one batch next to its rewards: check the std epsilon, "
            f"the normalisation ({k('adv_norm')}) and any mask applied after it",
        ],
        "POLICY_DEGRADATION": [
            f"lower {k('learning_rate')} (2-10x) and resume from a checkpoint before the fall",
            f"check {k('grad_clip')} and {k('warmup')}",
        ],
        "ENTROPY_COLLAPSE": [
            f"add {k('clip_higher')} or {k('entropy_bonus')}; check the sign of any entropy term",
            f"raise {k('temperature')} a little",
        ],
        "ENTROPY_BLOWUP": [
            f"lower or remove {k('entropy_bonus')} and lower {k('learning_rate')}",
            "resume from a checkpoint before entropy rose",
        ],
        "RUNAWAY_LENGTH": [
            "check that completions can end: the EOS token in the generation config and the "
            "chat template, stop strings",
            f"{k('mask_truncated')} so cut completions do not train",
            f"only then consider {k('length_limit')}",
        ],
        "LENGTH_LIMIT": [
            f"raise {k('length_limit')}: the terminated completions already need most of it",
            f"{k('mask_truncated')} meanwhile",
        ],
        "KL_BLOWUP": [
            f"lower {k('learning_rate')}; check {k('kl_coef')} and the reference model",
            "resume from a checkpoint before the rise",
        ],
        "REWARD_HACKING": [
            "inspect completions with high reward and a wrong answer: tighten the gameable "
            "reward term (format, length) or its weight",
            "select the checkpoint by the held-out evaluation",
        ],
    }
    out = table.get(cid, [])
    if not group_relative:
        out = [a for a in out if "group" not in a.lower() or cid == "NO_GROUP_BASELINE"]
    return out


# -- 3. order in time --------------------------------------------------------------------------


def differential(diagnosis: Any) -> list[ConditionCall]:
    """The ranked conditions of a diagnosed run; the first is the primary.

    ``diagnosis`` is a :class:`rlvitals.doctor.Diagnosis` (its vitals and findings). A run with
    nothing wrong gives one ``HEALTHY`` call; a run the doctor could not judge gives none.
    """
    if diagnosis.not_judged():
        return []
    ev = Events(diagnosis.vitals)
    found = {f.id for f in diagnosis.findings}
    ran = set(diagnosis.detectors)
    calls = [c for c in _candidates(ev, found) if SIGN_DETECTORS.get(c.id, ran) & ran]
    if not calls:
        calls = _from_findings(diagnosis, ev)
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
    ppo = (v.estimator or "") in ("gae", "ppo")
    trainer = getattr(v.run.manifest, "trainer", None)
    for c in calls:
        c.actions = _actions(c.id, trainer, group_relative=not ppo and v.group_size != 1)
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

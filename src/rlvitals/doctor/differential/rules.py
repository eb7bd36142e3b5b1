"""Step 2 of the differential: one rule per condition, reading the events (:func:`candidates`).

A cause is a pattern over several series: an ACR jump *at a constant pass rate*, truncation
*with short terminated completions*. Each rule gives an onset, a confidence and the signs for
and against; every threshold says what it was calibrated on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._median import median
from rlvitals.doctor.differential.calls import ConditionCall
from rlvitals.doctor.differential.signs import (
    FALL_RATIO,
    KL_HIGH,
    TRUNCATED,
    critic_baseline,
    cut_text,
    fall_at_changepoint,
    flat_from,
    kl_jump,
    length_cap,
    length_collapse,
    policy_moved,
)
from rlvitals.vitals.events import ENTROPY_EARLY_SHARE, Events, episode_of, onset_of

__all__ = ["candidates", "from_findings"]

JUMP_ACR = 0.95
"""ACR at or above this on a step counts as all groups agreeing (zoo dev: greedy and constant-
verifier runs sit at 1.0; healthy G=8 runs never reach 0.9)."""
SATURATED_PASS = 0.85
"""Pass rate over the second half of the run at or above this: saturated (real logs: GSM8K runs
at 0.93-0.98; the zoo's L0 run ~0.9)."""
TOO_HARD_PASS = 0.1
"""Early pass rate at or below this (and never much above): too hard (zoo L6: ~0.01-0.05)."""
ENTROPY_FALL = 0.35
"""Late entropy at most this share of the early level: entropy collapse (real logs: 18%, 6% of
the first values are collapses to an engineer; a fall to 20-25% must count)."""
ENTROPY_RISE = 3.0
"""Late (or peak) entropy at least this multiple of the early level: a blow-up (zoo: 0.25 -> 3.6;
real logs: a 2x rise under an entropy bonus is not one)."""
SHORT_TERMINATED = 0.6
"""Terminated completions shorter than this share of the cap: the cap is not what they need,
so truncation means run-away completions (real logs: 18-350 tokens of 512)."""
KL_RISE = 20.0
"""Peak KL at least this multiple of its early level (zoo dev: lr 100x gives >100x)."""
ADV_FALL = 0.2
"""Late advantage std at most this share of the early one with rewards still varying: the
pipeline flattened them (zoo dev: epsilon 1e4 gives ~1e-4 of the early std)."""
EPISODE_MIN = 10
"""Logged points an episode of agreeing groups must cover (and a tenth of the run) to count when
it comes and goes or heals (zoo dev: an injected fault lasts 60 steps; chance ties of small
groups last 1-3 steps)."""
SMALL_G = 4
"""Groups of at most this many completions agree by chance often (p^G + (1-p)^G)."""


def candidates(ev: Events, found: set[str]) -> list[ConditionCall]:
    v = ev.v
    out: list[ConditionCall] = []
    first = ev.first_step
    p_early, p_late, p_half = ev.early("pass_rate"), ev.late("pass_rate"), ev.half("pass_rate")
    acr_early = ev.early("acr")
    G = v.group_size
    ppo = critic_baseline(v)

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
    jump = jump_end = None
    acr_s = ev.series("acr")
    if acr_early is not None and acr_early < 0.7 and acr_s is not None:
        jump = _abrupt(acr_s, ev.onset("acr", lambda x: x >= JUMP_ACR, hold=0.9))
        if jump is None:
            # A fault that comes and goes (three steps in four) or heals is an episode.
            ep = episode_of(acr_s[0], acr_s[1] >= JUMP_ACR)
            if ep is not None and ep[2] >= max(EPISODE_MIN, len(acr_s[1]) // 10) and ep[3] >= 0.7:
                jump = _abrupt(acr_s, ep[0])
                jump_end = ep[1] if jump is not None else None
    if jump is None and (acr_early is None or acr_early >= 0.7):
        # Zero spread before as well (a saturated run): the ACR cannot jump, but a pass rate
        # that flips in one step to one exact value can (all-correct -> all-wrong).
        jump = flat_from(ev)
    if jump is not None and jump > first:
        pass_s = ev.series("pass_rate")
        before = after = None
        constant = False
        if pass_s is not None:
            st, x = pass_s
            before = float(median(x[st < jump][-10:])) if (st < jump).any() else None
            after_x = x[(st >= jump) & (st <= (jump_end if jump_end is not None else st[-1]))]
            after = float(median(after_x[:10])) if after_x.size else None
            constant = after_x.size >= 3 and float(np.ptp(after_x)) <= 1e-9
        moved = policy_moved(ev, jump)
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
                    end_step=jump_end,
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
                    end_step=jump_end,
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
    cp_fall = None if falls else fall_at_changepoint(ev)
    if falls or cp_fall is not None:
        onset = ev.changepoint("pass_rate")
        out.append(
            ConditionCall(
                "POLICY_DEGRADATION",
                onset or first,
                0.75,
                [
                    f"pass rate falls {p_early:.2f} -> {p_late:.2f} (from step {onset})"
                    if cp_fall is None
                    else f"pass rate falls {cp_fall[0]:.2f} -> {cp_fall[1]:.2f} at step {onset} "
                    "and stays down"
                ],
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
    cap = length_cap(v)
    # An episode counts as well as the late level: a policy that half-learns to stop again
    # (truncation 0.86 -> 0.1 over 60 steps) had its completions run away all the same.
    t_onset = ev.onset("truncation_frac", lambda x: x >= TRUNCATED, hold=0.6)
    if t_late is not None and (max(t_late, t_half or 0) >= TRUNCATED or t_onset is not None):
        term = ev.series("length_terminated_mean")
        term_med = float(median(term[1][term[1] > 0])) if term and (term[1] > 0).any() else None
        short = cap is not None and term_med is not None and term_med < SHORT_TERMINATED * cap
        from_start = t_early is not None and t_early >= TRUNCATED
        # Not present from the start: its onset is the first stretch at the cap, never step 1.
        onset = t_onset or ev.onset("truncation_frac", lambda x: x >= TRUNCATED, hold=0.0)
        onset = first if from_start or onset is None else onset
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
                    [cut_text(ev, onset, t_late), why],
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
        jump = kl_jump(kl)
        if (
            k_first >= 10 * KL_HIGH
            or (k_peak >= KL_HIGH and k_peak >= KL_RISE * max(k_early or 0.0, 1e-3))
            or jump is not None
        ):
            if k_first >= 10 * KL_HIGH:
                onset = first
            elif jump is not None:
                onset = jump
            else:
                onset = int(kl[0][np.argmax(kl[1] >= max(KL_HIGH, 10 * (k_early or 0)))])
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
    small = small_groups(ev, G, out)
    if small is not None:
        out.append(small)
    shrink = length_collapse(ev)
    if shrink:
        for call in out:
            if call.id in ("POLICY_DEGRADATION", "REWARD_HACKING", "ENTROPY_COLLAPSE"):
                call.for_.append(shrink)
    return out


def small_groups(ev: Events, G: int | None, others: list[ConditionCall]) -> ConditionCall | None:
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
        if not grid or onset_of(acr[0], acr[1] >= JUMP_ACR, 0.9) is not None:
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


def _abrupt(acr: tuple[np.ndarray, np.ndarray], step: int | None) -> int | None:
    """``step`` when the ACR before it was low (median of the 5 points before < 0.6): a jump,
    not a gradual rise (the pass rate's doing); else None."""
    if step is None:
        return None
    before = acr[1][acr[0] < step][-5:]
    return step if before.size >= 2 and float(median(before)) < 0.6 else None


def _groups_agree(ev: Events, onset: int | None) -> bool:
    """Whether most groups agreed (median ACR >= 0.8) over the 10 logged steps from ``onset``."""
    acr = ev.series("acr")
    if acr is None or onset is None:
        return False
    after = acr[1][acr[0] >= onset][:10]
    return bool(after.size) and float(median(after)) >= 0.8


def _agreement_ended(ev: Events, onset: int, cid: str) -> int | None:
    """For a condition of agreeing groups, the last step of its stretch of ACR >= JUMP_ACR from
    ``onset`` when the groups disagree again after it (a live window in which the fault healed:
    the detector's own episode may not have closed yet); None otherwise."""
    acr = ev.series("acr")
    if cid not in ("IDENTICAL_COMPLETIONS", "VERIFIER_CONSTANT") or acr is None:
        return None
    keep = acr[0] >= onset
    ep = episode_of(acr[0][keep], acr[1][keep] >= JUMP_ACR)
    return None if ep is None else ep[1]


def from_findings(diagnosis: Any, ev: Events) -> list[ConditionCall]:
    for f in diagnosis.findings:
        if f.severity.value not in ("warn", "critical") or f.id not in _FINDING_CONDITION:
            continue
        cid = _FINDING_CONDITION[f.id]
        if f.id == "ADV_COLLAPSE" and _groups_agree(ev, f.onset_step):
            continue  # flat advantages of groups that agree: the groups', not the pipeline's
        against = ["named from one detector's sign, not a pattern over several series"]
        if cid == "IDENTICAL_COMPLETIONS":
            against.append(
                "or a verifier that scores a group alike: log completions to tell them apart"
            )
        onset = f.onset_step if f.onset_step is not None else ev.first_step
        end = f.end_step if f.end_step is not None else _agreement_ended(ev, onset, cid)
        return [ConditionCall(cid, onset, 0.4, [f.message], against, findings=[f.id], end_step=end)]
    return []

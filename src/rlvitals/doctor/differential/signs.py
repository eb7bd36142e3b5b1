"""Step 1b of the differential: compound signs read across a series' history.

Each answers one question a rule asks — did the KL jump against the KL just before it, did the
pass rate fall at its change point and stay down, did it flip to one exact value, how much was
cut at the cap, did completions shrink — measured against the level *before* the event, never
after it. Every threshold says what it was calibrated on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._median import median
from rlvitals.vitals.events import Events, onset_of

__all__ = [
    "FALL_RATIO",
    "KL_HIGH",
    "TRUNCATED",
    "critic_baseline",
    "cut_text",
    "fall_at_changepoint",
    "flat_from",
    "kl_jump",
    "length_cap",
    "length_collapse",
    "policy_moved",
]

FALL_RATIO = 0.5
"""Late pass rate at most this share of the early one: the policy got worse (zoo dev: lr 3x ends
at 0.15-0.3 of its early rate; healthy runs end at 0.8-1.3)."""
TRUNCATED = 0.3
"""Share of completions cut at the cap, as a level, that makes truncation a condition (real
logs: run-away runs at 0.45-1.0; healthy runs below 0.05)."""
KL_HIGH = 1.0
"""A KL level (nats per token, as trainers log it) that is a blow-up whatever its start (real
logs: healthy runs stay below 0.2)."""
KL_JUMP = 10.0
"""A KL at or above :data:`KL_HIGH` that is also this multiple of the median of the
:data:`KL_BEFORE` logged points before it is a blow-up, however noisy the run's start (zoo dev:
lr 100x jumps 10-40x in one step; early KL of a run still finding its feet is 0.1-0.9, so a
rise against the early level alone misses a jump to 4 nats)."""
KL_BEFORE = 10
"""Logged points before a KL value whose median is its local baseline."""
FALL_AFTER = 10
"""Logged points the pass rate must stay down after its change point for the fall to count
(zoo dev: lr 3x stays down for the rest of the run; a dip of a few noisy steps is not a fall)."""
LENGTH_SHRINK = 0.25
"""Late mean length at most this share of the early one is a length collapse (issue 23's real
run: 53 -> 3 tokens. Measured: the zoo's healthy runs end at 0.99-1.0 of their early length and
its lowest run at 0.33 (a KL blow-up); the 15 real logs with lengths at 0.65-2.7)."""


def kl_jump(kl: tuple[np.ndarray, np.ndarray]) -> int | None:
    """The first step whose KL is at least :data:`KL_HIGH` and :data:`KL_JUMP` times the median
    of the :data:`KL_BEFORE` points before it, and stays at least :data:`KL_HIGH` on most of the
    rest of the run; None when there is none."""
    st, x = kl
    high = np.flatnonzero(x >= KL_HIGH)
    high = high[high >= 3]
    if high.size == 0:
        return None
    # Local baselines, vectorised (a 20,000-step run at a high KL has thousands of candidates).
    window = np.clip(high[:, None] - np.arange(KL_BEFORE, 0, -1)[None, :], 0, None)
    local = median(x[window], axis=1)
    short = high < KL_BEFORE  # fewer points before it than a full window: the exact median
    local[short] = [float(median(x[:i])) for i in high[short]]
    hit = high[x[high] >= KL_JUMP * np.maximum(local, 1e-3)]
    if hit.size == 0:
        return None
    i = int(hit[0])
    return int(st[i]) if onset_of(st[i:], x[i:] >= KL_HIGH, 0.7) == int(st[i]) else None


def fall_at_changepoint(ev: Events) -> tuple[float, float] | None:
    """``(before, after)`` pass-rate levels when the pass rate's change point splits it into a
    level at least 0.15 and one at most :data:`FALL_RATIO` of it that lasts :data:`FALL_AFTER`
    logged points and the last fifth of the run; None otherwise. The level before is the one
    just before the change, not the run's first steps (which, while the policy finds its feet,
    may be far below it)."""
    s = ev.series("pass_rate")
    cp = ev.changepoint("pass_rate")
    if s is None or cp is None:
        return None
    st, x = s
    after = x[st >= cp]
    if after.size < max(FALL_AFTER, len(x) // 5):
        return None
    before = float(median(x[st < cp][-FALL_AFTER:]))
    level, late = float(median(after)), ev.late("pass_rate")
    if before >= 0.15 and max(level, late or 0.0) <= FALL_RATIO * before:
        return before, level
    return None


def flat_from(ev: Events) -> int | None:
    """The step from which the pass rate is one exact value to the end (at least
    :data:`FALL_AFTER` logged points, not the ceiling), after points that differed from it by
    more than 0.05; None otherwise. A policy drifts; a verifier that broke returns a constant
    from one step to the next (issue 23: a saturated run flipping to all-wrong, zero spread on
    both sides, is a collapse the ACR does not show)."""
    s = ev.series("pass_rate")
    if s is None:
        return None
    st, x = s
    last = x[-1]
    off = np.flatnonzero(np.abs(x - last) > 1e-9)
    if off.size == 0 or last >= 0.97:
        return None
    k = int(off[-1]) + 1  # first index of the final constant stretch
    if x.size - k < FALL_AFTER or k < 5 or abs(float(median(x[k - 5 : k])) - last) <= 0.05:
        return None
    return int(st[k])


def cut_text(ev: Events, onset: int, late: float) -> str:
    """How many completions were cut at the cap: the level of the stretch from ``onset``, and
    the late level when the policy has half-learned to stop again."""
    st, x = ev.series("truncation_frac")
    level = float(median(x[st >= onset][:10])) if (st >= onset).any() else late
    if late >= TRUNCATED or abs(level - late) < 0.1:
        return f"{late:.0%} of completions cut at the cap late in the run"
    return f"{level:.0%} of completions cut at the cap from step {onset} ({late:.0%} at the end)"


def length_collapse(ev: Events) -> str | None:
    """A sign, when completions shrank to at most :data:`LENGTH_SHRINK` of their early length
    (measured against the level before the fall, never after it): the policy answers in a few
    tokens (a gamed format or length reward, or a policy that gave up)."""
    early, late = ev.early("length_mean"), ev.late("length_mean")
    if early is None or late is None or early < 8 or late > LENGTH_SHRINK * early:
        return None
    return f"completions shrink {early:.0f} -> {late:.0f} tokens"


def policy_moved(ev: Events, step: int, k: int = 5) -> str | None:
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


def critic_baseline(vitals: Any) -> bool:
    """Whether the run's advantages come from a critic or batch baseline (PPO/GAE), not from
    groups: one completion per prompt is then what the estimator expects."""
    scale = vitals.adv_scale or ""
    return (vitals.estimator or "") in ("gae", "ppo") or (
        vitals.group_size == 1 and scale == "batch_std"
    )


def length_cap(vitals: Any) -> float | None:
    """The completion-length cap: the trainer's setting, else the longest length logged when
    some completions were truncated."""
    flat = list(_flat(getattr(vitals.run.manifest, "config", None) or {}))
    for key in (
        "max_completion_length",
        "data.max_response_length",
        "max_response_length",
        "generate_max_len",
        "max_new_tokens",
    ):
        for k, v in flat:
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

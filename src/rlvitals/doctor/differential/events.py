"""Step 1 of the differential: levels and onsets of a run's vitals series (:class:`Events`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._median import median

__all__ = [
    "EARLY_SHARE",
    "ENTROPY_EARLY_SHARE",
    "LATE_SHARE",
    "Events",
    "episode_of",
    "length_cap",
    "onset_of",
    "policy_moved",
]

EARLY_SHARE = 0.15
"""Share of the logged steps (at least 3) that make a series' early level (zoo dev: the first
~12 of 80 steps precede every injection at step 20)."""
ENTROPY_EARLY_SHARE = 0.05
"""Entropy's early level comes from a shorter start: on real runs it falls within the first
2% of the steps (real logs: 0.389 at step 1, 0.10 by step 20 of 1,100), and a baseline taken
after the fall hides the collapse."""
LATE_SHARE = 0.2
"""Share of the last logged steps that make its late level."""


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
        return None if s is None else onset_of(s[0], test(s[1]), hold)

    @property
    def first_step(self) -> int:
        return int(self.steps[0]) if self.steps.size else 0

    def step_gap(self) -> float:
        return float(median(np.diff(self.steps))) if self.steps.size > 1 else 1.0


def onset_of(steps: np.ndarray, mask: np.ndarray, hold: float = 0.7, run: int = 3) -> int | None:
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


def episode_of(
    steps: np.ndarray, mask: np.ndarray, run: int = 3, gap: int = 3
) -> tuple[int, int | None, int, float] | None:
    """The first stretch where ``mask`` holds: it starts at ``run`` points in a row and ends at
    the last point before ``gap`` points in a row without it (single misses inside are bridged:
    a fault on three steps in four is one stretch). Returns ``(onset step, end step or None when
    it lasts to the end, points covered, share of them where mask holds)``, or None."""
    mask = np.asarray(mask, dtype=bool)
    n = mask.size
    if n < run:
        return None
    starts = np.flatnonzero(np.convolve(mask, np.ones(run, dtype=np.int32), "valid") == run)
    if starts.size == 0:
        return None
    i = int(starts[0])
    off = np.convolve(~mask[i:], np.ones(gap, dtype=np.int32), "valid") == gap
    stop = np.flatnonzero(off)
    last = n - 1 if stop.size == 0 else i + int(stop[0]) - 1
    covered = last - i + 1
    end = None if stop.size == 0 else int(steps[last])
    return int(steps[i]), end, covered, float(mask[i : last + 1].mean())


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

"""ACR volatile: the Advantage Collapse Rate swings far more than sampling noise explains.

## What is happening
He et al. (ICML 2026) measured the standard deviation of the ACR over sliding 25-step windows:
above 0.15, runs had a 2.3x higher chance of diverging or forgetting. Large swings mean the
policy lurches between producing uniform groups and varied ones — an unstable update (learning
rate too high, clipping too loose) or a prompt stream that alternates between easy and hard
batches.

## What it looks like in the recording
The ACR jumps up and down by tens of points from step to step or in waves, instead of drifting.
`reward_mean`, `entropy` and `grad_norm` often swing with it.

## How the detector decides
The volatility is `rlvitals.signal.acr_volatility` over :knob:`window` logged steps. Part of it
is sampling noise: a step with N groups has an ACR standard deviation of about
sqrt(ACR (1 - ACR) / N) by chance alone, so a run with few groups per step is "volatile"
without anything being wrong. With :knob:`noise_correction` on, that noise is removed
(variances subtract, and what is left must exceed 4 standard deviations of a window's sample
variance, a little more in runs over 2,000 logged steps, which give noise more chances); N comes from the per-group rewards, else from the granularity of the logged fraction
(values are multiples of 1/N), else the noise is estimated from step-to-step differences.
Neither a level shift (a collapse starting or ending inside the window, whose new level then
lasts), a steady ramp, nor a single outlier is volatility: the window is judged on what is left
after the better of a one-split step fit and a straight line, and without its two extreme
points. An episode is :knob:`sustain` consecutive logged steps with the corrected
volatility above :knob:`volatility_above`; its onset is where the volatility started to rise
(the last step before it at or below half the threshold).

## What to try
- Lower the learning rate or tighten the clip range; check grad_norm for spikes.
- Shuffle the prompt stream so batches mix difficulties.
- Smooth the signal the mitigation reacts to: AVSPO's windowed ACR gate (W = 25) damps
  oscillations (`AvspoConfig(windowed_gate="always")`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from rlvitals import advice
from rlvitals._median import median
from rlvitals._record import record
from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import (
    LONG_RUN_POINTS,
    compare,
    compress,
    find_spans,
    fmt,
    long_run_sustain,
    rnd,
)
from rlvitals.signal import DEFAULT_WINDOW, acr_volatility
from rlvitals.signal.rolling import row_nanmedian
from rlvitals.vitals import Vitals

VOLATILITY_ABOVE = 0.15
"""Noise-corrected std of the ACR over the window above this is volatile (paper: 0.15). Calibrated
on the corpus: 8/8 volatile runs found at 0.0375 to 0.15, 7/8 at 0.225, 4/8 at 0.3; silent on the 48
corpus, 9 zoo dev and 1 real healthy runs down to 0.0375 (no zoo or real run has the condition to
count a hit)."""
SUSTAIN = 5
"""Consecutive logged steps above the threshold that make an episode. Not calibrated: a design
choice (five steps, as the other detectors); the corpus (8/8), zoo dev and real logs give the same
findings for any value from 1 to 20."""
NOISE_CORRECTION = True
"""Remove the binomial sampling noise of the ACR before comparing with the threshold. Not
calibrated: a switch, on by design (at small G the raw volatility of a healthy run exceeds 0.15 by
chance); not swept."""
MAX_GROUPS = 1024
GRANULARITY_SAMPLE = 256
CHI2_1_MEDIAN = 0.4549
CONFIDENCE = 0.75
MAX_EPISODES = 3
MIN_POINTS_FACTOR = 2
SIGNIFICANCE = 4.0
CHUNK = 20000


@register
class AcrVolatile(Detector):
    __doc__ = __doc__
    id = "ACR_VOLATILE"
    severity = Severity.WARN
    family = "collapse"
    key_metrics = ("acr", "acr_volatility")

    @record(frozen=True)
    class Knobs:
        #: Volatility (std of the ACR over the window) above this is volatile (paper: 0.15).
        volatility_above: float = VOLATILITY_ABOVE
        #: Window of the volatility, in logged steps (paper: 25).
        window: int = DEFAULT_WINDOW
        #: Consecutive logged steps above the threshold that make an episode.
        sustain: int = SUSTAIN
        #: Remove the sampling noise of the ACR before comparing with the threshold.
        noise_correction: bool = NOISE_CORRECTION

    def needs(self, vitals: Vitals) -> str | None:
        if not vitals.has("acr"):
            return "needs the ACR: per-group rewards, frac_reward_zero_std or adv_zero_frac"
        return None

    def check(
        self, vitals: Vitals, found: Mapping[str, list[Finding]] | None = None
    ) -> list[Finding]:
        if not vitals.has("acr") or vitals.batch_trap or vitals.too_short:
            return []
        k = self.knobs
        steps, acr = compress(vitals.steps, vitals.get("acr"))
        if acr.size < MIN_POINTS_FACTOR * k.window:
            return []
        vol = acr_volatility(acr, k.window)
        noise_var, how = _noise_var(vitals, steps, acr, k.window)
        if k.noise_correction:
            corr = np.sqrt(np.maximum(vol**2 - noise_var, 0.0))
        else:
            corr, how = vol, "not corrected"
        corr = np.where(np.isnan(vol), 0.0, corr)
        # A level shift (a collapse starting or ending) or a steady ramp inside the window
        # raises the std without any swinging: judge what is left after the better of a
        # one-split step fit and a straight-line fit.
        cand = np.flatnonzero(corr > k.volatility_above)
        if cand.size:
            resid = _residual_std(acr, cand, k.window)
            if k.noise_correction:
                nv = noise_var[cand]
                excess = resid**2 - nv
                # Sampling noise also makes the window's variance itself noisy: keep only an
                # excess that is significant (z = SIGNIFICANCE sd of a W-point sample variance).
                z = SIGNIFICANCE + 0.5 * math.log2(max(1.0, acr.size / LONG_RUN_POINTS))
                significant = excess > z * nv * np.sqrt(2.0 / (k.window - 1))
                rc = np.where(significant, np.sqrt(np.maximum(excess, 0.0)), 0.0)
            else:
                rc = resid
            corr[cand] = np.minimum(corr[cand], rc)
        out = []
        sustain = long_run_sustain(k.sustain, int(acr.size))
        for sp in find_spans(steps, corr > k.volatility_above, sustain=sustain):
            # Onset: where the volatility began to rise.
            calm = np.flatnonzero(corr[: sp.first] <= k.volatility_above / 2)
            i_on = int(calm[-1]) + 1 if calm.size else 0
            i_on = max(i_on, sp.first - k.window + 1)
            peak = float(np.max(corr[sp.first : sp.last + 1]))
            raw = float(np.nanmax(vol[sp.first : sp.last + 1]))
            end = sp.end
            if end is not None:
                end = int(steps[max(i_on, sp.last - k.window // 2)])
            onset = int(steps[i_on])
            where = f"since step {onset}" if end is None else f"from step {onset} to {end}"
            msg = (
                f"ACR volatility {compare(peak, '>', k.volatility_above)} {where} "
                f"(window {k.window} logged steps; raw {fmt(raw)}, sampling noise {how})"
            )
            out.append(
                self.finding(
                    msg,
                    onset_step=onset,
                    end_step=end,
                    confidence=CONFIDENCE,
                    evidence=vitals.evidence,
                    series=["acr", "acr_volatility"],
                    thresholds={"acr_volatility": k.volatility_above},
                    metrics={
                        "volatility": rnd(peak),
                        "volatility_raw": rnd(raw),
                        "threshold": k.volatility_above,
                        "window": k.window,
                        "noise": how,
                    },
                    actions=[
                        advice.set_knob("learning_rate", vitals.trainer, "lower")
                        + ", or tighten the clip range; check grad_norm",
                        "shuffle the prompt stream so batches mix difficulties",
                        "damp the mitigation's input: AVSPO with a windowed ACR gate "
                        "(AvspoConfig windowed_gate='always', acr_window=25)",
                    ],
                )
            )
            if len(out) >= MAX_EPISODES:
                break
        return out


def _noise_var(
    vitals: Vitals, steps: np.ndarray, acr: np.ndarray, window: int
) -> tuple[np.ndarray, str]:
    """Per-point sampling variance of the ACR averaged over the trailing window, and how."""
    ng = vitals.get("n_groups")
    if ng is not None:
        n = ng[np.isin(vitals.steps, steps)]
        n = np.where(np.isfinite(n) & (n > 0), n, np.nan)
        how = "binomial, N from per-group rewards"
    else:
        g = _granularity(acr)
        if g:
            n = np.full(acr.shape, float(g))
            how = f"binomial, N = {g} from the fraction's granularity"
        else:
            d = np.diff(acr)
            v = float(median(d * d) / (2 * CHI2_1_MEDIAN)) if d.size else 0.0
            return np.full(acr.shape, v), "from step-to-step differences"
    per = acr * (1.0 - acr) / n
    per = np.where(np.isfinite(per), per, 0.0)
    c = np.cumsum(np.r_[0.0, per])
    idx = np.arange(1, per.size + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo), how


def _residual_std(x: np.ndarray, idx: np.ndarray, window: int) -> np.ndarray:
    """Std of what a step fit (best single split) or a line leaves in each trailing window.

    A split only explains the window when the new level persists: if the series goes back to
    the old level within the next ``window`` points, it was a swing, not a shift.

    Args:
        x: ``(n,)`` series; idx: ``(c,)`` window end indices (``>= window - 1``).
    Returns ``(c,)``.
    """
    if idx.size > CHUNK:  # bounded memory: (c, W) temporaries per chunk
        return np.concatenate(
            [_residual_std(x, idx[i : i + CHUNK], window) for i in range(0, idx.size, CHUNK)]
        )
    win = np.lib.stride_tricks.sliding_window_view(x, window)[idx - window + 1]  # (c, W)
    w = window
    total = win.sum(axis=1)
    ss = (win * win).sum(axis=1)
    sst = ss - total * total / w
    # Best single split: SSE = SST - (between-segment sum of squares), maximised over k.
    left = np.cumsum(win, axis=1)[:, :-1]  # (c, W-1) sums of the first k = 1..W-1 points
    k = np.arange(1, w, dtype=np.float64)
    mean = total / w
    between = (left - k * mean[:, None]) ** 2 * w / (k * (w - k))
    best = between.argmax(axis=1)
    sse_split = sst - between[np.arange(win.shape[0]), best]
    kb = k[best]
    m1 = left[np.arange(win.shape[0]), best] / kb
    m2 = (total - m1 * kb) / (w - kb)
    # Median of the (up to) w points after each window; NaN-padded at the end of the run.
    ext = np.concatenate((x.astype(np.float64, copy=False), np.full(w, np.nan)))
    nxt = np.lib.stride_tricks.sliding_window_view(ext, w)[idx + 1]
    after = row_nanmedian(nxt)
    reverted = np.abs(after - m1) < np.abs(after - m2)
    sse_split = np.where(reverted, sst, sse_split)
    # Least-squares line.
    t = np.arange(w, dtype=np.float64) - (w - 1) / 2.0
    slope = (win * t).sum(axis=1) / (t * t).sum()
    sse_line = sst - slope * slope * (t * t).sum()
    sse = np.maximum(np.minimum(sse_split, sse_line), 0.0)
    # A single outlier is not volatility either: the std without the window's two extremes.
    trimmed = np.sort(win, axis=1)[:, 1:-1].std(axis=1) if w > 4 else np.full(win.shape[0], np.inf)
    return np.minimum(np.sqrt(sse / w), trimmed)


def _granularity(x: np.ndarray) -> int | None:
    """Smallest N <= 1024 such that every value is a multiple of 1/N, or None."""
    u = np.sort(x)  # np.unique without its first-call import of numpy.ma (6 ms of start-up)
    u = u[np.r_[True, u[1:] != u[:-1]]]
    if u.size < 3:
        return None
    if u.size > GRANULARITY_SAMPLE:
        u = u[np.linspace(0, u.size - 1, GRANULARITY_SAMPLE).astype(int)]
    ns = np.arange(1, MAX_GROUPS + 1, dtype=np.float64)
    prod = u[:, None] * ns[None, :]
    ok = np.all(np.abs(prod - np.round(prod)) <= 1e-6 * ns[None, :], axis=0)
    hit = np.flatnonzero(ok)
    return int(ns[hit[0]]) if hit.size else None

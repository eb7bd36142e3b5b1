"""The steps of :func:`rlvitals.vitals.compute_vitals`: align the run's series, read the
collapse evidence tier by tier (DESIGN.md 3.6, best first), then the collapse rates.

Each tier adds the series it can derive and takes the evidence only when no better tier has:

1. :func:`from_groups`: per-group rewards (exact ACR, its split, expected collapse), or the ACR
   the rlvitals recorder computed live from them;
2. :func:`from_zero_std_frac`: the trainer's zero-variance group fraction (TRL
   ``frac_reward_zero_std``; its ``scale_rewards="batch"`` trap is noted);
3. :func:`from_advantages`: adv_std / adv_zero_frac, or veRL ``critic/advantages/max == min == 0``;
4. :func:`from_reward_variance`: the step's reward std (or score max - min) with reward_mean and G;
5. :func:`from_zero_updates`: loss (else pg_loss) and grad_norm exactly 0 on a step.

Then the trainer's filter is read (:mod:`rlvitals.vitals.filtering`) and :func:`expected_acr`
and :func:`collapse_rates` derive the pass rate, the expected and excess ACR, the windowed ACR,
its volatility and the wasted share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals._median import median
from rlvitals._record import record
from rlvitals.recording.run import Run
from rlvitals.signal import ZERO_ATOL, acr_volatility, expected_collapse, windowed_acr
from rlvitals.vitals.groups import GroupSeries

__all__ = [
    "GROUP_SERIES",
    "Draft",
    "align",
    "binary_rewards",
    "collapse_rates",
    "expected_acr",
    "finite_any",
    "from_advantages",
    "from_groups",
    "from_reward_variance",
    "from_zero_std_frac",
    "from_zero_updates",
]

_SINGLETON_SHARE = 0.9
"""Share of steps whose advantage extremes equal the reward extremes that means G = 1."""
_SINGLETON_MIN_STEPS = 10
_EXPECTED_NOTES = {
    "per-prompt": "expected ACR: each group's P0 at its prompt's pass rate in the prompt's "
    "nearest other steps",
    "mixed": "expected ACR: each group's P0 at its prompt's pass rate in its nearest other steps "
    "({share:.0%} of groups), else at the step's mean pass rate",
    "batch": "expected ACR: P0 at the step's mean pass rate (no prompt ids, or no prompt seen "
    "twice: prompts assumed alike, an optimistic baseline)",
}
_BATCH_TRAP_MIN_POINTS = 10
"""zero_std_frac must have this many points, all 0 or 1, to suspect the scale_rewards trap."""
GROUP_SERIES = (
    "acr",
    "acr_solve_all",
    "acr_solve_none",
    "acr_flat",
    "expected_acr",
    "pass_rate",
    "n_groups",
    "group_size",
)
"""Series the per-group rewards always give (tier 1); the live guard's window derives the same
ones from its groups."""


@record
class Draft:
    """The vitals being derived: one step index, the series on it, and what is known so far.

    Attributes:
        run: the run (per-completion rewards of +/-inf already read as unscorable).
        steps: ``(T,)`` the step index: the run's steps and its groups' steps, sorted.
        series: name -> ``(T,)`` float series, NaN where not logged.
        notes: what was read and how, in order.
        group_size: G, when stated or found; ``group_size_from`` says where from.
        evidence: the best collapse evidence tier so far (``none`` until one is found).
        expected_from: how the expected ACR was made (``per-prompt``, ``mixed``, ``batch``,
            ``estimate``).
        batch_trap: TRL's ``frac_reward_zero_std`` is whole-batch collapse only.
    """

    run: Run
    steps: np.ndarray
    series: dict[str, np.ndarray]
    notes: list[str]
    group_size: int | None = None
    group_size_from: str | None = None
    evidence: str = "none"
    expected_from: str | None = None
    batch_trap: bool = False


def align(run: Run, gs: GroupSeries | None, notes: list[str]) -> Draft:
    """Put every series of ``run`` on one step index (the union with the groups' steps)."""
    steps = run.steps.astype(np.int64, copy=False)
    if gs is not None and not np.array_equal(gs.steps, steps):
        steps = np.union1d(steps, gs.steps).astype(np.int64)
    same = np.array_equal(steps, run.steps)
    pos = None if same else np.searchsorted(steps, run.steps)
    T = steps.shape[0]
    series = {name: col if same else _scatter(T, pos, col) for name, col in run.series.items()}
    m = run.manifest
    stated = str(m.config.get("group_size_source") or "the configuration")
    return Draft(
        run=run,
        steps=steps,
        series=series,
        notes=notes,
        group_size=m.group_size,
        group_size_from=stated if m.group_size is not None else None,
    )


def from_groups(d: Draft, gs: GroupSeries | None) -> None:
    """Tier 1: per-group rewards give the exact ACR, its split, the pass rate, the expected ACR
    and G; the advantage, reward mean and reward std series the trainer did not log."""
    series, T = d.series, d.steps.shape[0]
    if gs is None:
        if finite_any(series.get("acr")):
            d.evidence = "groups"
            d.notes.append("collapse evidence: ACR recorded live from per-group rewards")
        return
    gpos = np.searchsorted(d.steps, gs.steps)
    for name in GROUP_SERIES:
        series[name] = _scatter(T, gpos, getattr(gs, name))
    for name in ("adv_std", "adv_zero_frac"):
        if not finite_any(series.get(name)):
            series[name] = _scatter(T, gpos, getattr(gs, name))
    if not finite_any(series.get("reward_mean")):
        series["reward_mean"] = _scatter(T, gpos, gs.reward_mean)
    # the mean of the groups' reward stds: TRL's reward_std before 0.27, OpenRLHF's group_reward_std
    for name in ("reward_std", "group_reward_std_mean"):
        if not finite_any(series.get(name)):
            series[name] = _scatter(T, gpos, gs.group_std_mean)
    if d.group_size is None:
        sizes = gs.group_size[np.isfinite(gs.group_size)]
        if sizes.size:
            d.group_size = round(float(median(sizes)))
            d.group_size_from = "per-group rewards"
    d.evidence = "groups"
    d.notes.append("collapse evidence: per-group rewards (exact ACR)")
    d.expected_from = gs.expected_from
    d.notes.append(_EXPECTED_NOTES[gs.expected_from].format(share=gs.per_prompt_share))


def from_zero_std_frac(d: Draft) -> None:
    """Tier 2: the trainer's zero-variance group fraction is the ACR (TRL's batch trap noted)."""
    zsf = d.series.get("zero_std_frac")
    if not finite_any(zsf):
        return
    d.batch_trap = _batch_trap(d.run.manifest.scale_rewards, zsf, d.notes)
    if d.evidence == "none":
        d.series["acr"] = zsf.astype(np.float64, copy=True)
        d.evidence = "zero_std_frac"
        d.notes.append(
            "collapse evidence: the trainer's zero-variance group fraction"
            + (" (whole-batch collapse only: see the scale_rewards note)" if d.batch_trap else "")
        )


def from_advantages(d: Draft) -> None:
    """Tier 3: advantages flat (adv_std, adv_zero_frac, adv max - min; veRL logs max and min)."""
    series = d.series
    amax, amin = series.get("adv_max"), series.get("adv_min")
    if finite_any(amax) and finite_any(amin):
        with np.errstate(invalid="ignore"):
            series["adv_span"] = amax - amin
            allz = (np.abs(amax) <= ZERO_ATOL) & (np.abs(amin) <= ZERO_ATOL)
        az = np.where(np.isfinite(amax) & np.isfinite(amin), allz.astype(np.float64), np.nan)
        series["adv_all_zero"] = az
    has_adv = any(finite_any(series.get(k)) for k in ("adv_std", "adv_zero_frac", "adv_span"))
    if has_adv and d.evidence == "none":
        d.evidence = "advantages"
        if finite_any(series.get("adv_zero_frac")):
            series["acr"] = series["adv_zero_frac"].astype(np.float64, copy=True)
            d.notes.append("collapse evidence: advantages (ACR ~ adv_zero_frac, equal group sizes)")
        else:
            d.notes.append("collapse evidence: advantages (adv_std / adv max-min; no ACR)")


def from_reward_variance(d: Draft) -> None:
    """Tier 4: reward variance (std, or max - min); G = 1 when the advantages are the rewards."""
    series = d.series
    rmx, rmn = series.get("reward_max"), series.get("reward_min")
    if finite_any(rmx) and finite_any(rmn):
        with np.errstate(invalid="ignore"):
            series["reward_range"] = rmx - rmn
        if d.group_size is None and _advantages_are_rewards(series):
            d.group_size, d.group_size_from = 1, "advantages equal to rewards"
            d.notes.append(
                "G = 1 inferred: the advantages' max and min equal the rewards' on every step "
                "(groups of one completion: the raw reward is the advantage, no baseline)"
            )
    has_rstd = finite_any(series.get("reward_std")) or finite_any(series.get("reward_range"))
    if has_rstd and d.evidence == "none":
        d.evidence = "reward_std"
        d.notes.append("collapse evidence: reward variance (no ACR; expected collapse from G)")


def from_zero_updates(d: Draft) -> None:
    """Tier 5: steps whose loss and grad_norm are exactly 0 (every advantage was zero); the
    total loss when logged, else the policy-gradient loss (OpenRLHF logs only that)."""
    series = d.series
    loss = series.get("loss") if finite_any(series.get("loss")) else series.get("pg_loss")
    gn = series.get("grad_norm")
    if finite_any(loss) and finite_any(gn):
        with np.errstate(invalid="ignore"):
            z = (np.abs(loss) <= ZERO_ATOL) & (np.abs(gn) <= ZERO_ATOL)
        series["zero_update"] = np.where(np.isfinite(loss) & np.isfinite(gn), z * 1.0, np.nan)
        if d.evidence == "none":
            d.evidence = "loss_grad_zero"
            d.notes.append("collapse evidence: steps with loss and grad_norm exactly 0")
    if d.evidence == "none":
        d.notes.append(
            "no collapse evidence: log per-group rewards (rlvitals recorder), "
            "frac_reward_zero_std, advantage stats or reward_std"
        )


def expected_acr(d: Draft, rmin: float, rmax: float) -> None:
    """The pass rate from the reward mean, and the ACR expected by chance, P0 = p^G + (1-p)^G
    (DESIGN.md 3.3), when the groups did not give it: binary rewards only."""
    series = d.series
    rmean = series.get("reward_mean")
    if "pass_rate" not in series and finite_any(rmean):
        series["pass_rate"] = np.clip((rmean - rmin) / (rmax - rmin), 0.0, 1.0)
    if (
        "expected_acr" not in series
        and d.group_size
        and finite_any(series.get("pass_rate"))
        and binary_rewards(d.run, series, rmin, rmax) is not False
    ):  # P0 is the collapse chance of binary rewards: partial credit gets no estimate
        d.expected_from = "estimate"
        p = series["pass_rate"]
        with np.errstate(invalid="ignore"):
            series["expected_acr"] = np.where(
                np.isfinite(p), expected_collapse(np.nan_to_num(p), float(d.group_size)), np.nan
            )


def collapse_rates(d: Draft, window: int) -> None:
    """Excess ACR (observed - expected), windowed ACR and its volatility over ``window`` steps,
    and the wasted share (completions with zero advantage; the ACR when those are not logged)."""
    series = d.series
    acr = series.get("acr")
    if finite_any(acr):
        if finite_any(series.get("expected_acr")):
            series["excess_acr"] = acr - series["expected_acr"]
        series["acr_windowed"] = _on_finite(acr, lambda a: windowed_acr(a, window))
        series["acr_volatility"] = _on_finite(acr, lambda a: acr_volatility(a, window))
    wasted = series.get("adv_zero_frac")
    if finite_any(wasted):
        series["wasted_frac"] = wasted
    elif finite_any(acr) and not d.batch_trap:
        series["wasted_frac"] = acr


def binary_rewards(run: Run, series: dict[str, np.ndarray], lo: float, hi: float) -> bool | None:
    """See :attr:`rlvitals.vitals.Vitals.binary_rewards`."""
    tol = 1e-6 * max(1.0, hi - lo)
    g = run.groups
    if g is not None and g.rewards.size:
        r = g.rewards[np.isfinite(g.rewards)]
        return bool(((np.abs(r - lo) <= tol) | (np.abs(r - hi) <= tol)).all())
    ends = [series.get(n) for n in ("reward_min", "reward_max")]
    vals = [x[np.isfinite(x)] for x in ends if x is not None]
    vals = [v for v in vals if v.size]
    if not vals:
        return None
    v = np.concatenate(vals)
    at_end = (np.abs(v - lo) <= tol) | (np.abs(v - hi) <= tol)
    return bool(at_end.mean() >= 0.95)


def finite_any(x: np.ndarray | None) -> bool:
    """True when ``x`` is a series with at least one finite point."""
    return x is not None and bool(np.isfinite(x).any())


def _batch_trap(scale_rewards: str | None, zsf: np.ndarray, notes: list[str]) -> bool:
    """Note TRL's ``scale_rewards="batch"`` trap; True when it applies."""
    if scale_rewards == "batch":
        notes.append(
            "scale_rewards='batch': TRL computes frac_reward_zero_std from the batch std, so it "
            "is 1 only when the whole batch is degenerate and 0 otherwise; it is not the ACR"
        )
        return True
    if scale_rewards is None:
        v = zsf[np.isfinite(zsf)]
        if v.size >= _BATCH_TRAP_MIN_POINTS and bool(np.all((v == 0.0) | (v == 1.0))):
            notes.append(
                "frac_reward_zero_std is only ever 0 or 1: likely TRL scale_rewards='batch' "
                "(computed from the batch std), or one prompt per step; read it as whole-batch "
                "collapse, not the ACR"
            )
            return True
    return False


def _advantages_are_rewards(series: dict[str, np.ndarray]) -> bool:
    """True when adv max/min equal reward max/min (relative 1e-3) on at least
    :data:`_SINGLETON_SHARE` of the steps that log all four, and the rewards vary: what veRL's
    GRPO logs with groups of one completion (mean 0, std 1: advantage = reward / (1 + eps))."""
    amax, amin = series.get("adv_max"), series.get("adv_min")
    rmax, rmin = series.get("reward_max"), series.get("reward_min")
    if amax is None or amin is None or rmax is None or rmin is None:
        return False
    ok = np.isfinite(amax) & np.isfinite(amin) & np.isfinite(rmax) & np.isfinite(rmin)
    if int(ok.sum()) < _SINGLETON_MIN_STEPS or not (rmax[ok] > rmin[ok]).any():
        return False
    scale = np.maximum(np.abs(rmax[ok]) + np.abs(rmin[ok]), 1e-6)
    same = (np.abs(amax[ok] - rmax[ok]) + np.abs(amin[ok] - rmin[ok])) <= 1e-3 * scale
    return float(same.mean()) >= _SINGLETON_SHARE


def _scatter(T: int, pos: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.full(T, np.nan)
    out[pos] = values
    return out


def _on_finite(x: np.ndarray, fn: Any) -> np.ndarray:
    """Apply a step-series function to the finite points of ``x``; NaN elsewhere."""
    ok = np.isfinite(x)
    out = np.full(x.shape[0], np.nan)
    if ok.any():
        out[ok] = fn(x[ok])
    return out

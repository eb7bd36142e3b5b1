"""``Vitals``: every series a detector reads, derived once per run (DESIGN.md 3.2-3.6).

The collapse evidence follows the fallback chain of DESIGN.md 3.6, best first:

1. ``groups``: per-group rewards (exact ACR, its split, expected and excess collapse), or the
   ACR the rlvitals recorder computed live from them;
2. ``zero_std_frac``: the trainer's zero-variance group fraction (TRL ``frac_reward_zero_std``);
3. ``advantages``: adv_std / adv_zero_frac, or veRL ``critic/advantages/max == min == 0``;
4. ``reward_std``: the step's reward std (or veRL's score max - min) with reward_mean and G;
5. ``loss_grad_zero``: loss (else pg_loss) and grad_norm exactly 0 on a step (every advantage
   was zero);
6. ``none``.

Every canonical series of the run is kept, aligned on one step index (NaN = not logged); the
derived series are added beside them. Derived names:

``acr``, ``acr_solve_all``, ``acr_solve_none``, ``acr_flat`` (tiers 1-3), ``n_groups``,
``group_size``, ``pass_rate`` (reward_mean rescaled to [0, 1] by the reward range),
``expected_acr`` (needs G), ``excess_acr``, ``acr_windowed``, ``acr_volatility``,
``adv_std``, ``adv_zero_frac``, ``adv_span`` (adv_max - adv_min), ``adv_all_zero`` (1 where every
advantage was 0), ``reward_std`` (from groups when not logged: mean group std, as TRL),
``reward_range`` (reward_max - reward_min), ``zero_update`` (1 where loss and grad_norm are
exactly 0), ``wasted_frac``.
"""

from __future__ import annotations

import math
from dataclasses import field, replace
from typing import Any

import numpy as np

from rlvitals import vocabulary
from rlvitals._median import median, nanmedian
from rlvitals._record import record
from rlvitals.recording.metrics import CANONICAL
from rlvitals.recording.run import Run
from rlvitals.signal import (
    DEFAULT_TAU,
    DEFAULT_WINDOW,
    acr_100,
)
from rlvitals.vitals import evidence, filtering
from rlvitals.vitals.evidence import GROUP_SERIES, finite_any
from rlvitals.vitals.groups import group_series
from rlvitals.vitals.rewards import reward_range

__all__ = [
    "DERIVED_SERIES",
    "EVIDENCE_TIERS",
    "MIN_JUDGE_STEPS",
    "UnknownSeriesError",
    "Vitals",
    "compute_vitals",
    "is_known_series",
]

DERIVED_SERIES = (
    *GROUP_SERIES,
    "excess_acr",
    "acr_windowed",
    "acr_volatility",
    "adv_span",
    "adv_all_zero",
    "reward_range",
    "zero_update",
    "wasted_frac",
    "filtered_frac",
    "group_reward_std_mean",
)
"""Series the vitals derive (module docstring); with the canonical metrics
(:data:`rlvitals.recording.metrics.CANONICAL`) they are the names a detector may ask for."""

EVIDENCE_TIERS = ("groups", "zero_std_frac", "advantages", "reward_std", "loss_grad_zero", "none")
"""The fallback chain of DESIGN.md 3.6, best first."""

MIN_JUDGE_STEPS = 30
"""A run spanning fewer training steps is too short to judge (unless it is totally collapsed)."""


class UnknownSeriesError(KeyError):
    """A series name that is neither a canonical metric nor a derived series."""

    def __init__(self, name: str):
        import difflib

        close = difflib.get_close_matches(name, [*CANONICAL, *DERIVED_SERIES], n=3, cutoff=0.6)
        hint = f" (closest: {', '.join(close)})" if close else ""
        super().__init__(
            f"unknown series {name!r}{hint}: vitals hold the canonical metrics "
            "(docs/metrics.md) and the derived series of rlvitals.vitals.core"
        )

    def __str__(self) -> str:
        return str(self.args[0])


_KNOWN = frozenset(DERIVED_SERIES)


def is_known_series(name: str) -> bool:
    """True for a canonical metric, a derived series, a TRL per-reward-function series
    (``reward/<fn>/mean``) and their ``eval/`` twins."""
    base = name[len("eval/") :] if name.startswith("eval/") else name
    return base in CANONICAL or base in _KNOWN or base.startswith("reward/")


@record
class Vitals:
    """Series derived from a :class:`Run`; what every detector reads.

    Attributes:
        run: the run.
        steps: ``(T,)`` int64 training steps (run steps ∪ steps with group data).
        series: name → ``(T,)`` float64 aligned on ``steps``; NaN = not logged. Holds every
            canonical series of the run plus the derived ones (module docstring).
        eval_steps, eval_series: evaluation rows, as in the run.
        evidence: the collapse evidence tier used (:data:`EVIDENCE_TIERS`).
        group_size: completions per prompt (G), when known.
        group_size_from: where G came from ("the configuration", "per-group rewards",
            "advantages equal to rewards", ...), or None.
        expected_acr_from: how ``expected_acr`` was made: ``per-prompt`` (each group's P0 at
            its prompt's pass rate in nearby steps), ``mixed`` (some groups fell back to the
            step's pass rate), ``batch`` (the step's mean pass rate for every group),
            ``estimate`` (no per-group rewards: P0 of the step's mean reward and G), or None.
        estimator: advantage estimator, when known (``grpo``, ``dr_grpo``, ``avspo``, ...).
        adv_scale: what the advantages were divided by (:class:`rlvitals.vocabulary.Scale`
            value: ``group_std``, ``batch_std``, ``none``, ``virtual``), when known.
        kl_coef: KL coefficient, when known.
        reward_min, reward_max: the reward range (assumed [0, 1] when unknown; see ``notes``).
        acr_mean, acr_100: mean ACR over the run and over its first 100 steps.
        notes: what the vitals noticed (tier used and why, the scale_rewards trap, ...).
        tau, acr_window: the collapse tolerance and ACR window the vitals were computed with.
        reward_range_known: False when [0, 1] was assumed.
        reward_range_from: where the range came from (:class:`~rlvitals.vitals.RewardRange`
            ``source``): ``mean reward`` means a guess from the mean's own extremes, so the pass
            rate is only approximate (saturation is then not judged from it).
        batch_trap: True when ``zero_std_frac`` is TRL's batch-level flag (scale_rewards trap).
    """

    run: Run
    steps: np.ndarray
    series: dict[str, np.ndarray]
    eval_steps: np.ndarray
    eval_series: dict[str, np.ndarray]
    evidence: str
    group_size: int | None
    group_size_from: str | None
    expected_acr_from: str | None
    estimator: str | None
    adv_scale: str | None
    kl_coef: float | None
    reward_min: float
    reward_max: float
    acr_mean: float | None
    acr_100: float | None
    notes: list[str] = field(default_factory=list)
    tau: float = DEFAULT_TAU
    acr_window: int = DEFAULT_WINDOW
    reward_range_known: bool = False
    reward_range_from: str = "assumed"
    batch_trap: bool = False

    # ----------------------------------------------------------------------------------------

    def get(self, name: str) -> np.ndarray | None:
        """The series ``name`` (train or ``eval/...``), or None when absent or never finite.

        ``name`` must be a series the vitals can hold (a canonical metric, a derived series,
        their ``eval/`` twins) or one the run logged under its own name; anything else raises
        :class:`UnknownSeriesError`, so a misspelt name fails loudly instead of muting the
        detector that asked.
        """
        table = self.eval_series if name.startswith("eval/") else self.series
        s = table.get(name)
        if s is None:
            if not is_known_series(name):
                raise UnknownSeriesError(name)
            return None
        # Detectors ask for the same series many times: whether it holds a finite value is
        # remembered per array object (series are not changed in place once derived).
        seen = self.__dict__.setdefault("_finite_seen", {})
        hit = seen.get(name)
        if hit is None or hit[0] is not s:
            hit = seen[name] = (s, bool(np.isfinite(s).any()))
        return s if hit[1] else None

    def has(self, name: str) -> bool:
        return self.get(name) is not None

    @property
    def measured_acr(self) -> bool:
        """True when the ACR was measured on the groups (per-group rewards, or the trainer's
        zero-variance group fraction), not read off the advantages."""
        return self.has("acr") and self.evidence in ("groups", "zero_std_frac")

    @property
    def reward_variance_logged(self) -> bool:
        """True when the run shows whether the rewards still vary: reward_std, the reward's
        max - min, or a measured ACR."""
        return self.has("reward_std") or self.has("reward_range") or self.measured_acr

    @property
    def n_steps(self) -> int:
        return int(self.steps.shape[0])

    @property
    def binary_rewards(self) -> bool | None:
        """Whether the rewards look binary (every logged step's reward min and max at an end of
        the reward range, on at least 95% of steps; per-group rewards: every reward at an end),
        None when the run logs neither. The expected ACR P0 = p^G + (1-p)^G assumes binary
        rewards."""
        return evidence.binary_rewards(self.run, self.series, self.reward_min, self.reward_max)

    @property
    def trainer(self) -> str | None:
        """The trainer that wrote the run (``trl``, ``verl``, ...), for advice in its terms."""
        return self.run.manifest.trainer

    @property
    def span_steps(self) -> int:
        """Training steps covered: last - first + 1 (0 for an empty run)."""
        if self.steps.size == 0:
            return 0
        return int(self.steps[-1] - self.steps[0] + 1)

    @property
    def too_short(self) -> bool:
        """True when the run spans fewer than :data:`MIN_JUDGE_STEPS` training steps."""
        return self.span_steps < MIN_JUDGE_STEPS

    @property
    def reward_std_kind(self) -> str | None:
        """``group_mean``, ``batch`` or None: what ``reward_std`` is (vitals/filtering.py)."""
        return filtering.reward_std_kind(self.run)

    @property
    def log_every(self) -> int:
        """Median gap between logged steps (1 when every step logged)."""
        if self.steps.size < 2:
            return 1
        return max(1, int(median(np.diff(self.steps))))

    def window(self, first_step: int, last_step: int) -> Vitals:
        """The same vitals restricted to ``first_step <= step <= last_step`` (inclusive).

        Derived series keep the values computed over the whole run (a live monitor's window
        sees the same windowed ACR the full run would); summary numbers are recomputed.
        """
        keep = (self.steps >= first_step) & (self.steps <= last_step)
        ekeep = (self.eval_steps >= first_step) & (self.eval_steps <= last_step)
        series = {k: v[keep] for k, v in self.series.items()}
        acr = series.get("acr")
        steps = self.steps[keep]
        return replace(
            self,
            steps=steps,
            series=series,
            eval_steps=self.eval_steps[ekeep],
            eval_series={k: v[ekeep] for k, v in self.eval_series.items()},
            acr_mean=_nanmean(acr),
            acr_100=_acr100(acr, steps),
            notes=list(self.notes),
        )

    def summary(self) -> dict[str, Any]:
        """JSON-ready numbers for the report's ``"vitals"`` section."""
        out: dict[str, Any] = {
            "acr_mean": _r(self.acr_mean),
            "acr_100": _r(self.acr_100),
            "evidence": self.evidence,
            "steps": self.n_steps,
            "first_step": int(self.steps[0]) if self.steps.size else None,
            "last_step": int(self.steps[-1]) if self.steps.size else None,
            "log_every": self.log_every,
            "group_size": self.group_size,
            "group_size_from": self.group_size_from,
            "expected_acr_from": self.expected_acr_from,
            "estimator": self.estimator,
            "adv_scale": self.adv_scale,
            "kl_coef": self.kl_coef,
            "reward_min": self.reward_min,
            "reward_max": self.reward_max,
        }
        for name in (
            "acr_windowed",
            "wasted_frac",
            "excess_acr",
            "acr_solve_all",
            "acr_solve_none",
            "acr_flat",
            "adv_std",
            "reward_std",
            "pass_rate",
        ):
            s = self.get(name)
            if s is not None:
                key = "acr_windowed_last" if name == "acr_windowed" else f"{name}_mean"
                out[key] = _r(_last_finite(s) if name == "acr_windowed" else _nanmean(s))
        vol = self.get("acr_volatility")
        out["acr_volatility_max"] = _r(float(np.nanmax(vol))) if vol is not None else None
        out["notes"] = list(self.notes)
        return out


# --------------------------------------------------------------------------------------------


def compute_vitals(run: Run, *, tau: float = DEFAULT_TAU, window: int = DEFAULT_WINDOW) -> Vitals:
    """Derive the vitals of ``run`` (see the module docstring for every series).

    Args:
        run: any run an importer produced.
        tau: collapse tolerance on a group's reward std (DESIGN.md 3.1).
        window: W for windowed ACR and ACR volatility.

    >>> from rlvitals.recording import RunBuilder
    >>> b = RunBuilder()
    >>> for s in range(1, 4):
    ...     b.add_row(s, {"reward": 0.5, "frac_reward_zero_std": 0.25 * s})
    >>> v = compute_vitals(b.build())
    >>> v.evidence, v.series["acr"].tolist()
    ('zero_std_frac', [0.25, 0.5, 0.75])
    """
    m = run.manifest
    notes: list[str] = []
    run, n_inf = _without_infinite_rewards(run)
    if n_inf:
        notes.append(f"{n_inf} per-completion reward(s) logged as +/-inf: read as unscorable")
    rr = reward_range(run)
    rmin, rmax = rr.low, rr.high
    if rr.inferred:
        notes.append(rr.note)
    gs = None
    if run.groups is not None and run.groups.n_groups > 0:
        gs = group_series(run.groups, tau=tau, r_min=rmin, r_max=rmax)

    d = evidence.align(run, gs, notes)  # the steps of vitals/evidence.py, in order
    evidence.from_groups(d, gs)
    evidence.from_zero_std_frac(d)
    evidence.from_advantages(d)
    evidence.from_reward_variance(d)
    evidence.from_zero_updates(d)
    filt = filtering.prefilter(run, d.series, notes, d.evidence, d.group_size)
    d.evidence = filt.evidence
    evidence.expected_acr(d, rmin, rmax)
    evidence.collapse_rates(d, window)
    filtering.add_filtered_to_wasted(d.series, filt)
    series, steps = d.series, d.steps

    estimator, adv_scale = vocabulary.resolve(
        m.estimator, scale_rewards=m.scale_rewards, scale=m.adv_scale
    )
    if not rr.known and not rr.inferred:
        notes.append(rr.note)  # "assumed [0, 1]", after what was read
    kl = m.kl_coef
    if kl is None and finite_any(series.get("kl_coef")):
        kl = float(nanmedian(series["kl_coef"]))
    acr_f = series.get("acr") if finite_any(series.get("acr")) else None
    return Vitals(
        run=run,
        steps=steps,
        series=series,
        eval_steps=run.eval_steps,
        eval_series=run.eval_series,
        evidence=d.evidence,
        group_size=d.group_size,
        group_size_from=d.group_size_from,
        expected_acr_from=d.expected_from if finite_any(series.get("expected_acr")) else None,
        estimator=estimator,
        adv_scale=adv_scale,
        kl_coef=kl,
        reward_min=rmin,
        reward_max=rmax,
        acr_mean=_nanmean(acr_f),
        acr_100=_acr100(acr_f, steps),
        notes=notes,
        tau=tau,
        acr_window=window,
        reward_range_known=rr.known,
        reward_range_from=rr.source,
        batch_trap=d.batch_trap,
    )


# --------------------------------------------------------------------------------------------


def _without_infinite_rewards(run: Run) -> tuple[Run, int]:
    """``run`` with per-completion rewards (and advantages) of +/-inf read as unscorable (NaN),
    and how many rewards were: a logged inf is no reward, and the array layer refuses it."""
    g = run.groups
    if g is None or not g.rewards.size:
        return run, 0
    bad = np.isinf(g.rewards)
    adv = g.advantages
    bad_adv = adv is not None and bool(np.isinf(adv).any())
    if not bad.any() and not bad_adv:
        return run, 0
    clean = replace(
        g,
        rewards=np.where(bad, np.nan, g.rewards),
        advantages=np.where(np.isinf(adv), np.nan, adv) if bad_adv else adv,
    )
    return replace(run, groups=clean), int(bad.sum())


def _nanmean(x: np.ndarray | None) -> float | None:
    if x is None:
        return None
    v = x[np.isfinite(x)]
    return float(v.mean()) if v.size else None


def _acr100(acr: np.ndarray | None, steps: np.ndarray) -> float | None:
    if acr is None or acr.size == 0:
        return None
    v = acr_100(acr, steps)
    return None if math.isnan(v) else v


def _last_finite(x: np.ndarray) -> float | None:
    v = x[np.isfinite(x)]
    return float(v[-1]) if v.size else None


def _r(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), 6)

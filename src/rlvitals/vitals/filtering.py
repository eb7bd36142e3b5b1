"""Trainers that filter zero-variance groups, trainer-reported solve splits, and what a logged
``reward_std`` means (DESIGN.md 3.6, last paragraph).

A trainer that drops zero-variance groups before the update (DAPO dynamic sampling, veRL
``filter_groups``, NeMo-RL dynamic sampling, SkyRL ``zero_variance_filter``, open-instruct and
prime-rl by default, Unsloth's exclusion) logs a clean trained batch: the ACR that matters is the
**pre-filter** one, and the filtered share is wasted rollouts. :func:`prefilter` derives, from
whatever the run logged:

- ``filtered_frac``: share of the sampled groups the filter removed. Counts become rates with a
  denominator, and the notes say where it came from (or that it is unknown);
- the pre-filter ``acr``: ``filtered + (1 - filtered) * acr_of_the_trained_batch`` for trainers
  whose collapse metrics describe the trained (post-filter) batch, or the filtered share itself
  when nothing else is logged;
- ``acr_solve_all`` / ``acr_solve_none`` from the trainer's own solve splits (prime-rl
  ``solve_all/all``, rLLM ``fractions/too_easy``, slime ``zero_std/count_<r>``, ...), and the ACR
  from them when the run has no better evidence;

:func:`add_filtered_to_wasted` then counts the filtered share in ``wasted_frac``, and
:func:`reward_std_kind` says whether a logged ``reward_std`` is a per-group mean or a batch std
(a batch of all-0 and all-1 groups has batch std ~0.5 while every group is collapsed).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rlvitals._record import record
from rlvitals.recording.run import Run
from rlvitals.trainers import POST_FILTER_TRAINERS, lookup
from rlvitals.vitals.evidence import finite_any

__all__ = ["FilterInfo", "add_filtered_to_wasted", "prefilter", "reward_std_kind"]

_WEAKER = ("advantages", "reward_std", "loss_grad_zero", "none")
_SLIME_ZERO = re.compile(r"^(?:rollout/)?zero_std/count_(-?[0-9.]+)$")
_SLIME_DROP = re.compile(r"^(?:rollout/)?dynamic_filter/drop_")
_SKYRL_PASS_AT = re.compile(r"^reward/avg_pass_at_([0-9]{1,6})$")


@record
class FilterInfo:
    """What :func:`prefilter` found; :func:`add_filtered_to_wasted` reads it.

    Attributes:
        evidence: the collapse evidence tier after the trainer's own counts were read.
        post_filter: the ACR before the correction described only the trained batch.
    """

    evidence: str
    post_filter: bool = False


def _config(run: Run, *keys: str) -> float | None:
    """A number from ``manifest.config`` under any of ``keys`` (dotted, dashed or nested)."""
    cfg = run.manifest.config
    for k in keys:
        for variant in (k, k.replace("_", "-")):
            v = lookup(cfg, variant)
            try:
                x = float(v) if v is not None and not isinstance(v, bool) else None
            except (TypeError, ValueError):
                x = None
            if x is not None and np.isfinite(x) and x > 0:
                return x
    return None


def _raw(
    run: Run, series: dict[str, np.ndarray], pattern: re.Pattern[str]
) -> list[tuple[str, Any, np.ndarray]]:
    out = []
    for name in run.unknown_keys:
        m = pattern.match(name)
        s = series.get(name)
        if m is not None and s is not None:
            out.append((name, m, s))
    return out


def _sum(cols: list[np.ndarray]) -> np.ndarray:
    stack = np.vstack(cols)
    total = np.nansum(stack, axis=0)
    return np.where(np.isfinite(stack).any(axis=0), total, np.nan)


def _filtered(
    run: Run, series: dict[str, np.ndarray], notes: list[str], g: int | None
) -> np.ndarray | None:
    """The ``(T,)`` share of sampled groups the trainer's filter removed, or None."""
    f = series.get("filtered_frac")
    if finite_any(f):
        return f
    kept = series.get("kept_frac")
    if finite_any(kept):
        notes.append(
            "filtered share = 1 - kept_frac (open-instruct real_batch_size_ratio: kept / expected responses)"
        )
        return np.clip(1.0 - kept, 0.0, 1.0)
    count = series.get("filtered_groups")
    if not finite_any(count):
        drops = _raw(run, series, _SLIME_DROP)
        if drops:
            count = _sum([s for _, _, s in drops])
    if finite_any(count):
        after, why = series.get("groups_after_filter"), "groups kept, logged by the trainer"
        before = series.get("groups_before_filter")
        with np.errstate(invalid="ignore", divide="ignore"):
            if finite_any(before):
                notes.append("filtered share = filtered groups / groups before the filter (logged)")
                return np.clip(count / before, 0.0, 1.0)
            if not finite_any(after):
                after, why = _groups_per_step(run, series, g)
            if after is not None and finite_any(np.asarray(after, dtype=float)):
                notes.append(
                    f"filtered share = filtered groups / (filtered + kept); kept groups: {why}"
                )
                return np.clip(count / (count + after), 0.0, 1.0)
        notes.append(
            "the trainer logged how many groups its filter removed, but not out of how many "
            "(the denominator is unknown: give the batch size in the config); no filtered share"
        )
    return _nemo_rl(run, series, notes, g)


def _groups_per_step(run: Run, series: dict[str, np.ndarray], g: int | None) -> tuple[Any, str]:
    n = _config(run, "data.train_batch_size", "rollout_batch_size", "global_batch_size")
    if n is not None:
        return n, "the configured prompts per step"
    return None, ""


def _nemo_rl(
    run: Run, series: dict[str, np.ndarray], notes: list[str], g: int | None
) -> np.ndarray | None:
    nb = series.get(
        "dynamic_sampling_num_gen_batches", series.get("train/dynamic_sampling_num_gen_batches")
    )
    if not finite_any(nb):
        return None
    disc = series.get(
        "dynamic_sampling_num_discarded_valid_samples",
        series.get("train/dynamic_sampling_num_discarded_valid_samples"),
    )
    prompts = _config(run, "grpo.num_prompts_per_step")
    mult = _config(run, "grpo.batch_multiplier") or 1.0
    if not (prompts and g):
        notes.append(
            "NeMo-RL dynamic sampling logged, but grpo.num_prompts_per_step and G are needed "
            "to turn it into a filtered share (unknown here)"
        )
        return None
    need = prompts * g
    kept = need + (np.nan_to_num(disc) if disc is not None else 0.0)
    notes.append(
        "filtered share (NeMo-RL dynamic sampling) = 1 - (num_prompts_per_step x G + discarded "
        "valid samples) / (gen batches x batch_multiplier x num_prompts_per_step x G)"
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(1.0 - kept / (nb * mult * need), 0.0, 1.0)


def _skyrl(
    run: Run, series: dict[str, np.ndarray], notes: list[str], g: int | None
) -> np.ndarray | None:
    count = series.get("filtered_groups")
    seqs = series.get("generate/batch_num_seq")
    if run.manifest.trainer != "skyrl" or not finite_any(count):
        return None
    if g is None:
        for name in run.unknown_keys:
            m = _SKYRL_PASS_AT.match(name)
            if m:
                g = int(m.group(1))
    if not (finite_any(seqs) and g):
        notes.append(
            "SkyRL reward/num_zero_variance_filtered is a count; G or the batch size is unknown"
        )
        return None
    notes.append(
        "zero-variance share (SkyRL) = reward/num_zero_variance_filtered / (generate/batch_num_seq / G)"
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip(count / (seqs / g), 0.0, 1.0)


def _solve_splits(run: Run, series: dict[str, np.ndarray], notes: list[str]) -> tuple[Any, Any]:
    sa, sn = series.get("solve_all_frac"), series.get("solve_none_frac")
    if finite_any(sa) or finite_any(sn):
        part = series.get("solve_partial")
        big = any(finite_any(x) and np.nanmax(x) > 1.0 + 1e-9 for x in (sa, sn, part))
        if finite_any(part) or big:
            if not finite_any(part):
                notes.append(
                    "solve_all/solve_none are counts but solve_partial is missing: not used"
                )
                return None, None
            den = _sum([x for x in (sa, sn, part) if x is not None])
            with np.errstate(invalid="ignore", divide="ignore"):
                sa = None if sa is None else sa / den
                sn = None if sn is None else sn / den
            notes.append(
                "solve splits are group counts (rLLM): divided by solve_all + solve_none + solve_partial"
            )
        return sa, sn
    zero = _raw(run, series, _SLIME_ZERO)
    if not zero:
        return None, None
    n = _config(run, "rollout_batch_size")
    if n is None:
        notes.append(
            "slime rollout/zero_std/count_* are group counts; rollout_batch_size (their "
            "denominator) is unknown, so they are not turned into an ACR"
        )
        return None, None
    rmax = run.manifest.reward_max if run.manifest.reward_max is not None else 1.0
    rmin = run.manifest.reward_min if run.manifest.reward_min is not None else 0.0
    # slime logs a count only for the reward levels that collapsed: absent means 0
    total = np.nansum(np.vstack([s for _, _, s in zero]), axis=0) / n
    sa = sn = None
    for _, m, s in zero:
        label = float(m.group(1))
        if abs(label - round(rmax, 1)) < 1e-9:
            sa = np.nan_to_num(s) / n
        elif abs(label - round(rmin, 1)) < 1e-9:
            sn = np.nan_to_num(s) / n
    series["_slime_acr"] = total
    notes.append(
        "zero-std groups (slime) = sum of rollout/zero_std/count_* / rollout_batch_size (config)"
    )
    return sa, sn


def prefilter(
    run: Run,
    series: dict[str, np.ndarray],
    notes: list[str],
    evidence: str,
    group_size: int | None,
) -> FilterInfo:
    """Read the trainer's filter and solve-split metrics into ``series`` (module docstring)."""
    before = len(notes)
    info = _prefilter(run, series, notes, evidence, group_size)
    if info.evidence != evidence:  # the tier core chose no longer holds: drop its note
        stale = ("no collapse evidence", "collapse evidence:")
        notes[:] = [n for n in notes[:before] if not n.startswith(stale)] + notes[before:]
    return info


def _prefilter(
    run: Run,
    series: dict[str, np.ndarray],
    notes: list[str],
    evidence: str,
    group_size: int | None,
) -> FilterInfo:
    info = FilterInfo(evidence)
    kind = reward_std_kind(run)
    if finite_any(series.get("reward_std")):
        notes.append(
            _REWARD_STD_NOTES.get(kind, _REWARD_STD_NOTES[None]).format(
                trainer=run.manifest.trainer
            )
        )

    sa, sn = _solve_splits(run, series, notes)
    slime_acr = series.pop("_slime_acr", None)
    if evidence in _WEAKER and (sa is not None or sn is not None or slime_acr is not None):
        if slime_acr is not None:
            acr = slime_acr
        else:
            acr = np.nan_to_num(sa if sa is not None else 0.0) + np.nan_to_num(
                sn if sn is not None else 0.0
            )
            ok = np.isfinite(sa) if sa is not None else np.isfinite(sn)
            acr = np.where(ok, acr, np.nan)
            notes.append(
                "ACR = solve_all + solve_none as the trainer reports them (binary rewards)"
            )
        series["acr"] = acr
        info.evidence = "zero_std_frac"
        notes.append("collapse evidence: the trainer's own solve splits / zero-variance counts")
    elif evidence in _WEAKER and finite_any(series.get("effective_frac")):
        series["acr"] = np.clip(1.0 - series["effective_frac"], 0.0, 1.0)
        info.evidence = "zero_std_frac"
        notes.append("collapse evidence: 1 - the trainer's effective (varied) group share")
    for name, s in (("acr_solve_all", sa), ("acr_solve_none", sn)):
        if s is not None and not finite_any(series.get(name)):
            series[name] = s

    g = group_size
    skyrl = _skyrl(run, series, notes, g)
    if skyrl is not None:  # a loss mask: the logged rewards are pre-filter already
        series["filtered_frac"] = skyrl
        if info.evidence in _WEAKER:
            series["acr"] = skyrl.copy()
            info.evidence = "zero_std_frac"
            notes.append("collapse evidence: SkyRL's zero-variance group count")
        _note_waste(skyrl, notes)
        return info
    f = _filtered(run, series, notes, g)
    if f is None:
        if run.manifest.filters_zero_var and sa is None and sn is None:
            notes.append(
                f"{run.manifest.trainer or 'the trainer'} drops zero-variance groups before the "
                "update, but the log says nothing of how many: the ACR seen is that of the "
                "trained batch, and the pre-filter ACR is unknown (it may be far higher)"
            )
        return info
    series["filtered_frac"] = f
    acr = series.get("acr")
    post = run.manifest.trainer in POST_FILTER_TRAINERS or run.manifest.filters_zero_var is True
    if run.manifest.trainer == "trl":
        post = False  # TRL / Unsloth compute frac_reward_zero_std before the exclusion
    if finite_any(acr) and post:
        with np.errstate(invalid="ignore"):
            series["acr"] = np.where(np.isfinite(acr), f + (1.0 - f) * acr, f)
        info.post_filter = True
        notes.append(
            "ACR is the pre-filter one: filtered share + (1 - filtered share) x ACR of the trained batch"
        )
    elif not finite_any(acr):
        series["acr"] = f.copy()
        info.post_filter = True
        info.evidence = "zero_std_frac" if info.evidence in _WEAKER else info.evidence
        notes.append(
            "ACR from the filtered share alone (a lower bound: the trained batch is not judged)"
        )
    _note_waste(f, notes)
    return info


def _note_waste(f: np.ndarray, notes: list[str]) -> None:
    v = f[np.isfinite(f)]
    if v.size:
        notes.append(
            f"the trainer's filter removed {100 * float(v.mean()):.1f}% of sampled groups on "
            f"average (max {100 * float(v.max()):.1f}%): wasted rollouts, not a healthy batch"
        )


def add_filtered_to_wasted(series: dict[str, np.ndarray], info: FilterInfo) -> None:
    """Count the filtered groups in ``wasted_frac`` (rollouts generated and never trained on)."""
    f = series.get("filtered_frac")
    if not finite_any(f):
        return
    w = series.get("wasted_frac")
    if not finite_any(w):
        series["wasted_frac"] = f.copy()
        return
    with np.errstate(invalid="ignore"):
        if info.post_filter:
            series["wasted_frac"] = np.where(np.isfinite(w), f + (1.0 - f) * w, f)
        else:
            series["wasted_frac"] = np.fmax(w, f)


_REWARD_STD_NOTES = {
    "group_mean": "reward_std read as the mean of the per-group reward stds (the {trainer} "
    "version or key names say so)",
    "batch": "reward_std read as the std of the whole batch, not a per-group measure: it stays "
    "~0.5 when every group is all-0 or all-1, so it cannot show a per-group collapse",
    None: "reward_std: its meaning (per-group mean or batch std) is unknown for this run",
}


def reward_std_kind(run: Run) -> str | None:
    """``group_mean``, ``batch`` or None: what the run's logged ``reward_std`` is.

    The manifest's ``reward_std_kind`` when the source stated it (a TRL version, ms-swift's
    ``scale_rewards``); for TRL without a version: no ``frac_reward_zero_std`` (it arrived in
    TRL 0.18) means the per-group mean, anything else is taken as the whole-batch std of TRL
    0.27 on (the safe reading: a batch std never shows a per-group collapse). OpenRLHF's
    per-group std has its own key (``group_reward_std`` → ``group_reward_std_mean``).
    """
    m = run.manifest
    if m.reward_std_kind in ("group_mean", "batch"):
        return m.reward_std_kind
    if m.trainer == "trl":
        # frac_reward_zero_std arrived in TRL 0.18; before 0.22 reward_std was the group mean
        return "batch" if "zero_std_frac" in run.series else "group_mean"
    return None

"""Canonical metric names and the alias table that maps trainer keys onto them.

Every importer maps the keys it reads through :func:`canonical_key`; detectors read canonical
names only. A key that is neither canonical nor an alias is kept under its raw name and listed in
``Run.unknown_keys``. ``docs/metrics.md`` is generated from this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ALIASES", "CANONICAL", "Metric", "canonical_key", "is_eval_key", "metric_names"]


@dataclass(frozen=True)
class Metric:
    name: str
    description: str
    aliases: tuple[str, ...] = ()


CANONICAL: dict[str, Metric] = {
    m.name: m
    for m in [
        # Reward and the group signal
        Metric(
            "reward_mean",
            "Mean reward of the step's completions.",
            ("reward", "rewards/mean", "critic/score/mean", "score/mean", "reward_mean"),
        ),
        Metric(
            "reward_std",
            "Std of the step's rewards. TRL: mean over groups of the group std "
            "(per-group view); veRL has no equivalent.",
            ("reward_std", "rewards/std", "critic/score/std"),
        ),
        Metric("reward_max", "Largest reward in the step.", ("critic/score/max", "rewards/max")),
        Metric("reward_min", "Smallest reward in the step.", ("critic/score/min", "rewards/min")),
        Metric(
            "zero_std_frac",
            "Fraction of groups whose rewards have zero std (TRL); equals "
            "ACR with equal-sized groups and per-group scaling.",
            ("frac_reward_zero_std", "frac_zero_std", "zero_std_frac"),
        ),
        Metric(
            "acr",
            "Advantage Collapse Rate recorded live: fraction of groups with zero "
            "reward variance, before any mitigation.",
            ("rlvitals/acr", "acr", "acr_raw"),
        ),
        Metric(
            "acr_solve_all",
            "Share of groups collapsed at the maximum reward.",
            ("rlvitals/acr_solve_all",),
        ),
        Metric(
            "acr_solve_none",
            "Share of groups collapsed at the minimum reward.",
            ("rlvitals/acr_solve_none",),
        ),
        Metric(
            "acr_flat",
            "Share of groups collapsed at an intermediate reward.",
            ("rlvitals/acr_flat",),
        ),
        Metric(
            "acr_residual",
            "Share of groups whose advantages are still all zero after "
            "mitigation (AVSPO, filters).",
            ("rlvitals/acr_residual",),
        ),
        Metric(
            "tau_adapt",
            "AVSPO's adaptive ACR threshold that this step's gate was "
            "compared with (before the step's update).",
            ("rlvitals/tau_adapt",),
        ),
        Metric(
            "avspo_triggered",
            "1 when AVSPO augmented collapsed groups this step.",
            ("rlvitals/avspo_triggered",),
        ),
        Metric(
            "avspo_groups_augmented",
            "Groups that received virtual samples this step.",
            ("rlvitals/avspo_groups_augmented",),
        ),
        Metric(
            "avspo_k", "Virtual samples per augmented group (K) this step.", ("rlvitals/avspo_k",)
        ),
        Metric(
            "kept_frac",
            "Share of groups a zero-variance filter kept in the loss.",
            ("rlvitals/kept_frac",),
        ),
        # Advantages
        Metric("adv_mean", "Mean advantage.", ("critic/advantages/mean", "advantages/mean")),
        Metric(
            "adv_std",
            "Std of all advantages in the step (about 1 with per-group scaling).",
            ("critic/advantages/std", "advantages/std", "rlvitals/adv_std"),
        ),
        Metric("adv_max", "Largest advantage.", ("critic/advantages/max", "advantages/max")),
        Metric("adv_min", "Smallest advantage.", ("critic/advantages/min", "advantages/min")),
        Metric(
            "adv_zero_frac",
            "Fraction of completions with |advantage| <= 1e-8.",
            ("rlvitals/adv_zero_frac", "advantages/zero_frac"),
        ),
        # Optimisation
        Metric("loss", "Training loss as the trainer logs it.", ("loss", "train_loss")),
        Metric("pg_loss", "Policy-gradient loss term.", ("actor/pg_loss", "policy_loss")),
        Metric(
            "grad_norm",
            "Gradient norm before clipping.",
            ("grad_norm", "actor/grad_norm", "gradient_norm"),
        ),
        Metric("learning_rate", "Learning rate.", ("learning_rate", "actor/lr", "lr", "actor_lr")),
        Metric(
            "kl",
            "KL divergence to the reference policy.",
            ("kl", "actor/kl_loss", "objective/kl", "kl_div"),
        ),
        Metric("kl_coef", "KL coefficient (beta).", ("actor/kl_coef", "kl_coef", "beta")),
        Metric(
            "ppo_kl",
            "KL between the rollout and the updated policy (approximate).",
            ("actor/ppo_kl", "ppo_kl"),
        ),
        Metric(
            "entropy",
            "Mean token entropy of the policy.",
            (
                "entropy",
                "actor/entropy",
                "actor/entropy_loss",
                "entropy_loss",
                "objective/entropy",
                "policy_entropy",
            ),
        ),
        Metric(
            "clip_frac",
            "Fraction of tokens whose importance ratio was clipped.",
            (
                "clip_ratio/region_mean",
                "clip_ratio",
                "actor/pg_clipfrac",
                "pg_clipfrac",
                "clipfrac",
                "ppo_clip_ratio",
            ),
        ),
        Metric(
            "clip_frac_low",
            "Fraction clipped at the lower bound.",
            ("clip_ratio/low_mean", "actor/pg_clipfrac_lower"),
        ),
        Metric("clip_frac_high", "Fraction clipped at the upper bound.", ("clip_ratio/high_mean",)),
        # Lengths
        Metric(
            "length_mean",
            "Mean completion length in tokens.",
            (
                "completions/mean_length",
                "completion_length",
                "response_length/mean",
                "response_length",
                "completions/mean_len",
            ),
        ),
        Metric(
            "length_max", "Longest completion.", ("completions/max_length", "response_length/max")
        ),
        Metric(
            "length_min", "Shortest completion.", ("completions/min_length", "response_length/min")
        ),
        Metric(
            "truncation_frac",
            "Fraction of completions cut at the length limit.",
            (
                "completions/clipped_ratio",
                "response_length/clip_ratio",
                "truncated_ratio",
                "response_clip_ratio",
            ),
        ),
        # Throughput
        Metric(
            "step_time",
            "Seconds per training step.",
            (
                "timing_s/step",
                "perf/time_per_step",
                "time_per_step",
                "step_time",
                "train_step_time",
                "timing/step_total",
            ),
        ),
        Metric(
            "throughput",
            "Tokens per second.",
            ("perf/throughput", "tokens/sec/gpu", "tokens_per_sec", "throughput"),
        ),
        Metric(
            "num_tokens",
            "Tokens processed so far or in the step, as the trainer logs it.",
            ("num_tokens", "perf/total_num_tokens", "total_num_tokens"),
        ),
        Metric("epoch", "Epoch (fractional).", ("epoch", "training/epoch")),
    ]
}

ALIASES: dict[str, str] = {}
for _m in CANONICAL.values():
    for _a in (_m.name, *_m.aliases):
        _k = _a.lower()
        if ALIASES.get(_k, _m.name) != _m.name:
            raise RuntimeError(f"alias {_a!r} maps to two metrics")
        ALIASES[_k] = _m.name

_TRAIN_PREFIXES = ("train/", "train_", "training/", "rollout/")
_EVAL_RE = re.compile(r"^(validation|val-core|val-aux|eval|test|val)[/_-]", re.IGNORECASE)


def is_eval_key(raw: str) -> bool:
    """True for evaluation keys: ``eval_*``, ``eval/*``, veRL ``val-core/*``, ``test/*``.

    >>> is_eval_key("eval_reward"), is_eval_key("val-core/gsm8k/reward/mean@1"), is_eval_key("kl")
    (True, True, False)
    """
    return bool(_EVAL_RE.match(raw))


def canonical_key(raw: str) -> tuple[str, bool, bool]:
    """Map a raw trainer key to ``(name, is_eval, known)``.

    Train keys lose ``train/``-style prefixes and map through the alias table; eval keys keep an
    ``eval/`` prefix and map their remainder the same way. Unknown keys come back unchanged
    (prefix stripped) with ``known=False``.

    >>> canonical_key("train/frac_reward_zero_std")
    ('zero_std_frac', False, True)
    >>> canonical_key("eval_reward")
    ('eval/reward_mean', True, True)
    >>> canonical_key("critic/values/mean")
    ('critic/values/mean', False, False)
    """
    key = raw.strip()
    m = _EVAL_RE.match(key)
    if m:
        rest = key[m.end() :]
        name = ALIASES.get(rest.lower())
        if name is None and rest.lower().startswith("rewards/") and rest.count("/") == 2:
            name = "reward/" + rest.split("/", 1)[1]
        return (f"eval/{name}" if name else f"eval/{rest}"), True, name is not None
    low = key.lower()
    for p in _TRAIN_PREFIXES:
        if low.startswith(p) and low[len(p) :] in ALIASES:
            return ALIASES[low[len(p) :]], False, True
    name = ALIASES.get(low)
    if name is not None:
        return name, False, True
    # TRL per-reward-function keys: rewards/<fn>/mean → reward/<fn>/mean (known family)
    if low.startswith("rewards/") and low.count("/") == 2:
        return "reward/" + key.split("/", 1)[1], False, True
    return key, False, False


def metric_names(mapping: dict[str, str]) -> dict[str, str]:
    """Validate a user's ``{run key: metric}`` map; targets may be canonical names or aliases.

    Raises ValueError naming the bad entry, with the closest canonical names.

    >>> metric_names({"my/pass_rate": "reward_mean", "my/zero": "frac_reward_zero_std"})
    {'my/pass_rate': 'reward_mean', 'my/zero': 'zero_std_frac'}
    >>> metric_names({"x": "reward_avg"})
    Traceback (most recent call last):
    ValueError: metric name 'x' -> 'reward_avg': no such metric (closest: reward_max, reward_mean, reward_std, ...)
    """
    import difflib

    out: dict[str, str] = {}
    for raw, target in mapping.items():
        if not isinstance(raw, str) or not raw.strip() or not isinstance(target, str):
            raise ValueError(
                f"metric names map a run key to a metric name, got {raw!r} -> {target!r}"
            )
        name = ALIASES.get(target.strip().lower())
        if name is None:
            close = difflib.get_close_matches(target, list(CANONICAL), n=3, cutoff=0.5)
            hint = f"closest: {', '.join(close)}, ..." if close else "see the metrics page"
            raise ValueError(f"metric name {raw!r} -> {target!r}: no such metric ({hint})")
        out[raw.strip()] = name
    return out

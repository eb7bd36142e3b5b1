"""Canonical metric names and the alias table that maps trainer keys onto them.

Every importer maps the keys it reads through :func:`canonical_key`; detectors read canonical
names only. A key that is neither canonical nor an alias is kept under its raw name and listed in
``Run.unknown_keys``. ``docs/metrics.md`` is generated from this table.
"""

from __future__ import annotations

import re

from rlvitals._record import record

__all__ = [
    "ALIASES",
    "CANONICAL",
    "Metric",
    "canonical_key",
    "dialect_of",
    "is_eval_key",
    "metric_names",
]


@record(frozen=True)
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
            (
                "reward",
                "rewards/mean",
                "critic/score/mean",
                "score/mean",
                "reward/mean",
                "reward/all/mean",
                "reward/avg_raw_reward",
                "raw_reward",
            ),
        ),
        Metric(
            "reward_std",
            "Std of the step's rewards as the trainer logs it. Its meaning depends on the "
            "trainer and version: TRL up to 0.21 logs the mean of the per-group stds, 0.22-0.26 "
            "the group or the batch std (by scale_rewards), 0.27 on the std of the whole batch "
            "(trl/trainer/grpo_trainer.py); ms-swift the mean per-group std. The vitals say "
            "which meaning they assumed (reward_std_kind).",
            ("rewards/std", "critic/score/std", "reward/std", "reward/all/std"),
        ),
        Metric(
            "group_reward_std_mean",
            "Mean over the step's groups of each group's reward std: the per-group view a batch "
            "std cannot give (a batch of all-0 and all-1 groups has batch std ~0.5). Sources: "
            "OpenRLHF group_reward_std (trainer/ppo_utils/experience_maker.py, 0.9-0.11); Oumi "
            "grpo/reward_group_std/mean (oumi/utils/verl_utils/grpo_metrics.py, 0.9).",
            ("group_reward_std", "grpo/reward_group_std/mean", "rlvitals/group_reward_std_mean"),
        ),
        Metric("reward_max", "Largest reward in the step.", ("critic/score/max", "rewards/max")),
        Metric("reward_min", "Smallest reward in the step.", ("critic/score/min", "rewards/min")),
        Metric(
            "zero_std_frac",
            "Fraction of groups whose rewards have zero std (TRL); equals "
            "ACR with equal-sized groups and per-group scaling.",
            (
                "frac_reward_zero_std",
                "frac_zero_std",
                "grpo/frac_reward_zero_std",
            ),
        ),
        Metric(
            "solve_all_frac",
            "Share of the step's groups in which every completion got the maximum reward, as "
            "the trainer reports it. Sources: prime-rl solve_all/all (orchestrator/metrics.py), "
            "batch/solve_all and reward/solve_all (older orchestrator.py; rLLM logs counts under "
            "batch/solve_all, turned into shares with batch/solve_partial), solved_all; rLLM "
            "batch/default/fractions/too_easy (trainer/algorithms/advantage.py); miles forks "
            "rollout/zero_std/all_one_percentage (a fraction despite the name).",
            (
                "solve_all/all",
                "batch/solve_all",
                "reward/solve_all",
                "solved_all",
                "solve_all",
                "batch/default/fractions/too_easy",
                "zero_std/all_one_ratio",
                "zero_std/all_one_percentage",
            ),
        ),
        Metric(
            "solve_none_frac",
            "Share of the step's groups in which every completion got the minimum reward, as "
            "the trainer reports it (sources as solve_all_frac: solve_none/all, batch/solve_none, "
            "reward/solve_none, solved_none, rLLM fractions/too_hard, miles "
            "all_zero_percentage).",
            (
                "solve_none/all",
                "batch/solve_none",
                "reward/solve_none",
                "solved_none",
                "solve_none",
                "batch/default/fractions/too_hard",
                "zero_std/all_zero_ratio",
                "zero_std/all_zero_percentage",
            ),
        ),
        Metric(
            "solve_partial",
            "Groups with some but not all completions solved (rLLM batch/solve_partial, a "
            "count: the denominator of its batch/solve_all and batch/solve_none counts).",
            ("batch/solve_partial", "solved_some", "solve_some"),
        ),
        Metric(
            "effective_frac",
            "Share of the step's groups whose rewards vary (the trainer's own count): prime-rl "
            "effective_batch_size/all (= 1 - solve_none - solve_all), rLLM "
            "batch/default/fractions/effective.",
            (
                "effective_batch_size/all",
                "batch/effective_batch_size",
                "reward/effective_batch_size",
                "batch/default/fractions/effective",
            ),
        ),
        Metric(
            "filtered_frac",
            "Share of the step's sampled groups the trainer's zero-variance filter removed "
            "before the update (wasted rollouts). Logged by Unsloth as "
            "frac_reward_zero_std_excluded (models/rl_replacements.py, 2026.10.9; only with "
            "UNSLOTH_GRPO_ZERO_VARIANCE_EXCLUDE=1); derived by the vitals from the filter counts "
            "of veRL, open-instruct, SkyRL, slime, NeMo-RL and rLLM (docs/importers.md).",
            ("frac_reward_zero_std_excluded", "rlvitals/filtered_frac"),
        ),
        Metric(
            "filtered_groups",
            "Groups the trainer's filter removed in the step (a count). Sources: veRL "
            "training/filter_groups/evicted_samples (counts prompt groups despite the name; "
            "trainer/ppo/v1/replay_buffer.py, 0.9.1); SkyRL reward/num_zero_variance_filtered "
            "(skyrl/train/trainer.py, 0.3.0); open-instruct batch/filtered_prompts "
            "(open_instruct/data_loader.py).",
            (
                "filter_groups/evicted_samples",
                "training/filter_groups/evicted_samples",
                "reward/num_zero_variance_filtered",
                "num_zero_variance_filtered",
                "batch/filtered_prompts",
            ),
        ),
        Metric(
            "groups_before_filter",
            "Groups sampled in the step before any filter (rLLM Tinker "
            "grouping/num_groups_before_filter).",
            ("grouping/num_groups_before_filter",),
        ),
        Metric(
            "groups_after_filter",
            "Groups left in the step after the filter: rLLM grouping/num_groups, open-instruct "
            "val/total_reward_groups (responses kept / G).",
            ("grouping/num_groups", "val/total_reward_groups", "total_reward_groups"),
        ),
        Metric(
            "acr",
            "Advantage Collapse Rate recorded live: fraction of groups with zero "
            "reward variance, before any mitigation.",
            ("rlvitals/acr", "acr_raw"),
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
            ("rlvitals/kept_frac", "real_batch_size_ratio"),
        ),
        # Advantages
        Metric(
            "adv_mean",
            "Mean advantage.",
            ("critic/advantages/mean", "advantages/mean", "val/advantages_mean"),
        ),
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
            (
                "rlvitals/adv_zero_frac",
                "advantages/zero_frac",
                "critic/advantages/zero_adv_ratio",
                "advantage/fraction_zero",
                "advantage/default/fraction_zero",
            ),
        ),
        Metric(
            "adv_sq_mean",
            "Mean over sequences of the squared per-sequence mean advantage; 0 when every "
            "advantage is 0 (veRL variance_proxy/expected_a_squared, only with "
            "actor.calculate_sum_pi_squared; trainer/ppo/metric_utils.py, 0.9.1).",
            ("variance_proxy/expected_a_squared",),
        ),
        # Optimisation
        Metric("loss", "Training loss as the trainer logs it.", ("train_loss",)),
        Metric(
            "pg_loss",
            "Policy-gradient loss term.",
            ("actor/pg_loss", "policy_loss", "policy/policy_loss"),
        ),
        Metric(
            "grad_norm",
            "Gradient norm before clipping.",
            ("actor/grad_norm", "gradient_norm", "policy/grad_norm"),
        ),
        Metric("learning_rate", "Learning rate.", ("actor/lr", "lr", "actor_lr")),
        Metric(
            "kl",
            "KL divergence to the reference policy.",
            ("actor/kl_loss", "objective/kl", "kl_div", "kl_loss", "loss/avg_kl"),
        ),
        Metric("kl_coef", "KL coefficient (beta).", ("actor/kl_coef", "beta")),
        Metric(
            "ppo_kl",
            "KL between the rollout and the updated policy (approximate).",
            ("actor/ppo_kl",),
        ),
        Metric(
            "entropy",
            "Mean token entropy of the policy.",
            (
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
                "val/sequence_lengths",
                "response_len/mean",
            ),
        ),
        Metric(
            "length_max", "Longest completion.", ("completions/max_length", "response_length/max")
        ),
        Metric(
            "length_min", "Shortest completion.", ("completions/min_length", "response_length/min")
        ),
        Metric(
            "length_terminated_mean",
            "Mean length of the completions that ended (EOS), not cut at the length limit.",
            ("completions/mean_terminated_length",),
        ),
        Metric(
            "length_terminated_max",
            "Longest completion that ended (EOS).",
            ("completions/max_terminated_length",),
        ),
        Metric(
            "length_terminated_min",
            "Shortest completion that ended (EOS).",
            ("completions/min_terminated_length",),
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
                "train_step_time",
                "timing/step_total",
                "timing/train/total_step_time",
                "timing/step",
            ),
        ),
        Metric(
            "throughput",
            "Tokens per second.",
            ("perf/throughput", "tokens/sec/gpu", "tokens_per_sec"),
        ),
        Metric(
            "num_tokens",
            "Tokens processed so far or in the step, as the trainer logs it.",
            ("perf/total_num_tokens", "total_num_tokens"),
        ),
        Metric("epoch", "Epoch (fractional).", ("training/epoch",)),
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


_OPEN_INSTRUCT_MARKS = (
    "real_batch_size_ratio",
    "val/total_reward_groups",
    "batch/filtered_prompts",
)


def dialect_of(keys) -> str | None:
    """The trainer whose keys do not follow the usual prefixes, from one logged row's keys.

    open-instruct logs its *training* batch statistics under ``val/`` (``val/advantages_mean``,
    ``val/sequence_lengths``; ``open_instruct/data_loader.py``), its evaluations under
    ``eval/``; its rows hold ``training_step`` and ``real_batch_size_ratio``.

    >>> dialect_of({"training_step": 3, "real_batch_size_ratio": 0.5, "val/stop_rate": 1.0})
    'open_instruct'
    """
    if "training_step" in keys and any(k in keys for k in _OPEN_INSTRUCT_MARKS):
        return "open_instruct"
    return None


def canonical_key(raw: str, dialect: str | None = None) -> tuple[str, bool, bool]:
    """Map a raw trainer key to ``(name, is_eval, known)``.

    ``dialect="open_instruct"`` reads ``val/`` keys as training statistics (:func:`dialect_of`).

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
    if dialect == "open_instruct" and key[:4].lower() == "val/":
        low = key.lower()
        name = ALIASES.get(low) or ALIASES.get(low[4:])
        return (name or key), False, name is not None
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

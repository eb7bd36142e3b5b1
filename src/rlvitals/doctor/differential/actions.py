"""What to try for each condition, in the trainer's own keys (:func:`actions_for`)."""

from __future__ import annotations

__all__ = ["actions_for"]


def actions_for(cid: str, trainer: str | None, group_relative: bool) -> list[str]:
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

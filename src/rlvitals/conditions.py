"""The closed vocabulary of causes: what an RL engineer names when a GRPO run goes wrong.

Detectors find *signs* (reward variance died, ACR stalled, lengths at the cap); a *condition* is
the cause behind them (a verifier that stopped looking at completions, a sampler turned greedy,
completions that no longer terminate). The failure zoo (:mod:`rlvitals.lab.zoo`) injects each
condition into a real TRL run, so the doctor can be judged on runs whose cause is known.

IDs are SCREAMING_SNAKE and never change: reports, the zoo's ``truth.json`` and the docs use them.

>>> CONDITIONS["RUNAWAY_LENGTH"].title
'Completions stop terminating'
>>> get_condition("HEALTHY").id
'HEALTHY'
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONDITIONS", "Condition", "get_condition"]


@dataclass(frozen=True)
class Condition:
    """One cause of a sick (or a healthy) run.

    Attributes:
        id: stable SCREAMING_SNAKE identifier.
        title: a few words for a report's first line.
        what: one sentence: what is happening to the run.
        signs: what it looks like in the logs, in the order it usually shows.
        tell_apart: what separates it from the condition most often confused with it.
    """

    id: str
    title: str
    what: str
    signs: tuple[str, ...]
    tell_apart: str = ""


_ALL = (
    Condition(
        "HEALTHY",
        "Nothing wrong",
        "The run learns: groups disagree, the policy is neither frozen nor noise.",
        (
            "ACR moderate and explained by the pass rate at this G",
            "reward flat or rising; entropy, lengths, KL and grad norm at ordinary levels",
        ),
    ),
    Condition(
        "VERIFIER_CONSTANT",
        "The reward stopped depending on the completion",
        "The verifier returns a constant, or one score for a whole group (a cached or "
        "mis-indexed result), so every group agrees with itself.",
        (
            "ACR jumps to ~1.0 in one step while the mean reward (pass rate) holds",
            "reward std 0 in every group; advantages and grad norm exactly 0 after",
            "entropy and completion lengths unchanged: the policy itself did not move",
        ),
        "Like IDENTICAL_COMPLETIONS in the scalars; completions that still differ within a "
        "group (log them) prove it is the verifier.",
    ),
    Condition(
        "IDENTICAL_COMPLETIONS",
        "Generation turned greedy",
        "The sampler stopped sampling (do_sample off, top_k 1, temperature ~0): the G "
        "completions of a prompt are one completion, so they earn one reward.",
        (
            "ACR jumps to ~1.0 at a constant pass rate",
            "completion-length spread within groups 0; grad norm 0",
            "the logged policy entropy (computed from the logits) does not fall",
        ),
        "Not SATURATED: the pass rate did not rise; not ENTROPY_COLLAPSE: entropy did not fall.",
    ),
    Condition(
        "SATURATED",
        "The policy solves its prompt set",
        "Most prompts are solved by every completion: the data is too easy for the policy.",
        ("pass rate near 1.0", "ACR high and almost all of it solve-all"),
        "ACR rises together with the pass rate, not at a constant one.",
    ),
    Condition(
        "TOO_HARD",
        "The prompts are too hard",
        "Most prompts are failed by every completion: nothing to learn from.",
        ("pass rate near 0 from the start", "ACR high and almost all of it solve-none"),
        "From the first logged step; a pass rate that *falls* to 0 is POLICY_DEGRADATION or "
        "a length/entropy failure.",
    ),
    Condition(
        "SMALL_GROUPS",
        "Groups too small: chance agreement",
        "With G = 2-4 and few prompts a step, groups agree by chance (p^G + (1-p)^G) and whole "
        "steps can have no signal; the run is otherwise healthy.",
        (
            "intermittent zero-spread steps at a steady pass rate",
            "ACR close to the chance level p^G + (1-p)^G",
        ),
        "The collapse matches what chance predicts at this G; no excess collapse.",
    ),
    Condition(
        "NO_GROUP_BASELINE",
        "One completion per prompt under a group-relative estimator",
        "G = 1: a group of one has no spread, so GRPO-style advantages are 0 (or the raw "
        "reward, as veRL scales a lone response).",
        ("group size 1 in the config or the recording", "advantages 0 or equal to the rewards"),
    ),
    Condition(
        "ADVANTAGE_PIPELINE",
        "Advantages flattened by the pipeline",
        "Rewards still vary within groups, but a scaling or normalisation bug (an epsilon of "
        "1e4, a double normalisation, a mask) flattens the advantages.",
        (
            "reward std and ACR unchanged",
            "advantage std falls many-fold; grad norm falls with it",
        ),
        "ACR stays where it was: the collapse is after the reward, not in it.",
    ),
    Condition(
        "POLICY_DEGRADATION",
        "The policy got worse (learning rate too high)",
        "The updates wreck the policy: a learning rate far too high, or raised mid-run.",
        (
            "pass rate (training reward) falls steadily",
            "grad norm and loss move first; ACR rises as groups fail together (solve-none)",
        ),
        "A falling pass rate with no length or entropy explosion before it.",
    ),
    Condition(
        "ENTROPY_COLLAPSE",
        "Entropy collapsed",
        "The policy (or its sampling) became near-deterministic: exploration is gone.",
        (
            "entropy falls to a fraction of its early level",
            "ACR rises afterwards as groups agree",
        ),
        "Entropy falls first; with a greedy sampler the logged entropy does not move.",
    ),
    Condition(
        "ENTROPY_BLOWUP",
        "The policy turned to noise",
        "Entropy explodes (sampling far too hot, or a broken update): completions become noise "
        "and run to the length cap, then every reward is 0.",
        (
            "entropy rises many-fold",
            "then completion lengths reach the cap (clipped share rises)",
            "then the reward floors at 0 (ACR ~1.0, solve-none)",
        ),
        "Entropy rises before the lengths do; in RUNAWAY_LENGTH entropy stays put.",
    ),
    Condition(
        "RUNAWAY_LENGTH",
        "Completions stop terminating",
        "The end-of-sequence token is no longer produced (EOS suppressed, a chat template "
        "without it, a stop token changed): completions run to the cap and are cut.",
        (
            "clipped share rises to ~1.0 while terminated completions stay short",
            "the reward falls to 0 as truncated answers fail",
        ),
        "Not LENGTH_LIMIT: the terminated completions are far below the cap, so the cap is "
        "not what the task needs; fix EOS / the chat template before raising the limit.",
    ),
    Condition(
        "LENGTH_LIMIT",
        "The length cap is below what the task needs",
        "max_completion_length is too small from the start: correct answers are cut off.",
        (
            "clipped share high from the first logged step",
            "terminated completions near the cap",
        ),
        "From the start and with terminated lengths near the cap (RUNAWAY_LENGTH starts later "
        "with short terminated completions).",
    ),
    Condition(
        "KL_BLOWUP",
        "KL to the reference exploded",
        "With beta > 0 and a learning rate far too high, the policy runs away from the "
        "reference and the KL term dominates.",
        ("KL rises by orders of magnitude", "grad norm spikes; the reward degrades after"),
    ),
    Condition(
        "REWARD_HACKING",
        "The reward is being gamed",
        "A gameable reward term rises while what the task wants (a held-out evaluation) falls.",
        ("training reward rises", "held-out accuracy falls over the same steps"),
    ),
)

CONDITIONS: dict[str, Condition] = {c.id: c for c in _ALL}
"""Every condition by ID, in the order the docs list them."""


def get_condition(cid: str) -> Condition:
    """The condition ``cid``; an unknown ID raises ValueError listing the valid ones."""
    if cid not in CONDITIONS:
        raise ValueError(f"unknown condition {cid!r}; valid: {', '.join(CONDITIONS)}")
    return CONDITIONS[cid]

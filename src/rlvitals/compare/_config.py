"""The configuration differences of a comparison, ranked for a reader.

Two runs of one sweep often differ in a few keys that matter and a long tail that does not
(logging, paths, hardware), and two runs of different trainers share few keys at all. So the
differences are shown in sections, most telling first: **algorithm** (estimator, group size,
KL, clipping, advantage scaling), **data** (datasets, prompt and completion lengths, rewards),
**optimisation** (learning rate, batch, schedule, precision of the update), then everything
else. Keys that one run has and the other not are folded: one line per side naming them,
not one row each saying "(absent)".

>>> section_of("args.learning_rate"), section_of("algorithm.adv_estimator"), section_of("bf16")
('optimisation', 'algorithm', 'other')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SECTIONS", "ConfigSections", "config_sections", "section_of"]

SECTIONS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "algorithm",
        re.compile(
            r"estimator|algorithm|group_size|num_generations|rollout\.n\b|\.n$|scale_rewards|"
            r"adv|loss_type|loss_agg|beta|kl|epsilon|clip|filters_zero_var|reward_min|"
            r"reward_max|importance|ratio|entropy_coeff|temperature|top_p|top_k|trainer$",
            re.I,
        ),
    ),
    (
        "data",
        re.compile(
            r"data|train_files|val_files|prompt|completion_length|response_length|max_length|"
            r"reward_func|reward_fn|reward_model|reward_weights|dataset|task|chat_template",
            re.I,
        ),
    ),
    (
        "optimisation",
        re.compile(
            r"learning_rate|\blr\b|(^|[._])lr($|[._])|optim|adam|weight_decay|warmup|scheduler|"
            r"batch_size|grad_clip|max_grad_norm|accumulation|max_steps|epochs|"
            r"total_training_steps|seed|"
            r"mini_batch|micro_batch|ppo_epochs|num_iterations",
            re.I,
        ),
    ),
)
"""Section name and the key pattern that puts a key in it (the first that matches)."""
OTHER = "other"


def section_of(key: str) -> str:
    """The section a configuration key belongs to (:data:`SECTIONS`, else ``other``)."""
    for name, pattern in SECTIONS:
        if pattern.search(key):
            return name
    return OTHER


@dataclass
class ConfigSections:
    """The differences, ranked.

    Attributes:
        sections: ``(section, [(key, A's value, B's value)])`` for keys both runs have, in
            section order (empty sections left out), keys by name within one.
        only_a, only_b: keys (sorted by section, then name) that one run has and the other not.
    """

    sections: list[tuple[str, list[tuple[str, Any, Any]]]] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return sum(len(rows) for _, rows in self.sections)


def config_sections(config: list[tuple[str, Any, Any]]) -> ConfigSections:
    """:class:`ConfigSections` of :attr:`rlvitals.compare.Comparison.config`."""
    order = [name for name, _ in SECTIONS] + [OTHER]
    both: dict[str, list] = {name: [] for name in order}
    only_a, only_b = [], []
    for key, a, b in config:
        if a is None:
            only_b.append(key)
        elif b is None:
            only_a.append(key)
        else:
            both[section_of(key)].append((key, a, b))

    def rank(k: str) -> tuple[int, str]:
        return order.index(section_of(k)), k

    return ConfigSections(
        sections=[(name, sorted(both[name], key=lambda r: r[0])) for name in order if both[name]],
        only_a=sorted(only_a, key=rank),
        only_b=sorted(only_b, key=rank),
    )

"""PG-GRPO's selection on RlvitalsGRPOTrainer's own dataloader (issue 26.6), with real TRL 1.16
GRPO steps on the tiny Qwen2 (CPU, offline): the sampler draws each step's prompts from the
live posterior, TRL trains on exactly those, importance weights reach the estimator, and under
``torchrun`` (gloo, 2 ranks) both ranks hold one posterior and draw the same prompts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import rlvitals_tests_trl_harness as H  # tests/trl_ddp_script.py, loaded by conftest

import rlvitals

H.set_offline_env()

from trl.trainer.utils import RepeatSampler  # noqa: E402

from rlvitals.integrations.trl import PosteriorSampler, RlvitalsGRPOTrainer  # noqa: E402
from rlvitals.integrations.trl._batch import _prompt_id  # noqa: E402

PROMPTS = [f"{a}+{b}=" for a in range(8) for b in range(2)]  # 16 prompts


def reward_solved_or_coin(prompts, completions, **kwargs) -> list[float]:
    """Prompts starting with an even digit are always solved (every group collapses at 1);
    the others score a coin from the completion's characters (mixed groups)."""
    return [
        1.0 if int(p[0]) % 2 == 0 else float(sum(map(ord, text)) % 2)
        for p, text in zip(prompts, completions)
    ]


class Keeping(RlvitalsGRPOTrainer):
    """Keeps the prompt of every group each training step trained on, and the config's
    importance weights."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.steps: list[list[str]] = []
        self.weights: list[tuple | None] = []
        super().__init__(*args, **kwargs)

    def _rlvitals_after_estimate(self, info: dict[str, Any]) -> None:
        super()._rlvitals_after_estimate(info)
        if info["mode"] == "train":
            self.steps.append(list(self.rlvitals_config.keys))
            self.weights.append(getattr(self.rlvitals_config, "weights", None))


tok = pytest.fixture(scope="module", name="tok")(H.one_thread_tokenizer)


def _train(tok, out, steps=48, **estimator_config):
    from datasets import Dataset

    trainer = Keeping(
        model=H.tiny_model(tok),
        reward_funcs=[reward_solved_or_coin],
        args=H.grpo_args(out, max_steps=steps, per_device_train_batch_size=8, num_generations=4),
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        processing_class=tok,
        estimator="pg_grpo",
        estimator_config={"select_eps": 0.0, **estimator_config},
    )
    trainer.train()
    assert trainer.state.global_step == steps and trainer.rlvitals_guard.total == 0
    return trainer


def _solved_share(steps: list[list[str]]) -> float:
    solved = {_prompt_id(p) for p in PROMPTS if int(p[0]) % 2 == 0}
    drawn = [k for keys in steps for k in keys]
    return float(np.mean([k in solved for k in drawn]))


def test_pg_grpo_draws_the_prompts_it_trains_on_from_its_posterior(tok, tmp_path):
    """Half the prompts are always solved: once seen, their posterior gives little chance of a
    mixed group, so the sampler draws them less than TRL's uniform sampler does (same seed)."""
    sel = _train(tok, tmp_path / "select")
    assert isinstance(sel.rlvitals_sampler, PosteriorSampler)
    base = _train(tok, tmp_path / "uniform", select=False)
    assert base.rlvitals_sampler is None
    assert isinstance(base._get_train_sampler(), RepeatSampler)
    ids = {_prompt_id(p) for p in PROMPTS}
    for steps in (sel.steps, base.steps):
        assert len(steps) == 48
        for keys in steps:  # each step: 2 distinct prompts, all of the dataset
            assert len(keys) == 2 and len(set(keys)) == 2 and set(keys) <= ids
    # the posterior's counts are filed under the same ids the sampler draws by
    assert set(sel.rlvitals_state.counts) <= set(sel.rlvitals_sampler.keys)
    # the last 24 steps (the first draw from a posterior that has seen most prompts is ~step 10;
    # seed 0: 15% solved prompts against TRL's 50%)
    late_sel, late_base = _solved_share(sel.steps[24:]), _solved_share(base.steps[24:])
    assert late_base > 0.3, "the uniform sampler draws the solved half about half the time"
    assert late_sel < late_base - 0.2, (late_sel, late_base)
    # and by the end the posterior itself rates the solved prompts below the coins
    from rlvitals.estimators.pg_grpo import selection_weights

    q = selection_weights(sel.rlvitals_state, sel.rlvitals_sampler.keys, sel.rlvitals_config, 4)
    even = np.array([int(p[0]) % 2 == 0 for p in PROMPTS])
    assert q[even].mean() < q[~even].mean()


def test_importance_weights_reach_the_estimator(tok, tmp_path):
    """``importance=True``: each step's groups carry 1/(N q) weights, mean 1, from the draw."""
    trainer = _train(tok, tmp_path, steps=8, importance=True)
    assert all(w is not None and len(w) == 2 for w in trainer.weights)
    for w in trainer.weights:
        assert np.isclose(np.mean(w), 1.0)
    assert any(not np.allclose(w, 1.0) for w in trainer.weights), "selection was never uneven"


@pytest.mark.slow
def test_torchrun_two_ranks_hold_one_posterior_and_draw_the_same_prompts(tmp_path):
    ranks = H.torchrun(tmp_path, "pg_grpo")
    assert len(ranks[0]) == len(ranks[1]) == H.DDP_STEPS
    state = None
    prompt_ids = {_prompt_id(p) for p in H.PROMPTS}
    for step, (r0, r1) in enumerate(zip(*ranks)):
        assert r0["world_size"] == 2 and r0["backend"] == r1["backend"] == "gloo"
        assert r0["sampler"] == r1["sampler"] == "PosteriorSampler"
        # one global batch: the same drawn prompt and rewards on both ranks
        assert r0["keys"] == r1["keys"] and set(r0["keys"]) <= prompt_ids, step
        assert r0["rewards"] == r1["rewards"]
        rewards = np.asarray(r0["rewards"], dtype=np.float32)
        ids = np.arange(rewards.shape[0]) // 8
        ref, metrics, state = rlvitals.estimate(
            "pg_grpo",
            rewards,
            ids,
            state=state,
            keys=tuple(r0["keys"]),
            **H.DDP_ESTIMATOR_CONFIG["pg_grpo"],
        )
        # each rank trains on its slice of the one computation, and both keep its state
        assert r0["local_advantages"] + r1["local_advantages"] == ref.tolist(), step
        for r in (r0, r1):
            assert r["metrics"] == metrics and r["state"] == state.to_dict(), step
    assert state.counts, "the posterior holds the drawn prompts"

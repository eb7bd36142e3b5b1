"""The configuration veRL prints at start, made by veRL's own config and printer: its generated
``ppo_trainer`` config (``verl/trainer/config/_generated_ppo_trainer.yaml``, the composed
defaults) with Hydra-style overrides, resolved and printed as ``verl/trainer/main_ppo.py`` does
(``pprint(OmegaConf.to_container(config, resolve=True))``), behind the TaskRunner's Ray prefix,
then read back by the veRL console importer."""

from __future__ import annotations

import contextlib
import io
import os
import pprint

import pytest
import verl
from omegaconf import OmegaConf

from rlvitals.importers import load

PREFIX = "\x1b[36m(TaskRunner pid=46086)\x1b[0m "
OVERRIDES = [
    "algorithm.adv_estimator=grpo",
    "algorithm.norm_adv_by_std_in_grpo=False",
    "algorithm.filter_groups.enable=True",
    "actor_rollout_ref.rollout.n=6",
    "actor_rollout_ref.actor.use_kl_loss=True",
    "actor_rollout_ref.actor.kl_loss_coef=0.002",
    "data.max_response_length=2048",
    "data.train_batch_size=32",
]


@pytest.fixture(scope="module")
def printed():
    path = os.path.join(
        os.path.dirname(verl.__file__), "trainer/config/_generated_ppo_trainer.yaml"
    )
    cfg = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(OVERRIDES))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        pprint.pprint(OmegaConf.to_container(cfg, resolve=True))
    return out.getvalue()


def test_real_printed_config_gives_the_facts(tmp_path, printed):
    lines = [PREFIX + line for line in printed.splitlines()]
    lines.insert(10, "\x1b[36m(WorkerDict pid=2101)\x1b[0m interleaved output of another actor")
    lines.append(PREFIX + "step:1 - critic/score/mean:0.500 - actor/entropy:0.300")
    p = tmp_path / "verl.log"
    p.write_text("\n".join(lines) + "\n")
    run = load(p)
    m = run.manifest
    assert run.manifest.format == "verl_console" and run.steps.tolist() == [1]
    assert (m.group_size, m.estimator, m.adv_scale) == (6, "dr_grpo", "none")
    assert m.kl_coef == pytest.approx(0.002) and m.filters_zero_var is True
    assert m.config["data.max_response_length"] == 2048
    assert m.config["data.train_batch_size"] == 32
    assert m.config["config_source"] == "printed configuration (line 1)"
    assert run.warnings == []

"""The veRL fail-fast guard, driven through veRL 0.9.1's real driver-side code.

veRL's ``RayPPOTrainer.fit`` computes advantages on the driver with
``verl.trainer.ppo.ray_trainer.compute_advantage(batch, adv_estimator=..., config=
self.config.algorithm)``; these tests call that very function once per step, on a real
``DataProto`` built as ``fit`` builds it (a ``uid`` per prompt, ``rollout.n`` responses each),
with the ``algorithm`` config as a DictConfig carrying ``rlvitals.guard`` the way
``+algorithm.rlvitals.guard.halt_on=...`` on veRL's command line would. A run whose reward breaks
at step K fails fast with :class:`rlvitals.guard.RlvitalsHalt` within sustain + 2 steps; the
alerts reach a webhook on loopback; the recording and the doctor agree.
"""

from __future__ import annotations

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

import rlvitals
from rlvitals.guard import RlvitalsHalt
from rlvitals.integrations import verl as rv
from rlvitals.recording import read_recording

N_PROMPTS, N, T = 8, 8, 6  # prompts per step, rollout.n, response length
K = 32  # the step from which every response scores 0 (the doctor judges runs of >= 30 steps)


@pytest.fixture(autouse=True)
def _fresh_runs():
    rv.reset()
    yield
    rv.reset()


def _batch(step: int, rng: np.random.Generator) -> DataProto:
    """One step's batch as ``fit`` builds it: uids per prompt, repeated (interleaved) n times."""
    uids = np.array([str(uuid.uuid4()) for _ in range(N_PROMPTS)], dtype=object)
    uids = np.repeat(uids, N)
    scores = (rng.random(N_PROMPTS * N) < 0.5).astype(np.float32)
    if step >= K:
        scores[:] = 0.0
    mask = torch.ones(N_PROMPTS * N, T, dtype=torch.int64)
    tlr = torch.zeros(N_PROMPTS * N, T)
    tlr[:, -1] = torch.from_numpy(scores)
    return DataProto.from_dict(
        tensors={"token_level_rewards": tlr, "response_mask": mask}, non_tensors={"uid": uids}
    )


def _algorithm(**rlvitals_cfg) -> OmegaConf:
    return OmegaConf.create(
        {
            "adv_estimator": "rlvitals_grpo",
            "norm_adv_by_std_in_grpo": True,
            "gamma": 1.0,
            "lam": 1.0,
            "rlvitals": rlvitals_cfg,
        }
    )


def _drive(config, steps):
    """The driver's per-step advantage call, as ``fit`` makes it; returns the step that raised."""
    rng = np.random.default_rng(0)
    for step in steps:
        batch = _batch(step, rng)
        try:
            out = compute_advantage(
                batch, adv_estimator=config.adv_estimator, num_repeat=N, config=config
            )
        except RlvitalsHalt as halt:
            return step, halt
        assert out.batch["advantages"].shape == (N_PROMPTS * N, T)
    return None, None


def test_a_broken_reward_fails_fast_with_the_resume_point(tmp_path):
    ckpt = tmp_path / "checkpoints"
    for s in (10, 20, 30, 40):  # veRL's trainer.default_local_dir/global_step_N
        (ckpt / f"global_step_{s}").mkdir(parents=True)
    rec = tmp_path / "rec"
    config = _algorithm(
        record_dir=str(rec),
        guard={"halt_on": "collapse", "checkpoint_dir": str(ckpt), "name": "verl-run"},
    )
    step, err = _drive(config, range(1, 80))
    assert err is not None, "the run must fail fast"
    assert K <= step <= K + 5 + 2, step
    halt = err.halt
    assert halt.last_healthy_step == K - 1
    assert halt.resume_from == str(ckpt / "global_step_30")
    assert "resume from" in str(err) and "global_step_30" in str(err)
    assert isinstance(err, RuntimeError)  # veRL's fit ends with an error, not "success"
    mon = rv.guard()
    assert mon.should_stop and mon.halted is halt
    run = read_recording(rec)
    assert run.manifest.trainer == "verl" and run.manifest.estimator == "grpo"
    assert run.groups.unique_steps()[-1] == step
    halts = [e for e in run.events if e.kind == "halt"]
    assert len(halts) == 1 and halts[0].data["last_healthy_step"] == K - 1
    post = rlvitals.diagnose(run)
    collapse = [i for i in post.incidents if i.theme == "collapse"]
    assert collapse and collapse[0].onset_step == K


class _Hook:
    def __init__(self):
        self.bodies = []
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                outer.bodies.append(
                    json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                )
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


def test_without_a_halt_policy_the_guard_alerts_and_training_goes_on():
    hook = _Hook()
    try:
        config = _algorithm(guard={"webhook": hook.url, "check_every": 2})
        step, err = _drive(config, range(1, 60))
        assert err is None and step is None  # every step ran
        mon = rv.guard()
        mon.flush(10)
        kinds = [a.kind for a in mon.alerts]
        assert kinds and kinds[0] == "opened"
        assert [b["kind"] for b in hook.bodies] == kinds
        assert hook.bodies[0]["incident"]["onset_step"] == K
        assert hook.bodies[0]["step"] - K <= 5 + 2
    finally:
        hook.httpd.shutdown()


def test_guard_keys_are_checked():
    config = _algorithm(guard={"halt": "collapse"})
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"unknown algorithm\.rlvitals\.guard key.*valid: halt_on"):
        compute_advantage(
            _batch(1, rng), adv_estimator="rlvitals_grpo", num_repeat=N, config=config
        )

"""Training processes for the guard's process tests (tests/test_guard_processes.py).

Importing this module has no side effects (pytest collects it for doctests). As a script:

- ``python tests/_guard_worker.py loop OUT_DIR``: a hand-written training loop (a softmax
  policy over four answers per prompt, REINFORCE with GRPO advantages, numpy) watched by a
  :class:`rlvitals.Monitor` recording into ``OUT_DIR/rec``. Its reward breaks at step
  :data:`BREAK_STEP` (the verifier starts rejecting everything). Every alert is printed as a
  JSON line on stdout the moment it is raised; the loop runs until it is killed.
- ``python -W error::RuntimeWarning tests/_guard_worker.py trl OUT_DIR LIMIT``: a real tiny TRL
  GRPO run with :class:`RlvitalsCallback` recording into ``OUT_DIR/rec``, under a file-size
  limit of LIMIT bytes (``RLIMIT_FSIZE``, ``SIGXFSZ`` ignored): the recording's streams hit it
  mid-run and every write past it fails (``EFBIG``), as on a full disk. Prints one JSON line
  with what happened.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

BREAK_STEP = 60
"""The step from which the hand loop's verifier rejects every answer."""
TRL_STEPS = 14


def loop(out_dir: str) -> None:
    import numpy as np

    from rlvitals import Manifest, Monitor
    from rlvitals.signal import advantages

    rng = np.random.default_rng(0)
    n_prompts, g, n_answers = 32, 8, 4
    logits = rng.normal(0.0, 0.1, size=(n_prompts, n_answers))
    correct = rng.integers(0, n_answers, size=n_prompts)

    import threading

    lock = threading.Lock()  # sinks run on the guard's thread: one whole line at a time

    def say(obj):
        with lock:
            sys.stdout.write(json.dumps(obj) + "\n")
            sys.stdout.flush()

    def emit(alert):
        say({"step": alert.step, **alert.to_dict()})

    mon = Monitor(
        Manifest(trainer="hand-loop", group_size=g, reward_min=0.0, reward_max=1.0),
        recording_dir=Path(out_dir, "rec"),
        sinks=[emit],
    )
    ids = np.repeat(np.arange(n_prompts), g)
    step = 0
    while True:
        step += 1
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        answers = np.array([rng.choice(n_answers, size=g, p=p[i]) for i in range(n_prompts)])
        rewards = (answers == correct[:, None]).astype(np.float32)
        if step >= BREAK_STEP:
            rewards[:] = 0.0  # the verifier broke
        adv = advantages(rewards.reshape(-1), ids).reshape(n_prompts, g)
        grad = np.zeros_like(logits)
        for i in range(n_prompts):
            for j in range(g):
                onehot = np.eye(n_answers)[answers[i, j]]
                grad[i] += adv[i, j] * (onehot - p[i])
        logits += 0.05 * grad / g
        mon.observe(
            step,
            rewards.reshape(-1),
            ids,
            prompts=[f"prompt-{i}" for i in range(n_prompts)],
            loss=float(-(adv * np.log(p[np.arange(n_prompts)[:, None], answers])).mean()),
            grad_norm=float(np.abs(grad).sum()),
        )
        say({"step": step})
        time.sleep(0.005)


def trl(out_dir: str, limit: int) -> None:
    import os
    import resource
    import signal

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import trl_ddp_script as H  # the tiny-model harness

    H.set_offline_env()
    import torch

    from rlvitals.integrations.trl import RlvitalsCallback, RlvitalsGRPOTrainer

    torch.set_num_threads(1)
    tok = H.tiny_tokenizer()
    cb = RlvitalsCallback(Path(out_dir, "rec"), doctor_every=2, halt_on="critical", sinks=[])
    trainer = RlvitalsGRPOTrainer(
        model=H.tiny_model(tok),
        reward_funcs=[H.reward_has_digit, H.reward_short],
        args=H.grpo_args(
            Path(out_dir, "out"),
            max_steps=TRL_STEPS,
            per_device_train_batch_size=16,
        ),
        train_dataset=H.train_dataset(),
        processing_class=tok,
        callbacks=[cb],
    )
    # From here on, no file may grow past `limit` bytes: the recording fills up mid-run.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    trainer.train()
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    stats = cb.recorder.stats
    print(
        json.dumps(
            {
                "global_step": trainer.state.global_step,
                "recorder_errors": stats["errors"],
                "dropped": stats["dropped"],
                "guard": dict(cb.guard.errors),
                "estimator_guard": dict(trainer.rlvitals_guard.errors),
                "sizes": {
                    p.name: p.stat().st_size for p in Path(out_dir, "rec").iterdir() if p.is_file()
                },
                "pid": os.getpid(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    if sys.argv[1] == "loop":
        loop(sys.argv[2])
    elif sys.argv[1] == "trl":
        trl(sys.argv[2], int(sys.argv[3]))
    else:  # pragma: no cover
        raise SystemExit(f"unknown mode {sys.argv[1]!r}")

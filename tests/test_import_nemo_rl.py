"""NeMo-RL ``train_data_step{N}.jsonl`` dumps (byte-faithful to ``Logger.log_batched_dict_as_jsonl``
of NVIDIA-NeMo/RL @ 0275e758: ``tests/_format_producers.py`` ``write_nemo_rl``)."""

from __future__ import annotations

import json

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, runs_of, sniff
from rlvitals.vitals import compute_vitals


def test_exp_dir_with_config(tmp_path):
    run = F.simulate(12)
    exp = F.write_nemo_rl(tmp_path / "logs" / "exp_001", run)
    assert sniff(exp).name == "nemo_rl"
    r = load(exp)
    assert r.manifest.group_size == 4 and r.manifest.estimator == "grpo_loo"
    assert r.groups.unique_steps().tolist() == list(range(1, 13))
    v = compute_vitals(r)
    assert np.allclose(v.series["acr"], [s.zero_std_frac for s in run])


def test_g_inferred_from_the_advantages(tmp_path):
    exp = F.write_nemo_rl(tmp_path / "exp_001", F.simulate(6, g=8), g=8, config=False)
    r = load(exp)
    assert r.manifest.group_size == 8 and any("inferred" in w for w in r.warnings)


def test_one_dump_and_several_experiments(tmp_path):
    F.write_nemo_rl(tmp_path / "logs" / "exp_001", F.simulate(3))
    F.write_nemo_rl(tmp_path / "logs" / "exp_002", F.simulate(5))
    r = load(tmp_path / "logs")
    assert len(runs_of(r)) == 2 and r.groups.unique_steps().size == 5
    assert load(tmp_path / "logs", run="exp_001").groups.unique_steps().size == 3
    one = load(tmp_path / "logs" / "exp_001" / "train_data_step2.jsonl")
    assert one.groups.unique_steps().tolist() == [2]


def write_nemo_rl_messages(exp, run, repeat_first: bool = False, multi_turn: bool = False):
    """Dumps of a newer NeMo-RL (``grpo.py``: ``log_data = {"content": flat_messages["content"],
    "rewards": ..., "generation_logprobs": ..., "prev_logprobs": ..., "input_lengths": ...}``,
    no advantages), ``content`` being ``message_log_to_flat_messages``' list of the message
    texts, wrapped in the one-element list of ``make_microbatch_iterator(1)``; no config.
    ``repeat_first``: the first prompt of each step is drawn twice in a row (a run of 2G)."""
    exp.mkdir(parents=True, exist_ok=True)
    system = "<|im_start|>system\nPlease reason step by step.<|im_end|>\n"
    for st in run:
        prompts = [f"<|im_start|>user\nQuestion {st.step}.{j}: what is {j} + {st.step}?<|im_end|>\n"
                   for j in range(len(st.rewards))]  # fmt: skip
        if repeat_first:
            prompts[1] = prompts[0]
        with open(exp / f"train_data_step{st.step}.jsonl", "w") as f:
            i = 0
            for prompt, grp in zip(prompts, st.rewards):
                for k, r in enumerate(grp):
                    reply = f"<|im_start|>assistant\nThe answer is {k}.<|im_end|>\n"
                    messages = [system, prompt, reply]
                    if multi_turn:
                        messages += [f"<tool>result {k}</tool>", f"answer {k}"]
                    sample = {
                        "content": [messages],
                        "rewards": [r],
                        "generation_logprobs": [[0.0] * 20 + [-0.4] * 6],
                        "prev_logprobs": [[-1.2] * 26],
                        "input_lengths": [26],
                    }
                    f.write(json.dumps({**sample, "idx": i}) + "\n")
                    i += 1
    return exp


def test_no_config_groups_are_consecutive_rows_with_the_same_prompt(tmp_path):
    """Issue 25.2: such a dump said "group size unknown" although NeMo-RL writes a prompt's G
    samples together; the groups are now those runs, and the report says G was inferred."""
    from rlvitals.doctor import diagnose
    from rlvitals.report import render

    run = F.simulate(8, groups=6, g=5)
    exp = write_nemo_rl_messages(tmp_path / "logs" / "exp_001", run)
    r = load(exp)
    assert r.manifest.group_size == 5
    assert "consecutive rows with the same prompt" in r.manifest.config["group_size_source"]
    assert any("G = 5 inferred from the prompts" in w for w in r.warnings)
    v = compute_vitals(r)
    assert np.allclose(v.series["acr"], [s.zero_std_frac for s in run])
    assert v.group_size_from == r.manifest.config["group_size_source"]
    assert r.groups.prompt is not None and len(set(r.groups.prompt[:6])) == 6
    report = json.loads(render(diagnose(r), "json"))
    assert "consecutive rows with the same prompt" in report["vitals"]["group_size_from"]
    assert any("inferred from the prompts" in w for w in report["run"]["warnings"])


def test_a_prompt_drawn_twice_in_a_row_is_two_groups(tmp_path):
    run = F.simulate(4, groups=4, g=3)
    r = load(write_nemo_rl_messages(tmp_path / "exp_001", run, repeat_first=True))
    assert r.manifest.group_size == 3
    assert np.allclose(compute_vitals(r).series["acr"], [s.zero_std_frac for s in run])


def test_prompts_that_never_repeat_leave_g_unknown(tmp_path):
    """Multi-turn contents (the last message is not the only one that differs): no prompt
    repeats in consecutive rows, and G = 1 is not concluded from that."""
    r = load(write_nemo_rl_messages(tmp_path / "exp_001", F.simulate(3), multi_turn=True))
    assert r.manifest.group_size is None and r.groups is None
    assert any("no prompt repeats" in w for w in r.warnings)

"""SkyRL and slime console logs (byte-faithful to ``ConsoleLogger.log`` of skyrl 0.3.0 and to
slime's ``perf {rollout_id}: {log_dict}`` lines: ``write_skyrl``, ``write_slime``)."""

from __future__ import annotations

import numpy as np
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals.importers import load, sniff
from rlvitals.vitals import compute_vitals


def test_skyrl_console(tmp_path):
    run = F.simulate(40)
    for ansi in (False, True):
        p = F.write_skyrl(tmp_path / f"sky{ansi}.log", run, ansi=ansi)
        assert sniff(p).name == "skyrl_console"
        r = load(p)
        assert r.steps.tolist() == list(range(1, 41)) and r.manifest.group_size == 4
        assert "trainer/global_step" not in r.series
        v = compute_vitals(r)
        assert np.allclose(v.series["filtered_frac"], [s.zero_std_frac for s in run])
        assert v.evidence == "zero_std_frac"


def test_slime_console_rollout_axis(tmp_path):
    run = F.simulate(40)
    p = F.write_slime(tmp_path / "slime.log", run)
    assert sniff(p).name == "slime_console"
    r = load(p)
    assert r.steps.tolist() == list(range(40)) and "rollout/step" in r.manifest.step_key
    assert r.manifest.group_size == 4 and r.has("pg_loss")
    v = compute_vitals(r)
    assert np.allclose(v.series["acr"], [s.zero_std_frac for s in run])


def test_slime_without_launch_says_the_denominator_is_unknown(tmp_path):
    p = F.write_slime(tmp_path / "slime.log", F.simulate(10), launch=False)
    v = compute_vitals(load(p))
    assert any("rollout_batch_size" in n and "unknown" in n for n in v.notes)


def _megatron_startup(n_bytes: int) -> str:
    """What a slime job prints before its first rollout, as Ray relays it from the Megatron
    actor: torch distributed and model set-up, then Megatron's argument dump (one
    ``name ..... value`` line per argument). Nothing in it says "slime" or "RolloutManager"."""
    pre = f"(MegatronTrainRayActor pid=777) [{F.TS}]"
    lines = [
        f"{pre} initialize.py:88 - > initializing torch distributed ...",
        f"{pre} initialize.py:130 - > initialized tensor model parallel with size 1",
        f"{pre} model.py:120 - > building GPT model ...",
        f"{pre} model.py:142 - > number of parameters on (tensor, pipeline) model parallel rank "
        "(0, 0): 494032768",
        f"{pre} arguments.py:66 - ------------------------ arguments ------------------------",
    ]
    i = 0
    while sum(len(x) + 1 for x in lines) < n_bytes:
        name = f"megatron_arg_{i:05d}"
        lines.append(f"{pre} arguments.py:70 -   {name} {'.' * (48 - len(name))} {i % 7}")
        i += 1
    return "\n".join(lines) + "\n"


def test_slime_log_whose_first_64_kib_are_startup_lines_is_slime(tmp_path):
    """Regression (issue 24): the registry's hand-written pre-check list looked for "slime" or
    "RolloutManager" in the head while slime's own sniffer also knew the Megatron actor and
    reads past the head: such a log was "unknown format". The pre-check is now declared in
    slime_console.py beside the sniffer, from the same marks."""
    from rlvitals.importers import SNIFF_BYTES

    run = F.simulate(30)
    body = F.write_slime(tmp_path / "body.log", run, launch=False).read_text()
    p = tmp_path / "slime.log"
    p.write_text(_megatron_startup(SNIFF_BYTES + 8192) + body)
    head = p.read_bytes()[:SNIFF_BYTES]
    assert b"slime" not in head and b"RolloutManager" not in head and b": {'" not in head
    assert sniff(p).name == "slime_console"
    r = load(p)
    assert r.steps.tolist() == list(range(30)) and r.manifest.format == "slime_console"

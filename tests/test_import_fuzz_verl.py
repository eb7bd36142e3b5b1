"""Fuzzing the veRL and OpenRLHF importers: a ``Run`` or an ``InputError`` naming the file.

Inputs: random bytes, valid files truncated or corrupted at random places, and lines built to
look almost like the real thing (``step:N - ...``, ``Global step N: {...}``, file-logger JSON,
rollout rows) with huge numbers, odd unicode, lone surrogates and giant lines. Any other
exception, or a hang (the deadline), fails the test.
"""

from __future__ import annotations

import json
import math
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvitals.errors import InputError
from rlvitals.importers import IMPORTERS, formats, load
from rlvitals.recording.run import Run

HANG_SECONDS = 30
"""Generous: these inputs take well under a second each when the code is linear."""

SETTINGS = settings(
    max_examples=80,
    deadline=timedelta(seconds=10),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
)

CONSOLE = (
    "++ python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n=5 algorithm.adv_estimator=grpo\n"
    "\x1b[36m(TaskRunner pid=7)\x1b[0m step:0 - val-core/openai/gsm8k/reward/mean@1:0.212\n"
    "\x1b[36m(TaskRunner pid=7)\x1b[0m step:1 - actor/entropy:0.336 - actor/ppo_kl:-0.000 - "
    "critic/score/mean:0.259 - perf/total_num_tokens:187276 - actor/grad_norm:nan\n"
    "Training Progress:   2%|\u258f  | 2/105 [01:10<59:01, 34.40s/it]\n"
    "step:2 - actor/entropy:np.float64(0.318) - critic/score/mean:0.679 - x:inf\n"
).encode()
FILE_LOG = (
    json.dumps({"step": 1, "data": {"actor/entropy": 0.3, "critic/score/mean": None}})
    + "\n"
    + json.dumps({"step": 2, "data": {"actor/entropy": 0.2, "val-core/x/reward/mean@1": 0.5}})
    + "\n"
).encode()
ROLLOUT = "".join(
    json.dumps({"input": f"q{i // 4} \u2603", "output": "o", "gts": "1", "score": i % 2, "step": 3})
    + "\n"
    for i in range(8)
).encode()
OPENRLHF = (
    "INFO 05-12 10:11:12 ppo_trainer.py:412] \u2728 Global step 1: "
    "{'policy_loss': -0.01, 'kl': nan, 'reward': np.float64(0.4), 'x': tensor(0.5000)}\n"
    "INFO 05-12 10:11:13 ppo_trainer.py:412] Eval at step 1: {'eval_pass1': 0.5}\n"
    "Global step 2: {'policy_loss': 0.02, 'response_length': 300.5, 'generated_samples': ['a', 1]}\n"
).encode()

HUGE = ["9" * 400, "1e999", "-1e999", "9" * 25, "1" + "0" * 5000, "0x10", "1_000", "\u0661\u0662"]
WEIRD = [
    "",
    " ",
    ":",
    " - ",
    "\x00",
    "\x1b[",
    "\x1b[36m",
    "\r",
    "\u202e",
    "\ud800",
    "\U0001f600",
    "(",
    ")",
    "nan",
    "inf",
    "-",
    "np.float64(",
    "np.float64(1)",
    "True",
    "{",
    "}",
    "'",
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def check(path: Path, fmt: str) -> None:
    """The contract: a Run, or an InputError whose message names the file."""
    try:
        run = load(path, fmt=fmt)
    except InputError as e:
        assert str(path) in str(e), str(e)
        return
    assert isinstance(run, Run)
    for col in run.series.values():
        assert col.shape == run.steps.shape


@st.composite
def corrupted(draw, base: bytes) -> bytes:
    """``base`` truncated, with bytes flipped, spliced or duplicated; or plain random bytes."""
    kind = draw(st.sampled_from(["truncate", "flip", "splice", "random", "dup"]))
    if kind == "random":
        return draw(st.binary(max_size=2000))
    data = bytearray(base)
    if kind == "truncate":
        return bytes(data[: draw(st.integers(0, len(data)))])
    if kind == "flip":
        for _ in range(draw(st.integers(1, 8))):
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        return bytes(data)
    if kind == "dup":
        i = draw(st.integers(0, len(data)))
        return bytes(data[:i] + data[:i])
    i = draw(st.integers(0, len(data)))
    return bytes(data[:i]) + draw(st.binary(max_size=200)) + bytes(data[i:])


token = st.one_of(st.sampled_from(HUGE + WEIRD), st.text(max_size=12))


@st.composite
def almost_verl_lines(draw) -> bytes:
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        step = draw(st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(HUGE + WEIRD)))
        fields = draw(st.lists(st.tuples(token, token), max_size=6))
        body = " - ".join([f"step:{step}"] + [f"{k}:{v}" for k, v in fields])
        pre = draw(st.sampled_from(["", "\x1b[36m(TaskRunner pid=1)\x1b[0m ", "(x) ", "\r", " "]))
        end = draw(st.sampled_from(["\n", "\r\n", "\r", "", " - ", " -"]))
        lines.append(pre + body + end)
    return encode("".join(lines))


@st.composite
def almost_openrlhf_lines(draw) -> bytes:
    pieces = [
        "{",
        "}",
        "'k'",
        "'kl'",
        ":",
        ",",
        "nan",
        "inf",
        "-",
        "tensor(",
        "np.float64(",
        ")",
        "[",
        "]",
        "None",
        "True",
        "1e309",
        "0.5",
        "'",
        "\\",
        "lambda: 1",
        "__import__('os')",
        "{'a': 1}",
        "\x00",
        "\ud800",
    ]
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        step = draw(st.one_of(st.integers(0, 10**6).map(str), st.sampled_from(HUGE)))
        body = "".join(draw(st.lists(st.sampled_from(pieces), max_size=30)))
        head = draw(st.sampled_from(["Global step", "Eval at step", "\u2728 Global step"]))
        lines.append(f"INFO x.py:1] {head} {step}: {{{body}\n")
    return encode("".join(lines))


json_value = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@st.composite
def almost_file_logger_lines(draw) -> bytes:
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        obj = {
            "step": draw(st.one_of(st.integers(), st.integers(0, 99), json_value)),
            "data": draw(st.one_of(st.dictionaries(st.text(max_size=10), json_value), json_value)),
        }
        lines.append(json.dumps(obj))
    return encode("\n".join(lines) + draw(st.sampled_from(["\n", ""])))


@st.composite
def almost_rollout_rows(draw) -> bytes:
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        row = {
            "input": draw(st.one_of(st.sampled_from(["a", "b"]), st.text(max_size=20), json_value)),
            "output": "o",
            "score": draw(st.one_of(st.floats(allow_nan=True), st.integers(0, 1), json_value)),
        }
        if draw(st.booleans()):
            row["step"] = draw(st.one_of(st.integers(0, 9), st.integers(), json_value))
        if draw(st.booleans()):
            row["uid"] = draw(json_value)
        lines.append(json.dumps(row, ensure_ascii=draw(st.booleans())))
    return encode("\n".join(lines) + "\n")


# --- veRL console ----------------------------------------------------------------------


@SETTINGS
@given(data=st.one_of(corrupted(CONSOLE), almost_verl_lines()))
def test_fuzz_verl_console(workdir, data):
    p = workdir / "console.log"
    p.write_bytes(data)
    check(p, "verl_console")


@SETTINGS
@given(data=st.one_of(corrupted(FILE_LOG), almost_file_logger_lines()))
def test_fuzz_verl_file(workdir, data):
    p = workdir / "metrics.jsonl"
    p.write_bytes(data)
    check(p, "verl_file")


@SETTINGS
@given(
    files=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    "1.jsonl",
                    "2.jsonl",
                    "007.jsonl",
                    "x.jsonl",
                    "3.json",
                    "99999999999999999999.jsonl",
                ]
            ),
            st.one_of(corrupted(ROLLOUT), almost_rollout_rows()),
        ),
        max_size=3,
    ),
    as_file=st.booleans(),
)
def test_fuzz_verl_rollouts(workdir, files, as_file):
    d = workdir / "rollouts"
    d.mkdir(exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    for name, data in files:
        (d / name).write_bytes(data)
    if as_file and files:
        check(d / files[0][0], "verl_rollouts")
    else:
        check(d, "verl_rollouts")


@SETTINGS
@given(data=st.one_of(corrupted(OPENRLHF), almost_openrlhf_lines()))
def test_fuzz_openrlhf_console(workdir, data):
    p = workdir / "openrlhf.log"
    p.write_bytes(data)
    check(p, "openrlhf_console")


MINE = ("verl_console", "verl_file", "verl_rollouts", "openrlhf_console")


@SETTINGS
@given(
    data=st.one_of(
        corrupted(CONSOLE),
        corrupted(FILE_LOG),
        corrupted(ROLLOUT),
        corrupted(OPENRLHF),
        almost_verl_lines(),
        almost_openrlhf_lines(),
    )
)
def test_fuzz_sniffers_return_a_confidence(workdir, data):
    formats()
    p = workdir / "sniff.bin"
    p.write_bytes(data)
    for name in MINE:
        s = IMPORTERS.get(name).sniff(p, data[:65536])
        assert 0.0 <= s <= 1.0 and not math.isnan(s)


def test_valid_seeds_import(workdir):
    """The seeds the fuzzers corrupt are themselves valid (else the fuzz proves little)."""
    cases = [
        ("console.log", CONSOLE, "verl_console", 2),
        ("m.jsonl", FILE_LOG, "verl_file", 2),
        ("3.jsonl", ROLLOUT, "verl_rollouts", 0),
        ("o.log", OPENRLHF, "openrlhf_console", 2),
    ]
    for name, data, fmt, n_steps in cases:
        p = workdir / name
        p.write_bytes(data)
        run = load(p)
        assert run.manifest.format == fmt
        assert run.n_steps == n_steps
    assert load(workdir / "3.jsonl").groups.n_groups == 2


# --- giant and deep inputs ---------------------------------------------------------------


def test_giant_console_line(workdir):
    p = workdir / "giant.log"
    digits = "1" * 200
    fields = " - ".join(f"k{i}:0.{digits}" for i in range(20_000))  # a 4 MB line
    p.write_text(f"step:1 - {fields}\nstep:2 - k1:2\n")
    run = load(p, fmt="verl_console")
    assert run.n_steps == 2 and len(run.series) == 20_000


def test_giant_line_without_newline_is_torn(workdir):
    p = workdir / "giant_torn.log"
    p.write_text("step:1 - a:1\nstep:2 - " + "a:1 - " * 500_000 + "a")
    run = load(p, fmt="verl_console")
    assert run.steps.tolist() == [1]
    assert any("torn" in w for w in run.warnings)


def test_deeply_nested_json(workdir):
    deep = "[" * 100_000 + "]" * 100_000
    p = workdir / "deep.jsonl"
    p.write_text('{"step": 1, "data": {"a": 1}}\n{"step": 2, "data": ' + deep + "}\n")
    with pytest.raises(InputError, match="line 2"):
        load(p, fmt="verl_file")
    d = workdir / "deep_rollouts"
    d.mkdir()
    (d / "1.jsonl").write_text('{"input": ' + deep + ', "score": 1}\n')
    with pytest.raises(InputError, match="line 1"):
        load(d, fmt="verl_rollouts")


def test_giant_and_deep_openrlhf_dicts(workdir):
    p = workdir / "giant_openrlhf.log"
    big = "{" + ", ".join(f"'k{i}': {i}" for i in range(600_000)) + "}"
    p.write_text(f"Global step 1: {{'kl': 0.1}}\nGlobal step 2: {big}\n")
    with pytest.raises(InputError, match="line 2: status dict longer than"):
        load(p, fmt="openrlhf_console")
    p.write_text("Global step 1: {'a': " + "-" * 200_000 + "1, 'b': " + "(" * 100_000 + "}\n")
    with pytest.raises(InputError, match="line 1"):
        load(p, fmt="openrlhf_console")


N_PATHO = 300_000
PATHOLOGICAL = {
    "newlines": b"\n" * N_PATHO,
    "crlf": b"\r\n" * N_PATHO,
    "spaces": b" " * N_PATHO,
    "escapes": b"\x1b[" * N_PATHO,
    "parens": b"(TaskRunner pid=1) " + b"(" * N_PATHO,
    "digits": b"step:" + b"1" * N_PATHO,
    "dashes": b"step:1 - " + b" - " * N_PATHO,
    "marks": b"verl.trainer Global step 1: " + b"\n" * N_PATHO,
    "repeat": b"step:1 - a:1" + b" " * N_PATHO + b"x cluster]\n",
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_pathological_inputs_do_not_hang(workdir, name):
    """Inputs that make a backtracking regex quadratic finish in seconds (hours if quadratic)."""
    formats()
    p = workdir / f"patho_{name}.log"
    data = PATHOLOGICAL[name]
    p.write_bytes(data)
    t = time.perf_counter()
    for fmt in MINE:
        IMPORTERS.get(fmt).sniff(p, data[:65536])
        check(p, fmt)
    assert time.perf_counter() - t < HANG_SECONDS


override = st.tuples(
    st.sampled_from(
        [
            "actor_rollout_ref.rollout.n",
            "algorithm.adv_estimator",
            "algorithm.use_kl_in_reward",
            "actor_rollout_ref.actor.use_kl_loss",
            "actor_rollout_ref.actor.kl_loss_coef",
            "algorithm.kl_ctrl.kl_coef",
            "x.reward_max",
            "+a.b",
            "--flag",
            "'q",
            "~c",
        ]
    ),
    st.one_of(st.sampled_from(HUGE + WEIRD + ["True", "false", "null", "-3", "0", "5"]), token),
)


@SETTINGS
@given(pairs=st.lists(override, max_size=8), multiline=st.booleans())
def test_fuzz_launch_commands(workdir, pairs, multiline):
    """Any launch command yields a Run whose manifest holds sane types, or an InputError."""
    sep = " \\\n  " if multiline else " "
    args = sep.join(f"{k}={v}" for k, v in pairs)
    flags = sep.join(f"--{k.strip('+~-')} {v}" for k, v in pairs)
    cases = [
        ("verl_console", f"python3 -m verl.trainer.main_ppo {args}\nstep:1 - a:1\n"),
        ("openrlhf_console", f"python3 -m openrlhf.cli.train_ppo_ray {flags}\n"
                             "Global step 1: {'kl': 0.1}\n"),
    ]  # fmt: skip
    for fmt, text in cases:
        p = workdir / f"cmd_{fmt}.log"
        p.write_bytes(encode(text))
        try:
            m = load(p, fmt=fmt).manifest
        except InputError as e:
            assert str(p) in str(e)
            continue
        assert m.group_size is None or (isinstance(m.group_size, int) and m.group_size > 0)
        assert m.kl_coef is None or isinstance(m.kl_coef, float)
        assert m.estimator is None or isinstance(m.estimator, str)


def test_numbers_beyond_float_range(workdir):
    huge = "1" + "0" * 400
    p = workdir / "huge.jsonl"
    p.write_text(f'{{"step": 1, "data": {{"a": {huge}, "b": -{huge}, "c": 1e999}}}}\n')
    check(p, "verl_file")
    d = workdir / "huge_rollouts"
    d.mkdir()
    (d / "1.jsonl").write_text(f'{{"input": "q", "score": {huge}}}\n{{"input": "q", "score": 0}}\n')
    run = load(d, fmt="verl_rollouts")
    assert run.groups.rewards.tolist() == [math.inf, 0.0]
    p = workdir / "huge.log"
    p.write_text(f"python3 -m verl.trainer.main_ppo actor_rollout_ref.rollout.n={huge} "
                 f"algorithm.use_kl_in_reward=True algorithm.kl_ctrl.kl_coef={huge}\n"
                 f"step:1 - a:{huge}\n")  # fmt: skip
    run = load(p, fmt="verl_console")
    # a coefficient beyond float range is not a fact the doctor can use: left unknown
    assert run.manifest.group_size is None and run.manifest.kl_coef is None
    assert run.series["a"].tolist() == [math.inf]

"""Standard input, pipes, FIFOs and compressed files (hardening item 4; issue 9 stdin and gzip).

Every text format gives the same JSON report through ``cat LOG | rlvitals doctor -`` as from
the path (the source may differ); a FIFO never blocks; nothing is lost from a pipe.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals import InputError
from rlvitals.importers import load
from rlvitals.importers._catalogue import CATALOGUE
from rlvitals.importers._source import FIFO_WAIT_S

RUN = F.simulate(60)

TEXT_FORMATS = tuple(
    sorted(name for name, (_, pre, _) in CATALOGUE.items() if pre.text or pre.starts)
)
"""Every importer of a text format, from the formats' declarations (a pre-check that asks for text;
a new one without a fixture in :func:`_text_fixture` fails) (the binary ones: parquet, SQLite, TensorBoard, W&B's
``.wandb``, MLflow stores, the recording, read files by path and are not streamed)."""


OWN_FIXTURES = Path(__file__).parent / "importer_fixtures"
"""A format's own fixture (``<format>/<file>`` with ``expected.json``: scripts/new_importer.py)."""


def _own_fixtures() -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in OWN_FIXTURES.glob("*/expected.json")}


def _text_fixture(d, fmt):
    """One file of ``fmt`` from its byte-faithful writer (``tests/_format_producers.py``), or
    the format's own fixture (``tests/importer_fixtures/<format>/``)."""
    d.mkdir(parents=True, exist_ok=True)
    own = _own_fixtures().get(fmt)
    if own is not None:
        return Path(shutil.copy(OWN_FIXTURES / fmt / own["file"], d / own["file"]))
    if fmt == "jsonl":
        return F.write_generic(d / "g.jsonl", RUN)
    if fmt == "csv":
        return F.write_generic(d / "g.csv", RUN, csv=True)
    if fmt == "groups_jsonl":
        return F.write_groups_jsonl(d / "groups.jsonl", RUN)
    if fmt == "verl_console":
        return F.write_verl_console(d / "verl.log", RUN)
    if fmt == "verl_file":
        return F.write_verl_file(d / "exp.jsonl", RUN)
    if fmt == "verl_rollouts":
        return F.write_verl_rollouts(d / "12.jsonl", RUN[11])
    if fmt == "openrlhf_console":
        return F.write_openrlhf(d / "openrlhf.log", RUN)
    if fmt == "trl_state":
        return F.write_trl_state(d / "trainer_state.json", RUN)
    if fmt == "trl_console":
        return F.write_trl_console(d / "trl.log", RUN)
    if fmt == "trl_log_history":
        return F.write_log_history(d / "lh.json", [RUN])
    if fmt in ("ms_swift", "ms_swift_completions"):
        F.write_ms_swift(d / "swift", RUN)
        return d / "swift" / ("logging.jsonl" if fmt == "ms_swift" else "completions.jsonl")
    if fmt == "nemo_rl":
        return F.write_nemo_rl(d / "exp_001", RUN[:3]) / "train_data_step2.jsonl"
    if fmt == "prime_rl":
        return F.write_prime_rl(d / "metrics.jsonl", RUN)
    if fmt == "prime_rl_traces":
        out = F.write_prime_rl_traces(d / "out", RUN[:4])
        return out / "traces" / "step_2" / "train" / "traces.jsonl"
    if fmt == "skyrl_console":
        return F.write_skyrl(d / "sky.log", RUN)
    if fmt == "slime_console":
        return F.write_slime(d / "slime.log", RUN)
    if fmt == "wandb_chart":
        return F.write_wandb_chart(d / "chart.csv", RUN)
    if fmt == "wandb_history":
        F.history_frame(RUN).to_csv(d / "hist.csv")
        return d / "hist.csv"
    raise AssertionError(fmt)


def _doctor_in_process(args, capsys, monkeypatch, stdin: bytes | None = None):
    """``rlvitals doctor ARGS --format json`` through ``main``; ``stdin`` arrives through a
    real pipe (``os.pipe``), written by another thread as ``cat`` would."""
    from rlvitals.cli import main

    feeder = None
    if stdin is not None:
        r, w = os.pipe()

        def feed():
            with os.fdopen(w, "wb") as f:
                f.write(stdin)

        feeder = threading.Thread(target=feed)
        feeder.start()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(os.fdopen(r, "rb")))
    capsys.readouterr()
    try:
        rc = main(["doctor", *args, "--format", "json", "--fail-on", "never"])
    finally:
        if feeder is not None:
            feeder.join()
            sys.stdin.close()
    out, err = capsys.readouterr()
    assert rc == 0, err[-2000:]
    return json.loads(out)


def _doctor(args, stdin=None):
    cmd = [
        sys.executable,
        "-m",
        "rlvitals",
        "doctor",
        *args,
        "--format",
        "json",
        "--fail-on",
        "never",
    ]
    out = subprocess.run(cmd, input=stdin, capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    return json.loads(out.stdout)


def _same(a, b, paths):
    text_a, text_b = json.dumps(a, sort_keys=True), json.dumps(b, sort_keys=True)
    for p in paths:
        text_a = text_a.replace(str(p), "SRC")
        text_b = text_b.replace(str(p), "SRC")
    return text_a.replace('"<stdin>"', '"SRC"').replace("<stdin>", "SRC") == text_b


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_pipe_gives_the_same_report_as_the_path(fmt, tmp_path, capsys, monkeypatch):
    """Issue 9, done when: ``cat LOG | rlvitals doctor -`` gives the JSON report of
    ``rlvitals doctor LOG``, gzip included, for every text format (but the source)."""
    src = _text_fixture(tmp_path / "made", fmt)
    alone = tmp_path / "alone"  # a stream has no siblings (args.json, ...) and no file name
    alone.mkdir()
    path = alone / "log"
    path.write_bytes(src.read_bytes())
    direct = _doctor_in_process([str(path)], capsys, monkeypatch)
    piped = _doctor_in_process(["-"], capsys, monkeypatch, stdin=path.read_bytes())
    assert direct["run"]["format"] == fmt == piped["run"]["format"]
    assert piped["run"]["source"] == "<stdin>"
    direct["run"]["source"] = piped["run"]["source"] = None
    assert _same(piped, direct, [path])
    zipped = _doctor_in_process(["-"], capsys, monkeypatch, stdin=gzip.compress(path.read_bytes()))
    zipped["run"]["source"] = None
    assert _same(zipped, direct, [path])
    gz = F.gzip_copy(path, tmp_path / "log.gz")
    from_gz = _doctor_in_process([str(gz)], capsys, monkeypatch)
    from_gz["run"]["source"] = None
    assert _same(from_gz, direct, [path, gz])


INSPECT = {
    # format: (step key (a part of it), trainer, G, first collapse evidence, steps first-last)
    "jsonl": ("step", None, None, "zero_std_frac", (1, 60)),
    "csv": ("step", None, None, "zero_std_frac", (1, 60)),
    "groups_jsonl": ("step", None, 4, "per-group rewards", (1, 60)),
    "verl_console": ("step:N", "verl", 4, "adv_max/adv_min", (1, 60)),
    "verl_file": ("step", "verl", None, "adv_max/adv_min", (1, 60)),
    "verl_rollouts": ("step", "verl", 4, "per-group rewards", (12, 12)),
    "openrlhf_console": ("Global step", "openrlhf", 4, "group_reward_std_mean", (1, 60)),
    "trl_state": ("step", "trl", None, "zero_std_frac", (1, 60)),
    "trl_console": (
        "the training bar's position at each line",  # a frame of its step before each line
        "trl",
        None,
        "zero_std_frac",
        (2, 60),
    ),
    "trl_log_history": ("step", "trl", None, "zero_std_frac", (1, 60)),
    "ms_swift": ("global_step/max_steps", "ms_swift", 4, "per-group rewards", (1, 60)),
    "ms_swift_completions": ("step", "ms_swift", 4, "per-group rewards", (1, 60)),
    "nemo_rl": ("train_data_step{N}", "nemo_rl", 4, "per-group rewards", (2, 2)),
    "prime_rl": ("step", "prime_rl", None, "solve_all_frac", (0, 59)),
    "prime_rl_traces": ("traces/step_<n>", "prime_rl", 4, "per-group rewards", (2, 2)),
    "skyrl_console": ("Step N", "skyrl", 4, "filtered_groups", (1, 60)),
    "slime_console": ("rollout/step", "slime", 4, "rollout/zero_std/count_", (0, 59)),
    "wandb_chart": ("x axis 'Step'", None, None, "zero_std_frac", (1, 60)),
    "wandb_history": ("train/global_step", "trl", None, "zero_std_frac", (1, 60)),
}
INSPECT.update(
    (fmt, (e["step_key"], e["trainer"], e["group_size"], e["evidence"], tuple(e["steps"])))
    for fmt, e in _own_fixtures().items()
)
"""What ``rlvitals inspect`` must say of each fixture of :func:`_text_fixture` (G only where
the log states it: a TRL log does not, veRL's printed config does)."""


def test_every_text_format_is_inspected():
    assert set(INSPECT) == set(TEXT_FORMATS)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_inspect_names_the_step_axis_trainer_g_and_collapse_evidence(fmt, tmp_path, capsys):
    """Issue 9, done when: ``rlvitals inspect`` shows the right step axis, the trainer, G and
    the collapse evidence used, for every format."""
    from rlvitals.cli import main

    key, trainer, g, evidence, (first, last) = INSPECT[fmt]
    path = _text_fixture(tmp_path, fmt)
    capsys.readouterr()
    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == fmt
    assert key in (info["step_key"] or ""), info["step_key"]
    assert (info["steps"]["first"], info["steps"]["last"]) == (first, last)
    assert info["trainer"] == trainer
    assert info["group_size"] == g
    assert info["collapse_evidence"] and info["collapse_evidence"][0].startswith(evidence)
    assert main(["inspect", str(path)]) == 0  # the text form says the same
    text = capsys.readouterr().out
    assert f"collapse data  {info['collapse_evidence'][0]}" in text
    assert "step" in text and (trainer is None or trainer in text)


@pytest.mark.slow
def test_cat_into_the_cli_process(tmp_path):
    """The same through a real ``rlvitals`` process reading its standard input."""
    src = _text_fixture(tmp_path / "made", "verl_console")
    path = tmp_path / "log"
    path.write_bytes(src.read_bytes())
    direct = _doctor([str(path)])
    piped = _doctor(["-"], stdin=gzip.compress(path.read_bytes()))
    direct["run"]["source"] = piped["run"]["source"] = None
    assert _same(piped, direct, [path])


def test_gzip_and_zstd_files(tmp_path):
    src = F.write_trl_console(tmp_path / "trl.log", RUN)
    gz = F.gzip_copy(src, tmp_path / "trl.log.gz")
    assert load(gz).n_steps == load(src).n_steps == 30
    zstd = pytest.importorskip("zstandard")
    zs = tmp_path / "trl.log.zst"
    zs.write_bytes(zstd.ZstdCompressor().compress(src.read_bytes()))
    assert load(zs).n_steps == 30
    bad = tmp_path / "bad.gz"
    bad.write_bytes(gzip.compress(src.read_bytes())[:200])
    with pytest.raises(InputError):
        load(bad)


def test_process_substitution_keeps_the_first_64_kib(tmp_path):
    """A pipe read by path (/dev/fd/N): the sniffed prefix is replayed, nothing is dropped."""
    rows = "".join(
        json.dumps({"step": s, "reward": 0.5, "pad": "x" * 200}) + "\n" for s in range(1, 2001)
    )
    src = tmp_path / "big.jsonl"
    src.write_text(rows)
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb") as f:
            f.write(src.read_bytes())

    t = threading.Thread(target=feed)
    t.start()
    try:
        run = load(f"/dev/fd/{r}")
    finally:
        t.join()
        os.close(r)
    assert run.steps.tolist() == list(range(1, 2001))


def test_fifo_never_hangs(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    for fmt in (None, "verl_console", "openrlhf_console", "jsonl"):
        t0 = time.monotonic()
        with pytest.raises(InputError, match="FIFO with no writer"):
            load(fifo, fmt)
        assert time.monotonic() - t0 < FIFO_WAIT_S + 5


def test_fifo_with_a_writer_is_read(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    data = "".join(json.dumps({"step": s, "reward": 0.5}) + "\n" for s in range(1, 31)).encode()

    def feed():
        with open(fifo, "wb") as f:
            f.write(data)

    t = threading.Thread(target=feed)
    t.start()
    run = load(fifo)
    t.join()
    assert run.n_steps == 30


def test_fifo_inside_a_tensorboard_or_mlruns_folder_is_skipped(tmp_path):
    import rlvitals_tests_binary_producers as B

    tb = tmp_path / "tb"
    tb.mkdir()
    os.mkfifo(tb / "events.out.tfevents.1.host")
    with pytest.raises(InputError):
        load(tb, "tensorboard")
    ml = tmp_path / "mlruns" / "0" / "abc"
    (ml / "metrics").mkdir(parents=True)
    (ml / "meta.yaml").write_text("run_id: abc\nstart_time: ²\n")
    (ml.parent / "meta.yaml").write_text("experiment_id: 0\nname: Default\n")
    (ml / "metrics" / "reward").write_text("1700000000000 0.5 1\n")
    os.mkfifo(ml / "metrics" / "kl")
    run = load(tmp_path / "mlruns", "mlflow")  # ² as start_time: no traceback either
    assert run.has("reward_mean")
    assert B is not None


def test_a_superscript_step_is_an_input_error(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("step,reward\n²,0.5\n")
    with pytest.raises(InputError, match="not an integer step"):
        load(p)


def test_stdin_terminal_is_refused(monkeypatch):
    class Tty:
        closed = False

        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    with pytest.raises(InputError, match="terminal"):
        load("-")


def test_verl_sniffer_is_linear(tmp_path):
    """A line of 16,000 colour codes took seconds (two adjacent ``(?:ESC...)*`` groups)."""
    p = tmp_path / "esc.log"
    p.write_bytes(
        b"verl\n"
        + b"\x1b[0m" * 16000
        + b"\n"
        + (b"(TaskRunner pid=1) " + b"\x1b[36m" * 4000 + b"\n") * 30
    )
    t0 = time.monotonic()
    with pytest.raises(InputError):
        load(p)
    assert time.monotonic() - t0 < 2.0

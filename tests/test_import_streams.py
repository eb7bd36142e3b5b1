"""Standard input, pipes, FIFOs and compressed files (hardening item 4; issue 9 stdin and gzip).

Every text format gives the same JSON report through ``cat LOG | rlvitals doctor -`` as from
the path (the source may differ); a FIFO never blocks; nothing is lost from a pipe.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time

import pytest
import rlvitals_tests_format_producers as F  # loaded by conftest.py

from rlvitals import InputError
from rlvitals.importers import load
from rlvitals.importers._source import FIFO_WAIT_S

RUN = F.simulate(60)


def _texts(tmp_path):
    import pandas as pd

    d = tmp_path
    rows = "".join(
        json.dumps({"step": s, "reward": s / 60, "frac_reward_zero_std": 0.1}) + "\n"
        for s in range(1, 61)
    )
    (d / "g.jsonl").write_text(rows)
    pd.DataFrame({"step": range(1, 61), "reward": [s / 60 for s in range(1, 61)]}).to_csv(
        d / "g.csv", index=False
    )
    F.history_frame(RUN).to_csv(d / "hist.csv")
    return {
        "jsonl": d / "g.jsonl",
        "csv": d / "g.csv",
        "trl_console": F.write_trl_console(d / "trl.log", RUN),
        "trl_log_history": F.write_log_history(d / "lh.json", [RUN]),
        "ms_swift": F.write_ms_swift(d / "swift", RUN),
        "prime_rl": F.write_prime_rl(d / "metrics.jsonl", RUN),
        "skyrl_console": F.write_skyrl(d / "sky.log", RUN),
        "slime_console": F.write_slime(d / "slime.log", RUN),
        "wandb_chart": F.write_wandb_chart(d / "chart.csv", RUN),
        "wandb_history": d / "hist.csv",
        "nemo_rl": F.write_nemo_rl(d / "exp_001", RUN[:3]) / "train_data_step2.jsonl",
    }


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


@pytest.mark.slow
def test_pipe_gives_the_same_report_for_every_text_format(tmp_path):
    for fmt, src in _texts(tmp_path).items():
        alone = tmp_path / "alone" / fmt  # a stream has no siblings (args.json, ...) or name
        alone.mkdir(parents=True)
        path = alone / "log"
        path.write_bytes(src.read_bytes())
        direct = _doctor([str(path)])
        piped = _doctor(["-"], stdin=path.read_bytes())
        assert direct["run"]["format"] == fmt == piped["run"]["format"], fmt
        direct["run"]["source"] = piped["run"]["source"] = None
        assert _same(piped, direct, [path]), fmt
        gz = F.gzip_copy(path, tmp_path / (path.name + ".gz"))
        zipped = _doctor(["-"], stdin=gz.read_bytes())
        zipped["run"]["source"] = None
        assert _same(zipped, direct, [path]), fmt


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

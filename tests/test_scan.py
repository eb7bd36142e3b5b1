"""``rlvitals scan`` over a folder holding every format the importers read, written by the real
writers where the suite has them (the labelled corpus's writers, the trainers' byte-faithful
producers, wandb and mlflow through ``tests/_binary_producers.py``, trackio in a subprocess),
with three multi-run stores (an MLflow SQLite store and file store, a W&B folder, a trackio
database) and logs holding several runs. Each run must be listed once, with the trainer and
the step axis its importer reads when the run is read alone."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import rlvitals_tests_binary_producers as P
import rlvitals_tests_format_producers as F

from rlvitals.cli import main
from rlvitals.importers import load
from rlvitals.scan import ScanRow, discover, render_scan, scan
from rlvitals.vitals import compute_vitals

CORPUS_FORMATS = (
    "trl_state",
    "jsonl",
    "csv",
    "groups_jsonl",
    "verl_console",
    "verl_file",
    "openrlhf_console",
    "tensorboard",
    "recording",
)
TRACKIO = textwrap.dedent(
    """
    import trackio
    trackio.init(project="proj", name="trl-run", config={"num_generations": 4, "beta": 0.0})
    for s in range(1, 41):
        trackio.log({"train/reward": s / 40, "train/frac_reward_zero_std": 0.25,
                     "train/global_step": 2 * s})
    trackio.finish()
    trackio.init(project="proj", name="verl-run", config={"actor_rollout_ref": {"rollout": {"n": 5}}})
    for s in range(1, 36):
        trackio.log({"critic/score/mean": 0.1 + s / 100}, step=s)
    trackio.finish()
    """
)

OWN_FIXTURES = Path(__file__).parent / "importer_fixtures"
"""A format's own fixture (``<format>/<file>`` with ``expected.json``: scripts/new_importer.py),
scanned under ``fixtures/<format>/``."""


def _own_fixtures() -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in OWN_FIXTURES.glob("*/expected.json")}


# label (relative to the tree) -> (format, trainer, steps); wandb run folders are named by the
# second they started, so they are matched by their prefix
EXPECTED = {
    "corpus/csv/metrics.csv": ("csv", None, 120),
    "corpus/groups_jsonl/groups.jsonl": ("groups_jsonl", None, 120),
    "corpus/jsonl/metrics.jsonl": ("jsonl", None, 120),
    "corpus/openrlhf_console/openrlhf.log": ("openrlhf_console", "openrlhf", 120),
    "corpus/recording/recording": ("recording", None, 120),
    "corpus/tensorboard/runs": ("tensorboard", "trl", 120),
    "corpus/trl_state": ("trl_state", "trl", 120),
    "corpus/verl_console/verl.log": ("verl_console", "verl", 120),
    "corpus/verl_file/verl_metrics.jsonl": ("verl_file", "verl", 120),
    "mlflow/mlflow.db [warmup]": ("mlflow", "trl", 1),
    "mlflow/mlflow.db [main]": ("mlflow", "trl", len(P.STEPS)),
    "mlflow/mlruns [main]": ("mlflow", "trl", len(P.STEPS)),
    "mlflow/mlruns [warmup]": ("mlflow", "trl", 1),
    "text/log_history.json [1]": ("trl_log_history", "trl", 40),
    "text/log_history.json [2]": ("trl_log_history", "trl", 50),
    "text/plain.jsonl": ("jsonl", None, 60),
    "text/plain_copy.jsonl.gz": ("jsonl", None, 60),
    "text/prime_rl.jsonl": ("prime_rl", "prime_rl", 60),
    "text/prime_out": ("prime_rl_traces", "prime_rl", 20),
    "text/skyrl.log": ("skyrl_console", "skyrl", 60),
    "text/slime.log": ("slime_console", "slime", 60),
    "text/trl_console.log": ("trl_console", "trl", 30),
    "text/wandb_export.csv [brisk-pond-1]": ("wandb_chart", None, 60),
    "text/wandb_export.csv [calm-sea-2]": ("wandb_chart", None, 60),
    "text/ms_swift/logging.jsonl": ("ms_swift", "ms_swift", 60),
    "text/nemo [exp_001]": ("nemo_rl", "nemo_rl", 60),
    "text/nemo [exp_002]": ("nemo_rl", "nemo_rl", 45),
    "text/rollouts": ("verl_rollouts", "verl", 40),
    "trackio/proj.db [trl-run]": ("trackio", "trl", 40),
    "trackio/proj.db [verl-run]": ("trackio", "verl", 35),
    "wandb/trlstyle/wandb [offline-run-": ("wandb", "trl", 3),
    "wandb/wandb [offline-run-@1": ("wandb", None, 1),
    "wandb/wandb [offline-run-@2": ("wandb", "trl", 327),
}
EXPECTED.update(
    (f"fixtures/{fmt}/{e['file']}", (e["format"], e["trainer"], e["n_steps"]))
    for fmt, e in _own_fixtures().items()
)


def _build(root: Path) -> Path:
    from rlvitals_corpus import generate
    from rlvitals_corpus.writers import write

    for i, fmt in enumerate(CORPUS_FORMATS):
        view = "groups" if fmt in ("groups_jsonl", "recording") else "trl"
        lr = generate("collapse_identical", seed=i, steps=120, onset=90, view=view)
        write(lr, fmt, root / "corpus" / fmt)
    run = F.simulate(60, g=4)
    t = root / "text"
    t.mkdir()
    F.write_trl_console(t / "trl_console.log", run)
    F.write_log_history(t / "log_history.json", [F.simulate(40), F.simulate(50, seed=1)])
    F.write_ms_swift(t / "ms_swift", run)
    F.write_nemo_rl(t / "nemo" / "exp_001", run)
    F.write_nemo_rl(t / "nemo" / "exp_002", F.simulate(45, seed=2))
    F.write_prime_rl(t / "prime_rl.jsonl", run)
    F.write_prime_rl_traces(t / "prime_out", run[:20])  # its metrics.jsonl is not a run apart
    F.write_skyrl(t / "skyrl.log", run)
    # its own run: the same run in two formats in one folder is one row (test_scan_pages.py)
    F.write_slime(t / "slime.log", F.simulate(60, g=4, seed=5))
    (t / "rollouts").mkdir()
    for st in run[:40]:
        F.write_verl_rollouts(t / "rollouts" / f"{st.step}.jsonl", st)
    F.write_wandb_chart(t / "wandb_export.csv", run, runs=("brisk-pond-1", "calm-sea-2"))
    F.gzip_copy(F.write_generic(t / "plain.jsonl", run), t / "plain_copy.jsonl.gz")
    (t / "README.md").write_text("# notes\n")
    for fmt, e in _own_fixtures().items():
        (root / "fixtures" / fmt).mkdir(parents=True)
        shutil.copy(OWN_FIXTURES / fmt / e["file"], root / "fixtures" / fmt / e["file"])
    (t / "config.json").write_text('{"hidden_size": 32, "vocab_size": 100}\n')
    for kind in ("wandb", "mlflow"):
        shutil.copytree(P.produced(kind), root / kind, ignore=shutil.ignore_patterns("home"))
    home = root.parent / "trackio-home"
    env = {**os.environ, "HOME": str(home), "TRACKIO_DIR": str(root / "trackio")}
    env["HF_HUB_OFFLINE"] = "1"
    subprocess.run(
        [sys.executable, "-c", TRACKIO], env=env, check=True, timeout=300, capture_output=True
    )
    return root


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    P.produced("wandb", "mlflow")
    return _build(tmp_path_factory.mktemp("scan") / "tree")


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        h.update(f"{p.relative_to(root)} {st.st_size} {st.st_mtime_ns}".encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def _label(row: ScanRow, root: Path) -> str:
    """The row's label relative to ``root`` (the scan shows paths relative to its root)."""
    label = row.label
    return label[len(str(root)) + 1 :] if label.startswith(str(root) + "/") else label


def _match(labels: list[str]) -> dict[str, str]:
    """Expected label -> the scanned label (wandb run folders by prefix, the n-th after @)."""
    out = {}
    for want in EXPECTED:
        prefix, _, nth = want.partition("@")
        if not prefix.endswith("-"):
            assert want in labels, f"{want}: not scanned (scanned: {labels})"
            out[want] = want
            continue
        hits = [x for x in labels if x.startswith(prefix)]
        k = int(nth) - 1 if nth else 0
        assert len(hits) > k, f"{want}: not scanned (scanned: {labels})"
        out[want] = hits[k]
    return out


def test_every_format_and_every_store_run_is_listed_once(tree, tmp_path):
    before = _digest(tree)
    result = scan([tree], jobs=2, cache_dir=tmp_path / "cache")
    labels = [_label(r, tree) for r in result.rows]
    assert len(labels) == len(set(labels)) == len(EXPECTED), labels
    match = _match(labels)
    rows = {_label(r, tree): r for r in result.rows}
    for want, (fmt, trainer, steps) in EXPECTED.items():
        r = rows[match[want]]
        assert r.error is None, (want, r.error)
        assert (r.format, r.trainer, r.steps) == (fmt, trainer, steps), want
        # the step axis: what the importer says when the run is read alone
        alone = load(r.path, run=r.run_id)
        assert r.step_key == alone.manifest.step_key, want
        steps = compute_vitals(alone).steps
        assert (r.first_step, r.last_step) == (int(steps[0]), int(steps[-1])), want
        assert r.source == alone.manifest.source, want
    # the README and the model config are not runs
    assert result.skipped >= 2 and not any("README" in x or "config.json" in x for x in labels)
    # nothing in the scanned tree was touched; the cache lives where it was told to
    assert _digest(tree) == before
    assert (tmp_path / "cache" / "scan.sqlite3").exists()


def test_overlapping_paths_and_links_still_list_each_run_once(tree, tmp_path):
    link = tmp_path / "again"
    link.symlink_to(tree / "corpus", target_is_directory=True)
    found = discover(
        [
            tree / "corpus",
            tree / "corpus" / "trl_state" / "trainer_state.json",  # inside a folder target
            tree / "mlflow",
            tree / "mlflow" / "mlruns" / "0",  # a run folder of the file store named again
            link,
        ]
    )
    paths = [os.path.realpath(t.path) for t in found.targets]
    assert len(paths) == len(set(paths)) == len(CORPUS_FORMATS) + 2


def test_a_warm_rescan_reads_nothing_and_a_changed_run_is_read_again(tree, tmp_path):
    work = tmp_path / "work"
    shutil.copytree(tree / "text", work)
    cache = tmp_path / "cache"
    cold = scan([work], jobs=2, cache_dir=cache)
    assert cold.read == len(cold.rows) and cold.cached == 0
    warm = scan([work], jobs=2, cache_dir=cache)
    assert warm.read == 0 and warm.cached == len(cold.rows)
    assert warm.table() == cold.table()
    # one file grows: only its run is read again
    with open(work / "plain.jsonl", "a") as f:
        f.write(json.dumps({"step": 61, "reward": 0.97, "frac_reward_zero_std": 0.9}) + "\n")
    again = scan([work], jobs=2, cache_dir=cache)
    assert again.read == 1 and again.cached == len(cold.rows) - 1
    row = next(r for r in again.rows if r.path.endswith("plain.jsonl"))
    assert row.steps == 61
    # a multi-run log that changes: both of its runs are read again
    F.write_log_history(work / "log_history.json", [F.simulate(40), F.simulate(55, seed=1)])
    again = scan([work], jobs=2, cache_dir=cache)
    assert again.read == 2
    assert [r.steps for r in again.rows if r.path.endswith("log_history.json")] == [40, 55]
    fresh = scan([work], jobs=2, cache=False)
    assert fresh.read == len(fresh.rows) and fresh.table() == again.table()


def test_other_settings_are_not_served_from_the_cache(tree, tmp_path):
    from rlvitals.doctor import DoctorConfig

    cache = tmp_path / "cache"
    first = scan([tree / "corpus"], jobs=1, cache_dir=cache)
    only = scan(
        [tree / "corpus"], jobs=1, cache_dir=cache, config=DoctorConfig(select=["KL_BLOWUP"])
    )
    assert only.cached == 0 and only.read == len(first.rows)
    assert all("DEGENERATE_GROUPS" not in r.finding_ids for r in only.rows)


def test_the_cli_and_another_fail_on_are_served_from_the_library_cache(tree, tmp_path, capsys):
    """What sets the exit code is not part of a row: ``rlvitals scan --fail-on never`` after a
    library scan with the defaults reads nothing again (the benchmark's warm CLI process read
    every run before)."""
    from rlvitals.cli import main

    cache = tmp_path / "cache"
    first = scan([tree / "corpus"], jobs=1, cache_dir=cache)
    argv = ["scan", str(tree / "corpus"), "--cache-dir", str(cache), "--jobs", "1"]
    assert main([*argv, "--fail-on", "never", "--no-progress", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["read"] == 0 and out["summary"]["cached"] == len(first.rows)


def test_unreadable_runs_are_rows_and_the_scan_goes_on(tmp_path):
    F.write_generic(tmp_path / "good.jsonl", F.simulate(40))
    (tmp_path / "torn").mkdir()
    (tmp_path / "torn" / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss"')
    empty = tmp_path / "empty.log"
    empty.write_text("")
    named = tmp_path / "notes.bin"
    named.write_bytes(b"\x00\x01\x02 not a log")
    result = scan([tmp_path, named], jobs=2, cache=False)
    by = {Path(r.path).name: r for r in result.rows}
    assert by["good.jsonl"].error is None and by["good.jsonl"].steps == 40
    assert by["torn"].error and "trainer_state.json" in by["torn"].error
    assert "\n" not in by["torn"].error
    # a file named on the command line is a row even when no importer reads it
    assert by["notes.bin"].error and "unknown format" in by["notes.bin"].error
    assert "empty.log" not in by  # met in a walk and read by nothing: skipped
    assert by["torn"].status == "error" and by["torn"].fails("never") is False
    assert by["torn"].fails("critical") and not by["torn"].fails("critical", allow_unjudged=True)


def _sniff_crash(path: Path, head: bytes) -> float:
    return 0.99 if head.startswith(b"CRASHLOG") else 0.0


def _load_crash(path: Path, progress=None):
    os.kill(os.getpid(), 9)  # the reader's process dies (the OOM killer, a segfault in C)


def test_a_reader_process_that_dies_is_that_runs_row_only(tmp_path):
    from rlvitals.importers import IMPORTERS, Importer, register

    if "rlvitals_test_crash" not in IMPORTERS:
        register(Importer("rlvitals_test_crash", "dies", _sniff_crash, _load_crash))
    for i in range(5):
        F.write_generic(tmp_path / f"run{i}.jsonl", F.simulate(35 + i))
    (tmp_path / "crash.log").write_text("CRASHLOG\n")
    result = scan([tmp_path], jobs=2, cache=False)
    by = {Path(r.path).name: r for r in result.rows}
    assert len(by) == 6
    assert "died" in by["crash.log"].error
    assert [by[f"run{i}.jsonl"].steps for i in range(5)] == [35, 36, 37, 38, 39]


def test_scan_cli_formats_exit_codes_and_sort(tree, tmp_path, capsys):
    corpus = str(tree / "corpus")
    cache = ["--cache-dir", str(tmp_path / "cache"), "--no-progress"]
    assert main(["scan", corpus, *cache, "--fail-on", "never"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["run", "format", "trainer"]
    assert "9 run(s)" in out
    assert main(["scan", corpus, *cache]) == 1  # the corpus runs collapse: warnings
    capsys.readouterr()
    assert main(["scan", corpus, *cache, "--format", "csv", "--sort", "acr_100", "--reverse"]) == 1
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    acr = [float(r["acr_100"]) for r in rows]
    assert len(rows) == 9 and acr == sorted(acr, reverse=True)
    out = tmp_path / "scan.json"
    assert main(["scan", corpus, *cache, "-o", str(out), "--fail-on", "never"]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == 1 and len(doc["runs"]) == 9 and doc["summary"]["cached"] == 9
    assert main(["scan", corpus, *cache, "--format", "md", "--fail-on", "never"]) == 0
    md = capsys.readouterr().out
    assert md.count("\n| ") == 10 and "| run | format |" in md
    # the store's short runs are not judged: exit 2 unless accepted
    assert main(["scan", str(tree / "mlflow"), *cache]) == 2
    assert "could not be read or judged" in capsys.readouterr().err
    assert main(["scan", str(tree / "mlflow"), *cache, "--allow-unjudged"]) == 1


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["scan", "/no/such/dir"], "/no/such/dir: no such file or directory"),
        (["scan", "/tmp/rlvitals-no-such-*-dir"], "no file or folder matches this pattern"),
        (["scan", "-"], "for standard input use doctor"),
        (["scan", "{empty}"], "no run found"),
        (["scan", "{run}", "-o", "{run}/report.html"], "never writes into a run"),
        (["scan", "{run}", "-o", "{empty}/x.pdf"], "no format for this file name"),
        (["scan", "{run}", "--jobs", "0"], "--jobs must be 1 or more"),
    ],
)
def test_scan_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, says):
    (tmp_path / "empty").mkdir()
    run = tmp_path / "run"
    run.mkdir()
    F.write_trl_state(run / "trainer_state.json", F.simulate(40))
    argv = [a.format(empty=tmp_path / "empty", run=run) for a in argv]
    assert main([*argv, "--no-cache", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1, err
    assert not (run / "report.html").exists()


def test_globs_find_runs_and_skip_what_no_importer_reads(tree, tmp_path):
    result = scan([str(tree / "corpus" / "*" / "*.jsonl")], jobs=1, cache=False)
    names = sorted(Path(r.path).name for r in result.rows)
    assert names == ["groups.jsonl", "metrics.jsonl", "verl_metrics.jsonl"]
    result = scan([str(tree / "text" / "*")], jobs=1, cache=False)
    assert not any(Path(r.path).name in ("README.md", "config.json") for r in result.rows)
    assert any(r.path.endswith("nemo") for r in result.rows)


def test_the_text_table_fits_a_terminal_and_shows_no_escape(tmp_path):
    odd = tmp_path / ("run\x1b[31mred" + "-long" * 8)  # paths are shown relative to the root
    odd.mkdir()
    F.write_generic(odd / "log.jsonl", F.simulate(40))
    result = scan([tmp_path], jobs=1, cache=False)
    text = render_scan(result, "text", width=100)
    assert "\x1b" not in text and "…" in text
    assert max(len(line) for line in text.splitlines()[:3]) <= 100
    wide = render_scan(result, "text")
    assert "\x1b" not in wide and "run\\x1b[31mred" in wide


def _extra_fixtures(d: Path) -> dict[str, Path]:
    """Files of the declared formats the scanned tree holds none of (see the test below)."""
    d.mkdir()
    F.history_frame(F.simulate(20)).to_csv(d / "history.csv")
    (d / "completions_00001.parquet").write_bytes(b"PAR1" + b"\0" * 60 + b"PAR1")
    return {"wandb_history": d / "history.csv", "trl_completions": d / "completions_00001.parquet"}


def test_every_declared_format_has_a_fixture_and_its_precheck_passes_what_its_sniffer_takes(
    tree, tmp_path
):
    """Issue 24: a pre-check (declared beside its sniffer, copied into the catalogue) must never
    reject what the sniffer accepts, or sniffing says "unknown format" for a file its importer
    reads. Checked for every importer on every file and folder of the tree; and every declared
    format is claimed by at least one of them."""
    from rlvitals.importers import SNIFF_BYTES, get_importer
    from rlvitals.importers._catalogue import CATALOGUE
    from rlvitals.importers._source import read_prefix

    extra = _extra_fixtures(tmp_path / "extra")
    paths = [tree, *sorted(tree.rglob("*")), *extra.values()]
    claimed: set[str] = set()
    for p in paths:
        is_dir = p.is_dir()
        head = b"" if is_dir else read_prefix(p, SNIFF_BYTES)
        if not is_dir and not head:
            continue
        for name, (_, pre, _) in CATALOGUE.items():
            try:
                score = get_importer(name).sniff(p, head)
            except Exception:
                continue  # a sniffer that cannot decide says "not mine"
            if score > 0:
                claimed.add(name)
                passes = pre.dirs if is_dir else pre(p, head)
                assert passes, f"{name}'s pre-check rejects {p.relative_to(p.anchor)}"
    assert claimed == set(CATALOGUE), f"no fixture for {sorted(set(CATALOGUE) - claimed)}"

"""The quality bar on a CI-sized labelled corpus, read back through the importers.

Targets (issue 4): collapse-family recall >= 0.95, false alarms on healthy runs <= 5%, median
onset error <= 3 logged steps. ``benchmarks/quality.py`` runs the full-size corpus over several
seeds and prints the same numbers.
"""

from __future__ import annotations

import pytest

from rlvitals_corpus.quality import evaluate
from rlvitals_corpus.scenarios import collapse_suite

SEED = 7  # not a seed the detectors were tuned on
FORMATS = {
    "trl_state",
    "jsonl",
    "csv",
    "groups_jsonl",
    "verl_console",
    "verl_file",
    "openrlhf_console",
    "tensorboard",
    "recording",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return evaluate(collapse_suite("ci", SEED), tmpdir=tmp_path_factory.mktemp("corpus"))


def test_corpus_goes_through_every_importer(report):
    used = {r.fmt for r in report.results}
    assert used >= FORMATS, used
    assert "memory" not in used
    assert not [r.name for r in report.results if r.errors]


def test_collapse_recall(report):
    misses = [(r.name, r.labels, r.findings[:4]) for r in report.misses()]
    assert report.recall >= 0.95, misses


def test_false_alarms_on_healthy_runs(report):
    healthy = [r for r in report.results if r.healthy]
    assert len(healthy) >= 30
    alarms = [(r.name, r.false_alarms) for r in report.alarms()]
    assert report.false_alarm_rate <= 0.05, alarms


def test_median_onset_error(report):
    assert report.median_onset_error <= 3.0, sorted(report.onset_errors)[-10:]


def test_no_wrong_diagnosis_and_every_tier_works(report):
    assert report.wrong_diagnosis_rate <= 0.02
    for view, (n, recall) in report.by("view").items():
        assert recall >= 0.8, (view, n, recall)

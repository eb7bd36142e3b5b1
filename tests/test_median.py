"""rlvitals._median against numpy's median, bit for bit, on the shapes the detectors use."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from rlvitals._median import median, nanmedian


def _same(a, b) -> bool:
    if type(a) is not type(b):  # a numpy scalar for a numpy scalar, an array for an array
        return False
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 8, 25, 600, 601])
def test_median_matches_numpy(dtype, n):
    rng = np.random.default_rng(n)
    for trial in range(20):
        x = rng.normal(size=n) * 10.0 ** rng.integers(-3, 6)
        if trial % 3 == 0:
            x = np.round(x)  # ties
        x = x.astype(dtype)
        if dtype in (np.float64, np.float32) and trial % 4 == 1:
            x[rng.integers(n)] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = np.median(x)
        assert _same(median(x), want), (x, median(x), want)
        assert _same(median(list(x.tolist())), np.median(x.tolist()))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 1), (5, 2), (40, 25), (3, 51), (0, 4)])
def test_median_last_axis_matches_numpy(dtype, shape):
    rng = np.random.default_rng(sum(shape))
    x = rng.random(shape).astype(dtype)
    if x.size:
        x[rng.random(shape) < 0.05] = np.nan
    assert _same(median(x, axis=1), np.median(x, axis=1))
    assert _same(median(x, axis=-1), np.median(x, axis=-1))


def test_median_empty_and_bad_axis():
    assert np.isnan(median(np.array([])))
    assert median(np.zeros((3, 0)), axis=1).shape == (3,)
    with pytest.raises(ValueError, match="axis 0"):
        median(np.zeros((3, 4)), axis=0)


def test_nanmedian_matches_numpy():
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 10, 101):
        for _ in range(20):
            x = rng.normal(size=n)
            x[rng.random(n) < 0.3] = np.nan
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = np.nanmedian(x)
            assert _same(nanmedian(x), want)
    assert np.isnan(nanmedian([np.nan, np.nan]))


def test_doctor_start_up_does_not_import_numpy_ma(tmp_path):
    """The point of the module: the doctor on a small log never loads numpy.ma (~9 ms)."""
    log = tmp_path / "run.jsonl"
    log.write_text(
        "".join(
            f'{{"step": {s}, "reward": {0.5 + 0.01 * (s % 7)}, "reward_std": 0.3, '
            f'"frac_reward_zero_std": {0.1 + 0.004 * s}, "kl": 0.01, "grad_norm": 0.3, '
            f'"entropy": 0.5, "completions/mean_length": 120.0}}\n'
            for s in range(1, 201)
        )
    )
    code = (
        "import sys; from rlvitals.cli import main; rc = main(['doctor', sys.argv[1], "
        "'--format', 'json', '--fail-on', 'never']); "
        "print(sorted(m for m in ('numpy.ma', 'rlvitals.scan', 'tomllib', 'csv', 'gzip', "
        "'logging') if m in sys.modules), file=sys.stderr); sys.exit(rc)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(log)], cwd=tmp_path, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip().splitlines()[-1] == "[]"

"""Scaffold a new detector: its module, its place in the catalogue, its test runs, its docs page.

    python scripts/new_detector.py LOSS_JUMP --series loss --family optimisation
    python scripts/new_detector.py LOSS_JUMP --series loss --dry-run      # print, write nothing

Writes, from the repository root (or ``--root``):

- ``src/rlvitals/detectors/<id>.py``: a detector with the four docstring sections, a ``Knobs``
  dataclass whose defaults are named constants (each documented with ``#:`` and named on the
  page), and a working check built from :mod:`rlvitals.detectors.kit`: the series shifting
  far above its recent level (trailing median, in units of its own noise) and staying there,
  with hysteresis. It is registered in ``detectors/__init__.py``'s module list.
- ``dev/rlvitals_corpus/pairs/<id>.py``: its ``bad`` run (the series shifted up from step 180
  of a healthy 300-step run) and ``good`` run (the healthy run).
- its docs page and picture (``scripts/gen_docs.py``).

The generated detector reports at info level: a new detector informs until it has been tuned on
real runs, then its severity is raised (CONTRIBUTING.md). The output passes the test suite as
generated (``tests/test_scaffold.py`` checks this in a copy of the repository).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ID_RE = re.compile(r"^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$")

DETECTOR = '''"""{title}: `{series}` shifted far above its recent level and stayed there.

## What is happening
`{series}` left the level it held over the steps before: a sustained shift, far larger than
its step-to-step noise, not the slow drift of a healthy run. Something about the run changed at
the onset step (a data shard, a learning rate change, a reward or sampling bug); what the shift
means depends on the series.

## What it looks like in the recording
`{series}` steps up to a new level and stays there, where before it moved slowly.

## How the detector decides
It smooths `{series}` with a centred running median over :knob:`smooth` logged points. Each
point's baseline is the median of the :knob:`baseline_points` logged points before it, and the
series' noise the median distance of those points from their own running median (times 1.48,
a standard deviation for Gaussian noise). An episode starts at :knob:`sustain` consecutive
points more than :knob:`jump_z` noise units above the baseline, once :knob:`min_history` points
of history exist, and ends when the series is back within :knob:`recover_z` noise units of the
baseline at its onset. It reports at info level.

## What to try
- Read the training logs and completions around the onset step: what changed there?
- Compare with the run's other vital signs at the onset (`rlvitals doctor RUN --format html`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from rlvitals.detectors.base import Detector, Finding, Severity, register
from rlvitals.detectors.kit import (
    compare,
    confidence,
    fmt,
    hysteresis,
    needs,
    points,
    rnd,
    rolling_median,
    trailing_median,
)

SERIES = "{series}"
"""The series this detector reads (a canonical metric: docs/metrics.md)."""
MIN_HISTORY = 40
"""Not calibrated: the scaffold's default. Measure it on the zoo dev runs and the real logs
(benchmarks/calibration.py --detector {det_id}) and say here what it was calibrated on."""
BASELINE_POINTS = 20
"""Not calibrated: the scaffold's default. Measure it on the zoo dev runs and the real logs
(benchmarks/calibration.py --detector {det_id}) and say here what it was calibrated on."""
JUMP_Z = 8.0
"""Not calibrated: the scaffold's default. Measure it on the zoo dev runs and the real logs
(benchmarks/calibration.py --detector {det_id}) and say here what it was calibrated on."""
RECOVER_Z = 3.0
"""Not calibrated: the scaffold's default. Measure it on the zoo dev runs and the real logs
(benchmarks/calibration.py --detector {det_id}) and say here what it was calibrated on."""
SUSTAIN = 3
"""Not calibrated: the scaffold's default. Measure it on the zoo dev runs and the real logs
(benchmarks/calibration.py --detector {det_id}) and say here what it was calibrated on."""
SMOOTH = 3
"""Not calibrated: the scaffold's default. Measure it on the zoo dev runs and the real logs
(benchmarks/calibration.py --detector {det_id}) and say here what it was calibrated on."""
MAX_EPISODES = 3
"""Episodes reported (the earliest ones)."""
NOISE_TO_STD = 1.4826
"""Median absolute deviation to standard deviation, for Gaussian noise."""
NOISE_FLOOR = 1e-3
"""The noise is at least this share of the baseline's magnitude (a series without noise)."""


@register
class {cls}(Detector):
    __doc__ = __doc__
    id = "{det_id}"
    severity = Severity.INFO
    family = "{family}"
    key_metrics = (SERIES,)

    @dataclass(frozen=True)
    class Knobs:
        #: Logged points of history a point needs before it can start an episode.
        min_history: int = MIN_HISTORY
        #: Logged points before each point whose median is its baseline (and noise).
        baseline_points: int = BASELINE_POINTS
        #: Smoothed value more than this many noise units above its baseline is a shift.
        jump_z: float = JUMP_Z
        #: An episode ends when the value is back within this many noise units of the
        #: onset's baseline.
        recover_z: float = RECOVER_Z
        #: Consecutive logged points needed to start (or end) an episode.
        sustain: int = SUSTAIN
        #: Window (logged points) of the centred running median applied first.
        smooth: int = SMOOTH

    def needs(self, vitals) -> str | None:
        return needs(vitals, [SERIES], self.knobs.min_history + self.knobs.sustain)

    def check(self, vitals, found: Mapping[str, list[Finding]] | None = None) -> list[Finding]:
        k = self.knobs
        p = points(vitals, SERIES)
        if p is None or p.n < k.min_history + k.sustain:
            return []
        smooth = rolling_median(p.values, k.smooth, edges="pad")
        base = trailing_median(p.values, k.baseline_points)
        resid = np.abs(p.values - rolling_median(p.values, 2 * k.smooth - 1, edges="pad"))
        noise = NOISE_TO_STD * trailing_median(resid, k.baseline_points)
        noise = np.maximum(noise, NOISE_FLOOR * np.abs(base)) + 1e-12
        start = (smooth - base) > k.jump_z * noise
        start[: k.min_history] = False
        out = []
        for ep in hysteresis(
            p, start, lambda i: smooth - base[i] < k.recover_z * noise[i], k.sustain, MAX_EPISODES
        ):
            b, z = float(base[ep.first]), float(noise[ep.first])
            high = ep.median(smooth)
            thr = b + k.jump_z * z
            msg = (
                f"{{SERIES}} {{compare(high, '>', thr)}} (its baseline {{fmt(b)}} + "
                f"{{fmt(k.jump_z)}} x noise {{fmt(z)}}) since step {{ep.onset}}"
                + ("" if ep.end is None else f", until step {{ep.end}}")
            )
            out.append(
                self.finding(
                    msg,
                    onset_step=ep.onset,
                    end_step=ep.end,
                    confidence=confidence(ep.n, k.sustain, margin=(high - b) / (thr - b) - 1),
                    evidence=SERIES,
                    metrics={{
                        f"{{SERIES}}_baseline": rnd(b),
                        f"{{SERIES}}_noise": rnd(z),
                        SERIES: rnd(high),
                        "threshold": rnd(thr),
                        "jump_z": k.jump_z,
                    }},
                    series=[SERIES],
                    thresholds={{SERIES: thr}},
                    actions=[
                        "read the training logs and completions around the onset step",
                        "compare with the run's other vital signs at the onset",
                    ],
                )
            )
        return out
'''

PAIR = '''"""The test runs of {det_id} (written by scripts/new_detector.py).

``good``: a healthy 300-step run (:func:`rlvitals_corpus.families.healthy_rows`); ``bad``: the
same run with `{series}` shifted up by :data:`SHIFT` times its noise (and its magnitude's tenth)
from step :data:`~rlvitals_corpus.families.ONSET` on. When the healthy run does not log
`{series}`, both carry a steady level of 1 with 5% noise.
"""

from __future__ import annotations

import numpy as np

from rlvitals.recording.metrics import canonical_key
from rlvitals_corpus import families as F
from rlvitals_corpus.fixtures import rows_pair

SERIES = "{series}"
SHIFT = 20.0


def _key(row: dict) -> str:
    """The row key that carries SERIES (its canonical name when the healthy run has none)."""
    return next((k for k in row if canonical_key(k)[0] == SERIES), SERIES)


def good(seed: int = 0) -> tuple[F.Rows, F.Rows]:
    train, evals = F.healthy_rows(seed)
    rng = np.random.default_rng(seed + 1000)
    for row in train.values():
        if _key(row) not in row:
            row[SERIES] = float(1.0 + 0.05 * rng.standard_normal())
    return train, evals


def bad(seed: int = 0) -> tuple[F.Rows, F.Rows]:
    train, evals = good(seed)
    x = np.array([row[_key(row)] for _, row in sorted(train.items())])
    noise = 1.4826 * np.median(np.abs(np.diff(x))) / np.sqrt(2) + 0.1 * np.median(np.abs(x))
    for s, row in train.items():
        if s >= F.ONSET:
            row[_key(row)] += SHIFT * noise
    return train, evals


rows_pair("{det_id}", bad, good, family="{family}", about="{series} shifted up from the onset")
'''


def _camel(det_id: str) -> str:
    return "".join(part.capitalize() for part in det_id.split("_"))


def _register_module(init: Path, module: str) -> str:
    """detectors/__init__.py with ``module`` added to the end of ``_MODULES``."""
    text = init.read_text()
    m = re.search(r"_MODULES: tuple\[str, \.\.\.\] = \((.*?)\n\)", text, re.S)
    if m is None:
        raise SystemExit(f"cannot find _MODULES in {init}")
    if f'"{module}"' in m.group(1):
        raise SystemExit(f"{module} is already in {init}")
    return text[: m.end() - 2] + f'\n    "{module}",' + text[m.end() - 2 :]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("id", help="detector ID, SCREAMING_SNAKE (e.g. LOSS_JUMP)")
    ap.add_argument(
        "--series",
        required=True,
        help="the canonical metric it reads (docs/metrics.md), e.g. loss, kl",
    )
    ap.add_argument("--family", default="other", help="its family (default: other)")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root")
    ap.add_argument("--dry-run", action="store_true", help="print the files, write nothing")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(args.root / "src"))
    from rlvitals.detectors import DETECTORS, load_all
    from rlvitals.recording.metrics import CANONICAL

    if not ID_RE.match(args.id):
        ap.error(f"the ID must be SCREAMING_SNAKE (e.g. LOSS_JUMP), got {args.id!r}")
    load_all()
    if args.id in DETECTORS:
        ap.error(f"{args.id} is already a detector")
    if args.series not in CANONICAL:
        ap.error(f"--series must be a canonical metric (docs/metrics.md), got {args.series!r}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", args.family):
        ap.error(f"--family must be lower_snake, got {args.family!r}")
    module = args.id.lower()
    fields = {
        "det_id": args.id,
        "cls": _camel(args.id),
        "series": args.series,
        "family": args.family,
        "title": args.id.replace("_", " ").capitalize(),
    }
    det_file = args.root / "src" / "rlvitals" / "detectors" / f"{module}.py"
    pair_file = args.root / "dev" / "rlvitals_corpus" / "pairs" / f"{module}.py"
    init = args.root / "src" / "rlvitals" / "detectors" / "__init__.py"
    files = {
        det_file: DETECTOR.format(**fields),
        pair_file: PAIR.format(**fields),
        init: _register_module(init, module),
    }
    for path in (det_file, pair_file):
        if path.exists():
            ap.error(f"{path} exists already")
    if args.dry_run:
        for path, text in files.items():
            print(f"==> {path}\n{text}")
        return 0
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path.relative_to(args.root)}")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(args.root / "src"), str(args.root / "dev"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    docs = subprocess.run(
        [sys.executable, str(args.root / "scripts" / "gen_docs.py")],
        cwd=args.root,
        check=False,
        env=env,
    )
    if docs.returncode:
        return docs.returncode
    print(
        f"next: edit the check and its runs, then: pytest tests/test_fixtures.py tests/test_docs.py"
        f"; 'rlvitals explain {args.id}' shows the page"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

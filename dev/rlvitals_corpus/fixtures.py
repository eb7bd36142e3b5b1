"""Every detector's own test runs, in one registry keyed by detector ID.

Each detector of the catalogue has a :class:`Pair`: a ``bad`` run that must make it fire and a
``good`` run that must leave it silent. The pair is the detector's test
(``tests/test_fixtures.py`` fails for a detector without one) and the picture on its docs page
(``scripts/gen_docs.py`` draws the bad run). Where the runs come from:

- the collapse family: scenarios of the corpus simulator (:mod:`rlvitals_corpus.scenarios`),
  named by ``(scenario, params)``;
- the other families: the hand-written runs of :mod:`rlvitals_corpus.families` (one healthy run
  with one thing changed, failure at step :data:`~rlvitals_corpus.families.ONSET`);
- RECORDING_LOSS: a real recording written by :class:`rlvitals.recording.Recorder`, in which
  the bad run's recorder could not open its groups stream and dropped every group record.

>>> p = PAIRS["KL_BLOWUP"]
>>> [(lab.id, lab.onset, lab.end) for lab in p.bad().expect], p.good().healthy
([('KL_BLOWUP', 180, 219)], True)
>>> p.bad_run(seed=1).n_steps
300
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rlvitals.recording import Recorder, read_recording
from rlvitals.recording.run import Manifest, Run
from rlvitals_corpus import Label, LabelledRun, generate, to_run
from rlvitals_corpus import families as F
from rlvitals_corpus.other import ALLOW, FAMILY

__all__ = ["PAIRS", "Pair", "pair", "register", "rows_pair"]

Make = Callable[[int | None], LabelledRun]
"""``(seed) -> LabelledRun``; seed None gives the pair's own run (the one the docs draw)."""


@dataclass(frozen=True)
class Pair:
    """A detector's two test runs.

    Attributes:
        detector: the detector ID.
        make_bad: makes the run that must fire (see :data:`Make`).
        make_good: makes the run that must stay silent.
        onset: training step the bad run's failure begins, when it is the same for every
            seed (None: read it from the bad run's label, or it is not checked).
        end: last step of a bad-run failure that clears (None: it lasts, or see the label).
        about: what goes wrong in the bad run, in a few words.
    """

    detector: str
    make_bad: Make
    make_good: Make
    onset: int | None = None
    end: int | None = None
    about: str = ""

    def bad(self, seed: int | None = None) -> LabelledRun:
        """The run that must make the detector fire."""
        return self.make_bad(seed)

    def good(self, seed: int | None = None) -> LabelledRun:
        """The run on which the detector must stay silent."""
        return self.make_good(seed)

    def bad_run(self, seed: int | None = None) -> Run:
        """:meth:`bad` as a :class:`Run` (what the doctor reads)."""
        return to_run(self.bad(seed))

    def good_run(self, seed: int | None = None) -> Run:
        """:meth:`good` as a :class:`Run`."""
        return to_run(self.good(seed))

    def label(self, seed: int | None = None) -> Label | None:
        """The bad run's label for this detector (onset, end, tolerance), or None when the
        run only has to make the detector fire."""
        return next((lab for lab in self.bad(seed).expect if lab.id == self.detector), None)


PAIRS: dict[str, Pair] = {}
"""Detector ID → its pair."""


def register(p: Pair) -> Pair:
    """Add ``p`` to :data:`PAIRS`; a detector has one pair."""
    if p.detector in PAIRS:
        raise ValueError(f"a pair for {p.detector!r} is already registered")
    PAIRS[p.detector] = p
    return p


def pair(det_id: str) -> Pair:
    """The pair of detector ``det_id``; an unknown ID raises and lists the valid ones."""
    try:
        return PAIRS[det_id]
    except KeyError:
        raise KeyError(f"no test runs for {det_id!r}; valid: {', '.join(sorted(PAIRS))}") from None


# --------------------------------------------------------------------------------------------
# The collapse family: corpus scenarios, ``(scenario name, params)``; params hold the own seed.


def _spec(name: str, params: dict[str, Any]) -> Make:
    def make(seed: int | None = None) -> LabelledRun:
        p = dict(params)
        own = p.pop("seed", 0)
        return generate(name, seed=own if seed is None else seed, **p)

    return make


def _scenarios(
    det_id: str,
    bad: tuple[str, dict[str, Any]],
    good: tuple[str, dict[str, Any]],
    onset: int | None = None,
    end: int | None = None,
    about: str = "",
) -> None:
    register(Pair(det_id, _spec(*bad), _spec(*good), onset, end, about))


_T = 200
_scenarios(
    "ADV_COLLAPSE",
    bad=("plumbing", {"seed": 11, "view": "adv_std", "steps": _T, "onset": 60, "end": 139}),
    good=("healthy", {"seed": 12, "shape": "dr_grpo", "view": "adv_std", "steps": _T}),
    onset=60,
    end=139,
    about="advantages scaled toward 0 from step 60 to 139 (a plumbing bug)",
)
_scenarios(
    "DEGENERATE_GROUPS",
    bad=(
        "collapse_identical",
        {"seed": 21, "view": "groups", "steps": _T, "onset": 60, "end": 139},
    ),
    good=("healthy", {"seed": 22, "shape": "saturating", "view": "groups", "steps": _T}),
    onset=60,
    end=139,
    about="identical completions from step 60 to 139",
)
_scenarios(
    "REWARD_STD_DEATH",
    bad=("collapse_floor", {"seed": 31, "view": "reward_std", "steps": _T, "onset": 120}),
    good=("healthy", {"seed": 32, "shape": "learning", "view": "reward_std", "steps": _T}),
    onset=120,
    about="pass rates fall to 0 from step 120",
)
_scenarios(
    "ACR_STALL",
    bad=("acr_stall", {"seed": 41, "view": "trl", "steps": 300}),
    good=("healthy", {"seed": 42, "shape": "too_hard", "view": "trl", "steps": 300}),
    about="learning freezes with ACR above 0.35",
)
_scenarios(
    "ACR_VOLATILE",
    bad=("acr_volatile", {"seed": 51, "view": "groups", "steps": 300}),
    good=("healthy", {"seed": 52, "shape": "learning", "view": "groups", "steps": 300}),
    about="collapse switched on and off in waves",
)
_scenarios(
    "EXCESS_COLLAPSE",
    bad=("collapse_identical", {"seed": 61, "view": "trl", "steps": _T, "onset": 90}),
    good=("healthy", {"seed": 62, "shape": "bimodal", "view": "trl", "steps": _T}),
    onset=90,
    about="identical completions from step 90: more collapse than pass rates explain",
)
_scenarios(
    "SATURATION",
    bad=("healthy", {"seed": 74, "shape": "saturating", "view": "trl", "steps": 300}),
    good=("healthy", {"seed": 72, "shape": "learning", "view": "trl", "steps": 300}),
    about="the policy solves every prompt",
)


# --------------------------------------------------------------------------------------------
# The other families: hand-written rows (rlvitals_corpus.families); the seed defaults to 0.

_MANIFEST = {
    "trainer": "trl",
    "group_size": 8,
    "kl_coef": 0.04,
    "reward_min": 0.0,
    "reward_max": 1.0,
}
"""What :func:`rlvitals_corpus.families.build_run` puts in the manifest."""


def _from_rows(
    det_id: str,
    kind: str,
    rows: Callable[[int], tuple[F.Rows, F.Rows]],
    onset: int,
    end: int | None,
    family: str | None = None,
) -> Make:
    def make(seed: int | None = None) -> LabelledRun:
        seed = 0 if seed is None else seed
        train, evals = rows(seed)
        steps = np.array(sorted(train), dtype=np.int64)
        keys = sorted({k for row in train.values() for k in row})
        columns = {k: np.array([train[s].get(k, np.nan) for s in steps.tolist()]) for k in keys}
        esteps = np.array(sorted(evals), dtype=np.int64)
        ekeys = sorted({k for row in evals.values() for k in row})
        ecols = {k: np.array([evals[s].get(k, np.nan) for s in esteps.tolist()]) for k in ekeys}
        bad = kind == "bad"
        # REWARD_HACKING reads the evaluation series, logged every EVAL_EVERY steps
        tol = float(F.EVAL_EVERY) if det_id == "REWARD_HACKING" else 3.0
        return LabelledRun(
            name=f"{det_id.lower()}_{kind}-s{seed}",
            scenario=f"families.{rows.__name__}",
            family=family or FAMILY[det_id],
            steps=steps,
            columns=columns,
            eval_steps=esteps,
            eval_columns=ecols,
            manifest=dict(_MANIFEST),
            expect=[Label(det_id, onset, end, tolerance=tol)] if bad else [],
            allow=ALLOW.get(det_id, set()) if bad else set(),
            healthy=not bad,
            formats=("jsonl",),
            params={"seed": seed},
        )

    return make


def _rows(
    det_id: str,
    bad: Callable[[int], tuple[F.Rows, F.Rows]],
    good: Callable[[int], tuple[F.Rows, F.Rows]],
    end: int | None = None,
    about: str = "",
) -> None:
    register(
        Pair(
            det_id,
            _from_rows(det_id, "bad", bad, F.ONSET, end),
            _from_rows(det_id, "good", good, F.ONSET, end),
            F.ONSET,
            end,
            about,
        )
    )


_rows(
    "ENTROPY_COLLAPSE",
    F.entropy_bad,
    F.entropy_good,
    about="entropy to ~3% of early while reward plateaus",
)
_rows(
    "KL_BLOWUP",
    F.kl_bad,
    F.kl_good,
    end=F.ONSET + 39,
    about="KL x30 within ten steps, settles after 40",
)
_rows("LENGTH_EXPLOSION", F.length_bad, F.length_good, about="mean length 340 -> 900 tokens")
_rows("TRUNCATION", F.trunc_bad, F.trunc_good, end=F.ONSET + 59, about="30% truncated for 60 steps")
_rows("CLIP_SATURATION", F.clip_bad, F.clip_good, about="35% of tokens clipped")
_rows("GRAD_NONFINITE", F.nonfinite_bad, F.nonfinite_good, about="inf grad norm, then NaN")
_rows(
    "GRAD_SPIKE",
    F.spike_bad,
    F.spike_good,
    end=F.ONSET + 60,
    about="three 25-400x grad-norm spikes",
)
_rows(
    "ZERO_GRAD_STEPS", F.zero_bad, F.zero_good, about="every third step has zero gradient and loss"
)
_rows("REWARD_HACKING", F.hack_bad, F.hack_good, about="eval falls while train reward rises")
_rows("THROUGHPUT_ROT", F.rot_bad, F.rot_good, about="steps take twice as long from the onset")


def rows_pair(
    det_id: str,
    bad: Callable[[int], tuple[F.Rows, F.Rows]],
    good: Callable[[int], tuple[F.Rows, F.Rows]],
    *,
    family: str,
    onset: int = F.ONSET,
    end: int | None = None,
    about: str = "",
) -> Pair:
    """Register the pair of a detector whose runs are rows of :mod:`rlvitals_corpus.families`
    (``bad(seed)`` / ``good(seed)`` return ``(train_rows, eval_rows)``): what a detector module
    of :mod:`rlvitals_corpus.pairs` calls."""
    return register(
        Pair(
            det_id,
            _from_rows(det_id, "bad", bad, onset, end, family),
            _from_rows(det_id, "good", good, onset, end, family),
            onset,
            end,
            about,
        )
    )


# --------------------------------------------------------------------------------------------
# RECORDING_LOSS: a real recording. The bad run's recorder finds a directory where its groups
# stream should be, cannot open the stream, and drops (counts and reports) every group record.

RECORDING_STEPS = 100
"""Steps of the recorded run."""
RECORDING_GROUPS = 8
"""Groups (prompts) per step; each of :data:`RECORDING_G` completions."""
RECORDING_G = 8


def _recording(kind: str) -> Make:
    def make(seed: int | None = None) -> LabelledRun:
        seed = 0 if seed is None else seed
        train, _ = F.healthy_rows(seed, steps=RECORDING_STEPS)
        rng = np.random.default_rng(seed + 12)
        ids = np.repeat(np.arange(RECORDING_GROUPS), RECORDING_G)
        manifest = Manifest(
            trainer="trl", group_size=RECORDING_G, kl_coef=0.04, reward_min=0.0, reward_max=1.0
        )
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the recorder warns once per loss
            path = Path(tmp) / "recording"
            blocked = path / "groups.rank0.bin"
            if kind == "bad":
                blocked.mkdir(parents=True)
            with Recorder(path, manifest) as rec:
                for step, row in train.items():
                    rec.log_scalars(step, row)
                    p = rng.beta(
                        4 * row["reward"] + 0.5, 4 * (1 - row["reward"]) + 0.5, RECORDING_GROUPS
                    )
                    rewards = rng.random((RECORDING_GROUPS, RECORDING_G)) < p[:, None]
                    rec.log_groups(step, rewards.astype(np.float64).ravel(), ids)
            if kind == "bad":
                blocked.rmdir()  # the reader wants files; the lost groups stay lost
            run = read_recording(path)
        return _from_run(run, f"recording_loss_{kind}-s{seed}", kind, seed)

    return make


def _from_run(run: Run, name: str, kind: str, seed: int) -> LabelledRun:
    """A run read back from disk as a labelled run (series under their canonical names)."""
    m = run.manifest
    bad = kind == "bad"
    return LabelledRun(
        name=name,
        scenario="recording",
        family="recording",
        steps=run.steps,
        columns=dict(run.series),
        groups=run.groups,
        eval_steps=run.eval_steps,
        eval_columns=dict(run.eval_series),
        events=list(run.events),
        manifest={
            k: getattr(m, k)
            for k in (
                "trainer",
                "group_size",
                "scale_rewards",
                "reward_min",
                "reward_max",
                "estimator",
                "kl_coef",
            )
        },
        expect=[Label("RECORDING_LOSS")] if bad else [],
        allow={"*"} if bad else set(),
        healthy=not bad,
        view="recording",
        formats=("recording",),
        params={"seed": seed},
    )


register(
    Pair(
        "RECORDING_LOSS",
        _recording("bad"),
        _recording("good"),
        about="the recorder could not open its groups stream and dropped every group",
    )
)


# --------------------------------------------------------------------------------------------
# Pairs of detectors added later (scripts/new_detector.py writes one module each).

for _mod in sorted(p.stem for p in Path(__file__).with_name("pairs").glob("[!_]*.py")):
    __import__(f"rlvitals_corpus.pairs.{_mod}")

"""The collapse family's scenarios: healthy runs of many shapes, and every collapse failure at
early, middle, late, transient and gradual onsets, seen through each evidence tier.

Views (which evidence a run carries):

==================  =========================================================  ==============
view                columns                                                    core detector
==================  =========================================================  ==============
``trl``             TRL trainer_state keys (reward, reward_std, frac_...)      DEGENERATE_GROUPS
``full``            recorder-like: everything incl. adv_std, adv_zero_frac     DEGENERATE_GROUPS
``groups``          per-group rewards only                                     DEGENERATE_GROUPS
``zero_std_frac``   frac_reward_zero_std only                                  DEGENERATE_GROUPS
``adv_std``         adv_std only                                               ADV_COLLAPSE
``adv_zero_frac``   adv_zero_frac only                                         ADV_COLLAPSE
``reward_std``      reward_std and reward                                      REWARD_STD_DEATH
``reward_std_only`` reward_std only                                            REWARD_STD_DEATH
``loss_grad``       loss, grad_norm, learning_rate (no KL)                     ADV_COLLAPSE
``verl``            veRL console keys (score and advantage max/min, ...)       ADV_COLLAPSE
==================  =========================================================  ==============
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlvitals.recording.run import GroupTable
from rlvitals_corpus import SUITES, Label, LabelledRun, scenario
from rlvitals_corpus.sim import Sim, Spec, schedule, simulate

__all__ = ["CORE_ID", "VIEWS", "build", "collapse_suite", "onset_at"]

COLLAPSE_IDS = (
    "ADV_COLLAPSE",
    "DEGENERATE_GROUPS",
    "REWARD_STD_DEATH",
    "ACR_STALL",
    "ACR_VOLATILE",
    "EXCESS_COLLAPSE",
    "SATURATION",
)
CORE_ID = {
    "trl": "DEGENERATE_GROUPS",
    "full": "DEGENERATE_GROUPS",
    "groups": "DEGENERATE_GROUPS",
    "zero_std_frac": "DEGENERATE_GROUPS",
    "adv_std": "ADV_COLLAPSE",
    "adv_zero_frac": "ADV_COLLAPSE",
    "loss_grad": "ADV_COLLAPSE",
    "verl": "ADV_COLLAPSE",
    "reward_std": "REWARD_STD_DEATH",
    "reward_std_only": "REWARD_STD_DEATH",
}
VIEWS = tuple(CORE_ID)
ACR_VIEWS = ("trl", "full", "groups", "zero_std_frac")
NO_REWARD_VIEWS = ("zero_std_frac", "adv_std", "adv_zero_frac", "reward_std_only", "loss_grad")
"""Views that carry no reward: a saturating run cannot be told from a collapse in them."""
FORMATS = {
    "trl": ("trl_state", "tensorboard"),
    "full": ("jsonl", "csv", "tensorboard", "openrlhf_console"),
    "groups": ("groups_jsonl", "recording"),
    "verl": ("verl_console", "verl_file"),
}
"""View → the writers that can express its runs (the quality bar cycles through them); other
views go to ``jsonl`` and ``csv``. wandb and mlflow (slow) are in no rotation."""
_TRL_KEYS = {
    "reward_mean": "reward",
    "reward_std": "reward_std",
    "zero_std_frac": "frac_reward_zero_std",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "entropy": "entropy",
    "length_mean": "completions/mean_length",
    "truncation_frac": "completions/clipped_ratio",
    "clip_frac": "clip_ratio/region_mean",
    "kl": "kl",
}
_FULL_KEYS = {
    "reward_mean": "reward_mean",
    "reward_std": "reward_std",
    "zero_std_frac": "frac_reward_zero_std",
    "adv_std": "adv_std",
    "adv_zero_frac": "adv_zero_frac",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "entropy": "entropy",
    "kl": "kl",
    "length_mean": "response_length",
    "clip_frac": "clip_frac",
}
_VERL_KEYS = {
    "reward_mean": "critic/score/mean",
    "reward_max": "critic/score/max",
    "reward_min": "critic/score/min",
    "adv_mean": "critic/advantages/mean",
    "adv_max": "critic/advantages/max",
    "adv_min": "critic/advantages/min",
    "loss": "actor/pg_loss",
    "grad_norm": "actor/grad_norm",
    "entropy": "actor/entropy",
    "kl": "actor/kl_loss",
    "length_mean": "response_length/mean",
    "truncation_frac": "response_length/clip_ratio",
    "clip_frac": "actor/pg_clipfrac",
    "learning_rate": "actor/lr",
}
_NARROW = {
    "zero_std_frac": {"zero_std_frac": "frac_reward_zero_std"},
    "adv_std": {"adv_std": "adv_std"},
    "adv_zero_frac": {"adv_zero_frac": "adv_zero_frac"},
    "reward_std": {"reward_std": "reward_std", "reward_mean": "reward"},
    "reward_std_only": {"reward_std": "reward_std"},
    "loss_grad": {"loss": "loss", "grad_norm": "grad_norm", "learning_rate": "learning_rate"},
}


# --------------------------------------------------------------------------------------------
# From a simulation to a labelled run


def _aggregate(x: np.ndarray, k: int) -> np.ndarray:
    """Mean over each block of ``k`` steps ending at a logged step (TRL averages between logs)."""
    if k == 1:
        return x
    n = x.shape[0] // k
    return x[: n * k].reshape(n, k).mean(axis=1)


def build(
    sim: Sim,
    *,
    name: str,
    scenario_name: str,
    view: str,
    log_every: int = 1,
    expect: list[Label] | None = None,
    allow: set[str] | None = None,
    forbid: set[str] | None = None,
    healthy: bool = False,
    nan_rows: float = 0.0,
    eval_every: int = 0,
    rng: np.random.Generator | None = None,
    family: str = "collapse",
    record_advantages: bool = False,
) -> LabelledRun:
    """Turn a simulation into a :class:`LabelledRun` seen through ``view``."""
    spec = sim.spec
    rng = rng or np.random.default_rng(0)
    k = max(1, int(log_every))
    T = sim.steps.shape[0]
    steps = sim.steps[k - 1 :: k][: T // k] if k > 1 else sim.steps
    keys = {"trl": _TRL_KEYS, "full": _FULL_KEYS, "verl": _VERL_KEYS}.get(view, _NARROW.get(view))
    columns: dict[str, np.ndarray] = {}
    if keys is not None:
        for src, dst in keys.items():
            if src not in sim.metrics:
                continue
            columns[dst] = _aggregate(sim.metrics[src], k)
        if view == "trl":
            columns["epoch"] = steps / max(T, 1) * 3.0
            columns["rewards/accuracy_reward/mean"] = columns["reward"].copy()
        if nan_rows > 0 and columns:
            # The labelled onset stays visible: a NaN there would move the true onset.
            protect = np.zeros(steps.shape[0], dtype=bool)
            for label in expect or ():
                if label.onset is not None:
                    protect[min(int(np.searchsorted(steps, label.onset)), steps.shape[0] - 1)] = (
                        True
                    )
            _poke_nans(columns, rng, nan_rows, protect)
    groups = None
    if view == "groups":
        r = sim.rewards
        Tn, N, G = r.shape
        step_of = np.repeat(sim.steps, N)
        offsets = np.arange(0, Tn * N * G + 1, G, dtype=np.int64)
        adv = sim.advantages.reshape(-1) if record_advantages else None
        groups = GroupTable(
            step=step_of.astype(np.int64),
            offsets=offsets,
            rewards=r.reshape(-1).copy(),
            prompt=None,
            advantages=adv,
        )
    lo, hi = spec.reward_range
    manifest: dict[str, Any] = {
        "group_size": spec.G,
        "scale_rewards": {"batch": "batch", "dr_grpo": "none"}.get(spec.estimator, "group"),
        "estimator": "dr_grpo" if spec.estimator == "dr_grpo" else "grpo",
        "kl_coef": spec.kl_coef,
        "trainer": {"trl": "trl", "verl": "verl"}.get(view),
        "n_prompts": spec.N,
        "steps": T,
    }
    if spec.reward == "scaled":
        manifest["reward_min"], manifest["reward_max"] = lo, hi
    esteps = np.zeros(0, dtype=np.int64)
    ecols: dict[str, np.ndarray] = {}
    if eval_every and view in ("trl", "full", "verl"):
        esteps = np.arange(eval_every, T + 1, eval_every, dtype=np.int64)
        base = sim.metrics["reward_mean"][esteps - 1]
        ecols = {
            "eval_reward": np.clip(base + rng.normal(0, 0.02, esteps.size), lo, hi),
            "eval_loss": np.abs(rng.normal(0.1, 0.02, esteps.size)),
        }
    return LabelledRun(
        name=name,
        scenario=scenario_name,
        family=family,
        steps=steps.astype(np.int64),
        columns=columns,
        groups=groups,
        eval_steps=esteps,
        eval_columns=ecols,
        manifest=manifest,
        expect=list(expect or []),
        allow=set(allow or set()),
        forbid=set(forbid or set()),
        healthy=healthy,
        view=view,
        formats=FORMATS.get(view, ("jsonl", "csv")),
        log_every=k,
    )


def _poke_nans(
    columns: dict[str, np.ndarray], rng: np.random.Generator, frac: float, protect: np.ndarray
) -> None:
    """NaN a few values (a metric the trainer could not compute) and a few whole rows, never
    in the ``protect``-ed rows."""
    n = next(iter(columns.values())).shape[0]
    names = sorted(columns)
    for name in names:
        hit = (rng.random(n) < frac / 2) & ~protect
        columns[name] = np.where(hit, np.nan, columns[name])
    rows = (rng.random(n) < frac / 4) & ~protect
    for name in names:
        columns[name] = np.where(rows, np.nan, columns[name])


def onset_at(kind: str, T: int, k: int, rng: np.random.Generator) -> tuple[int, int | None]:
    """``(onset, end)`` training steps for an onset ``kind`` in a T-step run logged every k.

    Kinds: ``early``, ``middle``, ``late``, ``transient``. Onsets keep at least 8 logged points
    of healthy run before them and 12 of failure after them (so every kind is judgeable).
    """
    lo = 8 * k + 1
    hi = T - 12 * k
    if kind == "early":
        onset = int(rng.uniform(max(lo, 0.08 * T), max(lo + 1, 0.2 * T)))
    elif kind == "middle":
        onset = int(rng.uniform(0.4 * T, 0.6 * T))
    elif kind == "late":
        onset = int(rng.uniform(max(lo, T - max(30 * k, 0.15 * T)), max(lo + 1, hi)))
    elif kind == "transient":
        onset = int(rng.uniform(max(lo, 0.2 * T), max(lo + 1, 0.35 * T)))
        length = int(rng.uniform(max(12 * k, 0.2 * T), max(13 * k, 0.4 * T)))
        return onset, min(onset + length, T - 15 * k)
    else:
        raise ValueError(f"unknown onset kind {kind!r}")
    return max(lo, min(onset, hi)), None


# --------------------------------------------------------------------------------------------
# Randomised healthy bases


def _base_spec(rng: np.random.Generator, T: int, **over: Any) -> Spec:
    G = int(rng.choice([4, 6, 8, 8, 12, 16]))
    N = int(rng.choice([8, 16, 16, 32, 64]))
    spec = Spec(
        steps=T,
        G=G,
        N=N,
        diff_mu=rng.uniform(-0.5, 0.5),
        diff_sd=rng.uniform(0.6, 1.8),
        skill0=rng.uniform(-1.0, 0.5),
        skill1=rng.uniform(0.5, 2.0),
        tau=rng.uniform(0.2, 1.0) * T,
        walk=rng.uniform(0.0, 0.02),
        reward=str(rng.choice(["binary", "binary", "binary", "partial", "scaled"])),
    )
    for key, v in over.items():
        setattr(spec, key, v)
    return spec


SATURATED_STEPS = 60
"""A healthy run clearly saturated (truth, see :func:`saturation_truth`) for at least this many
final steps is labelled SATURATION (the detector warns from 50; the margin keeps borderline
runs out of the label)."""
SATURATED_MARGIN = 0.05
"""Truth within this of a gate (ACR 0.5, pass rate 0.8, solved share 0.6) is borderline."""


def saturation_truth(sim: Sim, view: str, window: int = 25) -> tuple[str, int | None]:
    """``("yes", onset)`` when ``sim`` clearly saturated its prompt set for its last
    :data:`SATURATED_STEPS` steps or more (truth from the per-group rewards: median ACR >= 0.5
    and pass rate >= 0.8 over the last fifth, most collapsed groups solved, each clear of its
    gate by :data:`SATURATED_MARGIN`), ``("no", None)`` when clearly not, ``("maybe", None)``
    in between, or where the view cannot show it: without the reward (NO_REWARD_VIEWS), or a
    partial-credit reward seen without an ACR or per-step reward extremes (the expected ACR
    P0 = p^G + (1-p)^G assumes binary rewards)."""
    r = sim.rewards  # (T, N, G)
    lo, hi = sim.spec.reward_range
    collapsed = np.ptp(r, axis=2) <= 1e-9
    solved = collapsed & (np.abs(r[:, :, 0] - hi) <= 1e-9)
    acr = collapsed.mean(axis=1)
    pass_rate = (r.mean(axis=(1, 2)) - lo) / (hi - lo)
    T = acr.shape[0]
    m = max(10, round(0.2 * T))
    a, p = float(np.median(acr[-m:])), float(np.median(pass_rate[-m:]))
    easy = float(solved[-m:].sum()) / max(1, int(collapsed[-m:].sum()))

    def trailing(x: np.ndarray) -> np.ndarray:
        c = np.concatenate(([0.0], np.cumsum(x)))
        i = np.arange(x.shape[0])
        lo_i = np.maximum(i + 1 - window, 0)
        return (c[i + 1] - c[lo_i]) / (i + 1 - lo_i)

    e = SATURATED_MARGIN

    def since(acr_gate: float, pass_gate: float) -> int:
        """First step index of the final stretch with both trailing means at their gates."""
        ok = (trailing(acr) >= acr_gate) & (trailing(pass_rate) >= pass_gate)
        bad = np.flatnonzero(~ok)
        return 0 if not bad.size else int(bad[-1]) + 1

    start = since(0.5, 0.8)
    clear_yes = a >= 0.5 + e and p >= 0.8 + e and easy >= 0.6 + e
    clear_yes = clear_yes and T - start >= SATURATED_STEPS
    clear_no = a < 0.5 - e or p < 0.8 - e or easy < 0.6 - e
    if view in NO_REWARD_VIEWS:  # saturation cannot show; a clearly unsaturated run is healthy
        return ("no", None) if clear_no else ("maybe", None)
    if sim.spec.reward == "partial" and view == "reward_std":
        return "maybe", None  # the mean reward alone cannot say P0 is wrong for partial credit
    if clear_no:
        return "no", None
    if clear_yes:
        return "yes", int(sim.steps[start])
    return "maybe", None


def _steps_for(rng: np.random.Generator, k: int) -> int:
    return int(rng.uniform(150, 500)) * (1 if k == 1 else max(1, k // 2))


HEALTHY_SHAPES = (
    "learning",
    "saturating",
    "too_hard",
    "dr_grpo",
    "batch_scaled",
    "partial_credit",
    "scaled_reward",
    "noisy_grad",
    "kl_growth",
    "bimodal",
    "short",
    "long",
    "plateau",
)


@scenario("healthy")
def healthy(
    rng: np.random.Generator,
    shape: str = "learning",
    view: str = "trl",
    log_every: int = 1,
    steps: int | None = None,
    nan_rows: float = 0.0,
    eval_every: int = 0,
) -> LabelledRun:
    """A healthy run of the given ``shape``; nothing at warn or above may fire."""
    k = log_every
    T = steps or _steps_for(rng, k)
    over: dict[str, Any] = {}
    if shape == "saturating":
        over = {
            "skill0": rng.uniform(-0.5, 1.0),
            "skill1": rng.uniform(4.0, 7.0),
            "tau": rng.uniform(0.2, 0.5) * T,
        }
    elif shape == "too_hard":
        over = {
            "skill0": rng.uniform(-4.0, -2.5),
            "skill1": rng.uniform(0.0, 1.5),
            "tau": rng.uniform(0.2, 0.5) * T,
        }
    elif shape == "dr_grpo":
        over = {"estimator": "dr_grpo"}
    elif shape == "batch_scaled":
        over = {"estimator": "batch"}
    elif shape == "partial_credit":
        over = {"reward": "partial"}
    elif shape == "scaled_reward":
        over = {"reward": "scaled"}
    elif shape == "noisy_grad":
        over = {"grad_spikes": rng.uniform(0.01, 0.05)}
    elif shape == "kl_growth":
        over = {"kl_coef": float(rng.choice([0.01, 0.04, 0.1])), "kl_growth": rng.uniform(0.1, 1)}
    elif shape == "bimodal":
        over = {"bimodal": rng.uniform(0.2, 0.5)}
    elif shape == "short":
        T = int(rng.uniform(8, 29))
    elif shape == "long":
        T = steps or 20000
        over = {"tau": rng.uniform(0.1, 0.5) * T, "N": 8, "G": 8, "skill1": rng.uniform(0.3, 1.2)}
    elif shape == "plateau":
        over = {
            "skill0": rng.uniform(-0.3, 0.3),
            "skill1": rng.uniform(-0.3, 0.3),
            "diff_sd": rng.uniform(0.5, 1.0),
            "G": int(rng.choice([8, 12, 16])),
        }
    elif shape != "learning":
        raise ValueError(f"unknown healthy shape {shape!r}; valid: {', '.join(HEALTHY_SHAPES)}")
    spec = _base_spec(rng, T, **over)
    sim = simulate(spec, rng)
    saturated, _ = saturation_truth(sim, view)
    return build(
        sim,
        name=f"healthy-{shape}-{view}-k{k}",
        scenario_name="healthy",
        view=view,
        log_every=k,
        # A run that has solved its prompt set for a sustained stretch spends compute on a
        # dead signal: SATURATION must report it (at warn), though nothing else may; a
        # borderline one may report it.
        healthy=saturated == "no",
        expect=[Label("SATURATION")] if saturated == "yes" else [],
        allow=set() if saturated == "no" else {"SATURATION"},
        nan_rows=nan_rows,
        eval_every=eval_every,
        rng=rng,
    )


# --------------------------------------------------------------------------------------------
# Failures


def _label_onset(c: np.ndarray, frac: float = 0.5) -> tuple[int | None, int | None]:
    """First and last training step where the intensity is at least ``frac`` of its max."""
    cm = float(c.max()) if c.size else 0.0
    if cm <= 0:
        return None, None
    on = np.flatnonzero(c >= frac * cm)
    return int(on[0]) + 1, int(on[-1]) + 1


def _failure(
    rng: np.random.Generator,
    mechanism: str,
    *,
    onset_kind: str,
    view: str,
    log_every: int,
    gradual: bool,
    c_max: float | None,
    steps: int | None,
    required: list[str],
    allow_all: bool = True,
    forbid: set[str] | None = None,
    nan_rows: float = 0.0,
    record_advantages: bool = False,
    onset: int | None = None,
    end: int | None = None,
    **over: Any,
) -> LabelledRun:
    k = log_every
    T = steps or _steps_for(rng, k)
    if onset is None:
        onset, end = onset_at(onset_kind, T, k, rng)
    ramp = int(rng.uniform(30, 80)) if gradual else int(rng.integers(1, 4))
    if gradual:
        onset = max(8 * k + 1, min(onset, T - ramp - 12 * k))
    cm = c_max if c_max is not None else float(rng.uniform(0.9, 1.0))
    c = schedule(T, onset, end=end, ramp=ramp, c_max=cm)
    spec = _base_spec(rng, T, mechanism=mechanism, c=c, onset=onset, **over)
    sim = simulate(spec, rng)
    lab_on, lab_end = _label_onset(c)
    tol = max(3.0, ramp / (2.0 * k)) if gradual else 3.0
    expect = [Label(i, lab_on, lab_end if end is not None else None, tol) for i in required]
    tag = "gradual" if gradual else onset_kind
    return build(
        sim,
        name=f"{mechanism}-{tag}-{view}-k{k}",
        scenario_name=f"collapse_{mechanism}" if mechanism != "plumbing" else "plumbing",
        view=view,
        log_every=k,
        expect=expect,
        allow={"*"} if allow_all else set(),
        forbid=forbid,
        nan_rows=nan_rows,
        rng=rng,
        record_advantages=record_advantages,
    )


def _excess_expected(view: str) -> bool:
    """Views where the expected ACR is computable (G known, with the ACR and reward)."""
    return view in ("groups", "trl")


@scenario("collapse_identical")
def collapse_identical(
    rng: np.random.Generator,
    onset_kind: str = "middle",
    view: str = "trl",
    log_every: int = 1,
    gradual: bool = False,
    steps: int | None = None,
    nan_rows: float = 0.0,
    onset: int | None = None,
    end: int | None = None,
) -> LabelledRun:
    """Completions of a group become identical: ACR jumps at a middling reward (excess)."""
    total = view in ("adv_std", "adv_zero_frac", "loss_grad", "verl")
    c_max = 1.0 if total else (float(rng.uniform(0.96, 1.0)) if "reward_std" in view else None)
    required = [CORE_ID[view]]
    over: dict[str, Any] = {"skill1": rng.uniform(0.0, 1.0), "skill0": rng.uniform(-0.5, 0.5)}
    if view == "loss_grad":
        over["kl_coef"] = 0.0
    if _excess_expected(view):
        required.append("EXCESS_COLLAPSE")
    lr = _failure(
        rng,
        "identical",
        onset_kind=onset_kind,
        view=view,
        log_every=log_every,
        gradual=gradual,
        c_max=c_max,
        steps=steps,
        required=required,
        nan_rows=nan_rows,
        onset=onset,
        end=end,
        **over,
    )
    return lr


@scenario("collapse_floor")
def collapse_floor(
    rng: np.random.Generator,
    onset_kind: str = "middle",
    view: str = "trl",
    log_every: int = 1,
    gradual: bool = False,
    steps: int | None = None,
    nan_rows: float = 0.0,
    onset: int | None = None,
    end: int | None = None,
) -> LabelledRun:
    """Behaviour collapse: every completion starts failing (reward to the floor)."""
    total = view in ("adv_std", "adv_zero_frac", "loss_grad", "verl")
    c_max = 1.0 if total else float(rng.uniform(0.985, 1.0))
    over: dict[str, Any] = {"kl_coef": 0.0} if view == "loss_grad" else {}
    return _failure(
        rng,
        "floor",
        onset_kind=onset_kind,
        view=view,
        log_every=log_every,
        gradual=gradual,
        c_max=c_max,
        steps=steps,
        required=[CORE_ID[view]],
        nan_rows=nan_rows,
        onset=onset,
        end=end,
        **over,
    )


@scenario("collapse_constant")
def collapse_constant(
    rng: np.random.Generator,
    onset_kind: str = "middle",
    view: str = "trl",
    log_every: int = 1,
    steps: int | None = None,
    value: float | None = None,
    nan_rows: float = 0.0,
    onset: int | None = None,
    end: int | None = None,
) -> LabelledRun:
    """A broken verifier: from the onset every completion gets the same reward."""
    v = float(rng.choice([0.0, 0.0, 0.5])) if value is None else value
    over: dict[str, Any] = {"const_value": v, "reward": "binary"}
    if view == "loss_grad":
        over["kl_coef"] = 0.0
    lr = _failure(
        rng,
        "constant",
        onset_kind=onset_kind,
        view=view,
        log_every=log_every,
        gradual=False,
        c_max=1.0,
        steps=steps,
        required=[CORE_ID[view]],
        nan_rows=nan_rows,
        onset=onset,
        end=end,
        **over,
    )
    return lr


PLUMBING_VIEWS = ("full", "trl", "adv_std", "adv_zero_frac", "loss_grad", "groups", "verl")


@scenario("plumbing")
def plumbing(
    rng: np.random.Generator,
    onset_kind: str = "middle",
    view: str = "full",
    log_every: int = 1,
    steps: int | None = None,
    nan_rows: float = 0.0,
    onset: int | None = None,
    end: int | None = None,
) -> LabelledRun:
    """Rewards vary, advantages are zeroed before the loss (a reward→advantage plumbing bug)."""
    if view not in PLUMBING_VIEWS:
        raise ValueError(f"plumbing needs an advantage view: {', '.join(PLUMBING_VIEWS)}")
    # Total zeroing shows in every view; a partial one (x 0.02) only in adv_std.
    c_max = 1.0 if view != "adv_std" else float(rng.choice([1.0, 0.98]))
    required = ["ADV_COLLAPSE"]
    if view in ("full", "trl", "groups"):
        required.append("EXCESS_COLLAPSE")
    over: dict[str, Any] = {"kl_coef": 0.0, "estimator": "grpo"}
    lr = _failure(
        rng,
        "plumbing",
        onset_kind=onset_kind,
        view=view,
        log_every=log_every,
        gradual=False,
        c_max=c_max,
        steps=steps,
        required=required,
        forbid={"DEGENERATE_GROUPS", "REWARD_STD_DEATH"},
        nan_rows=nan_rows,
        record_advantages=True,
        onset=onset,
        end=end,
        **over,
    )
    return lr


@scenario("acr_stall")
def acr_stall(
    rng: np.random.Generator,
    onset_kind: str = "middle",
    view: str = "trl",
    log_every: int = 1,
    steps: int | None = None,
) -> LabelledRun:
    """Learning freezes and about half the groups go degenerate for a long stretch."""
    if view not in ACR_VIEWS:
        raise ValueError(f"acr_stall needs an ACR view: {', '.join(ACR_VIEWS)}")
    k = log_every
    T = steps or max(_steps_for(rng, k), 200 * k)
    if onset_kind == "transient":
        onset = int(rng.uniform(0.2, 0.3) * T)
        end = onset + int(rng.uniform(70, 120)) * k
    elif onset_kind == "late":
        onset, end = T - int(rng.uniform(70, 90)) * k, None
    elif onset_kind == "early":
        onset, end = int(rng.uniform(0.08, 0.15) * T) + 8 * k, None
    else:
        onset, end = int(rng.uniform(0.35, 0.55) * T), None
    c = schedule(T, onset, end=end, ramp=int(rng.integers(1, 4)), c_max=rng.uniform(0.45, 0.6))
    spec = _base_spec(
        rng,
        T,
        mechanism="stall",
        c=c,
        onset=onset,
        skill0=rng.uniform(-0.5, 0.3),
        skill1=rng.uniform(0.3, 1.0),
        diff_sd=rng.uniform(0.6, 1.2),
        G=int(rng.choice([8, 12, 16])),
    )
    sim = simulate(spec, rng)
    return build(
        sim,
        name=f"stall-{onset_kind}-{view}-k{k}",
        scenario_name="acr_stall",
        view=view,
        log_every=k,
        expect=[Label("ACR_STALL", onset, end, 5.0)],
        allow={"*"},
        rng=rng,
    )


@scenario("acr_volatile")
def acr_volatile(
    rng: np.random.Generator,
    onset_kind: str = "middle",
    view: str = "trl",
    log_every: int = 1,
    steps: int | None = None,
) -> LabelledRun:
    """Identical-completion collapse switching on and off in waves."""
    if view not in ACR_VIEWS:
        raise ValueError(f"acr_volatile needs an ACR view: {', '.join(ACR_VIEWS)}")
    k = log_every
    T = steps or max(_steps_for(rng, k), 200 * k)
    period = int(rng.integers(6, 17)) * k
    if onset_kind == "transient":
        onset = int(rng.uniform(0.2, 0.3) * T)
        end = onset + int(rng.uniform(60, 100)) * k
    elif onset_kind == "late":
        onset, end = T - int(rng.uniform(60, 80)) * k, None
    elif onset_kind == "early":
        onset, end = int(rng.uniform(0.08, 0.15) * T) + 8 * k, None
    else:
        onset, end = int(rng.uniform(0.35, 0.55) * T), None
    c = schedule(T, onset, end=end, c_max=rng.uniform(0.7, 1.0), period=period)
    spec = _base_spec(rng, T, mechanism="volatile", c=c, onset=onset)
    sim = simulate(spec, rng)
    return build(
        sim,
        name=f"volatile-{onset_kind}-{view}-k{k}",
        scenario_name="acr_volatile",
        view=view,
        log_every=k,
        expect=[Label("ACR_VOLATILE", onset, end, 8.0)],
        allow={"*"},
        rng=rng,
    )


@scenario("total_short")
def total_short(
    rng: np.random.Generator, view: str = "trl", mechanism: str = "floor"
) -> LabelledRun:
    """A run shorter than 30 steps whose every logged step is totally collapsed."""
    T = int(rng.uniform(8, 29))
    c = np.ones(T)
    spec = _base_spec(rng, T, mechanism=mechanism, c=c, onset=1, kl_coef=0.0)
    sim = simulate(spec, rng)
    return build(
        sim,
        name=f"total-short-{mechanism}-{view}",
        scenario_name="total_short",
        view=view,
        expect=[Label(CORE_ID[view], 1, None, 3.0)],
        allow={"*"},
        rng=rng,
    )


# --------------------------------------------------------------------------------------------
# The suite


@SUITES.register("collapse")
def collapse_suite(size: str = "ci", seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """``[(scenario, params), ...]`` covering the collapse family.

    ``ci`` is small enough for the test suite (about 120 runs, seconds); ``full`` is the
    benchmark corpus (several hundred runs, every mechanism x onset x view x logging).
    """
    rng = np.random.default_rng(seed)
    full = size == "full"
    out: list[tuple[str, dict[str, Any]]] = []
    s = iter(range(seed * 100_000, seed * 100_000 + 1_000_000))

    def add(name: str, **params: Any) -> None:
        out.append((name, {"seed": next(s), **params}))

    onsets = ("early", "middle", "late", "transient")
    reps = 3 if full else 1
    for _ in range(reps):
        for mech in ("collapse_identical", "collapse_floor"):
            for view in VIEWS:
                for onset in onsets:
                    if not full and rng.random() < 0.5:
                        continue
                    add(mech, onset_kind=onset, view=view, log_every=_pick_k(rng, view))
                add(
                    mech, onset_kind="middle", view=view, gradual=True, log_every=_pick_k(rng, view)
                )
        for view in ("trl", "groups", "zero_std_frac", "loss_grad", "verl", "reward_std"):
            for onset in onsets if full else ("middle", "transient"):
                add("collapse_constant", onset_kind=onset, view=view, log_every=_pick_k(rng, view))
        for view in PLUMBING_VIEWS:
            for onset in onsets if full else ("middle", "late"):
                add("plumbing", onset_kind=onset, view=view, log_every=_pick_k(rng, view))
        for view in ACR_VIEWS:
            for onset in onsets if full else ("middle", "transient"):
                add("acr_stall", onset_kind=onset, view=view, log_every=_pick_k(rng, view))
                add("acr_volatile", onset_kind=onset, view=view, log_every=_pick_k(rng, view))
        for view in ("trl", "groups", "zero_std_frac", "adv_std", "reward_std", "loss_grad"):
            add("total_short", view=view)
    # Healthy runs: every shape through several views.
    hviews = (
        "trl",
        "full",
        "groups",
        "zero_std_frac",
        "adv_std",
        "reward_std",
        "loss_grad",
        "verl",
        "reward_std_only",
        "adv_zero_frac",
    )
    hreps = 4 if full else 1
    for _ in range(hreps):
        for shape in HEALTHY_SHAPES:
            views = hviews if full else hviews[: 3 + int(rng.integers(0, 3))]
            for view in views:
                if shape == "long" and view not in ("trl", "full") and not full:
                    continue
                if shape == "batch_scaled" and view == "groups":
                    continue
                if shape == "saturating" and view in NO_REWARD_VIEWS:
                    continue  # without the reward, saturation looks like a collapse
                k = 1 if shape in ("short", "long") else _pick_k(rng, view)
                add(
                    "healthy",
                    shape=shape,
                    view=view,
                    log_every=k,
                    nan_rows=float(rng.choice([0.0, 0.0, 0.02])),
                    eval_every=int(rng.choice([0, 25, 50])),
                )
    return out


def _pick_k(rng: np.random.Generator, view: str) -> int:
    if view == "groups":
        return 1
    return int(rng.choice([1, 1, 1, 1, 5, 10]))

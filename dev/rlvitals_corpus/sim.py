"""A small simulator of GRPO training runs: per-group rewards and what a trainer would log.

Prompts have difficulties ``d`` drawn once per run (a pool); the policy has a skill ``s(t)`` that
follows a learning curve; a prompt's pass rate is ``sigmoid(s(t) - d)``. Each step samples N
prompts and G completions each, scores them, computes advantages with the run's estimator and
derives the scalars a trainer logs (TRL semantics: ``reward_std`` is the mean group std with
per-group scaling, the batch std with ``scale_rewards="batch"``; ``frac_reward_zero_std`` follows
the same scale).

Failures are *mechanisms* switched on by an intensity schedule ``c(t)`` in [0, 1]:

``identical``  the G completions of a group become one (temperature 0, a reused seed): with
               probability c a group's rewards are all its first completion's.
``floor``      behaviour collapse: pass rates shrink by (1 - c) toward 0.
``constant``   a broken verifier: with probability c a completion gets a constant reward.
``plumbing``   rewards fine, advantages multiplied by (1 - c) before the loss.
``stall``      learning freezes at the onset and groups partially go identical.
``volatile``   identical-completion collapse switched on and off in waves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["MECHANISMS", "Sim", "Spec", "schedule", "simulate"]

MECHANISMS = ("identical", "floor", "constant", "plumbing", "stall", "volatile")
TRL_EPS = 1e-4


@dataclass
class Spec:
    """Everything that shapes one simulated run.

    Attributes:
        steps: training steps T (steps are 1..T).
        G, N: completions per prompt, prompts per step.
        pool: prompts in the pool; ``diff_mu``/``diff_sd``: their difficulty distribution;
            ``bimodal``: share of prompts moved to +/- ``diff_sd`` * 1.5 (a mixed prompt set).
        skill0, skill1, tau: learning curve s(t) = skill0 + (skill1 - skill0)(1 - exp(-t/tau)).
        walk: random-walk std of the skill per step.
        reward: ``binary``, ``partial`` ({0, 0.2, 0.8, 1}) or ``scaled`` (binary times 5, minus 1).
        estimator: ``grpo``, ``dr_grpo`` or ``batch`` (TRL ``scale_rewards="batch"``).
        kl_coef, kl_growth: KL coefficient (0 = no KL term) and how far the KL grows.
        grad_spikes: probability of a 5-30x grad_norm spike on a step.
        mechanism, c: failure mechanism and its intensity schedule ``(T,)`` (None = healthy).
        const_value: the constant reward of the ``constant`` mechanism.
    """

    steps: int = 200
    G: int = 8
    N: int = 16
    pool: int = 512
    diff_mu: float = 0.0
    diff_sd: float = 1.5
    bimodal: float = 0.0
    skill0: float = -0.5
    skill1: float = 1.5
    tau: float = 150.0
    walk: float = 0.01
    reward: str = "binary"
    estimator: str = "grpo"
    kl_coef: float = 0.0
    kl_growth: float = 0.05
    grad_spikes: float = 0.0
    mechanism: str | None = None
    c: np.ndarray | None = None
    const_value: float = 0.0
    onset: int | None = None

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-1.0, 4.0) if self.reward == "scaled" else (0.0, 1.0)


@dataclass
class Sim:
    """A simulated run: per-step scalars (trainer view) and per-group rewards.

    Attributes:
        steps: ``(T,)`` 1..T.
        metrics: canonical-ish name → ``(T,)`` per-step values (see :func:`simulate`).
        rewards: ``(T, N, G)`` rewards; ``advantages``: ``(T, N, G)`` what the loss saw.
        spec: the spec.
    """

    steps: np.ndarray
    metrics: dict[str, np.ndarray]
    rewards: np.ndarray
    advantages: np.ndarray
    spec: Spec
    extra: dict = field(default_factory=dict)


def schedule(
    T: int,
    onset: int,
    *,
    end: int | None = None,
    ramp: int = 1,
    c_max: float = 1.0,
    period: int | None = None,
) -> np.ndarray:
    """Intensity ``(T,)`` over steps 1..T: 0 before ``onset``, ramping to ``c_max`` over ``ramp``
    steps, back to 0 after ``end`` (inclusive); ``period`` makes square waves instead.

    >>> schedule(6, 3, end=4).tolist()
    [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    """
    t = np.arange(1, T + 1, dtype=np.float64)
    c = np.clip((t - onset + 1) / max(ramp, 1), 0.0, 1.0) * c_max
    if period:
        on = ((t - onset) // max(period // 2, 1)) % 2 == 0
        c = np.where(t >= onset, np.where(on, c_max, 0.0), 0.0)
    if end is not None:
        c[t > end] = 0.0
    return c


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def simulate(spec: Spec, rng: np.random.Generator) -> Sim:
    """Run the simulation; every random draw comes from ``rng``.

    Metric names (per step): reward_mean, reward_std (trainer semantics), reward_max,
    reward_min, zero_std_frac, acr (exact), adv_std, adv_zero_frac, adv_mean, adv_max, adv_min,
    loss, grad_norm, kl, entropy, length_mean, truncation_frac, clip_frac, learning_rate.
    """
    T, N, G = spec.steps, spec.N, spec.G
    t = np.arange(1, T + 1, dtype=np.float64)
    c = np.zeros(T) if spec.c is None else np.asarray(spec.c, dtype=np.float64)
    mech = spec.mechanism

    # Prompts and pass rates.
    d = rng.normal(spec.diff_mu, spec.diff_sd, size=spec.pool)
    if spec.bimodal > 0:
        k = rng.random(spec.pool) < spec.bimodal
        d[k] = np.where(rng.random(int(k.sum())) < 0.5, -1.5, 1.5) * spec.diff_sd + spec.diff_mu
    skill = spec.skill0 + (spec.skill1 - spec.skill0) * (1.0 - np.exp(-t / spec.tau))
    skill = skill + np.cumsum(rng.normal(0.0, spec.walk, size=T))
    if mech == "stall" and spec.onset is not None:
        skill[spec.onset - 1 :] = skill[spec.onset - 1]
    idx = rng.integers(0, spec.pool, size=(T, N))
    p = _sigmoid(skill[:, None] - d[idx])  # (T, N)
    if mech == "floor":
        p = p * (1.0 - c)[:, None]

    # Rewards (T, N, G).
    correct = rng.random((T, N, G)) < p[:, :, None]
    if spec.reward == "partial":
        fmt_p = 0.9 * (1.0 - c) if mech == "floor" else np.full(T, 0.9)
        fmt_ok = rng.random((T, N, G)) < fmt_p[:, None, None]
        r = np.where(correct, 0.8, 0.0) + np.where(fmt_ok, 0.2, 0.0)
    elif spec.reward == "scaled":
        r = correct * 5.0 - 1.0
    else:
        r = correct.astype(np.float64)
    if mech in ("identical", "stall", "volatile"):
        same = rng.random((T, N)) < c[:, None]
        r = np.where(same[:, :, None], r[:, :, :1], r)
    if mech == "constant":
        const = rng.random((T, N, G)) < c[:, None, None]
        r = np.where(const, spec.const_value, r)

    # Group statistics and advantages.
    mean = r.mean(axis=2)
    std = r.std(axis=2, ddof=1)
    collapsed = (r.max(axis=2) - r.min(axis=2)) <= 1e-6
    centred = r - mean[:, :, None]
    bstd = r.reshape(T, -1).std(axis=1, ddof=1)
    if spec.estimator == "dr_grpo":
        adv = centred
    elif spec.estimator == "batch":
        adv = centred / (bstd[:, None, None] + TRL_EPS)
    else:
        adv = centred / (std[:, :, None] + TRL_EPS)
    if mech == "plumbing":
        adv = adv * (1.0 - c)[:, None, None]

    m: dict[str, np.ndarray] = {}
    m["reward_mean"] = r.mean(axis=(1, 2))
    if spec.estimator == "batch":
        m["reward_std"] = bstd
        m["zero_std_frac"] = (bstd <= 1e-6).astype(np.float64)
    else:
        m["reward_std"] = std.mean(axis=1)
        m["zero_std_frac"] = collapsed.mean(axis=1)
    m["reward_max"] = r.max(axis=(1, 2))
    m["reward_min"] = r.min(axis=(1, 2))
    m["acr"] = collapsed.mean(axis=1)
    flat = adv.reshape(T, -1)
    m["adv_std"] = flat.std(axis=1)
    m["adv_zero_frac"] = (np.abs(flat) <= 1e-8).mean(axis=1)
    m["adv_mean"] = flat.mean(axis=1)
    m["adv_max"] = flat.max(axis=1)
    m["adv_min"] = flat.min(axis=1)

    # Optimisation scalars.
    lengths = rng.gamma(4.0, 50.0, size=(T, N, G)) + 20.0
    ent0 = rng.uniform(0.4, 0.9)
    entropy = ent0 * (0.55 + 0.45 * np.exp(-t / rng.uniform(150, 600)))
    entropy = entropy * (1.0 - 0.7 * (c if mech in ("identical", "volatile", "stall") else 0.0))
    m["entropy"] = entropy * rng.lognormal(0.0, 0.05, size=T)
    kl = spec.kl_growth * (t / T) ** 1.5 * rng.lognormal(0.0, 0.2, size=T) + 1e-4
    tok = (lengths * adv).reshape(T, -1).sum(axis=1) / lengths.reshape(T, -1).sum(axis=1)
    m["loss"] = -tok + spec.kl_coef * kl
    rms = np.sqrt((flat**2).mean(axis=1))
    gn = rms * rng.lognormal(np.log(0.35), 0.3, size=T) + spec.kl_coef * kl * 2.0
    if spec.grad_spikes > 0:
        spike = rng.random(T) < spec.grad_spikes
        # 5-30x the step's noise-free level (not of its noisy draw, which would reach ~55x)
        level = rms * 0.35 + spec.kl_coef * kl * 2.0
        gn = np.where(spike, level * rng.uniform(5, 30, size=T), gn)
    m["grad_norm"] = gn
    if spec.kl_coef > 0:
        m["kl"] = kl
    m["length_mean"] = lengths.mean(axis=(1, 2))
    m["truncation_frac"] = (lengths >= 700).mean(axis=(1, 2))
    m["clip_frac"] = np.abs(rng.normal(0.01, 0.004, size=T)) * (rms > 0)
    m["learning_rate"] = 1e-6 * (1.0 - t / (T + 1))
    return Sim(steps=t.astype(np.int64), metrics=m, rewards=r, advantages=adv, spec=spec)

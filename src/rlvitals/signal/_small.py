"""Small dense steps in plain Python, bit for bit what the numpy path computes.

A trainer's step of a few groups (TRL's tiny benchmark: 8 groups x G=8) costs the numpy path a
few dozen calls of fixed overhead, and inside a training loop each first pays for the caches the
model's step evicted: measured inside a TRL step, ~6 us per numpy call against ~0.5 us in a
tight loop, and a few us per Python statement. So this path does little per call: a group's
statistics, advantages and metric flags depend only on the multiset of its rewards (and the
config), so they are computed once per distinct group (:class:`_Group`, memoised) and a step
only looks its groups up, lays out the rows and sums the advantages for ``adv_std``. The
estimators use it when :func:`small_step` accepts the step, else the numpy path runs. Why the
numbers are the numpy path's to the bit:

- Sums: numpy's float64 group sums run in an order set by its SIMD width. Values that are all
  multiples of a power of two ``q`` sum exactly, in any order (so the order of a group's rows
  does not matter either), while every partial sum stays below ``2**53 q``; :class:`_Group`
  checks that bound (binary and partial-credit rewards pass it by far) and the step falls back
  otherwise. The same for the sums of squared deviations.
- float32 arithmetic: one operation done in float64 and rounded once to float32 is the
  correctly rounded float32 result (53 >= 2 * 24 + 2), as numpy computes it (:func:`r32`).
  Python scalars next to a float32 array are rounded to float32 first (NEP 50).
- Means of the advantages and of ACR windows: numpy's pairwise summation, which does not depend
  on the machine (:func:`pairwise_sum`).
- ``sqrt`` is correctly rounded in both; ``x ** 0.5`` on a scalar is C ``pow`` in both.
- A ``-0.0`` reward would share a memo entry with ``0.0``: such a step takes the numpy path.

tests/test_signal_small.py compares every result with the numpy path on random steps.
"""

from __future__ import annotations

import math
from array import array
from functools import reduce
from itertools import repeat
from operator import add, mul, sub
from typing import Any

import numpy as np

from rlvitals.signal.advantages import ZERO_ATOL
from rlvitals.signal.groups import ROUNDOFF_ULPS

__all__ = [
    "SMALL_MAX",
    "Plan",
    "SmallStep",
    "pairwise_sum",
    "plain_numbers",
    "plan_for",
    "r32",
    "small_eps",
    "small_step",
    "split_metrics",
    "spread",
]

SMALL_MAX = 256
"""Rows up to which a dense step takes the plain-Python path. Its cost grows with the rows,
numpy's hardly: measured (bench_estimators.py --part small with --small-groups/--small-group-size)
the plain path is ~2x cheaper at 64 rows, on par at ~256 with cold caches, ~2x dearer at 512."""
_LIMIT = 2.0**60
"""Rewards, reward bounds and 1/eps bounded by this keep every float32 value finite."""
_EXACT = 2.0**51
"""A sum is exact in any order when its terms' total stays below ``2**53 q``; half of that again
covers the round-off of the total we compare (it is computed in float64 itself)."""
_ROUNDOFF = {
    True: ROUNDOFF_ULPS * float(np.finfo(np.float32).eps),
    False: ROUNDOFF_ULPS * float(np.finfo(np.float64).eps),
}
"""``ROUNDOFF_ULPS * eps`` of float32 (True) and float64: the ``equal`` test of ``group_stats``."""
_EXACT_F32 = 2.0**22
""":data:`_EXACT` for a float32 sum (24-bit significand)."""
_NEG_ZERO = {c: np.array(-0.0, dtype=c).tobytes() for c in "fd"}
_LAYOUTS: dict[tuple[int, bytes], int | None] = {}
_LAYOUTS_MAX = 64
_GROUPS: dict[tuple, Any] = {}
_GROUPS_ROWS = [0]
_GROUPS_MAX_ROWS = 1 << 14
"""Memoised groups (and the results derived from each), cleared when they hold this many rows:
a few MiB at most, whatever the rewards."""


class _Inexact(Exception):
    """A group sum that might depend on the summation order: the numpy path decides."""


def r32(x: float) -> float:
    """``x`` rounded to float32 (as numpy's cast does)."""
    return array("f", (x,))[0]


def pairwise_sum(a: list[float], rnd: Any = None) -> float:
    """numpy's pairwise summation of ``a`` (``np.add.reduce`` of a contiguous array).

    ``rnd`` rounds every partial sum (:func:`r32` for a float32 array); None for float64.

    >>> pairwise_sum([0.1] * 10) == float(np.add.reduce(np.full(10, 0.1)))
    True
    """
    return _pairwise(a, 0, len(a), rnd)


def _pairwise(a: list[float], lo: int, n: int, rnd: Any) -> float:
    # numpy/_core/src/umath/loops_utils.h.src: 8 accumulators up to 128 values, halves above.
    if n < 8:
        res = -0.0
        for i in range(lo, lo + n):
            res = res + a[i] if rnd is None else rnd(res + a[i])
        return res
    if n <= 128:
        end = lo + n - n % 8
        if rnd is None:  # accumulator j adds a[j], a[j + 8], ... in order: a left fold
            r0, r1, r2, r3, r4, r5, r6, r7 = (reduce(add, a[lo + j : end : 8]) for j in range(8))
            res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            for i in range(end, lo + n):
                res += a[i]
            return res
        r = a[lo : lo + 8]
        for base in range(lo + 8, end, 8):
            r = [rnd(v + x) for v, x in zip(r, a[base : base + 8])]
        res = rnd(
            rnd(rnd(r[0] + r[1]) + rnd(r[2] + r[3])) + rnd(rnd(r[4] + r[5]) + rnd(r[6] + r[7]))
        )
        for i in range(end, lo + n):
            res = rnd(res + a[i])
        return res
    n2 = n // 2
    n2 -= n2 % 8
    left, right = _pairwise(a, lo, n2, rnd), _pairwise(a, lo + n2, n - n2, rnd)
    return left + right if rnd is None else rnd(left + right)


def spread(a: list[float]) -> float:
    """The population std of ``a`` as ``spread_and_zeros`` computes it from a float64 array:
    the pairwise mean, the pairwise mean of the squared deviations, ``** 0.5``."""
    n = len(a)
    mu = pairwise_sum(a) / n
    d = list(map(sub, a, repeat(mu)))
    return (pairwise_sum(list(map(mul, d, d))) / n) ** 0.5


def _grain(values: Any) -> float:
    """The largest power of two (at most 1) that divides every value; 0.0 if too small."""
    den = 1
    for v in values:
        if v:
            d = v.as_integer_ratio()[1]
            if d > den:
                den = d
    return math.ldexp(1.0, 1 - den.bit_length())


def _layout(group_ids: np.ndarray) -> int | None:
    """G when the ids come in G-sized runs of strictly increasing values (as ``Ops``), else None.

    Memoised on the ids' bytes: a trainer sends the same ids every step.
    """
    key = (group_ids.dtype.num, group_ids.tobytes())
    if key in _LAYOUTS:
        return _LAYOUTS[key]
    ids = group_ids.tolist()
    n, first = len(ids), ids[0]
    g = 1
    while g < n and ids[g] == first:
        g += 1
    out: int | None = g
    if n % g:
        out = None
    else:
        for s in range(0, n, g):
            v = ids[s]
            if (s and not v > ids[s - 1]) or ids[s : s + g].count(v) != g:
                out = None
                break
    if len(_LAYOUTS) >= _LAYOUTS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS[key] = out
    return out


def small_eps(eps: Any) -> bool:
    """Whether the plain-Python path takes this GRPO eps: > 0, and 1/eps within :data:`_LIMIT`."""
    return eps * _LIMIT >= 1.0


def plain_numbers(*values: Any) -> bool:
    """Python ints and floats within :data:`_LIMIT`: numpy treats them as weak scalars (NEP 50)."""
    return all(type(v) in (int, float) and abs(v) <= _LIMIT for v in values)


class _Group:
    """Statistics of one group, from its sorted rewards, for one dtype, ddof and tau.

    What ``group_stats`` holds for the group (``mean_w`` float64, ``mean`` and ``std`` in the
    rewards' dtype, ``equal``, ``collapsed``) and ``dev``, the centred value of each distinct
    reward. Results derived from it (advantages, split flags) are memoised in ``derived``.
    """

    __slots__ = (
        "G",
        "collapsed",
        "derived",
        "dev",
        "equal",
        "mean",
        "mean_w",
        "rnd",
        "std",
        "values",
        "weight",
        "weight_grain",
    )

    def __init__(self, values: tuple, rnd: Any, ddof: int, tau: float, roundoff: float):
        g = self.G = len(values)
        self.values, self.rnd, self.derived = values, rnd, {}
        distinct = set(values)
        q = _grain(distinct)
        top = max(values[-1], -values[0])
        if top > _LIMIT or g * top > _EXACT * q:
            raise _Inexact
        mean_w = self.mean_w = sum(values) / g
        mean = self.mean = rnd(mean_w)
        dev = self.dev = {x: rnd(x - mean) for x in distinct}
        ss = sum([dev[x] * dev[x] for x in values])
        q = min(q, _grain((mean,)))  # every deviation is a multiple of the finer grain
        if ss > _EXACT * q * q:
            raise _Inexact
        unbiased = math.sqrt(ss / (g - 1.0))
        self.equal = unbiased <= max(abs(mean_w), 1.0) * roundoff
        self.collapsed = unbiased <= tau or self.equal
        self.std = rnd(unbiased if ddof == 1 else math.sqrt(ss / g))
        weight = self.weight = rnd(g * mean)  # count * mean of batch_mean, in the dtype
        self.weight_grain = _grain((weight,))

    def _scaled(self, dev: dict, scale: float) -> tuple[dict, int]:
        """``({reward: advantage}, rows with |A| <= ZERO_ATOL)``."""
        rnd = self.rnd
        adv = {x: rnd(d * scale) for x, d in dev.items()}
        return adv, sum([1 for x in self.values if -ZERO_ATOL <= adv[x] <= ZERO_ATOL])

    def advantages(self, key: tuple) -> tuple[dict, int]:
        """``advantages_from_stats(stats, method, eps)`` of this group; ``key`` is
        ``(method, eps)`` (eps > 0 for grpo)."""
        out = self.derived.get(key)
        if out is None:
            method, eps = key
            rnd, g = self.rnd, float(self.G)
            if self.equal:  # teaches nothing: every scale is 0
                scale = 0.0
            elif method == "grpo":
                scale = rnd(1.0 / rnd(self.std + rnd(eps)))
            elif method == "dr_grpo":
                scale = 1.0
            else:  # rloo: c / (c - 1)
                scale = rnd(g / (g - 1.0))
            out = self.derived[key] = self._scaled(self.dev, scale)
        return out

    def weighted(self, key: tuple, weight: float) -> tuple[dict, int]:
        """:meth:`advantages` times ``weight`` (a float32 value for float32 rewards)."""
        wkey = ("weighted", key, weight)
        out = self.derived.get(wkey)
        if out is None:
            amap, _ = self.derived.get(key) or self.advantages(key)
            out = self.derived[wkey] = self._scaled(amap, weight)
        return out

    def virtual(self, key: tuple, ddof: int) -> tuple:
        """GRPO advantages once ``k`` virtual rewards (mean ``mean_v``, squared deviations
        ``ss_v``, in the rewards' dtype) join the group: ``GroupStats.with_virtual`` (see
        there) then ``advantages_from_stats``, operation for operation. ``key`` is
        ``("virtual", k, mean_v, ss_v, eps)``."""
        out = self.derived.get(key)
        if out is None:
            _, k, mean_v, ss_v, eps = key
            rnd, g, m, s = self.rnd, float(self.G), self.mean, self.std
            gk = rnd(g + k)
            real_ss = rnd(rnd(s * s) * (g - ddof))
            mean = rnd(rnd(rnd(g * m) + rnd(k * mean_v)) / gk)
            gap = rnd(m - mean_v)
            ss = rnd(rnd(real_ss + ss_v) + rnd(rnd(rnd(rnd(g * k) / gk) * gap) * gap))
            std = rnd(math.sqrt(rnd(ss / rnd(gk - ddof))))
            dev = {x: rnd(x - mean) for x in self.dev}
            out = self.derived[key] = self._scaled(dev, rnd(1.0 / rnd(std + rnd(eps))))
        return out

    def at_bounds(self, key: tuple) -> tuple[bool, bool]:
        """``split_masks`` of this group: (collapsed at r_max, collapsed at r_min); ``key`` is
        ``("split", r_min, r_max, tau)``."""
        out = self.derived.get(key)
        if out is None:
            _, r_min, r_max, tau = key
            rnd, m = self.rnd, self.mean
            top = self.collapsed and abs(rnd(m - rnd(r_max))) <= rnd(tau * max(1.0, abs(r_max)))
            low = abs(rnd(m - rnd(r_min))) <= rnd(tau * max(1.0, abs(r_min)))
            out = self.derived[key] = (top, self.collapsed and not top and low)
        return out


class SmallStep:
    """A small dense step without NaN: its groups' rows and each group's :class:`_Group`.

    Made by :func:`small_step`. Lists are per group, in sorted-id order (as ``group_stats``).
    """

    __slots__ = ("G", "dtype", "f32", "groups", "k", "stats")

    def __init__(self, g: int, dtype: Any, groups: list, stats: list):
        self.G, self.dtype, self.groups, self.stats = g, dtype, groups, stats
        self.k, self.f32 = len(groups), dtype.char == "f"

    @property
    def collapsed(self) -> list[bool]:
        return [s.collapsed for s in self.stats]

    def assemble(self, per_group: list[tuple[dict, int]]) -> tuple[list[float], Any, int, int]:
        """``(adv list, adv array, rows with |A| <= ZERO_ATOL, groups all such)`` from each
        group's ``({reward: advantage}, zeros)``."""
        adv: list[float] = []
        zeros = dead = 0
        g = self.G
        for rows, (amap, z) in zip(self.groups, per_group):
            adv.extend(map(amap.__getitem__, rows))
            zeros += z
            dead += z == g
        return adv, np.array(adv, dtype=self.dtype), zeros, dead

    def advantages(self, plan: Plan) -> tuple[list[float], Any, int, int]:
        """``advantages_from_stats(stats, plan.method, plan.eps)``: see :meth:`assemble`."""
        key = plan.adv_key
        return self.assemble([s.derived.get(key) or s.advantages(key) for s in self.stats])

    def split(self, plan: Plan) -> tuple[list[bool], list[bool]]:
        """``split_masks(stats, r_min=..., r_max=..., tau=...)`` of the plan, as lists."""
        key = plan.split_key
        flags = [s.derived.get(key) or s.at_bounds(key) for s in self.stats]
        return [a for a, _ in flags], [b for _, b in flags]

    def metrics(self, adv: tuple, plan: Plan) -> dict:
        """``common_metrics`` of this step, ``adv`` an :meth:`assemble` result."""
        adv_list, _, zeros, dead = adv
        n, k = len(adv_list), self.k
        key, n_col, n_all, n_none = plan.split_key, 0, 0, 0
        for s in self.stats:
            at_max, at_min = s.derived.get(key) or s.at_bounds(key)
            n_col += s.collapsed
            n_all += at_max
            n_none += at_min
        return split_metrics(k, n_col, n_all, n_none, dead, spread(adv_list), zeros / n)

    def batch_mean(self) -> float:
        """``GroupStats.batch_mean``: the count-weighted mean of the group means.

        numpy sums the weights ``count * mean`` in the rewards' dtype, pairwise; when they are
        multiples of a grain ``q`` whose total stays below ``2**p q`` (p the dtype's mantissa
        bits: every partial sum exact), that is their plain sum.
        """
        weights = [s.weight for s in self.stats]
        q = min([s.weight_grain for s in self.stats])
        total = sum(map(abs, weights))
        n = float(self.G * self.k)
        if total <= (_EXACT_F32 if self.f32 else _EXACT) * q:
            return sum(weights) / n
        return pairwise_sum(weights, rnd=r32 if self.f32 else None) / n


def small_step(rewards: Any, group_ids: Any, plan: Plan) -> SmallStep | None:
    """:class:`SmallStep` of a dense numpy step of 2..SMALL_MAX rows, G >= 2, no NaN or -0.0.

    None when the step does not qualify or a sum would not be exact in every order (then the
    numpy path gives the answer).
    """
    if type(rewards) is not np.ndarray or type(group_ids) is not np.ndarray:
        return None
    dtype = rewards.dtype
    shape = rewards.shape
    if (
        len(shape) != 1
        or not 2 <= shape[0] <= SMALL_MAX
        or group_ids.shape != shape
        or dtype.char not in "fd"  # native float32, float64 (a swapped byte order is not)
        or not dtype.isnative
        or group_ids.dtype.kind not in "iu"
    ):
        return None
    g = _layout(group_ids)
    if g is None or g < 2:
        return None
    rows = rewards.tolist()
    if not math.isfinite(sum(rows)) or _has_negative_zero(rewards, dtype.char):
        return None  # a NaN or inf reward (or a float64 overflow); -0.0 (see the module doc)
    f32, ddof, tau, get = dtype.char == "f", plan.ddof, plan.tau, _GROUPS.get
    groups = [rows[s : s + g] for s in range(0, len(rows), g)]
    stats = [get((f32, ddof, tau, tuple(sorted(grp)))) for grp in groups]
    if None in stats:
        try:
            stats = [
                s or _new_group((f32, ddof, tau, tuple(sorted(grp))))
                for s, grp in zip(stats, groups)
            ]
        except _Inexact:
            return None
    return SmallStep(g, dtype, groups, stats)


def _new_group(key: tuple) -> _Group:
    f32, ddof, tau, values = key
    grp = _Group(values, r32 if f32 else float, ddof, tau, _ROUNDOFF[f32])
    _GROUPS_ROWS[0] += len(values)
    if _GROUPS_ROWS[0] > _GROUPS_MAX_ROWS:
        _GROUPS.clear()
        _GROUPS_ROWS[0] = len(values)
    _GROUPS[key] = grp
    return grp


class Plan:
    """What one estimator config asks of the small path, checked and converted once.

    Attributes: ``method`` (grpo, dr_grpo, rloo), ``eps`` (float), ``ddof``, ``tau`` (the
    collapse tolerance as ``group_stats`` takes it, a float), ``r_min``/``r_max``, and the keys
    of the results memoised on each group.
    """

    __slots__ = ("adv_key", "ddof", "eps", "method", "r_max", "r_min", "split_key", "tau")

    def __init__(self, method: str, eps: float, ddof: int, tau: float, r_min: Any, r_max: Any):
        self.method, self.eps, self.ddof, self.tau = method, eps, ddof, tau
        self.r_min, self.r_max = r_min, r_max
        self.adv_key = (method, eps)
        self.split_key = ("split", r_min, r_max, tau)


_PLANS: dict[tuple[int, str], tuple[Any, Plan | None]] = {}
_PLANS_MAX = 64


def plan_for(config: Any, method: str, eps: Any, ddof: int, *plain: Any) -> Plan | None:
    """The :class:`Plan` of ``config`` (any estimator config with ``tau``, ``r_min``, ``r_max``),
    or None when the small path does not take it: grpo with eps not in ``[2**-60, inf)``, or
    a number numpy would not treat as a weak Python scalar among ``r_min``, ``r_max`` and
    ``plain``. Memoised per config object (configs are frozen)."""
    key = (id(config), method)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is config:
        return hit[1]
    ok = (method != "grpo" or small_eps(eps)) and plain_numbers(config.r_min, config.r_max, *plain)
    tau = float(config.tau)  # check_tau's value; the config validated it
    plan = Plan(method, float(eps), ddof, tau, config.r_min, config.r_max) if ok else None
    if len(_PLANS) >= _PLANS_MAX:
        _PLANS.clear()
    _PLANS[key] = (config, plan)
    return plan


def _has_negative_zero(rewards: np.ndarray, char: str) -> bool:
    raw, pattern, size = rewards.tobytes(), _NEG_ZERO[char], rewards.itemsize
    i = raw.find(pattern)
    while i >= 0:
        if i % size == 0:
            return True
        i = raw.find(pattern, i + 1)
    return False


def split_metrics(
    k: int, n_col: int, n_all: int, n_none: int, dead: int, adv_std: float, adv_zero: float
) -> dict[str, float]:
    """The common estimator metrics from the counts of ``k`` groups (both paths end here)."""
    return {
        "acr": n_col / k,
        "acr_residual": dead / k,
        "acr_solve_all": n_all / k,
        "acr_solve_none": n_none / k,
        "acr_flat": (n_col - n_all - n_none) / k,
        "adv_std": adv_std,
        "adv_zero_frac": adv_zero,
    }

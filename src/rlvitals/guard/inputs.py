"""What the live guard takes from a training loop, checked and brought to host numpy arrays.

Bad *arguments* raise at the call (they are bugs in the caller, as with the
:class:`~rlvitals.Recorder`): a step that is no integer, shapes that disagree, rewards that are
not numbers. Values are read without copying where numpy allows; torch tensors on any device
are detached and moved to the host (bfloat16 and friends as float32).

Also here: a step's scalars as the window reads them (:func:`plain_scalars`).

>>> r, g, adv, lens = step_groups([[1.0, 0.0], [1.0, 1.0]], None, None, None)
>>> r.tolist(), g.tolist()
([1.0, 0.0, 1.0, 1.0], [0, 0, 1, 1])
>>> plain_scalars({"loss": 1, "name": "x", "kl": None})
{'loss': 1.0, 'kl': nan}
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

__all__ = [
    "check_step",
    "host_array",
    "number",
    "plain_recorder",
    "plain_scalars",
    "prompt_list",
    "step_groups",
]


def check_step(step: Any) -> int:
    """``step`` as an int (a 0-d torch tensor or a numpy integer too); TypeError otherwise."""
    if type(step).__module__.startswith("torch") and getattr(step, "ndim", 1) == 0:
        step = step.item()
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)):
        raise TypeError(f"step must be an integer, got {step!r}")
    return int(step)


def host_array(x: Any, name: str) -> np.ndarray:
    """``x`` (numpy, torch on any device, a list) as a numpy array of numbers."""
    if type(x).__module__.startswith("torch"):
        t = x.detach().cpu()
        try:
            return t.numpy()
        except TypeError:  # bfloat16 and friends
            return t.float().numpy()
    a = np.asarray(x)
    if a.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numbers, got dtype {a.dtype}")
    return a


def step_groups(rewards: Any, group_ids: Any, advantages: Any, lengths: Any) -> tuple:
    """``(rewards (n,), group_ids (n,), advantages (n,) or None, lengths (n,) or None)`` of one
    step: ``(N, G)`` rewards get one group per row; float rewards stay float32 or float64."""
    r = host_array(rewards, "rewards")
    if r.dtype.kind != "f" or r.dtype.itemsize > 8:
        r = r.astype(np.float64)
    elif r.dtype.itemsize < 4:
        r = r.astype(np.float32)
    if group_ids is None:
        if r.ndim != 2:
            raise ValueError(
                f"rewards of shape {r.shape} need group_ids (n,); or pass (N, G) rewards"
            )
        n_groups, size = r.shape
        r = r.reshape(-1)
        g = np.repeat(np.arange(n_groups, dtype=np.int64), size)
    else:
        if r.ndim != 1:
            raise ValueError(f"rewards with group_ids must be (n,), got shape {r.shape}")
        g = host_array(group_ids, "group_ids").reshape(-1)
        if g.shape != r.shape:
            raise ValueError(f"rewards {r.shape} and group_ids {g.shape} differ")
    rows = []
    for name, x in (("advantages", advantages), ("lengths", lengths)):
        a = None if x is None else host_array(x, name).reshape(-1)
        if a is not None and a.shape != r.shape:
            raise ValueError(f"{name} {a.shape} and rewards {r.shape} differ")
        rows.append(a)
    return r, g, *rows


def plain_recorder(rec: Any) -> bool:
    """Whether ``rec`` is a :class:`~rlvitals.recording.Recorder` itself (not a subclass or a
    stand-in), whose private paths may skip the checks the monitor made (no import here: if
    the module is not loaded, no recorder of it exists)."""
    mod = sys.modules.get("rlvitals.recording.writer")
    return mod is not None and type(rec) is mod.Recorder


def prompt_list(prompts: Any) -> list | None:
    """One prompt id per group as a plain list."""
    if prompts is None:
        return None
    if type(prompts).__module__.startswith("torch"):
        prompts = prompts.detach().cpu().numpy()
    if isinstance(prompts, np.ndarray):
        return prompts.tolist()
    return list(prompts)


def plain_scalars(values: dict[str, Any]) -> dict[Any, float]:
    """``values`` as the window reads them: numbers as floats (None as NaN), the rest left
    out (no torch tensors kept)."""
    out = {}
    for k, v in values.items():
        x = number(v)
        if x is not None:
            out[k] = x
    return out


def number(v: Any) -> float | None:
    """A logged value as a float (None as NaN; a huge int as +/-inf); None for a non-number."""
    t = type(v)
    if t is float:
        return v
    if t is bool or t is int:
        try:
            return float(v)
        except OverflowError:
            return math.inf if v > 0 else -math.inf
    if isinstance(v, (np.integer, np.floating, np.bool_)):
        return float(v)
    if t.__module__.startswith("torch") and getattr(v, "ndim", 1) == 0:
        try:
            return float(v.item())
        except (TypeError, ValueError, RuntimeError):
            return None
    if v is None:
        return math.nan
    return None

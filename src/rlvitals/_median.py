"""``np.median`` and ``np.nanmedian``, bit for bit, without importing ``numpy.ma``.

numpy's median checks every result for a masked array, and the first call imports
``numpy.ma``: ~45 M instructions, about 9 ms, of a doctor start-up whose own work on a small
log is ~5 ms. The detectors and vitals take many small medians, so they use these. Same
selection (``np.partition``), same arithmetic (the two middle values are summed and halved in
the input's float type, integers in float64), NaN wherever numpy gives NaN (a NaN in the
slice), NaN without a warning for an empty input.

>>> import numpy as np
>>> x = np.array([3.0, 1.0, 2.0, 10.0])
>>> bool(median(x) == np.median(x)), float(median(x[:3])), float(nanmedian([1.0, np.nan, 3.0]))
(True, 2.0, 2.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["median", "nanmedian"]


def median(x: Any, axis: int | None = None) -> Any:
    """``np.median(x, axis=axis)`` for ``axis`` None (a float) or the last axis (an array)."""
    a = np.asarray(x)
    if a.dtype.kind in "biu":
        a = a.astype(np.float64)
    if axis is None:
        a = a.ravel()
    elif axis not in (-1, a.ndim - 1):
        raise ValueError(f"median over axis {axis} of a {a.ndim}-d array: only the last one")
    n = a.shape[-1]
    if n == 0:
        return np.float64(np.nan) if axis is None else np.full(a.shape[:-1], np.nan)
    half = n // 2
    kth = [half - 1, half] if n % 2 == 0 else [half]
    if a.dtype.kind == "f":
        kth.append(n - 1)  # partition puts NaNs last: the last slot says if the slice has one
    part = np.partition(a, kth, axis=-1)
    if axis is None:  # plain indexing: numpy scalars, as np.median returns (not 0-d arrays)
        if a.dtype.kind == "f" and np.isnan(part[-1]):
            return part[-1]
        return part[half] if n % 2 else (part[half - 1] + part[half]) / 2
    mid = part[..., half] if n % 2 else (part[..., half - 1] + part[..., half]) / 2
    if a.dtype.kind == "f":
        nan = np.isnan(part[..., -1])
        if nan.any():
            mid = np.where(nan, part[..., -1], mid)
    return mid


def nanmedian(x: Any) -> Any:
    """``np.nanmedian(x)``: the median of the non-NaN values, NaN (no warning) when none."""
    a = np.asarray(x).ravel()
    if a.dtype.kind == "f":
        a = a[~np.isnan(a)]
    return median(a) if a.size else np.float64(np.nan)

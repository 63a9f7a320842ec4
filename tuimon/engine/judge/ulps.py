"""Two float64 values, or two columns of them, compared bit for bit: equal, the absolute and
relative difference, and the distance in ULPs (units in the last place).

`diff_arrays` is the one vectorised judge; `diff_floats` and `same_bits` judge one pair of
plain Python floats the same way, bit for bit.
"""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np

from tuimon.store.aligned import MetricDiff


def _ordered(bits: np.ndarray) -> np.ndarray:
    """float64 bit patterns mapped to int64s that order like the floats."""
    return np.where(bits < 0, -(bits & np.int64(0x7FFFFFFFFFFFFFFF)), bits)


_BITS = struct.Struct("<d")


def same_bits(a: float, b: float) -> bool:
    """One pair of values judged as `diff_arrays` judges arrays: the same 64 bits, or both NaN
    (0.0 and -0.0 differ). The one judge of "differs", for the panes as for the verdict."""
    return _BITS.pack(a) == _BITS.pack(b) or (a != a and b != b)


def diff_arrays(a: np.ndarray, b: np.ndarray, *, ulps: bool = True) -> tuple[Any, ...]:
    """Vectorised diffs of two float64 arrays: (equal, abs, rel, ulps).

    Bitwise equality treats NaN == NaN (any NaN payload); 0.0 and -0.0 differ (by 1 ulp).
    NaN against a number, or inf against anything else, has rel = inf and ulps = -1 for NaN.
    ulps is int64, or an object array of Python ints where a distance does not fit; None
    when not asked for (`ulps=False`: no aligned step will show it).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    equal = a.view(np.int64) == b.view(np.int64)
    if equal.all():  # the usual block of a reproducible pair: every distance is 0
        zeros = np.zeros(a.shape, np.int64) if ulps else None
        return equal, np.zeros(a.shape), np.zeros(a.shape), zeros
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        equal |= nan_a & nan_b
        absd = np.abs(a - b)
        scale = np.maximum(np.abs(a), np.abs(b))
        rel = np.where(scale > 0, absd / scale, 0.0)
        huge = np.isinf(absd) & np.isfinite(a) & np.isfinite(b)
        if huge.any():  # |a - b| overflowed: take the ratio of scaled values
            rel = np.where(huge, np.abs(a / scale - b / scale), rel)
    odd = (nan_a != nan_b) | (np.isinf(a) | np.isinf(b)) & ~equal
    absd = np.where(equal, 0.0, np.where(odd, np.inf, absd))
    rel = np.where(equal, 0.0, np.where(odd, np.inf, rel))
    return equal, absd, rel, _ulps(a, b, equal, nan_a | nan_b) if ulps else None


def _ulps(a: np.ndarray, b: np.ndarray, equal: np.ndarray, nan: np.ndarray) -> np.ndarray:
    oa, ob = _ordered(a.view(np.int64)), _ordered(b.view(np.int64))
    hi, lo = np.maximum(oa, ob).astype(np.uint64), np.minimum(oa, ob).astype(np.uint64)
    dist = hi - lo  # exact modulo 2**64, and the true distance is below 2**64
    dist = np.where(~equal & (dist == 0), np.uint64(1), dist)  # 0.0 against -0.0
    dist = np.where(equal, np.uint64(0), dist)
    if (dist >= np.uint64(2**63)).any():
        out = dist.astype(object)
        out[nan & ~equal] = -1
        return out
    signed = dist.astype(np.int64)
    signed[nan & ~equal] = -1
    return signed


_INT = struct.Struct("<q")
_SIGN = 0x7FFFFFFFFFFFFFFF
_INF = math.inf


def _ordered_int(x: float) -> int:
    """A float64's bit pattern as an int that orders like the floats (`_ordered`)."""
    bits: int = _INT.unpack(_BITS.pack(x))[0]
    return -(bits & _SIGN) if bits < 0 else bits


def diff_floats(x: float, y: float) -> MetricDiff:
    """`diff_arrays` for one pair of values, in plain Python floats: the same equality
    (`same_bits`), abs, rel and ULPs, bit for bit (a small block's judge)."""
    if x == y:
        if x or math.copysign(1.0, x) == math.copysign(1.0, y):
            return MetricDiff(x, y, True, 0.0, 0.0, 0)
        return MetricDiff(x, y, False, 0.0, 0.0, 1)  # 0.0 against -0.0
    nan_x, nan_y = x != x, y != y
    if nan_x and nan_y:
        return MetricDiff(x, y, True, 0.0, 0.0, 0)
    if nan_x or nan_y:
        return MetricDiff(x, y, False, _INF, _INF, -1)
    dist = abs(_ordered_int(x) - _ordered_int(y)) or 1
    if x in (_INF, -_INF) or y in (_INF, -_INF):
        return MetricDiff(x, y, False, _INF, _INF, dist)
    absd = abs(x - y)
    scale = max(abs(x), abs(y))
    # scale > 0 (x != y); where |x - y| overflowed, the ratio of scaled values
    rel = abs(x / scale - y / scale) if absd == _INF else absd / scale
    return MetricDiff(x, y, False, absd, rel, dist)

"""Bounded series for plots: per-bucket maxima for the sparkline, decimated curves for charts.

Both keep a fixed number of float64 slots however long the run is: when full, neighbouring
buckets merge (the bucket width doubles). Nothing here imports textual.
"""

from __future__ import annotations

import math

import numpy as np

EQUAL_LEVEL = -18.0
"""Level of a bitwise-equal step: below any real log10 relative difference (>= ~1.1e-16)."""
ZERO_LEVEL = -17.0
"""Level of a step that differs in bits but not in value (digests, 0.0 vs -0.0)."""
TOP_LEVEL = 1.0
"""Level of NaN / infinite relative differences (a finite one is at most log10(2))."""
REAL_FLOOR = -16.5


def levels(rel: np.ndarray, equal: np.ndarray) -> np.ndarray:
    """log10 of relative differences, with bitwise-equal steps at `EQUAL_LEVEL`."""
    rel = np.asarray(rel, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        real = np.log10(np.clip(rel, 10**REAL_FLOOR, None))
    out = np.where(rel > 0, real, ZERO_LEVEL)
    out = np.where(np.isfinite(rel), out, TOP_LEVEL)
    return np.where(np.asarray(equal, dtype=bool), EQUAL_LEVEL, out)


class BucketSeries:
    """At most `size` buckets, each the maximum of `width` consecutive points."""

    def __init__(self, size: int = 200) -> None:
        if size < 2 or size % 2:
            raise ValueError("size must be an even number >= 2")
        self.size = size
        self.width = 1
        self.points = 0
        self._values = np.full(size, -np.inf)
        self._used = 0
        """Buckets holding data; the last may be partly filled."""

    def extend(self, values: np.ndarray | list[float]) -> None:
        """Append points (NaN counts as the top of the scale)."""
        data = np.asarray(values, dtype=np.float64)
        data = np.where(np.isnan(data), TOP_LEVEL, data)
        while data.size:
            fill = self.points % self.width
            if fill:  # top up the partly filled last bucket
                take = min(self.width - fill, data.size)
                last = self._used - 1
                self._values[last] = max(self._values[last], float(data[:take].max()))
            else:
                if self._used == self.size:
                    self._merge()
                    continue
                room = (self.size - self._used) * self.width
                take = min(room, data.size)
                chunk = data[:take]
                whole = take // self.width * self.width
                n_whole = whole // self.width
                if n_whole:
                    maxima = chunk[:whole].reshape(n_whole, self.width).max(axis=1)
                    self._values[self._used : self._used + n_whole] = maxima
                    self._used += n_whole
                if take > whole:
                    self._values[self._used] = chunk[whole:].max()
                    self._used += 1
            self.points += take
            data = data[take:]

    def _merge(self) -> None:
        pairs = self._values.reshape(-1, 2).max(axis=1)
        self._values[:] = -np.inf
        self._values[: self.size // 2] = pairs
        self._used = self.size // 2
        self.width *= 2

    def data(self) -> list[float]:
        """The bucket maxima, oldest first."""
        return self._values[: self._used].tolist()

    def __len__(self) -> int:
        return self._used


class CurveSeries:
    """A decimated curve: every `stride`-th point of (x, y), at most `size` of them."""

    def __init__(self, size: int = 1024) -> None:
        if size < 2 or size % 2:
            raise ValueError("size must be an even number >= 2")
        self.size = size
        self.stride = 1
        self.points = 0
        self._x = np.empty(size)
        self._y = np.empty(size)
        self._used = 0
        self.last: tuple[float, float] | None = None
        """The newest point, kept whatever the stride, so the curve reaches the end."""

    def extend(self, xs: np.ndarray | list[float], ys: np.ndarray | list[float]) -> None:
        """Append points."""
        x = np.asarray(xs, dtype=np.float64)
        y = np.asarray(ys, dtype=np.float64)
        if not x.size:
            return
        self.last = (float(x[-1]), float(y[-1]))
        index = self.points + np.arange(x.size)
        self.points += x.size
        while True:
            keep = index % self.stride == 0
            x, y, index = x[keep], y[keep], index[keep]
            take = min(self.size - self._used, x.size)
            self._x[self._used : self._used + take] = x[:take]
            self._y[self._used : self._used + take] = y[:take]
            self._used += take
            x, y, index = x[take:], y[take:], index[take:]
            if not x.size:
                return
            half = self.size // 2  # full: keep every other point, double the stride
            self._x[:half] = self._x[: self.size : 2]
            self._y[:half] = self._y[: self.size : 2]
            self._used = half
            self.stride *= 2

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the kept points plus the newest point."""
        x, y = self._x[: self._used], self._y[: self._used]
        if self.last is not None and (not x.size or x[-1] != self.last[0]):
            x = np.append(x, self.last[0])
            y = np.append(y, self.last[1])
        return x, y

    def __len__(self) -> int:
        return self._used


def finite_log10(values: np.ndarray) -> np.ndarray:
    """log10 of positive values, NaN elsewhere."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(values > 0, np.log10(np.where(values > 0, values, 1.0)), math.nan)

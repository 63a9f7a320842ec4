"""A band per metric (`--tolerance-from SWEEP`): how far repeated runs of one seed were seen to
differ, used as the limit of "close enough" instead of one relative tolerance.

Each metric's band is the largest absolute and the largest relative difference between any two
repeats, over every step they share (`tuimon.engine.analyses.band_from` measures it). A
difference lies inside the band when both its absolute and its relative difference are at most
the band's; a metric that was bitwise equal in every repeat (band 0) must be bitwise equal. A
metric the repeats never logged is judged with the pair's `--tolerance`. Parameter digests that
differ are inside a band that is not bitwise (the repeats' parameters differ too).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Band:
    """name -> (largest abs, largest rel) difference seen between repeats; where it came from."""

    metrics: dict[str, tuple[float, float]]
    source: str = ""
    """The sweep the band was measured on (its id)."""
    runs: int = 0
    """Runs measured (two a pair)."""
    seeds: list[int] = field(default_factory=list)
    steps: int = 0
    """Steps measured (the most any metric was seen at)."""
    digests_differ: bool = False
    """The repeats' parameter digests differed at some step."""

    @property
    def exact(self) -> bool:
        """The repeats were bitwise equal (every metric, every digest): the band is bitwise,
        judged as tolerance 0."""
        return not self.digests_differ and all(a == 0 and r == 0 for a, r in self.metrics.values())

    def limit(self, name: str) -> tuple[float, float] | None:
        """(abs, rel) of `name`'s band; None: the repeats never logged it."""
        return self.metrics.get(name)

    def outside(self, name: str, tolerance: float, absd: float, rel: float) -> bool:
        """Whether one differing value of `name` lies outside the band (NaN is outside)."""
        got = self.metrics.get(name)
        if got is None:
            return tolerance == 0 or not rel <= tolerance
        a, r = got
        if a == 0 and r == 0:
            return True
        return not (absd <= a and rel <= r)

    def outside_rows(
        self,
        names: list[str],
        tolerance: float,
        both: np.ndarray,
        equal: np.ndarray,
        absd: np.ndarray,
        rel: np.ndarray,
    ) -> np.ndarray:
        """`outside` for a group of metrics x rows at once (a bool array of that shape)."""
        lim_a = np.empty(len(names))
        lim_r = np.empty(len(names))
        strict = np.zeros(len(names), bool)
        for i, name in enumerate(names):
            got = self.metrics.get(name)
            if got is None:
                lim_a[i], lim_r[i], strict[i] = math.inf, tolerance, tolerance == 0
            else:
                lim_a[i], lim_r[i] = got
                strict[i] = got == (0.0, 0.0)
        with np.errstate(invalid="ignore"):
            inside = (absd <= lim_a[:, None]) & (rel <= lim_r[:, None]) & ~strict[:, None]
        return both & ~equal & ~inside

    def words(self, name: str | None = None) -> str:
        """`the band abs 3.1e-06, rel 2e-06 (10 runs of sweep ID)`; of one metric, or of the
        whole band (its widest)."""
        where = f"{self.runs} runs of sweep {self.source}" if self.source else f"{self.runs} runs"
        if name is not None and (got := self.metrics.get(name)) is not None:
            a, r = got
            if a == 0 and r == 0:
                return f"the band: bitwise equal in all {where}"
            return f"the band abs {a:.3g}, rel {r:.3g} ({where})"
        if name is not None:
            return f"no band ({where} never logged it)"
        return f"the band of {len(self.metrics)} metrics ({where})"

    def to_dict(self) -> dict[str, Any]:
        """For pair.json, the summary and `--json`."""
        return {
            "source": self.source,
            "runs": self.runs,
            "seeds": list(self.seeds),
            "steps": self.steps,
            "digests_differ": self.digests_differ,
            "rule": "inside when abs <= band abs and rel <= band rel (a band of 0: bitwise)",
            "metrics": {k: {"abs": a, "rel": r} for k, (a, r) in self.metrics.items()},
        }

    @classmethod
    def from_dict(cls, raw: object) -> Band | None:
        """A band as `to_dict` wrote it; None when `raw` is not one (damaged, or absent)."""
        if not isinstance(raw, Mapping) or not isinstance(raw.get("metrics"), Mapping):
            return None
        metrics: dict[str, tuple[float, float]] = {}
        for name, value in raw["metrics"].items():
            if not isinstance(value, Mapping):
                return None
            a, r = value.get("abs"), value.get("rel")
            if not all(_limit(x) for x in (a, r)):
                return None
            metrics[str(name)] = (float(a), float(r))  # type: ignore[arg-type]
        seeds = raw.get("seeds")
        return cls(
            metrics,
            str(raw.get("source") or ""),
            int(raw["runs"]) if _count(raw.get("runs")) else 0,
            [s for s in seeds if _count(s, signed=True)] if isinstance(seeds, list) else [],
            int(raw["steps"]) if _count(raw.get("steps")) else 0,
            raw.get("digests_differ") is True,
        )


def _limit(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf


def _count(value: object, *, signed: bool = False) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and (signed or value >= 0)


def saved_band(doc: object, tolerance: float) -> Band | None:
    """The band a saved pair was judged with (pair.json `band`), when it is judged again at
    its own tolerance (`tolerance` that of `doc`); None otherwise."""
    more = getattr(doc, "more", None)
    if not isinstance(more, Mapping) or tolerance != (getattr(doc, "tolerance", None) or 0.0):
        return None
    return Band.from_dict(more.get("band"))

"""Aligning two step logs and judging them: per-metric diffs, running divergence, verdicts.

`PairAligner` is incremental (live runs, replay); `compare_steps` does a whole log at once with
numpy. Both produce the same `AlignedStep`s and `Summary`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from tuimon.steplog import Step, jsonable
from tuimon.store import SIDES
from tuimon.wording import headline

IDENTICAL, CLOSE, DIVERGED, INCOMPLETE = "IDENTICAL", "CLOSE", "DIVERGED", "INCOMPLETE"
VERDICTS = (IDENTICAL, CLOSE, DIVERGED, INCOMPLETE)


@dataclass(frozen=True, slots=True)
class MetricDiff:
    """One metric of one aligned step, on both sides."""

    a: float
    b: float
    equal: bool
    abs: float
    rel: float
    ulps: int


@dataclass(frozen=True, slots=True)
class AlignedStep:
    """One step both runs logged, with what differs."""

    step: int
    a: Step
    b: Step
    diffs: dict[str, MetricDiff]
    digest_equal: bool | None
    tensors: tuple[str, ...]
    """Parameter tensors whose per-tensor digests differ at this step."""
    divergence: float
    """The largest relative difference over the shared metrics; 0 when bitwise equal."""

    @property
    def equal(self) -> bool:
        """Bitwise equal in every shared metric and in the digests."""
        return (
            self.digest_equal is not False
            and not self.tensors
            and all(d.equal for d in self.diffs.values())
        )

    def to_dict(self) -> dict[str, Any]:
        """The line of aligned.jsonl: flat columns for pandas, plus both records."""
        row: dict[str, Any] = {
            "step": self.step,
            "equal": self.equal,
            "divergence": self.divergence,
            "digest_equal": self.digest_equal,
            "tensors_differ": list(self.tensors),
        }
        for name, d in self.diffs.items():
            row[f"{name}_a"] = d.a
            row[f"{name}_b"] = d.b
            row[f"{name}_abs"] = d.abs
            row[f"{name}_rel"] = d.rel
            row[f"{name}_ulps"] = d.ulps
        row["t_a"] = self.a.t
        row["t_b"] = self.b.t
        return jsonable(row)


@dataclass(slots=True)
class Summary:
    """What a pair comes to."""

    verdict: str
    tolerance: float
    steps_compared: int
    steps_equal: int
    unmatched_a: int
    unmatched_b: int
    first_divergent_step: int | None
    first_divergent_metrics: list[str]
    first_digest_step: int | None
    first_tensors: list[str]
    max_divergence: float
    max_divergence_step: int | None
    metric_max: dict[str, dict[str, float | int | None]] = field(default_factory=dict)
    complete: bool = True
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite floats as strings)."""
        return jsonable(asdict(self))

    def headline(self) -> str:
        """One line: the verdict and where the runs part (`wording.headline`)."""
        return headline(self)


def _ordered(bits: np.ndarray) -> np.ndarray:
    """float64 bit patterns mapped to integers that order like the floats (as Python ints)."""
    return np.where(bits < 0, -(bits & np.int64(0x7FFFFFFFFFFFFFFF)), bits)


def diff_arrays(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """Vectorised diffs of two float64 arrays: (equal, abs, rel, ulps).

    Bitwise equality treats NaN == NaN (any NaN payload); 0.0 and -0.0 differ (by 1 ulp).
    NaN against a number, or inf against anything else, has rel = inf and ulps = -1 for NaN.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        equal = (a.view(np.int64) == b.view(np.int64)) | (nan_a & nan_b)
        absd = np.abs(a - b)
        scale = np.maximum(np.abs(a), np.abs(b))
        rel = np.where(scale > 0, absd / scale, 0.0)
        huge = np.isinf(absd) & np.isfinite(a) & np.isfinite(b)
        if huge.any():  # |a - b| overflowed: take the ratio of scaled values
            rel = np.where(huge, np.abs(a / scale - b / scale), rel)
    odd = (nan_a != nan_b) | (np.isinf(a) | np.isinf(b)) & ~equal
    absd = np.where(equal, 0.0, np.where(odd, np.inf, absd))
    rel = np.where(equal, 0.0, np.where(odd, np.inf, rel))
    oa = _ordered(a.view(np.int64)).astype(object)
    ob = _ordered(b.view(np.int64)).astype(object)
    ulps = np.where(equal, 0, np.abs(oa - ob))
    ulps = np.where(~equal & (ulps == 0), 1, ulps)  # 0.0 against -0.0
    ulps = np.where(nan_a | nan_b, np.where(equal, 0, -1), ulps)
    return equal, absd, rel, ulps


def _diff_one(a: float, b: float) -> MetricDiff:
    eq, absd, rel, ulps = diff_arrays(np.array([a]), np.array([b]))
    return MetricDiff(a, b, bool(eq[0]), float(absd[0]), float(rel[0]), int(ulps[0]))


def align_step(a: Step, b: Step) -> AlignedStep:
    """Compare the two records of one step."""
    shared = [name for name in a.metrics if name in b.metrics]
    if shared:
        eq, absd, rel, ulps = diff_arrays(
            np.fromiter((a.metrics[n] for n in shared), np.float64, len(shared)),
            np.fromiter((b.metrics[n] for n in shared), np.float64, len(shared)),
        )
        diffs = {
            n: MetricDiff(
                a.metrics[n], b.metrics[n], bool(eq[i]), float(absd[i]), float(rel[i]), int(ulps[i])
            )
            for i, n in enumerate(shared)
        }
    else:
        diffs = {}
    digest_equal = a.digest == b.digest if a.digest and b.digest else None
    tensors = tuple(n for n, h in a.digests.items() if n in b.digests and b.digests[n] != h)
    divergence = max((d.rel for d in diffs.values()), default=0.0)
    return AlignedStep(a.step, a, b, diffs, digest_equal, tensors, divergence)


class PairAligner:
    """Aligns step records from two runs fed in any interleaving; judges the pair so far."""

    def __init__(self, tolerance: float = 0.0) -> None:
        if not tolerance >= 0:
            raise ValueError("tolerance must be >= 0")
        self.tolerance = tolerance
        self._pending: dict[str, dict[int, Step]] = {"a": {}, "b": {}}
        self._seen: dict[str, set[int]] = {"a": set(), "b": set()}
        self.steps_compared = 0
        self.steps_with_values = 0
        """Aligned steps that had a metric or a digest in common (the rest prove nothing)."""
        self.steps_equal = 0
        self.duplicates = {"a": 0, "b": 0}
        self.first_divergent: AlignedStep | None = None
        self.first_digest: AlignedStep | None = None
        self.first_tensors: tuple[str, ...] = ()
        self._first_tensor_step: int | None = None
        self.max_divergence = 0.0
        self.max_step: int | None = None
        self.metric_max: dict[str, dict[str, float | int | None]] = {}

    def feed(self, side: str, record: Step) -> AlignedStep | None:
        """Add one step record of `side`; return the aligned step when both now have it."""
        other = "b" if side == "a" else "a"
        if record.step in self._seen[side]:
            self.duplicates[side] += 1
            return None
        self._seen[side].add(record.step)
        match = self._pending[other].pop(record.step, None)
        if match is None:
            self._pending[side][record.step] = record
            return None
        pair = (record, match) if side == "a" else (match, record)
        aligned = align_step(*pair)
        self._account(aligned)
        return aligned

    def _account(self, s: AlignedStep) -> None:
        self.steps_compared += 1
        if s.diffs or s.digest_equal is not None or s.a.digests.keys() & s.b.digests.keys():
            self.steps_with_values += 1
        if s.equal:
            self.steps_equal += 1
        elif self.first_divergent is None or s.step < self.first_divergent.step:
            self.first_divergent = s
        if s.digest_equal is False and (
            self.first_digest is None or s.step < self.first_digest.step
        ):
            self.first_digest = s
        if s.tensors and (self._first_tensor_step is None or s.step < self._first_tensor_step):
            self.first_tensors = s.tensors
            self._first_tensor_step = s.step
        if s.divergence > 0 and (
            s.divergence > self.max_divergence
            or (s.divergence == self.max_divergence and s.step < (self.max_step or 0))
        ):
            self.max_divergence = s.divergence
            self.max_step = s.step
        for name, d in s.diffs.items():
            cur = self.metric_max.get(name)
            if (
                cur is None
                or d.rel > cur["rel"]  # type: ignore[operator]
                or (d.rel == cur["rel"] and s.step < cur["step"])  # type: ignore[operator]
            ):
                self.metric_max[name] = {"rel": d.rel, "abs": d.abs, "step": s.step}

    def unmatched(self) -> tuple[int, int]:
        """Steps only one side has logged so far."""
        return len(self._pending["a"]), len(self._pending["b"])

    def summary(
        self, complete: bool = True, reason: str | None = None, *, running: bool = False
    ) -> Summary:
        """The pair judged on what has been aligned; `complete=False` makes it INCOMPLETE.

        `running=True` judges a pair still under way: steps one side has not reached yet are
        not held against it.
        """
        ua, ub = self.unmatched()
        if running:  # only steps the other side has already gone past count
            top_a, top_b = (max(self._seen[k], default=-1) for k in SIDES)
            ua = sum(step < top_b for step in self._pending["a"])
            ub = sum(step < top_a for step in self._pending["b"])
        fd = self.first_divergent
        if self.steps_compared and not self.steps_with_values:
            complete, reason = False, reason or "the two logs share no metric"
        return Summary(
            verdict=verdict(
                self.steps_compared,
                self.steps_equal,
                self.max_divergence,
                self.tolerance,
                complete and ua == 0 and ub == 0,
            ),
            tolerance=self.tolerance,
            steps_compared=self.steps_compared,
            steps_equal=self.steps_equal,
            unmatched_a=ua,
            unmatched_b=ub,
            first_divergent_step=fd.step if fd else None,
            first_divergent_metrics=[n for n, d in fd.diffs.items() if not d.equal] if fd else [],
            first_digest_step=self.first_digest.step if self.first_digest else None,
            first_tensors=list(self.first_tensors),
            max_divergence=self.max_divergence,
            max_divergence_step=self.max_step,
            metric_max=dict(self.metric_max),
            complete=complete and ua == 0 and ub == 0,
            reason=reason if reason else (None if ua == ub == 0 else _unmatched_reason(ua, ub)),
        )


def _unmatched_reason(ua: int, ub: int) -> str:
    return f"steps logged by one run only: a {ua}, b {ub}"


def verdict(compared: int, equal: int, max_div: float, tolerance: float, complete: bool) -> str:
    """IDENTICAL / CLOSE / DIVERGED / INCOMPLETE from the counts.

    Tolerance 0 means bitwise: any difference is DIVERGED. A divergence beyond tolerance is
    DIVERGED even when the pair is incomplete (that much is known); otherwise an incomplete pair
    is INCOMPLETE.
    """
    beyond = max_div > tolerance or math.isnan(max_div) or (tolerance == 0 and equal < compared)
    if beyond:
        return DIVERGED
    if not complete or compared == 0:
        return INCOMPLETE
    return IDENTICAL if equal == compared else CLOSE


def compare_steps(
    a: Sequence[Step], b: Sequence[Step], tolerance: float = 0.0
) -> tuple[list[AlignedStep], PairAligner]:
    """Align two whole logs at once (numpy per metric), in step order."""
    aligner = PairAligner(tolerance)
    first_a = _first_by_step(a, aligner, "a")
    first_b = _first_by_step(b, aligner, "b")
    steps = sorted(first_a.keys() & first_b.keys())
    names = dict.fromkeys(n for s in steps for n in first_a[s].metrics)
    in_b = {n for s in steps for n in first_b[s].metrics}
    cols: dict[str, tuple[list[Any], ...]] = {}
    for n in (n for n in names if n in in_b):
        va = np.array([first_a[s].metrics.get(n, np.nan) for s in steps], np.float64)
        vb = np.array([first_b[s].metrics.get(n, np.nan) for s in steps], np.float64)
        cols[n] = tuple(x.tolist() for x in (va, vb, *diff_arrays(va, vb)))
    aligned = []
    for i, s in enumerate(steps):
        ra, rb = first_a[s], first_b[s]
        diffs = {}
        for n in ra.metrics:
            if n in rb.metrics:
                c = cols[n]
                diffs[n] = MetricDiff(c[0][i], c[1][i], c[2][i], c[3][i], c[4][i], int(c[5][i]))
        digest_equal = ra.digest == rb.digest if ra.digest and rb.digest else None
        tensors = tuple(k for k, h in ra.digests.items() if k in rb.digests and rb.digests[k] != h)
        divergence = max((d.rel for d in diffs.values()), default=0.0)
        step = AlignedStep(s, ra, rb, diffs, digest_equal, tensors, divergence)
        aligner._account(step)
        aligned.append(step)
    aligner._pending["a"] = {k: v for k, v in first_a.items() if k not in first_b}
    aligner._pending["b"] = {k: v for k, v in first_b.items() if k not in first_a}
    return aligned, aligner


def _first_by_step(records: Sequence[Step], aligner: PairAligner, side: str) -> dict[int, Step]:
    out: dict[int, Step] = {}
    for r in records:
        if r.step in out:
            aligner.duplicates[side] += 1
        else:
            out[r.step] = r
    aligner._seen[side] = set(out)
    return out

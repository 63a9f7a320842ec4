"""Tests for tuimon.engine.judge.align: per-metric diffs, incremental and whole-log alignment."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from helpers import bits, from_bits, same_float
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine.judge.align import PairAligner, compare_steps
from tuimon.engine.judge.ulps import diff_arrays
from tuimon.engine.judge.verdict import CLOSE, DIVERGED, IDENTICAL, INCOMPLETE, Summary, verdict
from tuimon.report.wording import headline
from tuimon.steplog import Step
from tuimon.store.aligned import METRIC_COLUMNS, ROW_COLUMNS, AlignedStep

FAST = settings(max_examples=100, deadline=None)
MASK = 0x7FFF_FFFF_FFFF_FFFF
TINY = 5e-324  # the smallest subnormal


# --- independent references ---------------------------------------------------------------


same = same_float  # bitwise equal, any NaN matching any NaN (the design's 'equal')


def ref_ulps(x: float, y: float) -> int:
    """ULP distance from the sign-magnitude bit patterns: same sign -> difference of magnitudes,
    opposite signs -> sum of magnitudes; -0.0 and 0.0 differ bitwise, so they count as 1 apart.
    -1 for NaN vs not."""
    if math.isnan(x) or math.isnan(y):
        return 0 if math.isnan(x) and math.isnan(y) else -1
    bx, by = bits(x), bits(y)
    mx, my = bx & MASK, by & MASK
    dist = abs(mx - my) if (bx >> 63) == (by >> 63) else mx + my
    return 1 if dist == 0 and bx != by else dist


def ref_rel(x: float, y: float) -> float:
    """|x-y| / max(|x|,|y|), 0 when bitwise equal, inf when NaN or inf is involved unequally."""
    if same(x, y):
        return 0.0
    if math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
        return math.inf
    scale = max(abs(x), abs(y))
    return abs(x - y) / scale if scale > 0 else 0.0


def first_by_step(records: Sequence[Step]) -> dict[tuple[int, int], Step]:
    """Each record keyed by (step, occurrence): the k-th record of a step is occurrence k."""
    out: dict[tuple[int, int], Step] = {}
    count: dict[int, int] = {}
    for r in records:
        occ = count.get(r.step, 0)
        count[r.step] = occ + 1
        out[(r.step, occ)] = r
    return out


def ref_step_equal(ra: Step, rb: Step) -> bool:
    """Every metric on both sides (a value on one side only differs) bitwise equal, and no
    digest (aggregate or per tensor) differs."""
    if ra.metrics.keys() != rb.metrics.keys():
        return False
    for n in ra.metrics.keys() & rb.metrics.keys():
        if not same(ra.metrics[n], rb.metrics[n]):
            return False
    if ra.digest and rb.digest and ra.digest != rb.digest:
        return False
    return all(rb.digests.get(k, h) == h for k, h in ra.digests.items())


def ref_first_divergent(a: Sequence[Step], b: Sequence[Step]) -> int | None:
    fa, fb = first_by_step(a), first_by_step(b)
    for s in sorted(fa.keys() & fb.keys()):
        if not ref_step_equal(fa[s], fb[s]):
            return s[0]
    return None


def _lone_only(ra: Step, rb: Step) -> bool:
    """Two records whose only differences are values one of them lacks."""
    lone = ra.metrics.keys() != rb.metrics.keys()
    return lone and ref_step_equal(
        Step(ra.step, {k: v for k, v in ra.metrics.items() if k in rb.metrics}, None,
             ra.digest, ra.digests),
        Step(rb.step, {k: v for k, v in rb.metrics.items() if k in ra.metrics}, None,
             rb.digest, rb.digests),
    )  # fmt: skip


def ref_verdict(a: Sequence[Step], b: Sequence[Step], tol: float, complete: bool = True) -> str:
    fa, fb = first_by_step(a), first_by_step(b)
    shared = fa.keys() & fb.keys()
    equal = [ref_step_equal(fa[s], fb[s]) for s in shared]
    rels = [
        ref_rel(fa[s].metrics[n], fb[s].metrics[n])
        if n in fa[s].metrics and n in fb[s].metrics
        else math.inf  # a value on one side only: beyond any tolerance
        for s in shared
        for n in fa[s].metrics.keys() | fb[s].metrics.keys()
    ]
    if any(r > tol for r in rels) or (tol == 0 and not all(equal)):
        # values on one side only where a log was not read whole are gaps, not differences
        lone = [not ref_step_equal(fa[s], fb[s]) and _lone_only(fa[s], fb[s]) for s in shared]
        gaps = all(lone[i] or equal[i] for i in range(len(shared)))
        return INCOMPLETE if gaps and not complete else DIVERGED
    if not complete or not shared or fa.keys() != fb.keys():
        return INCOMPLETE
    return IDENTICAL if all(equal) else CLOSE


# --- diff_arrays -----------------------------------------------------------------------------


def d1(x: float, y: float) -> tuple[bool, float, float, int]:
    eq, absd, rel, ulps = diff_arrays(np.array([x]), np.array([y]))
    return bool(eq[0]), float(absd[0]), float(rel[0]), int(ulps[0])


def test_diff_equal() -> None:
    assert d1(1.0, 1.0) == (True, 0.0, 0.0, 0)
    assert d1(0.0, 0.0) == (True, 0.0, 0.0, 0)
    assert d1(-3.5, -3.5) == (True, 0.0, 0.0, 0)


def test_diff_one_ulp() -> None:
    up = math.nextafter(1.0, 2.0)
    eq, absd, rel, ulps = d1(1.0, up)
    assert not eq and ulps == 1
    assert absd == up - 1.0 == 2.0**-52
    assert rel == (up - 1.0) / up
    assert d1(1.0, math.nextafter(1.0, 0.0))[3] == 1
    assert d1(up, 1.0) == (eq, absd, rel, ulps)


def test_diff_signed_zeros_are_bitwise_different_but_at_zero_distance() -> None:
    eq, absd, rel, _ = d1(-0.0, 0.0)
    assert not eq  # the design's equality is bitwise
    assert absd == 0.0 and rel == 0.0


def test_diff_signed_zeros_ulps_agree_with_equal() -> None:
    eq, _, _, ulps = d1(-0.0, 0.0)
    assert (ulps == 0) == eq


def test_diff_nan() -> None:
    quiet, payload = math.nan, from_bits(0x7FF8_0000_0000_0001)
    negative_nan = from_bits(0xFFF8_0000_0000_0000)
    assert d1(quiet, quiet) == (True, 0.0, 0.0, 0)
    assert d1(quiet, payload) == (True, 0.0, 0.0, 0)
    assert d1(negative_nan, quiet) == (True, 0.0, 0.0, 0)
    eq, absd, rel, ulps = d1(math.nan, 1.0)
    assert not eq and rel == math.inf and absd == math.inf and ulps == -1
    assert d1(1.0, math.nan) == (eq, absd, rel, ulps)
    assert d1(math.nan, math.inf)[:3] == (False, math.inf, math.inf)


def test_diff_infinities() -> None:
    assert d1(math.inf, math.inf) == (True, 0.0, 0.0, 0)
    assert d1(-math.inf, -math.inf) == (True, 0.0, 0.0, 0)
    eq, absd, rel, ulps = d1(math.inf, -math.inf)
    assert not eq and absd == math.inf and rel == math.inf
    assert ulps == 2 * bits(math.inf) == ref_ulps(math.inf, -math.inf)
    eq, absd, rel, ulps = d1(math.inf, 1.0)
    assert not eq and absd == math.inf and rel == math.inf and ulps == ref_ulps(math.inf, 1.0)
    assert d1(1.7976931348623157e308, math.inf)[3] == 1


def test_diff_subnormals() -> None:
    assert d1(TINY, 2 * TINY) == (False, TINY, 0.5, 1)
    assert d1(0.0, TINY) == (False, TINY, 1.0, 1)
    assert d1(-TINY, TINY) == (False, 2 * TINY, 2.0, 2)
    smallest_normal = 2.2250738585072014e-308
    below = math.nextafter(smallest_normal, 0.0)
    assert d1(below, smallest_normal)[3] == 1


def test_diff_rel_of_huge_opposite_values() -> None:
    assert d1(1.7e308, -1.7e308)[2] == 2.0


def test_diff_vectorised_matches_elementwise() -> None:
    xs = [1.0, -0.0, math.nan, math.inf, TINY, 3.0, -1e300]
    ys = [math.nextafter(1.0, 2.0), 0.0, 1.0, math.inf, -TINY, 3.0, 1e300]
    eq, absd, rel, ulps = diff_arrays(np.array(xs), np.array(ys))
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        assert (bool(eq[i]), float(absd[i]), float(rel[i]), int(ulps[i])) == d1(x, y)


any_float64 = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.integers(0, 2**64 - 1).map(from_bits),
)


def signed_zero_pair(x: float, y: float) -> bool:
    return x == 0 and y == 0 and bits(x) != bits(y)


@FAST
@given(any_float64, any_float64)
def test_diff_properties(x: float, y: float) -> None:
    fwd, back = d1(x, y), d1(y, x)
    assert fwd[0] == back[0] and fwd[3] == back[3]  # equal and ulps symmetric
    assert same(fwd[1], back[1]) and same(fwd[2], back[2])
    eq, _, rel, ulps = fwd
    assert eq == same(x, y)
    assert rel == 0.0 if eq else (rel > 0 or signed_zero_pair(x, y))
    if not (math.isnan(x) or math.isnan(y)) and not signed_zero_pair(x, y):
        assert (ulps == 0) == eq
    assert ulps == ref_ulps(x, y)
    if not math.isinf(rel):
        assert 0.0 <= rel <= 2.0
        assert rel == ref_rel(x, y)


@FAST
@given(st.floats(allow_nan=False, allow_infinity=False), st.integers(0, 40), st.booleans())
def test_diff_ulps_counts_nextafter_steps(x: float, k: int, up: bool) -> None:
    y = x
    for _ in range(k):
        y = math.nextafter(y, math.inf if up else -math.inf)
    if math.isinf(y):
        return
    assert d1(x, y)[3] == k


@FAST
@given(st.lists(st.tuples(any_float64, any_float64), min_size=1, max_size=30))
def test_diff_arrays_matches_references(pairs: list[tuple[float, float]]) -> None:
    xs = np.array([p[0] for p in pairs])
    ys = np.array([p[1] for p in pairs])
    eq, _, _, ulps = diff_arrays(xs, ys)
    assert [bool(e) for e in eq] == [same(x, y) for x, y in pairs]
    assert [int(u) for u in ulps] == [ref_ulps(x, y) for x, y in pairs]


# --- building step logs ----------------------------------------------------------------------


def digest_of(tensors: dict[str, str]) -> str:
    return hashlib.sha256(orjson.dumps(tensors, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def step(s: int, t: float | None = None, tensors: dict[str, str] | None = None, **m: float) -> Step:
    return Step(
        s,
        dict(m),
        t=float(s) if t is None else t,
        digest=digest_of(tensors) if tensors else None,
        digests=dict(tensors or {}),
    )


METRICS = ("train_loss", "test_loss", "train_acc", "lr")  # deliberately not in sorted order
TENSORS = ("W_E", "W_pos", "W_U")
KINDS = ("ulp", "tiny", "small", "large", "nan", "inf", "digest")


def perturb(x: float, kind: str, k: int) -> float:
    if kind == "ulp":
        return math.nextafter(x, math.inf)
    if kind == "tiny":
        return x * (1 + 1e-12 * (k + 1))
    if kind == "small":
        return x * (1 + 1e-6 * (k + 1))
    if kind == "large":
        return x * (1.5 + k)
    if kind == "nan":
        return math.nan
    if kind == "inf":
        return math.inf
    return x


@st.composite
def pair_logs(draw: st.DrawFn) -> tuple[list[Step], list[Step]]:
    """Two logs of a pair, b a copy of a that parts at some step, with gaps, extra steps,
    duplicates, metrics one side lacks, shared NaNs, and per-tensor digests."""
    shape = draw(st.sampled_from(["same", "same", "shorter", "much longer", "gaps"]))
    n_a = draw(st.integers(1, 12))
    skip_a = set(draw(st.lists(st.integers(0, 11), max_size=3)))
    n_b, skip_b = n_a, set(skip_a)
    if shape == "shorter":  # one side stopped early (crashed, interrupted)
        n_b = draw(st.integers(0, n_a))
    elif shape == "much longer":
        n_b = draw(st.integers(20, 60))
    elif shape == "gaps":  # each side skipped other steps
        skip_b = set(draw(st.lists(st.integers(0, 11), max_size=3)))
    if draw(st.booleans()):
        n_a, n_b, skip_a, skip_b = n_b, n_a, skip_b, skip_a
    seed = draw(st.integers(0, 2**32 - 1))
    diverge_at = draw(st.none() | st.none() | st.integers(0, max(n_a, n_b, 1)))
    kind = draw(st.sampled_from(KINDS))
    which = draw(st.lists(st.sampled_from(METRICS), min_size=1, max_size=3, unique=True))
    with_digests = kind == "digest" or draw(st.booleans())
    nan_metric = draw(st.booleans())
    one_sided = draw(st.booleans())  # a value one side lacks: a difference

    def make(side: str, n: int, skip: set[int]) -> list[Step]:
        out = []
        for s in range(n):
            if s in skip:
                continue
            values = np.random.default_rng((seed, s)).random(len(METRICS)) + 0.5
            metrics = {m: float(v) for m, v in zip(METRICS, values, strict=True)}
            tensors = {name: f"{name}-{s}" for name in TENSORS} if with_digests else None
            if side == "b" and diverge_at is not None and s >= diverge_at:
                k = s - diverge_at
                if kind == "digest":
                    if tensors:  # W_E parts first, every tensor from the next step on
                        for name in TENSORS if k else ("W_E",):
                            tensors[name] += "'"
                else:
                    for m in which:
                        metrics[m] = perturb(metrics[m], kind, k)
            if nan_metric and s % 3 == 0:
                metrics["grad_norm"] = math.nan  # NaN on both sides: equal
            if one_sided and side == "a":
                metrics["a_only"] = 1.0
            elif one_sided and s % 4 == 1:
                del metrics["lr"]  # a metric one side lacks at some steps
            out.append(step(s, tensors=tensors, **metrics))
        return out

    a, b = make("a", n_a, skip_a), make("b", n_b, skip_b)
    for log in (a, b):  # repeats, with other values: compared occurrence by occurrence
        for i in draw(st.lists(st.integers(0, max(len(log) - 1, 0)), max_size=3)):
            if log:
                src = log[min(i, len(log) - 1)]
                log.insert(
                    min(i + 1 + draw(st.integers(0, 3)), len(log)),
                    Step(src.step, {m: 9.0 for m in src.metrics}, t=src.t),
                )
    return a, b


@st.composite
def pair_and_order(draw: st.DrawFn) -> tuple[list[Step], list[Step], list[str]]:
    a, b = draw(pair_logs())
    order = draw(st.permutations(["a"] * len(a) + ["b"] * len(b)))
    return a, b, list(order)


def feed_all(
    a: Sequence[Step], b: Sequence[Step], order: Sequence[str], tol: float = 0.0
) -> tuple[list[AlignedStep], PairAligner]:
    """Feed each side's records in its own order, interleaved as `order` says."""
    aligner = PairAligner(tol)
    its = {"a": iter(a), "b": iter(b)}
    got = [r for side in order if (r := aligner.feed(side, next(its[side]))) is not None]
    return sorted(got, key=lambda s: (s.step, s.occurrence)), aligner


def row(s: AlignedStep) -> dict[str, Any]:
    out = s.to_dict()
    out["metric_equal"] = {n: d.equal for n, d in s.diffs.items()}
    return out


def normalised(summary: Summary, aligned: Sequence[AlignedStep]) -> dict[str, Any]:
    """A summary as a dict, checked against the aligned steps it was made from."""
    by_step: dict[int, AlignedStep] = {}
    for s in aligned:
        by_step.setdefault(s.step, s)
    if summary.max_divergence_step is not None:
        at = [s.divergence for s in aligned if s.step == summary.max_divergence_step]
        assert summary.max_divergence in at
    for name, m in summary.metric_max.items():
        diffs = [s.diffs[name] for s in aligned if s.step == m["step"] and name in s.diffs]
        assert (m["rel"], m["abs"]) in [(d.rel, d.abs) for d in diffs]
        assert m["rel"] == max(s.diffs[name].rel for s in aligned if name in s.diffs)
    return summary.to_dict()


# --- PairAligner against compare_steps and the references -----------------------------------


@settings(max_examples=150, deadline=None)
@given(pair_and_order(), st.sampled_from([0.0, 1e-9, 1e-3, 10.0]))
def test_any_interleaving_matches_compare_steps(
    case: tuple[list[Step], list[Step], list[str]], tol: float
) -> None:
    a, b, order = case
    want_aligned, want = compare_steps(a, b, tol)
    got_aligned, got = feed_all(a, b, order, tol)

    assert [row(s) for s in got_aligned] == [row(s) for s in want_aligned]
    fa, fb = first_by_step(a), first_by_step(b)
    keys = [(s.step, s.occurrence) for s in got_aligned]
    assert keys == sorted(fa.keys() & fb.keys())  # never invented
    assert got.unmatched() == want.unmatched() == (len(fa.keys() - fb), len(fb.keys() - fa))
    steps_a, steps_b = {s for s, _ in fa}, {s for s, _ in fb}
    assert got.repeats == want.repeats == {"a": len(a) - len(steps_a), "b": len(b) - len(steps_b)}

    for complete in (True, False):
        sg, sw = got.summary(complete), want.summary(complete)
        assert normalised(sg, got_aligned) == normalised(sw, want_aligned)
        assert sg.first_divergent_step == ref_first_divergent(a, b)
        assert sg.verdict == ref_verdict(a, b, tol, complete)
        assert sg.steps_compared == len(fa.keys() & fb.keys())
        assert sg.steps_equal == sum(ref_step_equal(fa[s], fb[s]) for s in fa.keys() & fb.keys())
        assert (sg.unmatched_a, sg.unmatched_b) == got.unmatched()
        assert headline(sg).startswith(sg.verdict)
        orjson.dumps(sg.to_dict())


@FAST
@given(pair_and_order())
def test_aligned_rows_are_plain_json(case: tuple[list[Step], list[Step], list[str]]) -> None:
    a, b, order = case
    aligned, aligner = feed_all(a, b, order)
    for s in aligned:
        check_plain_json(s.to_dict())
    check_plain_json(aligner.summary().to_dict())


def test_unmatched_steps_are_counted_never_invented() -> None:
    a = [step(s, train_loss=1.0) for s in (0, 1, 2, 3, 5)]
    b = [step(s, train_loss=1.0) for s in (0, 2, 3, 4, 6, 7)]
    aligned, aligner = feed_all(a, b, ["b"] * 6 + ["a"] * 5)
    assert [s.step for s in aligned] == [0, 2, 3]
    assert aligner.unmatched() == (2, 3)
    summary = aligner.summary()
    assert (summary.unmatched_a, summary.unmatched_b) == (2, 3)
    assert summary.verdict == INCOMPLETE and not summary.complete
    assert summary.reason == "steps logged by one run only: a 2, b 3"
    assert summary.steps_compared == summary.steps_equal == 3


def test_repeats_compared_in_order_never_dropped() -> None:
    aligner = PairAligner()
    assert aligner.feed("a", step(0, train_loss=1.0)) is None
    assert aligner.feed("a", step(0, train_loss=2.0)) is None
    got = aligner.feed("b", step(0, train_loss=1.0))
    assert got is not None and got.equal and got.occurrence == 0
    second = aligner.feed("b", step(0, train_loss=3.0))  # a's second record says 2.0
    assert second is not None and not second.equal and second.occurrence == 1
    assert aligner.feed("a", step(0, train_loss=3.0)) is None
    assert aligner.repeats == {"a": 2, "b": 1}
    assert aligner.tally.steps_compared == 2
    _, whole = compare_steps(
        [step(0, train_loss=1.0), step(0, train_loss=2.0), step(0, train_loss=3.0)],
        [step(0, train_loss=1.0), step(0, train_loss=3.0)],
    )
    summary = whole.summary()
    assert (summary.repeats_a, summary.repeats_b) == (2, 1)
    assert summary.verdict == DIVERGED and summary.first_divergent_step == 0
    assert summary.unmatched_a == 1 and "one run only" in (summary.reason or "")


def run_pair(kind: str, n: int = 10, at: int = 2) -> tuple[list[Step], list[Step]]:
    """Two runs like the design's measurement: bitwise equal at steps < at, then apart."""
    a, b = [], []
    for s in range(n):
        loss, acc = 4.7 / (s + 1), s / n
        tensors = {name: f"{name}{s}" for name in TENSORS}
        a.append(step(s, tensors=tensors, train_loss=loss, test_loss=loss + 0.1, train_acc=acc))
        tb = dict(tensors)
        lb = loss
        if s >= at:
            for name in TENSORS if s > at else ("W_E",):
                tb[name] += "x"
            if kind != "digest-only-first" or s > at:
                lb = loss * (1 + 6e-10 * 10 ** (s - at))
        b.append(step(s, tensors=tb, train_loss=lb, test_loss=loss + 0.1, train_acc=acc))
    return a, b


@pytest.mark.parametrize("reverse", [False, True])
def test_per_tensor_digests_name_the_tensor_that_parted_first(reverse: bool) -> None:
    a, b = run_pair("digest-only-first")
    order = ["a"] * 10 + ["b"] * 10
    if reverse:
        a, b = a[::-1], b[::-1]
    _, aligner = feed_all(a, b, order)
    summary = aligner.summary()
    assert summary.first_divergent_step == 2
    assert summary.first_divergent_metrics == []  # only the digests differ at step 2
    assert summary.first_digest_step == 2
    assert summary.first_tensors == ["W_E"]
    assert (summary.first_tensor_step, summary.first_tensors_among) == (2, len(TENSORS))
    assert summary.verdict == DIVERGED
    assert "W_E" in headline(summary) and "first divergent step 2" in headline(summary)
    _, whole = compare_steps(a, b)
    assert whole.summary().first_tensors == ["W_E"]
    assert whole.summary().first_tensors_among == len(TENSORS)  # judged whole, the same count


def test_first_divergent_metrics_named() -> None:
    a, b = run_pair("metrics")
    _, aligner = compare_steps(a, b, tolerance=1e-3)
    s = aligner.summary()
    assert s.first_divergent_step == 2 and s.first_divergent_metrics == ["train_loss"]
    assert s.first_tensors == ["W_E"]
    assert s.max_divergence_step == 9 and s.verdict == DIVERGED
    assert s.metric_max["train_loss"]["step"] == 9
    assert s.metric_max["test_loss"]["rel"] == 0.0


# --- verdicts --------------------------------------------------------------------------------


def logs(values_b: Sequence[float], values_a: Sequence[float] | None = None) -> tuple[list, list]:
    values_a = values_a if values_a is not None else [1.0 + i for i in range(len(values_b))]
    a = [step(i, train_loss=v) for i, v in enumerate(values_a)]
    b = [step(i, train_loss=v) for i, v in enumerate(values_b)]
    return a, b


@pytest.mark.parametrize("tol", [0.0, 1e-6])
def test_verdict_identical(tol: float) -> None:
    a, b = logs([1.0, 2.0, math.nan])
    a[2] = step(2, train_loss=math.nan)
    s = compare_steps(a, b, tol)[1].summary()
    assert s.verdict == IDENTICAL
    assert headline(s) == "IDENTICAL: 3 steps bitwise equal"
    assert s.first_divergent_step is None and s.max_divergence == 0.0


def test_verdict_tolerance_zero_is_bitwise() -> None:
    a, b = logs([1.0, math.nextafter(2.0, 3.0)])
    assert compare_steps(a, b, 0.0)[1].summary().verdict == DIVERGED
    assert compare_steps(a, b, 1e-15)[1].summary().verdict == CLOSE
    assert compare_steps(a, b, 1e-17)[1].summary().verdict == DIVERGED


def test_verdict_close_is_inclusive_of_the_tolerance() -> None:
    a, b = logs([1.0, 1.5], [1.0, 2.0])
    rel = 0.5 / 2.0
    assert compare_steps(a, b, rel)[1].summary().verdict == CLOSE
    assert compare_steps(a, b, math.nextafter(rel, 0.0))[1].summary().verdict == DIVERGED
    s = compare_steps(a, b, rel)[1].summary()
    assert s.first_divergent_step == 1 and s.max_divergence == rel and s.max_divergence_step == 1
    assert headline(s).startswith("CLOSE: first divergent step 1 (train_loss)")


def test_verdict_signed_zero_with_tolerance_is_close() -> None:
    a, b = logs([0.0], [-0.0])
    assert compare_steps(a, b, 0.0)[1].summary().verdict == DIVERGED
    assert compare_steps(a, b, 1e-9)[1].summary().verdict == CLOSE


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_verdict_nonfinite_on_one_side_diverges_at_any_tolerance(bad: float) -> None:
    a, b = logs([1.0, bad])
    s = compare_steps(a, b, 1e6)[1].summary()
    assert s.verdict == DIVERGED and s.max_divergence == math.inf
    check_plain_json(s.to_dict())


def test_verdict_incomplete() -> None:
    a, b = logs([1.0, 2.0])
    aligner = compare_steps(a, b)[1]
    s = aligner.summary(complete=False, reason="run b exited with 1")
    assert s.verdict == INCOMPLETE and not s.complete
    assert headline(s).endswith("[run b exited with 1]")
    a, b = logs([1.0, 2.5])
    assert compare_steps(a, b)[1].summary(complete=False).verdict == DIVERGED
    a, b = logs([1.0, 2.0 + 1e-9])
    assert compare_steps(a, b, 1e-6)[1].summary(complete=False).verdict == INCOMPLETE


def test_verdict_no_shared_steps() -> None:
    s = PairAligner().summary()
    assert s.verdict == INCOMPLETE
    assert headline(s) == "INCOMPLETE: no step logged by both runs"
    aligner = PairAligner()
    aligner.feed("a", step(0, train_loss=1.0))
    aligner.feed("b", step(1, train_loss=1.0))
    assert aligner.summary().verdict == INCOMPLETE


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ((0, 0, 0.0, 0.0, True), INCOMPLETE),
        ((3, 3, 0.0, 0.0, True), IDENTICAL),
        ((3, 2, 0.0, 0.0, True), DIVERGED),
        ((3, 2, 1e-9, 1e-6, True), CLOSE),
        ((3, 2, 1e-9, 1e-6, False), INCOMPLETE),
        ((3, 2, 1e-3, 1e-6, False), DIVERGED),
        ((3, 3, 0.0, 1e-6, False), INCOMPLETE),
        ((3, 2, math.nan, 1.0, True), DIVERGED),
    ],
)
def test_verdict_function(args: tuple[Any, ...], want: str) -> None:
    assert verdict(*args) == want


@pytest.mark.parametrize("tol", [-1e-9, math.nan])
def test_bad_tolerance(tol: float) -> None:
    with pytest.raises(ValueError):
        PairAligner(tol)


def test_running_summary_ignores_steps_not_reached_yet() -> None:
    aligner = PairAligner()
    for s in range(10):
        aligner.feed("a", step(s, train_loss=1.0 / (s + 1)))
    for s in range(4):
        aligner.feed("b", step(s, train_loss=1.0 / (s + 1)))
    running = aligner.summary(running=True)
    assert running.verdict == IDENTICAL and running.complete
    assert (running.unmatched_a, running.unmatched_b) == (0, 0) and running.reason is None
    final = aligner.summary()
    assert final.verdict == INCOMPLETE and (final.unmatched_a, final.unmatched_b) == (6, 0)
    aligner.feed("b", step(4, train_loss=0.3))
    assert aligner.summary(running=True).verdict == DIVERGED


# --- to_dict ---------------------------------------------------------------------------------


def check_plain_json(obj: dict[str, Any]) -> dict[str, Any]:
    """orjson can write it, and a plain json loader reads it back without NaN/Infinity tokens."""
    text = orjson.dumps(obj)

    def no_constant(token: str) -> Any:
        raise AssertionError(f"bare {token} token")

    back = json.loads(text.decode(), parse_constant=no_constant)
    assert back == obj
    return back


def test_aligned_row_columns() -> None:
    a = step(3, t=1.5, tensors={"W_E": "1"}, loss=1.0, acc=math.nan, lr=math.inf, only_a=2.0)
    b = step(3, t=1.75, tensors={"W_E": "2"}, loss=math.nextafter(1.0, 2.0), acc=0.5, lr=-math.inf)
    s = compare_steps([a], [b])[0][0]  # one step, as the live aligner judges it
    r = check_plain_json(s.to_dict())
    assert r["step"] == 3 and r["equal"] is False and r["digest_equal"] is False
    assert r["tensors_differ"] == ["W_E"]
    assert r["divergence"] == "Infinity"
    assert (r["t.a"], r["t.b"]) == (1.5, 1.75) and r["occurrence"] == 0
    assert r["loss.a"] == 1.0 and r["loss.b"] == math.nextafter(1.0, 2.0)
    assert r["loss.ulps"] == 1 and r["loss.abs"] == 2.0**-52
    assert r["acc.a"] == "NaN" and r["acc.rel"] == "Infinity" and r["acc.ulps"] == -1
    assert r["lr.a"] == "Infinity" and r["lr.b"] == "-Infinity"
    assert r["lr.ulps"] == 2 * bits(math.inf)  # beyond int64, still plain JSON
    # a value on one side only is a difference: the missing one NaN, apart beyond any tolerance
    assert (r["only_a.a"], r["only_a.b"], r["only_a.rel"]) == (2.0, "NaN", "Infinity")
    names = [f"{m}.{c}" for m in ("loss", "acc", "lr", "only_a") for c in METRIC_COLUMNS]
    assert list(r) == [*ROW_COLUMNS, *names]  # the one naming (aligned.jsonl, tuimon export)


def test_summary_to_dict_is_plain_json() -> None:
    a, b = logs([1.0, math.nan])
    s = compare_steps(a, b)[1].summary()
    d = check_plain_json(s.to_dict())
    assert d["verdict"] == DIVERGED and d["max_divergence"] == "Infinity"
    assert d["metric_max"]["train_loss"] == {"rel": "Infinity", "abs": "Infinity", "step": 1}


# --- bugs found and fixed: kept as regression tests ---------------------------------------


def test_per_tensor_digests_alone_make_a_step_divergent() -> None:
    a = [Step(0, {"loss": 1.0}, digests={"W_E": "1"}), Step(1, {"loss": 1.0}, digests={"W_E": "1"})]
    b = [Step(0, {"loss": 1.0}, digests={"W_E": "1"}), Step(1, {"loss": 1.0}, digests={"W_E": "2"})]
    s = compare_steps(a, b)[1].summary()
    assert s.first_tensors == ["W_E"]  # holds today
    assert s.first_divergent_step == 1
    assert s.verdict == DIVERGED


def test_max_divergence_step_independent_of_feed_order() -> None:
    a = [step(s, loss=1.0) for s in range(4)]
    b = [step(0, loss=1.0), step(1, loss=math.nan), step(2, loss=1.0), step(3, loss=math.nan)]
    want = compare_steps(a, b)[1].summary()
    assert want.max_divergence_step == 1
    got = feed_all(a[::-1], b[::-1], ["a"] * 4 + ["b"] * 4)[1].summary()
    assert got.max_divergence_step == want.max_divergence_step


def test_metric_max_independent_of_feed_order() -> None:
    a = [step(s, loss=1.0) for s in range(3)]
    b = [step(s, loss=1.0) for s in range(3)]
    want = compare_steps(a, b)[1].summary()
    got = feed_all(a[::-1], b[::-1], ["a"] * 3 + ["b"] * 3)[1].summary()
    assert got.metric_max == want.metric_max


def test_first_divergent_metrics_same_order_live_and_whole() -> None:
    a = [step(0, train_loss=1.0, test_loss=2.0)]
    b = [step(0, train_loss=1.5, test_loss=2.5)]
    live = feed_all(a, b, ["a", "b"])[1].summary()
    whole = compare_steps(a, b)[1].summary()
    assert live.first_divergent_metrics == whole.first_divergent_metrics
    assert headline(live) == headline(whole)


def test_running_summary_still_counts_skipped_steps() -> None:
    aligner = PairAligner()
    for s in (0, 1, 2, 3):
        aligner.feed("a", step(s, loss=1.0))
    for s in (0, 2, 3):  # b skipped step 1 and is already at 3
        aligner.feed("b", step(s, loss=1.0))
    s = aligner.summary(running=True)
    assert s.unmatched_a == 1
    assert s.verdict == INCOMPLETE


def test_logs_without_a_shared_metric_prove_nothing() -> None:
    """Each value is on one side only and nothing is shared: not a difference, a gap."""
    a = [Step(i, {"loss": 1.0}) for i in range(3)]
    b = [Step(i, {"acc": 0.5}) for i in range(3)]
    _, aligner = compare_steps(a, b)
    summary = aligner.summary()
    assert summary.verdict == INCOMPLETE
    assert summary.reason == "the two logs share no metric"
    live = PairAligner()
    for x, y in zip(a, b, strict=True):
        live.feed("a", x)
        live.feed("b", y)
    assert live.summary().verdict == INCOMPLETE


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True))
def test_same_bits_is_diff_arrays_judgement(a: float, b: float) -> None:
    """The panes' scalar judge and the verdict's vectorised one never disagree."""
    from tuimon.engine.judge.ulps import same_bits

    equal = diff_arrays(np.array([a, a, -0.0]), np.array([b, a, 0.0]))[0]
    assert [same_bits(a, b), same_bits(a, a), same_bits(-0.0, 0.0)] == equal.tolist()


_VALUE = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e308, 5e-324]),
)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from("abcdefg"), _VALUE, max_size=7),
            st.dictionaries(st.sampled_from("abcdefg"), _VALUE, max_size=7),
        ),
        min_size=1,
        max_size=12,
    ),
    per=st.integers(1, 20),
)
def test_a_wide_block_judged_a_few_metrics_at_a_time_is_judged_the_same(
    rows: list[tuple[dict[str, float], dict[str, float]]], per: int
) -> None:
    """A block's metrics diffed in groups (`JUDGE_VALUES`, what keeps a 100,000-column CSV's
    judge small) give the same block as all at once."""
    from tuimon.engine.judge import columns as col

    def block() -> col.Block:
        sides = [[Step(i, m) for i, m in enumerate(side)] for side in zip(*rows, strict=True)]
        occ = [0] * len(rows)
        a, b = (col.Columns.of_steps(s, occ, col.MetricFilter()) for s in sides)
        return col.judge_block(a, b)

    whole = block()
    saved = col.JUDGE_VALUES
    col.JUDGE_VALUES = per
    try:
        parts = block()
    finally:
        col.JUDGE_VALUES = saved
    assert whole.metrics.keys() == parts.metrics.keys()
    for name, arrays in whole.metrics.items():
        for x, y in zip(arrays, parts.metrics[name], strict=True):
            assert x.tolist() == y.tolist() or np.array_equal(x, y, equal_nan=True)
    assert whole.equal.tolist() == parts.equal.tolist()
    assert whole.values.tolist() == parts.values.tolist()
    assert whole.divergence.tolist() == parts.divergence.tolist() or np.array_equal(
        whole.divergence, parts.divergence, equal_nan=True
    )


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.lists(_VALUE, min_size=6, max_size=6), min_size=2, max_size=2),
    width=st.integers(1, 5),
    per=st.integers(1, 20),
)
def test_two_tables_of_the_same_columns_are_judged_as_their_metrics_would_be(
    values: list[list[float]], width: int, per: int
) -> None:
    """A CSV read into one array a side (`RowTable`: rows taken as they are, no view per
    metric) gives the block the same values as per-metric columns give."""
    from tuimon.engine.judge import columns as col

    rows = 6 // width
    names = [f"m{i}" for i in range(width)]
    tables = [np.array(side[: rows * width], dtype=float).reshape(width, rows) for side in values]
    steps = np.arange(rows)

    def columns(table: np.ndarray, as_table: bool) -> col.Columns:
        present = np.ones(rows, bool)
        return col.Columns(
            steps=steps,
            occ=np.zeros(rows, np.int64),
            values=col.RowTable(names, table) if as_table else dict(zip(names, table, strict=True)),
            present=dict.fromkeys(names, present),
            digest=np.empty(rows, dtype=object),
        )

    saved = col.JUDGE_VALUES
    col.JUDGE_VALUES = per
    try:
        fast = col.judge_block(*(columns(t, True) for t in tables))
        slow = col.judge_block(*(columns(t, False) for t in tables))
    finally:
        col.JUDGE_VALUES = saved
    assert list(fast.metrics) == list(slow.metrics) == names
    for name in names:
        for x, y in zip(fast.metrics[name], slow.metrics[name], strict=True):
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
    assert fast.equal.tolist() == slow.equal.tolist()
    assert np.array_equal(fast.divergence, slow.divergence, equal_nan=True)


@settings(max_examples=150, deadline=None)
@given(case=pair_logs(), data=st.data())
def test_blocks_in_any_order_sum_up_as_judged_the_long_way(
    case: tuple[list[Step], list[Step]], data: st.DataObject
) -> None:
    """Judged in blocks of any size and order (rising or not, all equal or not), the summary
    is the one the long way gives: every row in one block, in step order, every metric's
    maximum looked for (the shortcuts for rising steps and for equal blocks off)."""
    from tuimon.engine.judge import align as align_mod
    from tuimon.engine.judge.columns import Columns, MetricFilter

    a, b = case
    first_b = {}
    for r in b:
        first_b.setdefault(r.step, r)
    firsts_a = dict((r.step, r) for r in reversed(a)).values()
    rows = [(r, first_b[r.step]) for r in firsts_a if r.step in first_b]
    rows.sort(key=lambda p: p[0].step)
    mixed = data.draw(st.permutations(rows)) if data.draw(st.booleans()) else rows
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(rows)), max_size=5))))
    blocks = [mixed[i:j] for i, j in zip([0, *cuts], [*cuts, len(rows)], strict=True) if j > i]

    def judged(blocks: list[list[tuple[Step, Step]]]) -> dict[str, Any]:
        aligner = PairAligner(0.0)
        for block in blocks:
            x, y = (
                Columns.of_steps([p[side] for p in block], [0] * len(block), MetricFilter())
                for side in (0, 1)
            )
            aligner.judge(x, y, ulps=False)
        return aligner.summary().to_dict()

    fast = judged(blocks)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(align_mod, "_rising", lambda steps: False)
        mp.setattr(align_mod.Tally, "_kept", lambda self, block: False)
        assert judged([rows] if rows else []) == fast

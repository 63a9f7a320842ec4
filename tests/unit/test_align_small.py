"""The small-block judge (plain Python floats) gives what the numpy judge gives, bit for bit."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuimon.engine.judge import align
from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.ulps import diff_arrays, diff_floats, same_bits
from tuimon.steplog import Step

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def from_bits(bits: int) -> float:
    """Any float64, NaNs with payloads included."""
    return float(struct.unpack("<d", struct.pack("<Q", bits))[0])


SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 5e-324, -5e-324, 2.2e-308,
           1.7976931348623157e308, -1.7976931348623157e308, 1.0, 1.0000000000000002]  # fmt: skip
values = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True),
    st.integers(0, 2**64 - 1).map(from_bits),
    st.integers(-(2**63), 2**63 - 1),  # an int metric (converted as numpy converts it)
)
digests = st.sampled_from([None, "", "x", "y", "devsum1:x", "devsum1:y", "other:x"])
tensor_digests = st.dictionaries(
    st.sampled_from(["W_E", "W_U", "W_Q"]), st.sampled_from(["0", "1", "devsum1:0"]), max_size=3
)
NAMES = ["loss", "acc", "lr", "t_wall", "val"]


@st.composite
def records(draw: Any, side: str) -> list[Step]:
    out = []
    for _ in range(draw(st.integers(0, 12))):
        metrics = draw(st.dictionaries(st.sampled_from(NAMES), values, max_size=5))
        out.append(
            Step(draw(st.integers(0, 6)), metrics, digest=draw(digests),
                 digests=draw(tensor_digests))
        )  # fmt: skip
    return out


def canon(obj: Any) -> Any:
    """Floats by their bits (NaN, -0.0 kept apart), containers walked."""
    if isinstance(obj, float):
        return ("f", struct.pack("<d", obj)) if obj == obj else ("nan",)
    if isinstance(obj, dict):
        return {k: canon(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [canon(v) for v in obj]
    return obj


def judged(small: int, events: list[tuple[str, list[Step]]], select: MetricFilter) -> Any:
    """Every aligned row (with its record pair and order) and the summary, with SMALL_BLOCK."""
    old = align.SMALL_BLOCK
    align.SMALL_BLOCK = small
    try:
        aligner = PairAligner(0.0, select)
        rows = []
        for side, batch in events:
            for row in aligner.feed_batch(side, batch):
                d = row.to_dict()
                d["diffs"] = {k: list(v) for k, v in row.diffs.items()}
                d["records"] = (row.a, row.b)
                rows.append(d)
        tolerant = PairAligner(1e-12, select)
        for side, batch in events:
            tolerant.feed_batch(side, batch)
        summaries = [aligner.summary().to_dict(), tolerant.summary().to_dict()]
        return canon(rows), canon(summaries)
    finally:
        align.SMALL_BLOCK = old


@SETTINGS
@given(records("a"), records("b"), st.integers(1, 5), st.booleans())
def test_small_blocks_judge_as_numpy(a: list[Step], b: list[Step], size: int, ignore: bool):
    """Blocks of repeated steps, missing metrics, NaN/inf/-0.0/subnormals, digests of two
    formats: the same rows (values, abs, rel, ULPs, order), firsts, maxima and digests."""
    events = [("a", a[i : i + size]) for i in range(0, len(a), size)]
    events += [("b", b[i : i + size]) for i in range(0, len(b), size)]
    events.sort(key=lambda e: e[1][0].step)  # sides interleaved by their first step
    select = MetricFilter(ignore=("t_*",) if ignore else ())
    assert judged(0, events, select) == judged(10**9, events, select)


@SETTINGS
@given(values, values)
def test_diff_floats_is_diff_arrays(x: float, y: float) -> None:
    """One pair of values: equality, abs, rel and ULPs as the vectorised diff."""
    x, y = float(x), float(y)
    eq, absd, rel, ulps = diff_arrays(np.array([x]), np.array([y]))
    want = (x, y, bool(eq[0]), float(absd[0]), float(rel[0]), int(ulps.tolist()[0]))
    assert canon(tuple(diff_floats(x, y))) == canon(want)
    assert diff_floats(x, y).equal == same_bits(x, y)


@pytest.mark.parametrize(
    ("x", "y", "ulps"),
    [(0.0, -0.0, 1), (1.0, 1.0000000000000002, 1), (math.nan, 1.0, -1), (math.nan, -math.nan, 0)],
)
def test_diff_floats_cases(x: float, y: float, ulps: int) -> None:
    assert diff_floats(x, y).ulps == ulps


def test_big_and_small_blocks_meet() -> None:
    """A pair fed in small ticks and in one block ends with the same summary."""
    steps_a = [Step(i, {"loss": 1.0 / (i + 1)}, digest=str(i)) for i in range(100)]
    steps_b = [Step(i, {"loss": 1.0 / (i + 1) + (1e-9 if i > 40 else 0)}, digest=str(i))
               for i in range(100)]  # fmt: skip
    small = [(s, [x]) for x_a, x_b in zip(steps_a, steps_b, strict=True)
             for s, x in (("a", x_a), ("b", x_b))]  # fmt: skip
    big = [("a", steps_a), ("b", steps_b)]
    assert judged(16, small, MetricFilter())[1] == judged(16, big, MetricFilter())[1]

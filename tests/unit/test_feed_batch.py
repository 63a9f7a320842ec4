"""A tick's steps aligned together give what feeding them one by one gives."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine.judge.align import PairAligner
from tuimon.steplog import Step


def log(side: str, n: int) -> list[Step]:
    out = []
    for i in range(n):
        loss = 1.0 / (i + 1)
        if side == "b" and i >= 7:
            loss += 1e-9 * i
        if side == "b" and i == 11:
            loss = math.nan
        metrics = {"loss": loss, "acc": 0.5} if i % 5 else {"loss": loss}
        if side == "a" and i == 13:
            metrics["only_a"] = 1.0
        digests = {"W_E": "e" if side == "b" and i >= 9 else "0"}
        out.append(Step(i, metrics, t=0.1 * i, digest="d", digests=digests))
    return out


def test_batches_align_as_one_by_one() -> None:
    rng = random.Random(0)
    a, b = log("a", 40), log("b", 37)
    a.insert(5, a[3])  # a repeated step
    events = [("a", s) for s in a] + [("b", s) for s in b]
    rng.shuffle(events)
    one, batched = PairAligner(), PairAligner()
    expected = [x for side, s in events if (x := one.feed(side, s)) is not None]
    got = []
    i = 0
    while i < len(events):
        side, size = events[i][0], rng.randint(1, 6)
        run = []
        while i < len(events) and events[i][0] == side and len(run) < size:
            run.append(events[i][1])
            i += 1
        got += batched.feed_batch(side, run)
    assert [x.to_dict() for x in got] == [x.to_dict() for x in expected]
    assert batched.summary().to_dict() == one.summary().to_dict()


def test_batches_merged_keep_every_record_in_order_and_the_last_state() -> None:
    from tuimon.engine.sources.session import Batch, merge_batches
    from tuimon.engine.sources.side_state import SideState

    summary = PairAligner().summary(running=True)
    sides = {s: SideState(s, "cpu", "x") for s in "ab"}
    steps = log("a", 6)
    batches = [
        Batch({"a": steps[i : i + 2], "b": []}, {"a": [f"e{i}"], "b": []}, [i], sides, summary,
              message=f"m{i}" if i != 2 else None)
        for i in (0, 2, 4)
    ]  # fmt: skip
    one = merge_batches(batches)
    assert one.records["a"] == steps and one.stderr["a"] == ["e0", "e2", "e4"]
    assert one.aligned == [0, 2, 4] and one.message == "m0; m4"
    assert one.sides is batches[-1].sides and one.summary is summary and not one.done
    assert merge_batches(batches[:1]) is batches[0]


def test_batches_without_aligned_steps_judge_the_same() -> None:
    """`aligned=False` (a headless report): the same counts and verdict, no `AlignedStep`
    made for a block, and the last step's divergence told all the same."""
    a, b = log("a", 400), log("b", 380)
    shown, bare = PairAligner(), PairAligner()
    for side, steps in (("a", a[:50]), ("b", b), ("a", a[50:60]), ("a", a[60:])):
        rows = shown.feed_batch(side, steps)
        assert not bare.feed_batch(side, steps, aligned=False) or len(rows) <= 32
        if rows:
            assert bare.last_divergence == shown.last_divergence == rows[-1].divergence
    assert bare.summary().to_dict() == shown.summary().to_dict()


@given(st.data())
@settings(max_examples=80, deadline=None)
def test_whole_logs_matched_block_by_block_judge_as_compare_steps(data: st.DataObject) -> None:
    """`ColumnMatcher` (compare's blocks) gives the summary `compare_steps` gives: steps
    missing on either side, a side running ahead, a step going back, blocks of any size."""
    from tuimon.engine.judge.align import compare_steps
    from tuimon.engine.judge.columns import Columns
    from tuimon.engine.judge.matcher import ColumnMatcher

    logs = {}
    for side in "ab":
        steps = data.draw(st.lists(st.integers(0, 60), min_size=1, max_size=50, unique=True))
        if data.draw(st.booleans()):
            steps.sort()
        logs[side] = [
            Step(s, {"loss": 1.0 / (s + 1) + (1e-9 if side == "b" and s > 30 else 0)}, digest="d")
            for s in steps
        ]
    _, expected = compare_steps(logs["a"], logs["b"])
    aligner = PairAligner()
    matcher = ColumnMatcher(aligner)
    at = {"a": 0, "b": 0}
    while any(at[s] < len(logs[s]) for s in "ab"):
        side = data.draw(st.sampled_from([s for s in "ab" if at[s] < len(logs[s])]))
        n = data.draw(st.integers(1, 12))
        block = logs[side][at[side] : at[side] + n]
        at[side] += len(block)
        for record in block:
            aligner.note(side, record)
        matcher.add(side, Columns.of_steps(block, [0] * len(block), aligner.select))
    matcher.finish()
    assert not matcher.repeated
    assert aligner.summary().to_dict() == expected.summary().to_dict()

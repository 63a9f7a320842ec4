"""`StepCounts`: the aligner's count of each step's records, against a dict (the definition),
in memory that does not grow with rising steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine.judge.step_counts import StepCounts


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-5, 60), max_size=200))
def test_the_count_before_each_record_is_the_definition(steps: list[int]) -> None:
    counts, seen = StepCounts(), {}
    for step in steps:
        assert counts.add(step) == seen.get(step, 0)
        seen[step] = seen.get(step, 0) + 1


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 7), st.integers(0, 50), st.lists(st.integers(0, 400), max_size=30))
def test_a_resumed_run_repeats_its_steps(stride: int, start: int, again: list[int]) -> None:
    counts, seen = StepCounts(), {}
    for step in [*range(start, start + 300 * stride, stride), *again]:
        assert counts.add(step) == seen.get(step, 0)
        seen[step] = seen.get(step, 0) + 1


def test_rising_steps_are_one_run() -> None:
    counts = StepCounts()
    for step in range(0, 1_000_000, 50):
        counts.add(step)
    assert len(counts._runs) == 1 and not counts._more

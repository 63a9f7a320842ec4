"""The sweep table's cells (headless table and sweep screen alike)."""

from __future__ import annotations

from tuimon.engine.runs.sweep import Job, row

MAX_DIV = 6


def test_max_divergence_is_a_dash_until_a_step_was_compared() -> None:
    """A failed pair, or one that has not compared a step yet, has no largest divergence: "–",
    never "0" (which would read as "no difference")."""
    failed = Job(seed=0, repeat=1, status="failed", max_divergence=0.0, steps_compared=0)
    assert row(failed)[MAX_DIV] == "–"
    new = Job(seed=1, repeat=1, status="running", max_divergence=0.0)
    assert row(new)[MAX_DIV] == "–"
    same = Job(seed=2, repeat=1, status="finished", max_divergence=0.0, steps_compared=40)
    assert row(same)[MAX_DIV] == "0"
    apart = Job(seed=3, repeat=1, status="finished", max_divergence=0.0123, steps_compared=40)
    assert row(apart)[MAX_DIV] == "0.0123"

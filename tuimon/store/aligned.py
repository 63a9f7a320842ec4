"""The aligned row: what one step both runs logged comes to, as aligned.jsonl holds it.

`AlignedStep` is one aligned step with its per-metric `MetricDiff`s; `AlignedStep.row` and
`AlignedStep.to_dict` are the row that `PairWriter` writes to aligned.jsonl and `tuimon export`
writes, named by `ROW_COLUMNS` and `METRIC_COLUMNS`. The judge (`tuimon.engine.judge`) makes
them; this module only says what they hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from tuimon.steplog import Step, jsonable


class MetricDiff(NamedTuple):
    """One metric of one aligned step, on both sides (a tuple: many are made per second)."""

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
    occurrence: int = 0
    """Which record of this step (0 the first): a step logged again is compared in order."""

    @property
    def equal(self) -> bool:
        """Bitwise equal in every shared metric and in the digests."""
        return (
            self.digest_equal is not False
            and not self.tensors
            and all(d.equal for d in self.diffs.values())
        )

    def row(self) -> dict[str, Any]:
        """The aligned row, values as they are: `ROW_COLUMNS`, then `METRIC_COLUMNS` of each
        judged metric (aligned.jsonl and `tuimon export` write it)."""
        row: dict[str, Any] = {
            "step": self.step,
            "occurrence": self.occurrence,
            "equal": self.equal,
            "divergence": self.divergence,
            "digest_equal": self.digest_equal,
            "tensors_differ": list(self.tensors),
            "t.a": self.a.t,
            "t.b": self.b.t,
        }
        for name, (a, b, _, absd, rel, ulps) in self.diffs.items():
            row[f"{name}.a"] = a
            row[f"{name}.b"] = b
            row[f"{name}.abs"] = absd
            row[f"{name}.rel"] = rel
            row[f"{name}.ulps"] = ulps
        return row

    def to_dict(self) -> dict[str, Any]:
        """The row as a line of aligned.jsonl: non-finite floats as strings."""
        # One sum tells whether every float is finite (a NaN, an infinity or an overflow makes
        # it non-finite; a numpy scalar makes it not a float): then the row is written as it
        # is, else `jsonable` writes the non-finite values as strings.
        total = self.divergence + (self.a.t or 0.0) + (self.b.t or 0.0)
        for a, b, _, absd, rel, _ in self.diffs.values():
            total += a + b + absd + rel
        row = self.row()
        return row if type(total) is float and math.isfinite(total) else jsonable(row)


ROW_COLUMNS = (
    "step",
    "occurrence",
    "equal",
    "divergence",
    "digest_equal",
    "tensors_differ",
    "t.a",
    "t.b",
)
"""The columns every aligned row has (`AlignedStep.row`): the step and which of its records
(0 the first), bitwise equal, the largest relative difference, the digests equal, the tensors
whose digests differ, each side's clock."""
METRIC_COLUMNS = ("a", "b", "abs", "rel", "ulps")
"""A judged metric's columns are `<metric>.a`, `.b` (each side's value), `.abs`, `.rel` and
`.ulps` (how far apart): the one naming of aligned.jsonl and `tuimon export`."""

"""Every line is judged: text lines of two runs compared by position between step records.

A line that is not a step record (an evaluation line nobody read, a banner, a config dump, a
damaged row) is matched with the line at the same place on the other side: the same number of
step records before it, the same count of text lines since the last one. The numbers it
prints, once its clocks are masked (`tuimon.clocks.mask_clocks`), must agree; its words are
shown, not judged (a path or a run name may differ between two runs of one computation).
Equal text never blocks a verdict; differing numbers are a difference, named by both lines
and the step they follow; a line on one side only leaves the pair INCOMPLETE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from tuimon.clocks import text_numbers
from tuimon.readers.text import last_state
from tuimon.steplog import UNJUDGED
from tuimon.store import other_side

MAX_TEXT = 400
"""Characters of a line kept for the report."""


@dataclass(slots=True)
class _Line:
    step: int | None
    """The step record this line follows (None: before the first)."""
    number: int
    """Its place among this side's text lines (1-based)."""
    text: str
    values: tuple[str, ...]


@dataclass
class TextDifference:
    """The first text lines whose numbers differ."""

    step: int | None
    line_a: int
    line_b: int
    text_a: str
    text_b: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "line_a": self.line_a,
            "line_b": self.line_b,
            "text_a": self.text_a,
            "text_b": self.text_b,
        }


def _relative(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    """The largest relative difference of two lines' numbers (inf when they do not pair)."""
    if len(a) != len(b):
        return math.inf
    top = 0.0
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        try:
            u, v = float(x), float(y)
        except ValueError:
            return math.inf
        if u == v:  # 1.0 against 1.00: the same number printed another way
            continue
        scale = max(abs(u), abs(v))
        top = max(top, abs(u - v) / scale if scale else 0.0)
        if math.isnan(top):
            return math.inf
    return top


@dataclass
class TextJudge:
    """Text lines of both sides, matched by (step records before, place since the last)."""

    tolerance: float = 0.0
    compared: int = 0
    """Matched lines that hold numbers."""
    differ: int = 0
    beyond: bool = False
    max_divergence: float = 0.0
    first: TextDifference | None = None
    _pending: dict[str, dict[tuple[int, int], _Line]] = field(
        default_factory=lambda: {"a": {}, "b": {}}
    )
    _gap: dict[str, tuple[int, int]] = field(default_factory=lambda: {"a": (0, 0), "b": (0, 0)})
    _lines: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})
    _ordinal: dict[str, int] = field(default_factory=lambda: {"a": 0, "b": 0})

    def add(self, side: str, text: str, steps_before: int, step: int | None) -> None:
        """One text line of `side`, after `steps_before` step records (the last `step`)."""
        ordinal, index = self._gap[side]
        index = index + 1 if ordinal == steps_before else 0
        self._gap[side] = (steps_before, index)
        self._ordinal[side] = max(self._ordinal[side], steps_before)
        self._lines[side] += 1
        text = last_state(text)  # a bar redrawn with \r: as a terminal shows it, its last state
        values = () if text.startswith(UNJUDGED) else text_numbers(text)
        line = _Line(step, self._lines[side], text[:MAX_TEXT], values)
        other = other_side(side)
        match = self._pending[other].pop((steps_before, index), None)
        if match is None:
            self._pending[side][(steps_before, index)] = line
            return
        a, b = (line, match) if side == "a" else (match, line)
        self._judge(a, b)

    def _judge(self, a: _Line, b: _Line) -> None:
        if not a.values and not b.values:
            return
        self.compared += 1
        if a.values == b.values:
            return
        rel = _relative(a.values, b.values)
        if rel == 0.0:
            return
        self.differ += 1
        self.max_divergence = max(self.max_divergence, rel)
        if rel > self.tolerance or self.tolerance == 0:
            self.beyond = True
        if self.first is None or a.number < self.first.line_a:
            step = a.step if a.step is not None else b.step
            self.first = TextDifference(step, a.number, b.number, a.text, b.text)

    def steps_seen(self, side: str, steps: int) -> None:
        """The side has logged `steps` step records so far (a gap's lines are complete)."""
        self._ordinal[side] = max(self._ordinal[side], steps)

    def unmatched(self, *, running: bool = False) -> tuple[int, int]:
        """Text lines one side only has; `running`: only those the other side has gone past."""
        if not running:
            return len(self._pending["a"]), len(self._pending["b"])
        a = sum(o < self._ordinal["b"] for o, _ in self._pending["a"])
        b = sum(o < self._ordinal["a"] for o, _ in self._pending["b"])
        return a, b

    def first_unmatched(self) -> str | None:
        """The first line one side only has, as `a line N: text`."""
        best: tuple[tuple[int, int], str, _Line] | None = None
        for side in ("a", "b"):
            for key, line in self._pending[side].items():
                if best is None or key < best[0]:
                    best = (key, side, line)
        if best is None:
            return None
        _, side, line = best
        return f"{side} text line {line.number}: {line.text[:80]}"

    def to_dict(self) -> dict[str, Any]:
        """For `--json` and pair.json."""
        ua, ub = self.unmatched()
        return {
            "lines_a": self._lines["a"],
            "lines_b": self._lines["b"],
            "compared": self.compared,
            "differ": self.differ,
            "max_divergence": self.max_divergence,
            "only_a": ua,
            "only_b": ub,
            "first": self.first.to_dict() if self.first else None,
        }

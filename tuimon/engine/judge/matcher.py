"""Two whole logs judged block by block without building records (`tuimon compare`)."""

from __future__ import annotations

import numpy as np

from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.columns import Columns
from tuimon.store import SIDES, other_side


class ColumnMatcher:
    """Two whole logs matched block by block on the step (a merge on step): columns of each
    side wait until the other side has the same step, then are judged. Only unmatched rows
    are held, so logs written in step order stream in bounded memory. Steps must not repeat
    within a side (`ColumnMatcher.repeated` tells; use `compare_steps` then)."""

    def __init__(self, aligner: PairAligner) -> None:
        self.aligner = aligner
        self._pending: dict[str, Columns | None] = {"a": None, "b": None}
        self._past: dict[str, list[np.ndarray]] = {"a": [], "b": []}
        """Each side's steps so far, while every block's steps rise past the last block's."""
        self._seen: dict[str, set[int] | None] = {"a": None, "b": None}
        """Each side's steps so far, once they did not rise (a set: repeats are found)."""
        self.repeated = False

    def add(self, side: str, block: Columns) -> None:
        """A block of one side's rows (steps unique within the side)."""
        if self._repeats(side, block.steps):
            self.repeated = True
            return
        for name in block.values:
            self.aligner.names[side].add(name)
        other = other_side(side)
        mine = self._pending[side]
        mine = block if mine is None else Columns.concat([mine, block])
        theirs = self._pending[other]
        if theirs is None:
            self._pending[side] = mine
            return
        m = min(len(mine), len(theirs))
        if (
            self._seen[side] is None
            and self._seen[other] is None
            and np.array_equal(mine.steps[:m], theirs.steps[:m])
        ):  # both rising, the same steps in the same order (the usual pair): no search
            if m:
                x, y = mine.take(slice(0, m)), theirs.take(slice(0, m))
                self.aligner.judge(*((x, y) if side == "a" else (y, x)), ulps=False)
                mine, theirs = mine.take(slice(m, None)), theirs.take(slice(m, None))
            self._pending[side], self._pending[other] = mine, theirs
            return
        _, i, j = np.intersect1d(mine.steps, theirs.steps, assume_unique=True, return_indices=True)
        if len(i):
            x, y = mine.take(i), theirs.take(j)
            self.aligner.judge(*((x, y) if side == "a" else (y, x)), ulps=False)
            keep_mine, keep_theirs = np.ones(len(mine), bool), np.ones(len(theirs), bool)
            keep_mine[i], keep_theirs[j] = False, False
            mine, theirs = mine.take(keep_mine), theirs.take(keep_theirs)
        self._pending[side], self._pending[other] = mine, theirs

    def _repeats(self, side: str, steps: np.ndarray) -> bool:
        """Whether a block's steps repeat one of the side's steps so far (or each other)."""
        past, seen = self._past[side], self._seen[side]
        if not len(steps):
            return False
        if seen is None:
            if (not past or steps[0] > past[-1][-1]) and (steps[1:] > steps[:-1]).all():
                past.append(steps)  # rising: no repeat (the usual log, no set of its steps)
                return False
            seen = self._seen[side] = set(np.concatenate(past).tolist()) if past else set()
        listed = steps.tolist()
        if len(set(listed)) != len(listed) or not seen.isdisjoint(listed):
            return True
        seen.update(listed)
        return False

    def finish(self) -> None:
        """Count what is left on each side as steps one side only has."""
        for side in SIDES:
            rest = self._pending[side]
            self.aligner.unmatched_extra[side] = len(rest) if rest is not None else 0

"""How often each step of one side was logged, in memory that does not grow with a run whose
steps rise: the aligner matches the k-th record of a step on one side with the k-th on the other,
so it must know, for every record, how many of that step came before.

Steps seen once, rising at a stride (0, 1, 2 ... or 0, 50, 100 ...), are kept as runs
(start, last, stride); a step logged again, or one that breaks the pattern, goes in a dict.
A million rising steps are one run, not a million dict entries.
"""

from __future__ import annotations

from bisect import bisect_right


class StepCounts:
    """Records of each step seen so far: `add(step)` returns how many came before."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        """First step of each run, rising."""
        self._runs: list[list[int]] = []
        """[start, last, stride] of steps seen once each, in the order of `_starts`."""
        self._more: dict[int, int] = {}
        """Counts of the steps outside the runs, and of the steps seen more than once."""

    def add(self, step: int) -> int:
        """Count one record of `step`; the number of its records before this one."""
        more = self._more
        if more:
            got = more.get(step)
            if got is not None:
                more[step] = got + 1
                return got
        runs = self._runs
        if runs:
            last = runs[-1]
            if step > last[1]:
                if last[2] == 0 or step - last[1] == last[2]:  # the run goes on
                    last[2] = step - last[1]
                    last[1] = step
                else:
                    self._starts.append(step)
                    runs.append([step, step, 0])
                return 0
            if self._in_runs(step):
                more[step] = 2
                return 1
            more[step] = 1
            return 0
        self._starts.append(step)
        runs.append([step, step, 0])
        return 0

    def _in_runs(self, step: int) -> bool:
        i = bisect_right(self._starts, step) - 1
        if i < 0:
            return False
        start, last, stride = self._runs[i]
        return step <= last and (step == start or (stride > 0 and (step - start) % stride == 0))

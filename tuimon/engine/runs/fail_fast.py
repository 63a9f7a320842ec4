"""Fail fast: a sweep whose first pairs all fail before their first step stops there.

A missing partition, a launcher that is not installed, a typo in the command: every pair of the
sweep would fail the same way, one after another (or 32 at once). So the first pair of a sweep
runs alone until both of its runs have logged a step (or it has run `GATE_S` seconds without
failing: a job waiting in a queue); when it fails before its first step, the sweep stops there,
says the error once and leaves the other pairs never run (`--resume` runs them once it is
fixed). After the gate, the sweep also stops starting pairs when the first `SAME_ERRORS` pairs
to end all failed before their first step with the same error.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tuimon.engine.judge.verdict import exit_words
from tuimon.engine.sources.session import PairSession

GATE_S = 10.0
"""Seconds the first pair runs alone at most before the others start."""
SAME_ERRORS = 3
"""Pairs that failed the same way before their first step, after which no more start."""


def early_error(session: PairSession) -> str | None:
    """How a pair failed before its first step (a side failed having logged no step): its last
    stderr line (or its exit), the same words for the same error; None when it did not."""
    for side, state in session.sides.items():
        if state.status == "failed" and not state.records:
            last = next((line for line in reversed(state.stderr_tail) if line.strip()), None)
            return f"run {side}: " + (last.strip() if last else exit_words(state.exit_code))
    return None


async def gate(session: Callable[[], PairSession | None], done: asyncio.Future[None]) -> None:
    """Until the first pair has logged a step on both sides, ended, or run `GATE_S` seconds."""
    start = time.monotonic()
    while not done.done() and time.monotonic() - start < GATE_S:
        current = session()
        if current is not None and all(s.records for s in current.sides.values()):
            return
        await asyncio.wait({done}, timeout=0.1)


class FailFast:
    """What the ends of a sweep's first pairs say: stop, or go on."""

    def __init__(self) -> None:
        self.errors: list[str | None] = []
        self.reason: str | None = None
        """Why the sweep stopped (one line), once it has."""

    def ended(self, error: str | None, *, alone: bool) -> bool:
        """A pair ended (`error`: how it failed before its first step, else None); True when
        the sweep should start no more pairs. `alone`: it was the first pair, run alone."""
        if self.reason is not None:
            return True
        self.errors.append(error)
        first = self.errors[:SAME_ERRORS]
        if error is None or any(e != error for e in first):
            return False
        if alone or len(first) == SAME_ERRORS:
            count = "the first pair" if alone else f"the first {len(first)} pairs"
            self.reason = f"{count} failed before the first step: {error}"
            return True
        return False

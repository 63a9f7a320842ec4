"""A session batches once per tick of the clock, from the turn that takes its runs' lines: the
two runs of a pair deliver on the same ticks, so their lines of one tick make one batch. These
are bounds a slow machine keeps (a slow loop makes fewer batches, never more)."""

from __future__ import annotations

import asyncio
import json
import time

from tuimon.engine.events import Exited, Lines
from tuimon.engine.sources.session import Batch, PairOptions, PairSession, SourceEvent
from tuimon.engine.sources.side_state import SideState

PERIOD = 0.1


def line(step: int) -> bytes:
    return json.dumps({"step": step, "loss": 1.0 / (step + 1)}).encode() + b"\n"


class TickSource:
    """Both sides deliver one line each on every tick of the clock, as two runs do."""

    def __init__(self, ticks: int) -> None:
        self.ticks = ticks
        self.stopped = False

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        for step in range(self.ticks):
            await asyncio.sleep(PERIOD - time.monotonic() % PERIOD)
            if self.stopped:
                break
            for side in "ab":  # one turn of the loop: as two pumps waking on one tick
                queue.put_nowait(Lines(side, [line(step)]))
        for side in "ab":
            queue.put_nowait(Exited(side, 0, "interrupted" if self.stopped else "finished"))

    async def stop(self) -> None:
        self.stopped = True

    def quiet_for(self, side: str) -> float:
        return 0.0

    def terminate(self) -> None:
        pass


def run_session(source: TickSource, stop_after: float | None = None) -> tuple[list[Batch], float]:
    batches: list[Batch] = []
    sides = (SideState("a", "cpu", "x"), SideState("b", "cpu", "x"))
    session = PairSession(
        source, sides, options=PairOptions(batch_interval=PERIOD), on_batch=batches.append
    )

    async def main() -> float:
        start = time.monotonic()
        if stop_after is not None:
            asyncio.get_running_loop().call_later(stop_after, session.stop)
        await session.run()
        return time.monotonic() - start

    return batches, asyncio.run(main())


def test_one_batch_per_tick_and_a_ticks_lines_together() -> None:
    batches, took = run_session(TickSource(12))
    with_lines = [b for b in batches if any(b.records.values())]
    assert len(with_lines) <= took / PERIOD + 2  # never two batches in one tick
    for batch in with_lines:  # a tick's lines of both runs are never split between batches
        assert len(batch.records["a"]) == len(batch.records["b"])
    assert sum(len(b.records["a"]) for b in batches) == 12
    assert batches[-1].done and batches[-1].summary.steps_compared == 12


def test_a_stop_wakes_the_session_at_once() -> None:
    batches, took = run_session(TickSource(10_000), stop_after=0.3)
    assert took < 30  # not the 1,000 s of its ticks
    assert batches[-1].done and batches[-1].sides["a"].status == "interrupted"


class QuietSource(TickSource):
    """Runs that print nothing for a second, then end."""

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        await asyncio.sleep(1.0)
        for side in "ab":
            queue.put_nowait(Exited(side, 0, "finished"))


def test_a_quiet_pair_batches_once_a_second_and_never_spins(monkeypatch) -> None:
    """Nothing new: a batch a second (rates and ETAs still move), and a handful of turns, not a
    loop that spins until the next tick."""
    turns = []
    monkeypatch.setattr(PairSession, "_check_stalls", lambda self: turns.append(1))
    batches, took = run_session(QuietSource(0))
    assert 1 <= len(batches) <= took / 1.0 + 2
    assert len(turns) <= 3 * (took / PERIOD + 2)


class BackwardsSource(TickSource):
    """Steps that go back (a log out of order, a second run in one stream)."""

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        for step in (5, 6, 0, 1, 2):
            await asyncio.sleep(PERIOD)
            for side in "ab":
                queue.put_nowait(Lines(side, [line(step)]))
        for side in "ab":
            queue.put_nowait(Exited(side, 0, "finished"))


def test_a_rate_is_never_negative_when_steps_go_back() -> None:
    batches, _ = run_session(BackwardsSource(0))
    rates = [s.rate for b in batches for s in b.sides.values() if s.rate is not None]
    assert rates and all(r >= 0 for r in rates)

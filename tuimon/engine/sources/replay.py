"""Replaying saved logs through the same session as a live pair, at a chosen pace."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from tuimon.engine.events import Exited, Lines, SourceEvent, Stderr
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.sources.replicas import saved_watch
from tuimon.engine.sources.saved import SavedPair
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.steplog import Record, Step
from tuimon.store import SIDES, SavedLogs

YIELD_EVERY = 64
"""Steps fed between two yields to the event loop when the pace needs no sleep."""
TICK = 0.125
"""Seconds between two feeds at most 8 a second (half a batch interval): the steps due in
between go together (one event, one judge of a block), so a paced replay costs per tick, not
per step."""


class _Clock:
    """When each step is due: `shown / speed` steps/s, or the recorded `t` / `speed`."""

    def __init__(
        self, speed: float, realtime: bool, times: dict[int, float], start_at: int | None = None
    ) -> None:
        self.pace = (speed, realtime)
        self.times = times
        self.start = time.monotonic()
        self.first_t: float | None = times.get(start_at) if start_at is not None else None
        self.shown = 0

    def delay(self, step: int) -> float:
        """Seconds until `step` is due (<= 0: due already)."""
        speed, realtime = self.pace
        self.shown += 1
        if realtime:
            t = self.times.get(step) or 0.0
            if self.first_t is None:
                self.first_t = t
            due = (t - self.first_t) / speed
        else:
            due = self.shown / speed
        return due - (time.monotonic() - self.start)


class ReplaySource:
    """Feeds a saved pair's lines (`SavedPair`, read once) to a session, step by step, at
    `speed` steps per second.

    With `realtime`, the pace follows the recorded `t` of the steps (times `speed`). Pausing,
    changing speed and jumping ahead act on the next lines fed.
    """

    def __init__(self, logs: SavedLogs, *, speed: float = 50.0, realtime: bool = False) -> None:
        self.logs = SavedPair.of(logs)
        self.speed = speed
        self.realtime = realtime
        self.paused = False
        self.jump_to: int | None = None
        self._resume = asyncio.Event()
        self._resume.set()
        self._stopped = False
        self._stopping = asyncio.Event()

    def pause(self) -> None:
        """Hold the replay."""
        self.paused = True
        self._resume.clear()

    def resume(self) -> None:
        """Go on after a pause."""
        self.paused = False
        self._resume.set()

    def toggle(self) -> bool:
        """Pause or resume; True when now paused."""
        if self.paused:
            self.resume()
        else:
            self.pause()
        return self.paused

    def faster(self) -> float:
        """Double the pace."""
        self.speed = min(self.speed * 2, 1e6)
        return self.speed

    def slower(self) -> float:
        """Halve the pace."""
        self.speed = max(self.speed / 2, 0.25)
        return self.speed

    def jump(self, step: int | None) -> None:
        """Feed without pausing until `step` (e.g. the first divergence) has been shown."""
        self.jump_to = step
        self.resume()

    async def stop(self) -> None:
        self._stopped = True
        self._stopping.set()  # ends a wait for the next step at once, whatever the pace
        self._resume.set()

    def quiet_for(self, side: str) -> float:
        return 0.0

    def terminate(self) -> None:
        """Nothing runs in a replay."""

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        cursors = {"a": 0, "b": 0}
        parsed = {s: self.logs.records(s) for s in SIDES}  # the readers': a live pair's account
        steps = sorted({r.step for recs in parsed.values() for r in recs if isinstance(r, Step)})
        times = {
            r.step: r.t for recs in parsed.values() for r in recs if isinstance(r, Step) and r.t
        }
        clock = _Clock(self.speed, self.realtime, times)
        fed: int | None = None  # the last step whose lines were put
        for step in steps:
            if self._stopped:
                break
            if self.jump_to is not None and step < self.jump_to:
                if step % YIELD_EVERY == 0:  # fast-forward in chunks, letting the view breathe
                    await self._feed_until(step, parsed, cursors, queue)
                    await asyncio.sleep(0)
                continue
            self.jump_to = None
            if self.paused or clock.pace != (self.speed, self.realtime):
                await self._feed_until(step, parsed, cursors, queue)
                fed = step
                await self._resume.wait()  # a pause or a new speed starts a new clock
                clock = _Clock(self.speed, self.realtime, times, start_at=step)
                continue
            delay = clock.delay(step)
            if delay > 0:  # the steps due so far go in one event, then wait (TICK at least)
                if fed != step:
                    await self._feed_until(step, parsed, cursors, queue)
                    fed = step
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), max(delay, TICK))
            elif clock.shown % YIELD_EVERY == 0:
                await self._feed_until(step, parsed, cursors, queue)
                fed = step
                await asyncio.sleep(0)
        if steps and not self._stopped:
            await self._feed_until(steps[-1], parsed, cursors, queue)
        await self._end(parsed, cursors, queue)

    async def _feed_until(
        self,
        step: int,
        parsed: dict[str, list[Record]],
        cursors: dict[str, int],
        queue: asyncio.Queue[SourceEvent],
    ) -> None:
        """Put each side's lines up to (and with) the record of `step`."""
        for side in SIDES:
            recs, lines = parsed[side], self.logs.lines(side)
            begin = end = cursors[side]
            while end < len(lines) and not (isinstance(rec := recs[end], Step) and rec.step > step):
                end += 1
            if end > begin:
                cursors[side] = end
                await queue.put(Lines(side, lines[begin:end], recs[begin:end]))

    async def _end(
        self,
        parsed: dict[str, list[Record]],
        cursors: dict[str, int],
        queue: asyncio.Queue[SourceEvent],
    ) -> None:
        """The lines left after the last step, the saved stderr, then how each side ended."""
        for side in SIDES:
            rest = self.logs.lines(side)[cursors[side] :]
            if rest and not self._stopped:
                await queue.put(Lines(side, rest, parsed[side][cursors[side] :]))
            err = self.logs.stderr(side)
            if err is not None:
                await queue.put(Stderr(side, err.read_bytes()[-20000:]))
            code, status = self.logs.ending.exits[side]
            await queue.put(Exited(side, code, "interrupted" if self._stopped else status))


def replay_session(
    logs: SavedLogs,
    *,
    speed: float = 50.0,
    realtime: bool = False,
    tolerance: float | None = None,
    on_batch: Callable[[Batch], None] | None = None,
    select: MetricFilter | None = None,
) -> PairSession:
    """A session that replays saved logs (nothing is written); its source has the controls.
    The pair's own tolerance and `--ignore`/`--only` choice unless others are given."""
    if tolerance is None:
        tolerance = logs.doc.tolerance or 0.0
    source = ReplaySource(logs, speed=speed, realtime=realtime)
    pair = source.logs
    session = PairSession(
        source,
        (pair.side_state("a"), pair.side_state("b")),
        options=PairOptions(
            tolerance=tolerance,
            select=select or pair.select,
            replicas=saved_watch(pair.pair_dir, pair.doc.more.get("nproc"), pair.reading),
        ),
        on_batch=on_batch,
    )
    session.pair_path = pair.pair_dir
    session.controls = source
    session.logs = pair
    return session

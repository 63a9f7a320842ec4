"""Replaying saved logs through the same session as a live pair, at a chosen pace."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from typing import Any, Protocol

from tuimon.engine.events import Exited, Judged, Lines, SourceEvent, Stderr
from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.sources.replicas import saved_watch
from tuimon.engine.sources.saved import SavedPair, boxed_end, saved_ending
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.errors import CompareError, ReplayError
from tuimon.steplog import Record, Step
from tuimon.store import SIDES, SavedLogs

YIELD_EVERY = 64
"""Steps fed between two yields to the event loop when the pace needs no sleep."""
TICK = 0.125
"""Seconds between two feeds at most 8 a second (half a batch interval): the steps due in
between go together (one event, one judge of a block), so a paced replay costs per tick, not
per step."""


class SideRead(Protocol):
    """A side as a `PairJudge` read it: what it held besides its steps."""

    header: Any
    end: Any
    steps: int
    texts: int
    first_text: str | None

    @property
    def tuimon(self) -> bool:
        """A tuimon step log (its runs write an end record)."""


class PairJudge(Protocol):
    """The judge of two saved logs read in blocks (`tuimon.engine.analyses.compare.judge_pair`,
    what `compare` runs), handed down by the command: the aligner that judged every step and
    each side as read; `progress(aligner, sides)` is told after each block."""

    def __call__(
        self,
        logs: SavedPair,
        tolerance: float,
        select: MetricFilter | None,
        progress: Callable[[PairAligner, dict[str, Any]], None] | None,
    ) -> tuple[PairAligner, tuple[Any, Any]]: ...


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

    def __init__(
        self,
        logs: SavedLogs,
        *,
        speed: float = 50.0,
        realtime: bool = False,
        judge: PairJudge | None = None,
    ) -> None:
        self.logs = SavedPair.of(logs)
        self.judge = judge
        """Flat out (an infinite speed, not realtime), the pair goes through this judge
        instead of record by record (`replay_session`, `_run_judged`)."""
        self.judged: tuple[PairAligner, tuple[SideRead, SideRead]] | None = None
        """What `judge` gave (`replay_session` runs it)."""
        self.tolerance = 0.0
        self.select: MetricFilter | None = None
        self.speed = speed
        self.realtime = realtime
        self.paused = False
        self.jump_to: int | None = None
        self._resume = asyncio.Event()
        self._resume.set()
        self._stopped = False
        self._stopping = asyncio.Event()

    @property
    def flat_out(self) -> bool:
        """Judged by `judge` in blocks: no pace (an infinite speed, not realtime)."""
        return self.judge is not None and math.isinf(self.speed) and not self.realtime

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
        if self.judged is not None:
            await self._run_judged(queue, self.judged)
            return
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

    async def _run_judged(
        self,
        queue: asyncio.Queue[SourceEvent],
        judged: tuple[PairAligner, tuple[SideRead, SideRead]],
    ) -> None:
        """Flat out: the pair as its judge read it in blocks (no record per step was made or
        held): what each side held besides its steps, its steps counted, the aligner that
        judged them, then how each side ended."""
        aligner, read = judged
        sides = dict(zip(SIDES, read, strict=True))
        box = self.logs.pair_dir
        for i, (side, log) in enumerate(sides.items()):
            end = boxed_end(log.end, box or getattr(self.logs, side).parent)
            step = aligner.last_step[side] if log.steps else None
            last = i == len(sides) - 1
            device = self.logs.device(side, log.header)
            done = Judged(
                side,
                log.steps,
                step,
                done=True,
                header=log.header,
                end=end,
                texts=log.texts,
                first_text=log.first_text,
                device=device,
                aligner=aligner if last else None,
            )
            await queue.put(done)
        if "ending" not in self.logs.__dict__:  # from the ends read, not every record again
            ends = {s: log.end for s, log in sides.items()}
            tuimon = [s for s, log in sides.items() if log.tuimon]
            self.logs.ending = saved_ending(self.logs, ends, tuimon)
        for side in SIDES:
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
    judge: PairJudge | None = None,
) -> PairSession:
    """A session that replays saved logs (nothing is written); its source has the controls.
    The pair's own tolerance and `--ignore`/`--only` choice unless others are given. `judge`:
    flat out, the pair is judged in blocks by it (`ReplaySource._run_judged`), unless its
    sides have ranks to check step by step (`saved_watch`)."""
    if tolerance is None:
        tolerance = logs.doc.tolerance or 0.0
    pair = SavedPair.of(logs)
    replicas = saved_watch(pair.pair_dir, pair.doc.more.get("nproc"), pair.reading)
    source = ReplaySource(
        pair, speed=speed, realtime=realtime, judge=judge if replicas is None else None
    )
    source.tolerance, source.select = tolerance, select or pair.select
    quick = source.flat_out  # the judge reads the logs: the view does not read them first
    if judge is not None and quick:  # judged now: a log it cannot read is refused at once
        try:
            source.judged = judge(pair, tolerance, source.select, None)
        except CompareError as exc:
            raise ReplayError(str(exc)) from None
    session = PairSession(
        source,
        (pair.side_state("a", quick=quick), pair.side_state("b", quick=quick)),
        options=PairOptions(tolerance=tolerance, select=select or pair.select, replicas=replicas),
        on_batch=on_batch,
    )
    session.pair_path = pair.pair_dir
    session.controls = source
    session.logs = pair
    return session

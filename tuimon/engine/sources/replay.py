"""Replaying saved logs through the same session as a live pair, at a chosen pace."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from tuimon.engine.events import Exited, Judged, Lines, SourceEvent, Stderr
from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.verdict import Ending
from tuimon.engine.sources.read_ahead import ReadAhead, side_blocks
from tuimon.engine.sources.replicas import saved_watch
from tuimon.engine.sources.saved_pair import SavedPair, boxed_end, saved_ending
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.errors import CompareError, ReplayError
from tuimon.steplog import End, Header, Record, Step
from tuimon.store import SIDES, SavedLogs

YIELD_EVERY = 64
"""Steps passed between two yields to the event loop while a jump fast-forwards."""
DUE_EVERY = 512
"""Steps due already (the pace is ahead of the ticks, or flat out) fed in one event at most:
at 1,000 steps/s a tick's 125 steps go in one event, not two or three."""
FIRST_DUE = 64
"""Steps due fed first, at once: a screen of rows (the first rows shown before `DUE_EVERY` steps
are read, issue 42)."""
TICK = 0.125
"""Seconds between two feeds at most 8 a second (half a batch interval): the steps due in
between go together (one event, one judge of a block), so a paced replay costs per tick, not
per step."""


AHEAD_AFTER = 1.0
"""Seconds after its first step that a paced view's replay starts judging the pair in full."""


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
        *,
        fork: bool = True,
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
        stream: bool = False,
        ahead: ReadAhead | None = None,
    ) -> None:
        self.logs = SavedPair.of(logs)
        self.judge = judge
        """Flat out (an infinite speed, not realtime), the pair goes through this judge
        instead of record by record (`replay_session`, `_run_judged`)."""
        self.stream = stream
        """Paced, the logs are read a block at a time as they are shown (`_Streamed`), not
        whole before the first step (`_Whole`)."""
        self.children = ahead
        """The logs read ahead by a child process for the streamed feed (closed at its end)."""
        self.judged: tuple[PairAligner, tuple[SideRead, SideRead]] | None = None
        self.ahead: tuple[PairAligner, tuple[SideRead, SideRead]] | None = None
        """What `judge` gave while a paced feed showed the pair (`_judge_ahead`)."""
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
        try:
            await self._run(queue)
        finally:
            if self.children is not None:
                self.children.close()

    async def _run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        if self.judged is not None:
            await self._run_judged(queue, self.judged)
            return
        feed: _Whole | _Streamed = (
            _Streamed(self.logs, times=self.realtime, ahead=self.children)
            if self.stream
            else _Whole(self.logs)
        )
        ahead: asyncio.Task[None] | None = None
        started = 0.0
        times = feed.times
        clock: _Clock | None = None
        fed: int | None = None  # the last step whose lines were put
        last: int | None = None
        async for step in feed.steps():
            last = step
            if clock is None:  # the pace counts from the first step read, not from the start
                clock = _Clock(self.speed, self.realtime, times)
            if self._stopped:
                break
            if ahead is None and self.stream and self.judge is not None:
                # the pair judged in full beside the feed, once its first rows are on screen
                # (the two would share the CPU before they are shown)
                started = started or time.monotonic()
                if time.monotonic() - started >= AHEAD_AFTER:
                    ahead = asyncio.create_task(self._judge_ahead(queue, self.judge))
            if self.jump_to is not None and step < self.jump_to:
                if step % YIELD_EVERY == 0:  # fast-forward in chunks, letting the view breathe
                    await feed.feed_until(step, queue)
                    await asyncio.sleep(0)
                continue
            self.jump_to = None
            if self.paused or clock.pace != (self.speed, self.realtime):
                await feed.feed_until(step, queue)
                fed = step
                await self._resume.wait()  # a pause or a new speed starts a new clock
                clock = _Clock(self.speed, self.realtime, times, start_at=step)
                continue
            delay = clock.delay(step)
            if delay > 0:  # the steps due so far go in one event, then wait (TICK at least)
                if fed != step:
                    await feed.feed_until(step, queue)
                    fed = step
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), max(delay, TICK))
            elif clock.shown % DUE_EVERY == 0 or clock.shown == FIRST_DUE:
                await feed.feed_until(step, queue)
                fed = step
                await asyncio.sleep(0)
        if last is not None and not self._stopped:
            await feed.feed_until(last, queue)
        await feed.rest(queue, self._stopped)
        for side in SIDES:
            err = self.logs.stderr(side)
            if err is not None:
                await queue.put(Stderr(side, err.read_bytes()[-20000:]))
            code, status = feed.ending().exits[side]
            await queue.put(Exited(side, code, "interrupted" if self._stopped else status))
        if ahead is not None and not ahead.done():
            ahead.cancel()  # its thread reads on until its end; nobody waits for it

    async def _judge_ahead(self, queue: asyncio.Queue[SourceEvent], judge: PairJudge) -> None:
        """The pair judged in full by `judge` in a thread while the feed shows it: the verdict
        and the first divergence said at once (`Judged.ahead`), and the first divergence kept
        for a jump to it (`judged`). A log it cannot read: the feed tells it."""
        try:
            got = await asyncio.to_thread(
                # no worker process forked from this thread: it would share the view's
                # signal wakeup pipe (a worker's signal read as the view's own: it quit)
                functools.partial(judge, fork=False),
                self.logs,
                self.tolerance,
                self.select,
                None,
            )
        except (CompareError, ReplayError, OSError):
            return
        aligner, read = got
        self.ahead = got
        ends = {s: log.end for s, log in zip(SIDES, read, strict=True)}
        tuimon = [s for s, log in zip(SIDES, read, strict=True) if log.tuimon]
        ending = saved_ending(self.logs, ends, tuimon)
        summary = aligner.summary(
            complete=ending.reason is None, reason=ending.reason, interrupted=ending.interrupted
        )
        await queue.put(Judged("a", 0, None, summary, ahead=True))

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


class _Whole:
    """A saved pair's records read whole (`SavedPair.records`), fed a step at a time."""

    def __init__(self, logs: SavedPair) -> None:
        self.logs = logs
        self.parsed = {s: logs.records(s) for s in SIDES}  # the readers': a live pair's account
        self.cursors = dict.fromkeys(SIDES, 0)
        recs = self.parsed.values()
        self.times = {r.step: r.t for rs in recs for r in rs if isinstance(r, Step) and r.t}

    async def steps(self) -> AsyncIterator[int]:
        """Every step either side logged, rising."""
        for step in sorted(
            {r.step for rs in self.parsed.values() for r in rs if isinstance(r, Step)}
        ):
            yield step

    async def feed_until(self, step: int, queue: asyncio.Queue[SourceEvent]) -> None:
        """Put each side's lines up to (and with) the record of `step`."""
        for side in SIDES:
            recs, lines = self.parsed[side], self.logs.lines(side)
            begin = end = self.cursors[side]
            while end < len(lines) and not (isinstance(rec := recs[end], Step) and rec.step > step):
                end += 1
            if end > begin:
                self.cursors[side] = end
                await queue.put(Lines(side, lines[begin:end], recs[begin:end]))

    async def rest(self, queue: asyncio.Queue[SourceEvent], stopped: bool) -> None:
        """The lines left after the last step."""
        for side in SIDES:
            rest = self.logs.lines(side)[self.cursors[side] :]
            if rest and not stopped:
                await queue.put(Lines(side, rest, self.parsed[side][self.cursors[side] :]))

    def ending(self) -> Ending:
        return self.logs.ending


class _Streamed:
    """A saved pair's records read a block at a time as they are shown (`read_blocks`, in a
    thread; a log that is not lines, or a small one, whole): memory holds the blocks not fed
    yet, and the first rows are on screen once the first block of each side is read. The
    next step is the lower of the two sides' next step records."""

    def __init__(
        self, logs: SavedPair, *, times: bool = True, ahead: ReadAhead | None = None
    ) -> None:
        self.logs = logs
        self.ahead = ahead
        """Children reading the logs ahead (`read_ahead`), or None: read here, in threads."""
        self.times: dict[int, float] = {}
        """Each step's recorded `t`, kept only for a pace that follows them (`times`): a
        replay at a number of steps a second holds nothing per step."""
        self.keep_times = times
        self.held: dict[str, list[Record]] = {s: [] for s in SIDES}
        self.blocks: dict[str, Iterator[list[Record]] | None] = {}
        self.header: dict[str, Header | None] = dict.fromkeys(SIDES)
        self.end: dict[str, End | None] = dict.fromkeys(SIDES)
        self.seen = dict.fromkeys(SIDES, 0)
        """Records read so far (a header among a side's first five is its header)."""
        self.passed = dict.fromkeys(SIDES, 0)
        """Held records at or before the last step given (`steps`), fed or not: a jump passes
        steps without feeding them."""

    async def _more(self, side: str) -> bool:
        """Read a side's next block; False at its end."""
        ahead = self.ahead
        if side not in self.blocks:
            opened = self._open(side) if ahead else await asyncio.to_thread(self._open, side)
            self.blocks[side] = opened
        it = self.blocks[side]
        if it is None:
            block = None
        elif ahead is not None and ahead.ready(side):  # here already: no thread, no wait
            block = next(it, None)
        else:
            block = await asyncio.to_thread(next, it, None)
        if block is None:
            self.blocks[side] = None
            return False
        path: Path = getattr(self.logs, side)
        box = self.logs.pair_dir or path.parent
        block = [(boxed_end(r, box) or r) if isinstance(r, End) else r for r in block]
        for record in block:
            if isinstance(record, Step):
                if record.t and self.keep_times:
                    self.times[record.step] = record.t
            elif isinstance(record, Header) and self.seen[side] < 5:
                self.header[side] = self.header[side] or record
            elif isinstance(record, End):
                self.end[side] = record
            self.seen[side] += 1
        self.held[side] += block
        return True

    def _open(self, side: str) -> Iterator[list[Record]]:
        """A side's blocks of records, from its child where they are read ahead."""
        if self.ahead is not None:
            return self.ahead.blocks(side)
        return side_blocks(self.logs, side)

    async def _next(self, side: str) -> int | None:
        """The step of a side's next step record past the steps given (None at its end)."""
        while True:
            recs = self.held[side]
            at = self.passed[side]
            step = next((r.step for r in islice(recs, at, None) if isinstance(r, Step)), None)
            if step is not None or not await self._more(side):
                return step

    async def _past(self, side: str, step: int) -> int:
        """The index of a side's first held record past `step` (its next step record after
        it; reading on as needed), from the records already passed."""
        end = self.passed[side]
        while True:
            recs = self.held[side]
            while end < len(recs) and not (isinstance(r := recs[end], Step) and r.step > step):
                end += 1
            if end < len(recs) or not await self._more(side):
                return end

    def _held_next(self, side: str) -> int | bool | None:
        """`_next` from the records held (no coroutine, no read): the step, or False when the
        held records end first (then `_next` reads on)."""
        recs = self.held[side]
        for i in range(self.passed[side], len(recs)):
            record = recs[i]
            if isinstance(record, Step):
                return record.step
        return False if side not in self.blocks or self.blocks[side] is not None else None

    def _held_past(self, side: str, step: int) -> int | None:
        """`_past` from the records held: the index, or None when they end first."""
        recs = self.held[side]
        end, n = self.passed[side], len(recs)
        while end < n and not (isinstance(r := recs[end], Step) and r.step > step):
            end += 1
        return end if end < n else None

    async def steps(self) -> AsyncIterator[int]:
        """The lower of the two sides' next steps, until both end; each side's records up to
        it are passed, whether fed (`feed_until`) or not (a jump). A step costs a look at the
        records held; a side's next block is read (awaited) only when they run out."""
        while True:
            ahead = []
            for side in SIDES:
                got = self._held_next(side)
                if got is False:
                    got = await self._next(side)
                if got is not None:
                    ahead.append(got)
            if not ahead:
                return
            step = min(ahead)
            yield step
            for side in SIDES:
                end = self._held_past(side, step)
                self.passed[side] = end if end is not None else await self._past(side, step)

    async def feed_until(self, step: int, queue: asyncio.Queue[SourceEvent]) -> None:
        """Put each side's records up to (and with) the record of `step`."""
        for side in SIDES:
            end = await self._past(side, step)
            if end:
                recs = self.held[side]
                self.held[side] = recs[end:]
                self.passed[side] = max(0, self.passed[side] - end)
                await queue.put(Lines(side, [], recs[:end]))

    async def rest(self, queue: asyncio.Queue[SourceEvent], stopped: bool) -> None:
        """The records left after the last step (read to the end)."""
        for side in SIDES:
            while not stopped and await self._more(side):
                pass
            if self.held[side] and not stopped:
                await queue.put(Lines(side, [], self.held[side]))
            self.held[side], self.passed[side] = [], 0

    def ending(self) -> Ending:
        """How the pair ended, from the end records read (the records are not read again)."""
        if "ending" not in self.logs.__dict__:
            tuimon = [s for s, h in self.header.items() if h and h.format.startswith("tuimon")]
            self.logs.ending = saved_ending(self.logs, self.end, tuimon)
        return self.logs.ending


def replay_session(
    logs: SavedLogs,
    *,
    speed: float = 50.0,
    realtime: bool = False,
    tolerance: float | None = None,
    on_batch: Callable[[Batch], None] | None = None,
    select: MetricFilter | None = None,
    judge: PairJudge | None = None,
    stream: bool = False,
    ahead: ReadAhead | None = None,
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
        pair,
        speed=speed,
        realtime=realtime,
        judge=judge if replicas is None else None,
        stream=stream,
        ahead=ahead if stream else None,
    )
    if ahead is not None and not stream:
        ahead.close()
    source.tolerance, source.select = tolerance, select or pair.select
    quick = source.flat_out or stream  # the judge or the feed reads the logs: not read first
    if judge is not None and source.flat_out:  # judged now: a log it cannot read is refused at once
        try:
            source.judged = judge(pair, tolerance, source.select, None)
        except CompareError as exc:
            raise ReplayError(str(exc)) from None
    session = PairSession(
        source,
        (pair.side_state("a", quick=quick), pair.side_state("b", quick=quick)),
        options=PairOptions(
            tolerance=tolerance,
            select=select or pair.select,
            replicas=replicas,
            meta={k: v for k, v in pair.doc.more.items() if k == "resume"},  # said again
        ),
        on_batch=on_batch,
    )
    session.pair_path = pair.pair_dir
    session.controls = source
    session.logs = pair
    stopped = pair.doc.more.get("stopped_on_divergence")
    if type(stopped) is int:  # the pair was stopped there: its replay says so, as it did
        session.stopped_at = stopped
    return session

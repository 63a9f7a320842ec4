"""A pair: two sources -> raw logs on disk -> aligner -> batched events for a view.

The same `PairSession` drives live runs and replays, for the Textual app and the headless
reporter alike: a view gets at most one `Batch` per tick of the clock (`batch_interval`,
0.25 s; 0.5 s in a big sweep) and never computes anything twice.
"""

from __future__ import annotations

import asyncio
import functools
import math
import signal
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from tuimon.applied import pair_applied
from tuimon.engine.events import Exited, Judged, Lines, Note, SourceEvent, Stderr
from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.artifacts import compare_artifacts, describe
from tuimon.engine.judge.band import Band
from tuimon.engine.judge.byte_rule import hold
from tuimon.engine.judge.columns import MetricFilter
from tuimon.engine.judge.fingerprints import env_diff
from tuimon.engine.judge.hints import likely_causes
from tuimon.engine.judge.seed_check import pair_seeds
from tuimon.engine.judge.verdict import (
    BY_TUIMON,
    Ending,
    RunEnd,
    Summary,
    hold_replicas,
    how_it_ended,
    status_words,
)
from tuimon.engine.launch.resumed import Resume, ResumedRun
from tuimon.engine.launch.runner import HALT_GRACE, TICK, LaunchError, Run, RunSpec
from tuimon.engine.sources.replicas import ReplicaWatch
from tuimon.engine.sources.side_state import SideState
from tuimon.readers import PatternError, Reading
from tuimon.readers.cut import LineCutter
from tuimon.steplog import End, Header, Record, Step, Text, parse_line
from tuimon.store import SIDES, PairDoc, PairWriter, RunDoc, SavedLogs, StoreError

STDERR_TAIL = 20
IDLE_BATCH = 1.0
"""Seconds between batches when nothing happened (rates and ETAs still move)."""
LATE = 0.25
"""A session's batches come once per tick of the clock (its batch interval, the ticks its runs
deliver on), made by the turn that takes the runs' lines; its timer, for a tick with no lines,
waits this share of an interval past the tick (the lines of a tick come first, however many
pairs deliver on it)."""
MAX_EVENTS_PER_TURN = 512
"""Events handled before the session yields to the event loop (a view must stay responsive)."""
TURN = 0.05
"""Seconds of events a session handles before it yields to the event loop (runs that flood
deliver thousands of lines an event)."""
RATE_WINDOW = 5.0


@dataclass(frozen=True, slots=True)
class Batch:
    """Everything that happened in one ~100 ms window. Data fields never replace each other."""

    records: dict[str, list[Record]]
    """New records per side, in arrival order (text lines included)."""
    stderr: dict[str, list[str]]
    aligned: list[Any]
    """New `AlignedStep`s, in the order they were completed."""
    sides: dict[str, SideState]
    """Snapshots of both sides."""
    summary: Summary
    done: bool = False
    pair_path: Path | None = None
    message: str | None = None
    """A status line; a later one replaces it."""
    divergence: float | None = None
    """The divergence of the last step aligned so far (also when `aligned` is left empty:
    `PairSession.aligned`)."""


def merge_batches(batches: Sequence[Batch]) -> Batch:
    """Several batches of one session as one (data in order, the last batch's state and
    summary, messages joined): a view that takes them late takes them at once."""
    if len(batches) == 1:
        return batches[0]
    last = batches[-1]
    records = {k: [r for b in batches for r in b.records.get(k, ())] for k in last.records}
    stderr = {k: [t for b in batches for t in b.stderr.get(k, ())] for k in last.stderr}
    message = "; ".join(b.message for b in batches if b.message) or None
    aligned = [x for b in batches for x in b.aligned]
    return replace(last, records=records, stderr=stderr, aligned=aligned, message=message)


class Source(Protocol):
    """Where a session's lines come from: live runs or a replay."""

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        """Put events until both sides have exited (each side ends with `Exited`)."""

    async def stop(self) -> None:
        """End early (quit, Ctrl-C): both sides end with `Exited(..., "interrupted")`."""

    def quiet_for(self, side: str) -> float:
        """Seconds since `side` last wrote anything (0 when it cannot stall)."""

    def terminate(self) -> None:
        """Last resort when the view ends without a stop: SIGTERM whatever still runs."""


class PaceControls(Protocol):
    """The controls a paced source (a replay) offers a view: pause, speed, jump."""

    paused: bool
    speed: float

    def pause(self) -> None:
        """Hold."""

    def toggle(self) -> bool:
        """Pause or resume; True when now paused."""

    def faster(self) -> float:
        """Double the pace; the new speed."""

    def slower(self) -> float:
        """Halve the pace; the new speed."""

    def jump(self, step: int | None) -> None:
        """Feed without pausing until `step` has been shown."""


@dataclass(eq=False)
class LiveSource:
    """Two subprocesses, launched together; their pipes save what they read to `writer`."""

    specs: tuple[RunSpec, RunSpec]
    _: KW_ONLY
    writer: PairWriter | None = None
    grace: float = 5.0
    runs: dict[str, Run] = field(default_factory=dict)
    tick: float = TICK
    """Seconds between two deliveries of a run's lines at least (`Run.tick`)."""
    resume: Resume | None = None
    """`--resume-at`: the side that stops with a checkpoint and runs again from it."""

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        writer = self.writer
        for spec in self.specs:
            save = writer.raw_bytes if writer else None
            save_stderr = writer.stderr if writer else None
            if self.resume is not None and spec.side == self.resume.side:
                self.runs[spec.side] = ResumedRun(  # type: ignore[assignment]
                    spec, self.resume, queue, grace=self.grace, save=save, save_stderr=save_stderr
                )
            else:
                self.runs[spec.side] = Run(
                    spec, queue, grace=self.grace, save=save, save_stderr=save_stderr
                )
            self.runs[spec.side].tick = self.tick
        for spec in self.specs:
            try:
                await self.runs[spec.side].start()
            except LaunchError as exc:
                await queue.put(Stderr(spec.side, f"{exc}\n".encode()))
                await queue.put(Exited(spec.side, None, "failed"))
        await asyncio.gather(*(r.pump() for r in self.runs.values() if r.proc is not None))

    async def stop(self) -> None:
        await asyncio.gather(*(r.terminate(self.grace) for r in self.runs.values()))

    def halt(self) -> None:
        """A stop was asked: the runs parse no more of what they read (`Run.halt`)."""
        for run in self.runs.values():
            run.halt()

    async def stop_side(self, side: str) -> None:
        """Terminate one side (the other failed and --stop-on-fail is set)."""
        if side in self.runs:
            await self.runs[side].terminate(self.grace)

    def quiet_for(self, side: str) -> float:
        run = self.runs.get(side)
        return time.monotonic() - run.last_output if run and run.proc else 0.0

    def terminate(self) -> None:
        for run in self.runs.values():
            run.signal(signal.SIGTERM)


@dataclass
class PairOptions:
    """How a session judges and saves."""

    tolerance: float = 0.0
    band: dict[str, Any] | None = None
    """`--tolerance-from`: a band per metric judges instead of `tolerance` (`Band`)."""
    select: MetricFilter = field(default_factory=MetricFilter)
    """Which metrics are judged (`--ignore`, `--only`); clocks never are."""
    stall_timeout: float | None = None
    stop_on_fail: bool = False
    stop_on_divergence: bool = False
    """End the live runs at the first step judged DIVERGED (`--stop-on-divergence`)."""
    end_check: Callable[[PairSession], None] | None = None
    """Run once both sides have ended, before the pair is saved: it may judge more (a saved
    side's W_E) and change `summary` (`tuimon.engine.sources.against`)."""
    batch_interval: float = 0.25
    """Seconds between two batches at most while lines arrive (a view draws at most once a
    second while steps stream: more batches cost the monitor without showing more)."""
    totals: tuple[int | None, int | None] = (None, None)
    meta: dict[str, Any] = field(default_factory=dict)
    """pair.json fields of the launch: seed, devices, commands, label ... (see `PairDoc`)."""
    replicas: ReplicaWatch | None = None
    """`--nproc`: the other ranks of each side checked against rank 0 (`engine.replicas`)."""


class PairSession:
    """Consumes a source, streams raw lines to the writer, aligns, batches events to a view."""

    def __init__(
        self,
        source: Source,
        sides: tuple[SideState, SideState],
        *,
        options: PairOptions | None = None,
        writer: PairWriter | None = None,
        on_batch: Callable[[Batch], None] | None = None,
    ) -> None:
        self.source = source
        self.options = options or PairOptions()
        self.writer = writer
        self.on_batch = on_batch or (lambda batch: None)
        self.listeners: list[Callable[[Batch], None]] = []
        """More takers of each batch, after `on_batch` (see `listen`)."""
        self.aligned = True
        """Whether batches carry every aligned step (a view shows them; a headless report
        reads the last divergence alone, and a writer always has them)."""
        self.sides = {s.side: s for s in sides}
        for state, total in zip(sides, self.options.totals, strict=True):
            state.total = state.total or total
        self.aligner = PairAligner(
            self.options.tolerance, self.options.select, Band.from_dict(self.options.band)
        )
        self.interrupted = False
        self._stopping = set()
        self.ended = False
        """The session is over and its pair saved (or the save failed)."""
        self.created = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._rates: dict[str, deque[tuple[float, int]]] = {k: deque() for k in self.sides}
        self._stderr: dict[str, deque[str]] = {k: deque(maxlen=STDERR_TAIL) for k in self.sides}
        self._new_records: dict[str, list[Record]] = {k: [] for k in self.sides}
        self._new_stderr: dict[str, list[str]] = {k: [] for k in self.sides}
        self._new_aligned: list[Any] = []
        self._unfed: dict[str, list[Step]] = {k: [] for k in self.sides}
        self._err_split = {k: LineCutter() for k in self.sides}
        self._messages: list[str] = []
        self._first_text: dict[str, str] = {}
        self._stop_requested = asyncio.Event()
        self._unjudged: dict[str, int] = {k: 0 for k in self.sides}
        """Lines that arrived after a stop was asked: saved in the raw logs, not judged."""
        self._store_error_told = False
        self.summary: Summary = self.aligner.summary(complete=False)
        self.pair_path: Path | None = writer.path if writer else None
        self.controls: PaceControls | None = None
        """Pause, speed and jump, when the source offers them (a replay does)."""
        self.logs: SavedLogs | None = None
        """The two logs on disk the session reads (a replay), for a view that reads around."""
        self.artifacts: dict[str, dict[str, Any]] = {}
        """What both runs saved at the end, compared (e.g. W_E: bitwise equal or not)."""

    def _news(self) -> bool:
        """Anything new since the last batch (records, stderr, a status, a message)."""
        return (
            self._states() != self._last_states
            or bool(self._messages)
            or any(self._new_records.values())
            or any(self._new_stderr.values())
        )

    def _states(self) -> tuple[tuple[str, int | None], ...]:
        return tuple((s.status, s.exit_code) for s in self.sides.values())

    _last_states: tuple[tuple[str, int | None], ...] = ()

    def _say(self, message: str) -> None:
        self._messages.append(message)

    def say(self, message: str) -> None:
        """A status line in the next batch (a source's news: a followed file was rotated ...)."""
        self._say(message)

    def listen(self, listener: Callable[[Batch], None]) -> Callable[[], None]:
        """Give `listener` every batch from the next one on (after `on_batch`, in the loop that
        runs the session); the call returned stops that."""
        self.listeners.append(listener)

        def unlisten() -> None:
            if listener in self.listeners:
                self.listeners.remove(listener)

        return unlisten

    _stopped_at: float | None = None

    def _past_stop(self) -> bool:
        """A stop was asked more than `HALT_GRACE` ago: lines still queued are not judged."""
        return self._stopped_at is not None and time.monotonic() > self._stopped_at + HALT_GRACE

    def stop(self) -> None:
        """Ask the session to end early (quit / Ctrl-C); the partial pair is saved."""
        self.interrupted = True
        if self._stopped_at is None:
            self._stopped_at = time.monotonic()
        self._stop_requested.set()
        if isinstance(self.source, LiveSource):
            self.source.halt()  # at once: a session's turn may be long while runs flood
        if self._wake is not None:
            self._wake()

    def terminate(self) -> None:
        """SIGTERM any run still there (the view ended without a stop)."""
        self.source.terminate()

    async def run(self) -> Summary:
        """Run to the end; return the pair's summary."""
        queue: asyncio.Queue[SourceEvent | None] = asyncio.Queue()
        if isinstance(self.source, LiveSource):  # lines more often than batches serve nobody
            self.source.tick = max(TICK, self.options.batch_interval)
        loop = asyncio.get_running_loop()
        # None on the queue: look again (a batch is due, a stop was asked, the source ended).
        # One queue and one timer per turn: no task and no `asyncio.wait` per event.
        wake = functools.partial(queue.put_nowait, None)
        feeder = asyncio.create_task(self.source.run(queue))  # type: ignore[arg-type]
        feeder.add_done_callback(lambda _: wake())
        self._wake = wake
        exited: set[str] = set()
        feeder_seen = False
        last_flush = time.monotonic()
        period = self.options.batch_interval
        flushed_tick = int(last_flush // period)
        try:
            while len(exited) < len(self.sides):
                due = flushed_tick + 1  # the tick of the next batch, in whole ticks
                if not self._news():
                    due = max(due, math.ceil((last_flush + IDLE_BATCH) / period))
                timeout = max(0.0, (due + LATE) * period - time.monotonic())
                timer = loop.call_later(min(timeout, self._stall_due()), wake)
                event = await queue.get()
                timer.cancel()
                ends = time.monotonic() + TURN
                for _ in range(1 + min(queue.qsize(), MAX_EVENTS_PER_TURN)):
                    if event is not None:
                        self._handle(event)
                        if isinstance(event, Exited):
                            exited.add(event.side)
                            await self._on_exit(event)
                    if queue.empty() or time.monotonic() > ends:
                        break  # the rest next turn: a view (a key, a quit) stays responsive
                    event = queue.get_nowait()
                if self._stop_requested.is_set() and self._stop_task is None:
                    self._say("stopping both runs…")
                    self._stop_task = asyncio.create_task(self.source.stop())
                if feeder.done() and not feeder_seen:
                    feeder_seen = True
                    if feeder.exception() is not None:
                        await self._source_failed(feeder.exception(), queue, exited)
                self._check_stalls()
                now = time.monotonic()
                tick = int(now // period)
                if self._first_rows():  # the first aligned rows go at once, not on the tick
                    tick = max(tick, flushed_tick + 1)
                if tick > flushed_tick and (self._news() or now - last_flush >= IDLE_BATCH):
                    self._flush()
                    last_flush, flushed_tick = now, tick
                    self._stop_if_diverged()
        finally:
            self._wake = None
            if not feeder.done():
                await self.source.stop()
                feeder.cancel()
        return self._finish()

    async def _source_failed(
        self,
        exc: BaseException | None,
        queue: asyncio.Queue[SourceEvent | None],
        exited: set[str],
    ) -> None:
        """The source broke (unreadable log, OS error): end the sides it left open."""
        self._say(f"source failed: {exc}")
        for side in self.sides:
            if side not in exited:
                queue.put_nowait(Exited(side, None, "failed"))

    _stop_task: asyncio.Task[None] | None = None
    _divergence_stop: asyncio.Task[None] | None = None
    stopped_at: int | None = None
    """The first divergent step at which `--stop-on-divergence` ended the live runs."""
    _stopping: set[str]
    """Sides tuimon ends by its own rule (`--stop-on-divergence`, `--stop-on-fail`): their
    status is `stopped`, not `interrupted`."""

    def _stop_if_diverged(self) -> None:
        """With `stop_on_divergence`, end the live runs once the pair is DIVERGED."""
        source = self.source
        if (
            not self.options.stop_on_divergence
            or self.stopped_at is not None
            or self.summary.verdict != "DIVERGED"
            or not isinstance(source, LiveSource)
        ):
            return
        beyond = self.summary.beyond  # past a tolerance or band: later than the first bits
        self.stopped_at = beyond["step"] if beyond else self.summary.first_divergent_step
        live = [side for side in source.runs if not self.sides[side].over]
        if live:
            limit = "band" if self.options.band else "tolerance"
            past = beyond and (self.options.tolerance or self.options.band)
            where = f"the first step past the {limit}" if past else "the first divergent step"
            self._say(
                f"stopping run {' and '.join(live)} at {where} {self.stopped_at} "
                "(--stop-on-divergence)"
            )
            self._divergence_stop = asyncio.create_task(self._stop_sides(live))

    async def _stop_sides(self, sides: list[str]) -> None:
        assert isinstance(self.source, LiveSource)
        self._stopping.update(sides)
        await asyncio.gather(*(self.source.stop_side(side) for side in sides))

    _wake: Callable[[], None] | None = None
    """Wakes a running session's loop (`run`)."""

    def _handle(self, event: SourceEvent) -> None:
        state = self.sides[event.side]
        if isinstance(event, Lines):
            if self.writer and not event.saved:
                self.writer.raw_bytes(event.side, b"".join(event.lines))  # a cut tail stays cut
            if event.unread or self._past_stop():  # saved, not judged (`Run.halt`: runs
                self._unjudged[event.side] += len(event.lines)  # that flood leave a backlog)
                return
            if state.status == "starting" or state.status == "stalled":
                state.status = "running"
            records = event.records
            self._records(state, records if records is not None else map(parse_line, event.lines))
        elif isinstance(event, Stderr):
            if self.writer and not event.saved:
                self.writer.stderr(event.side, event.data)
            if state.status == "stalled":
                state.status = "running"
            self._stderr_text(event.side, self._err_split[event.side].feed(event.data))
        elif isinstance(event, Note):
            self.say(f"{event.side}: {event.text}")
        elif isinstance(event, Judged):
            self._judged(state, event)
        else:
            self._stderr_text(event.side, self._err_split[event.side].flush())
            state.exit_code = event.code
            state.status = event.status
            if event.status == "interrupted" and event.side in self._stopping:
                state.status = "stopped"  # by tuimon's own rule, not by the user: pair.json's word
            state.wall_s = time.monotonic() - state.started
        if self.writer and self.writer.error and not self._store_error_told:
            self._store_error_told = True
            self._say(f"raw log not fully saved: {self.writer.error}")

    def _stderr_text(self, side: str, lines: list[bytes]) -> None:
        # A progress bar (tqdm) redraws with carriage returns: show its last state only.
        text = [
            line.decode("utf-8", "replace").rstrip("\r\n").rsplit("\r", 1)[-1] for line in lines
        ]
        self._stderr[side].extend(text)
        self._new_stderr[side].extend(text)

    def _records(self, state: SideState, records: Iterable[Record]) -> None:
        """Take one batch of records of a side; its steps are aligned together."""
        new = self._new_records[state.side]
        steps: list[Step] = []
        for record in records:
            new.append(record)
            if isinstance(record, Step):
                steps.append(record)
                continue
            before = state.records + len(steps)  # every step this side gave, fed or not yet
            last = steps[-1].step if steps else (state.step if state.records else None)
            self.aligner.note_other(state.side, record, (before, last))
            self._other(state, record)
        if not steps:
            return
        if self.options.replicas:
            self._messages += self.options.replicas.feed(state.side, steps)
        state.records += len(steps)
        state.step = steps[-1].step
        now = time.monotonic()
        rates = self._rates[state.side]
        if rates and state.step < rates[-1][1]:  # the steps went back (a second run, a log
            rates.clear()  # out of order): the rate starts again, never negative
            state.rate = None
        rates.append((now, state.step))
        while rates and now - rates[0][0] > RATE_WINDOW:
            rates.popleft()
        if len(rates) > 1 and rates[-1][0] > rates[0][0]:
            state.rate = (rates[-1][1] - rates[0][1]) / (rates[-1][0] - rates[0][0])
        self._unfed[state.side] += steps

    def _other(self, state: SideState, record: Header | End | Text) -> None:
        """What a record that is not a step tells of its side (its header, end, text)."""
        if isinstance(record, Header):
            state.header = record
            total = record.hyper.get("steps")
            if isinstance(total, int):
                state.total = total
        elif isinstance(record, End):
            state.end = record
        else:
            state.texts += 1
            if isinstance(record, Text):
                self._first_text.setdefault(state.side, record.text)

    judged_ahead: Summary | None = None
    """The pair's summary judged in full ahead of a paced replay (`Judged.ahead`)."""

    _judged_summary: Summary | None = None
    """The pair's summary so far, from a source that judges its steps itself (`Judged`)."""

    def _judged(self, state: SideState, event: Judged) -> None:
        """A side as far as a source that judges its steps itself has read it; its last
        event brings the side's header, end and text (counted by that judge) and the aligner
        that judged the pair, which this session's summary comes from from then on."""
        if event.ahead:
            self.judged_ahead = event.summary
            if event.summary is not None:
                self._say(ahead_line(event.summary))
            return
        if state.status in ("starting", "stalled"):
            state.status = "running"
        state.records, state.step = event.steps, event.step
        self._judged_summary = event.summary or self._judged_summary
        if not event.done:
            return
        state.device = event.device or state.device
        for record in (event.header, event.end):
            if record is not None:
                self._other(state, record)
        state.texts += event.texts
        if event.first_text is not None:
            self._first_text.setdefault(state.side, event.first_text)
        if event.aligner is not None:
            self.aligner, self._judged_summary = event.aligner, None

    _rows_out = False
    """A batch has carried aligned rows (the first ones do not wait for the tick)."""

    def _first_rows(self) -> bool:
        """No batch has carried a row yet and the steps taken since align into some: the view
        shows them now (a replay's first rows, issue 42), later rows on the tick."""
        if self._rows_out or not self.aligned:  # headless: nobody shows rows
            return False
        self._feed()
        self._rows_out = bool(self._new_aligned)
        return self._rows_out

    def _feed(self) -> None:
        """Judge the steps taken since the last batch, a side's at once (the aligner's cost is
        per call more than per step: a sweep of many slow pairs feeds it once a batch)."""
        for side, steps in self._unfed.items():
            if not steps:
                continue
            self._unfed[side] = []
            rows = self.aligned or self.writer is not None or bool(self.listeners)
            aligned = self.aligner.feed_batch(side, steps, aligned=rows)
            if self.writer is not None:
                for row in aligned:
                    self.writer.aligned(row.to_dict())
            self._new_aligned += aligned

    async def _on_exit(self, event: Exited) -> None:
        state = self.sides[event.side]
        if event.status == "failed":
            tail = " | ".join(self._stderr[event.side]) or "no stderr"
            if self.options.replicas and (
                rank := self.options.replicas.side_failed(
                    event.side, "\n".join(self._stderr[event.side])
                )
            ):
                tail = f"{rank}; {tail}"
            self._say(f"run {event.side} {status_words('failed', event.code)}: {tail[-300:]}")
            if self.options.stop_on_fail and isinstance(self.source, LiveSource):
                other = "b" if event.side == "a" else "a"
                if not self.sides[other].over:
                    self._say(f"stopping run {other} (--stop-on-fail)")
                    self._stopping.add(other)
                    await self.source.stop_side(other)
        state.stderr_tail = list(self._stderr[event.side])

    def _stall_due(self) -> float:
        """Seconds until a running side would pass `--stall-timeout` (inf without one): the
        session looks then, so a stall is said within its timeout, whatever the batch pace."""
        timeout = self.options.stall_timeout
        if not timeout:
            return math.inf
        quiet = [
            self.source.quiet_for(side)
            for side, state in self.sides.items()
            if state.status in ("starting", "running")
        ]
        return max(0.0, timeout - max(quiet) + 0.01) if quiet else math.inf

    def _check_stalls(self) -> None:
        timeout = self.options.stall_timeout
        if not timeout:
            return
        for side, state in self.sides.items():
            if state.status in ("starting", "running") and self.source.quiet_for(side) > timeout:
                state.status = "stalled"
                lag = self.options.replicas.lag(side) if self.options.replicas else None
                self._say(f"run {side} stalled: no output for {timeout:g} s" + (
                    f" ({lag}: a rank may wait in a collective)" if lag else ""))  # fmt: skip

    def _ending(self) -> Ending:
        """How the pair ended (`how_it_ended`, the one rule, live and saved)."""
        failed = self.options.replicas.failed if self.options.replicas else {}
        runs = [
            RunEnd(side, s.status, s.exit_code, None if s.end is None else s.end.status,
                   note=failed.get(side), steps=s.records,
                   texts=s.texts, first_text=self._first_text.get(side))
            for side, s in self.sides.items()
        ]  # fmt: skip
        return how_it_ended(
            runs,
            interrupted=self.interrupted,
            stopped_at=self.stopped_at,
            text_compared=self.aligner.text.compared,
        )

    def _flush(self, *, done: bool = False, message: str | None = None) -> None:
        self._feed()
        if self.options.replicas and not done:
            self._messages += self.options.replicas.poll()
        if not done:
            self.summary = self._judged_summary or self.aligner.summary(running=True)
            if self.options.replicas:  # a parted replica: DIVERGED as soon as it is seen
                hold_replicas(self.summary, self.options.replicas.to_dict())
        for side, state in self.sides.items():
            state.stderr_tail = list(self._stderr[side])
        batch = Batch(
            records=self._new_records,
            stderr=self._new_stderr,
            aligned=self._new_aligned,
            sides={k: replace(v, stderr_tail=list(v.stderr_tail)) for k, v in self.sides.items()},
            summary=self.summary,
            done=done,
            pair_path=self.pair_path,
            message="; ".join([*self._messages, *([message] if message else [])]) or None,
            divergence=self.aligner.last_divergence,
        )
        self._new_records = {k: [] for k in self.sides}
        self._new_stderr = {k: [] for k in self.sides}
        self._new_aligned = []
        self._messages = []
        self._last_states = self._states()
        self.on_batch(batch)
        for listener in list(self.listeners):
            listener(batch)

    def status(self) -> str:
        """finished / interrupted / failed / stopped (`--stop-on-divergence`), for pair.json."""
        if self.interrupted:
            return "interrupted"
        if self.stopped_at is not None and all(
            s.status in ("finished", *BY_TUIMON) for s in self.sides.values()
        ):
            return "stopped"
        return "finished" if all(s.status == "finished" for s in self.sides.values()) else "failed"

    def _finish(self) -> Summary:
        self._feed()
        if self.options.replicas:
            self._messages += self.options.replicas.poll(final=True)
        ending = self._ending()
        reason = ending.reason
        if any(self._unjudged.values()):
            unjudged = ", ".join(f"{n:,} of {side}" for side, n in self._unjudged.items())
            reason = "; ".join(filter(None, (reason, (
                f"stopped: {unjudged} lines not yet read when the runs were stopped, saved "
                "in the raw logs, not judged (a replay of the pair judges them)"))))  # fmt: skip
        self.summary = self.aligner.summary(
            complete=ending.complete, reason=reason, interrupted=ending.interrupted
        )
        self._hold_to_bytes()
        if self.options.replicas:
            hold_replicas(self.summary, self.options.replicas.to_dict())
        ends = [self.sides[k].end for k in SIDES]
        if ends[0] is not None and ends[1] is not None:
            self.artifacts = compare_artifacts(ends[0].artifacts, ends[1].artifacts)
        if self.options.end_check is not None:
            self.options.end_check(self)
        for name, result in self.artifacts.items():
            self._say(describe(name, result))
        if (same := pair_seeds(self.options.meta, self.summary.verdict)) is not None:
            self._say(same.text())
        message = None
        if self.writer is not None:
            try:
                path = self.writer.finish(self.pair_doc())
                self.pair_path = path.parent
                message = f"saved to {self.pair_path}"
                if self.writer.error:
                    message += f" (raw log incomplete: {self.writer.error})"
            except StoreError as exc:
                message = f"pair not saved: {exc}"
                self.writer.close()  # the monitor is done with it: no longer RUNNING
        self.ended = True
        self._flush(done=True, message=message)
        return self.summary

    def _hold_to_bytes(self) -> None:
        """The verdict held to the bytes of each side's log (`byte_rule.hold`): those a live
        pair saved, or those a replay reads; `compare` and a replay of the saved pair hold it
        to the same bytes, so they give the same verdict."""
        saved = getattr(self.source, "logs", None)  # a replay: the logs it reads
        devices = (self.sides["a"].device or "", self.sides["b"].device or "")
        if isinstance(saved, SavedLogs):
            logs, reading = [saved.a, saved.b], saved.reading
        elif self.writer is not None:
            if self.writer.error:  # a write failed (disk full): the files hold less than was
                return  # read, and the verdict says so; what they hold is not the pair
            logs = [self.writer.path / f"{side}.jsonl" for side in SIDES]
            try:
                reading = Reading.from_dict(self.options.meta.get("reading"))
            except PatternError:  # the live pair read with it, so it compiled: never here
                reading = Reading()
        else:
            return
        if not all(log.exists() for log in logs):
            return
        hold(
            self.summary,
            *logs,
            reading=reading,
            select=self.aligner.select,
            devices=devices if all(devices) else None,
        )

    def _run_doc(self, s: SideState) -> RunDoc:
        end = None if s.end is None else {"status": s.end.status, "steps": s.end.steps}
        return RunDoc(
            device=s.device,
            command=s.command,
            status=s.status,
            exit_code=s.exit_code,
            steps=s.records,
            env=s.header.env if s.header else None,
            hyper=s.header.hyper if s.header else None,
            more={
                "last_step": s.step,
                "text_lines": s.texts,
                "wall_s": s.wall_s,
                "end": end,
                "run": s.header.run if s.header else None,
                "stderr_tail": list(self._stderr[s.side]),
            },
        )

    def pair_doc(self) -> PairDoc:
        """pair.json: what ran, where, how it ended, and the judgement."""
        a, b = (self.sides[k].header for k in SIDES)
        asked = bool(self.options.meta.get("deterministic"))
        doc = replace(
            PairDoc.from_json({**self.options.meta, **pair_applied(asked, {"a": a, "b": b})}),
            created=self.created,
            status=self.status(),
            tolerance=self.options.tolerance,
            runs={side: self._run_doc(s) for side, s in self.sides.items()},
            env_diff=env_diff(a.env if a else {}, b.env if b else {}),
            hyper_diff=env_diff(a.hyper if a else {}, b.hyper if b else {}),
            summary=self.summary.to_dict(),
            artifacts=self.artifacts,
        )
        if self.stopped_at is not None:
            doc.more["stopped_on_divergence"] = self.stopped_at
        if self.options.band is not None:
            doc.more["band"] = self.options.band
        if self.options.replicas:
            doc.more["replicas"] = self.options.replicas.to_dict()
        if (same := pair_seeds(self.options.meta, self.summary.verdict)) is not None:
            doc.more["seeds_not_applied"] = [same.to_dict()]
        doc.more["hints"] = [h.to_dict() for h in likely_causes(doc.to_json())]
        return doc


def ahead_line(summary: Summary) -> str:
    """The status line of a pair judged in full ahead of its paced replay: the verdict, the
    first divergent step and what parted there."""
    line = f"judged in full: {summary.verdict}"
    if summary.first_divergent_step is not None:
        names = summary.first_divergent_metrics
        more = f" and {len(names) - 3} more" if len(names) > 3 else ""
        line += f", first divergent step {summary.first_divergent_step}"
        line += f" ({', '.join(names[:3])}{more})" if names else ""
    if summary.reason:
        line += f" [{summary.reason}]"
    return line + f" · {summary.steps_compared:,} steps compared"

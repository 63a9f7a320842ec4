"""Following two growing log files that tuimon did not launch (`tuimon watch A B`).

A `FollowSource` is a session source like the live one: it reads what each file gains
(`launch.follower.Follower`: waited for, read again when truncated, followed when rotated, each
said once as a note on that side), and the same `PairSession` aligns and judges the lines, so
the verdict is the one a live pair would give on the same bytes. A side ends with its end
record; the watch ends when every side still open has been idle past the stall timeout (a run
that logs no end record, a job that died), or when stopped. A file quiet for `RELEASE_AFTER`
seconds has its last step shown (the parser held it to merge rows of one step): what a log
holds is on screen within a second. Nothing here imports textual.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tuimon.engine.events import Exited, Lines, Note, SourceEvent, Stderr
from tuimon.engine.launch.follower import Follower, FollowError, RunFollower, follows_run
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.readers import RELEASE_AFTER, LineParser, Reading, line_parser, to_line
from tuimon.sanitize import clean
from tuimon.steplog import End
from tuimon.store import SIDES, PairWriter

POLL = 0.1
"""Seconds between two looks at files that had nothing new."""
ASK_EVERY = 15.0
"""Seconds between two questions to the scheduler about an idle submitted job."""


@dataclass
class Tail:
    """One followed file of a side (`Follower`), its stderr and its exit file: what became
    of the run."""

    side: str
    file: Follower | RunFollower
    """The file followed: by lines, or a W&B run by records (`RunFollower`)."""
    parser: LineParser
    end: End | None = None
    over: bool = False
    err_path: Path | None = None
    """The run's stderr, followed too (a submitted job's `<side>.stderr`)."""
    exit_path: Path | None = None
    """A file the job's wrapper writes its exit code to: the side is over when it is there."""
    saved: bool = False
    """The followed files are the pair's own raw logs: nothing is written again."""
    raw: bool = False
    """The file's lines are saved as they are cut (the source was made with the writer)."""
    queued: Callable[[], str | None] | None = None
    """Asks the scheduler about the run's job: `PENDING`, `RUNNING` ..., None when it is gone."""
    asked_at: float = -ASK_EVERY
    queue_state: str | None = None
    told_queued: bool = False
    err_at: int = 0
    err_change: float = 0.0
    told_missing: bool = False
    told: list[str] = field(default_factory=list)
    """Notes passed on as events, for the source to say as status lines too."""
    lines_at: float = 0.0
    """When (the source's clock) the file last gave lines."""

    def note(self, text: str) -> None:
        """Say something about the file (shown on its side, and as a status line)."""
        self.file.notes.append(text)

    def idle_for(self) -> float:
        return time.monotonic() - max(self.file.last_change, self.err_change)

    def still_queued(self) -> bool:
        """The scheduler says the job is waiting or running (`queued`, asked at most every
        `ASK_EVERY` s): its silence is not an end. Said once."""
        if self.queued is None:
            return False
        now = time.monotonic()
        if now - self.asked_at >= ASK_EVERY:
            self.asked_at, state = now, self.queued()
            self.queue_state = state
            if state and not self.told_queued:
                self.told_queued = True
                self.note(f"{self.file.name}: the job is {state.lower()} in the scheduler's queue")
        return bool(self.queue_state)

    def poll(self) -> list[SourceEvent]:
        """What the file gained since the last poll (lines and notes)."""
        got = self.file.read()
        if not self.file.appeared:
            waits = isinstance(self.file, RunFollower) or not self.file.path.exists()
            if not self.told_missing and waits:
                self.told_missing = True
                name = self.file.name
                run = isinstance(self.file, RunFollower) and self.file.path.is_dir()
                self.note(f"no W&B run in {name} yet: waiting for one" if run
                          else f"{name} is not there yet: waiting for it")  # fmt: skip
        elif self.told_missing:
            self.told_missing = False
            if not isinstance(self.file, RunFollower):  # a run found is said by its follower
                self.note(f"{self.file.name} is there now")
        events: list[SourceEvent] = [self._lines(got)] if got else []
        return self._notes(events + self._stderr())

    def _stderr(self) -> list[SourceEvent]:
        """What the run's stderr file gained (read from where it was read up to)."""
        if self.err_path is None:
            return []
        try:
            with open(self.err_path, "rb") as fh:
                fh.seek(self.err_at)
                data = fh.read(1 << 20)
        except OSError:
            return []
        self.err_at += len(data)
        if data:
            self.err_change = time.monotonic()
        return [Stderr(self.side, data, saved=self.saved)] if data else []

    def exit_code(self) -> int | None:
        """The code the job's wrapper wrote (None while it has not: the job is not over)."""
        if self.exit_path is None:
            return None
        try:
            return int(self.exit_path.read_text().strip())
        except (OSError, ValueError):
            return None

    def close(self) -> list[SourceEvent]:
        """The end of the file: a last line without newline, the parser's held rows."""
        if isinstance(self.file, RunFollower):
            got = self.file.close()
            return self._notes(([self._lines(got)] if got else []) + self._stderr())
        rest = self.file.close()
        records = self.parser.feed(rest) + self.parser.close()
        events: list[SourceEvent] = []
        if rest or records:
            events.append(Lines(self.side, rest, records, saved=self.saved or self.raw))
        return self._notes(events + self._stderr())

    def release(self) -> list[SourceEvent]:
        """The step the parser holds for a row that has not come (`LineParser.release`)."""
        records = self.parser.release()
        return [Lines(self.side, [], records, saved=True)] if records else []

    def _lines(self, got: list[Any]) -> Lines:
        """The lines read and their records; a W&B run's records and their step-log lines
        (saved as those: the pair's raw log of that side is a step log)."""
        if isinstance(self.file, RunFollower):
            self._ended(got)
            return Lines(self.side, [to_line(r) for r in got], got, saved=False)
        records = self.parser.feed(got)
        self._ended(records)
        return Lines(self.side, got, records, saved=self.saved or self.raw)

    def _ended(self, records: list[Any]) -> None:
        for record in records:
            if isinstance(record, End):
                self.end = record

    def _notes(self, events: list[SourceEvent]) -> list[SourceEvent]:
        self.told += self.file.notes
        for text in self.file.notes:
            events.append(Stderr(self.side, f"tuimon: {text}\n".encode(), saved=self.saved))
        self.file.notes.clear()
        return events


class FollowSource:
    """Two growing files as a session source (see the module's docstring)."""

    def __init__(
        self,
        paths: tuple[Path, Path],
        *,
        idle: float,
        reading: Reading | None = None,
        writer: PairWriter | None = None,
        release_after: float = RELEASE_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tails = {
            side: Tail(
                side,
                RunFollower(Path(path))
                if follows_run(Path(path))
                else Follower(
                    Path(path), functools.partial(writer.raw_bytes, side) if writer else None
                ),
                line_parser(reading, side),
                raw=writer is not None,
            )
            for side, path in zip(SIDES, paths, strict=True)
        }
        self.idle = idle
        self.release_after = release_after
        """Seconds a file is quiet before its held step is shown (`Tail.release`)."""
        self.clock = clock
        self._stop = asyncio.Event()

    @classmethod
    def of_pair_dir(cls, pair_dir: Path, *, idle: float, reading: Reading | None) -> FollowSource:
        """The raw logs of a pair directory that submitted jobs write (`<side>.jsonl`,
        `<side>.stderr`, `<side>.exit`): followed, not written again."""
        source = cls(tuple(pair_dir / f"{s}.jsonl" for s in SIDES), idle=idle, reading=reading)  # type: ignore[arg-type]
        for side, tail in source.tails.items():
            tail.err_path = pair_dir / f"{side}.stderr"
            tail.exit_path = pair_dir / f"{side}.exit"
            tail.saved = True
        return source

    async def run(self, queue: asyncio.Queue[SourceEvent]) -> None:
        open_tails = list(self.tails.values())
        while open_tails:
            busy = await self.look(open_tails, queue)
            open_tails = [t for t in open_tails if not t.over]
            if open_tails and not busy:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), POLL)

    async def look(self, open_tails: list[Tail], queue: asyncio.Queue[SourceEvent]) -> bool:
        """One look at every open file (`run` takes one each `POLL` while nothing comes): its
        new lines, its held step once it is quiet, its end; True when lines came."""
        busy = False
        for tail in open_tails:
            busy |= await self._poll(tail, queue)
        now = self.clock()
        for tail in open_tails:
            if tail.parser.holding and not tail.over and now - tail.lines_at >= self.release_after:
                for event in tail.release():
                    await self._put(event, queue)
        if self._stop.is_set():
            for tail in open_tails:
                await self._end(tail, queue, None, "interrupted")
        elif self.idle and all(
            t.idle_for() > self.idle and not t.still_queued() for t in open_tails
        ):
            for tail in open_tails:
                await self._end_idle(tail, queue)
        return busy

    async def _poll(self, tail: Tail, queue: asyncio.Queue[SourceEvent]) -> bool:
        """One look at a file; True when it had something new."""
        try:
            events = tail.poll()
        except (FollowError, OSError) as exc:
            text = str(exc) if isinstance(exc, FollowError) else f"{tail.file.name}: {exc}"
            tail.note(text)
            await self._end(tail, queue, None, "failed")
            return False
        came = any(isinstance(e, Lines) for e in events)
        if came:
            tail.lines_at = self.clock()
        for event in events:
            await self._put(event, queue)
        if tail.end is not None:
            await self._end(tail, queue, 0, "finished")
        elif (code := tail.exit_code()) is not None:
            for event in tail.poll():  # what it wrote before its wrapper wrote the code
                await self._put(event, queue)
            await self._end(tail, queue, code, "finished" if code == 0 else "failed")
        return came

    async def _end_idle(self, tail: Tail, queue: asyncio.Queue[SourceEvent]) -> None:
        if not tail.file.appeared:
            tail.note(f"{tail.file.name} never appeared in {self.idle:g} s")
            await self._end(tail, queue, None, "failed")
            return
        if tail.exit_path is not None:  # a submitted job that never said it ended
            tail.note(
                f"{tail.file.name}: nothing new for {self.idle:g} s and no exit code: the job was "
                "cancelled, killed, or is still waiting"
            )
            await self._end(tail, queue, None, "failed")
            return
        tail.note(f"{tail.file.name}: nothing new for {self.idle:g} s: taken as over")
        await self._end(tail, queue, 0, "finished")

    async def _end(
        self, tail: Tail, queue: asyncio.Queue[SourceEvent], code: int | None, status: str
    ) -> None:
        for event in tail.close():
            await self._put(event, queue)
        tail.over = True
        await queue.put(Exited(tail.side, code, status))

    async def _put(self, event: SourceEvent, queue: asyncio.Queue[SourceEvent]) -> None:
        await queue.put(event)
        for tail in self.tails.values():
            for text in tail.told:
                await queue.put(Note(tail.side, text))
            tail.told.clear()

    async def stop(self) -> None:
        self._stop.set()

    def quiet_for(self, side: str) -> float:
        """0: a followed file is judged idle by the source itself (see `run`)."""
        return 0.0

    def terminate(self) -> None:
        """Nothing runs here: the writers of the files are not ours."""
        self._stop.set()


def watch_factory(
    paths: tuple[Path, Path],
    store: Path | None,
    *,
    idle: float,
    options: PairOptions,
    reading: Reading | None = None,
    release_after: float = RELEASE_AFTER,
) -> Callable[[Callable[[Batch], None]], PairSession]:
    """A session factory (as `PairPlan.session_factory`) for `tuimon watch A B`: the pair is
    saved in `store` like a live one (raw lines as read, aligned log, pair.json)."""

    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        names = tuple(clean(p.name, 40) or "log" for p in paths)
        writer = (
            PairWriter.create(store, seed=None, devices=("log", "log"), label="watch")
            if store is not None
            else None
        )
        source = FollowSource(
            paths, idle=idle, reading=reading, writer=writer, release_after=release_after
        )
        sides = tuple(
            SideState(side, name, f"watch {clean(str(path), 300)}")
            for side, name, path in zip(SIDES, names, paths, strict=True)
        )
        meta = {
            "devices": list(names),
            "label": "watch",
            "watched": {side: str(path.resolve()) for side, path in zip(SIDES, paths, strict=True)},
            "commands": {
                side: ["tuimon", "watch", str(path)]
                for side, path in zip(SIDES, paths, strict=True)
            },
            "reading": (reading or Reading()).to_dict(),
        }
        return PairSession(
            source,
            sides,  # type: ignore[arg-type]
            options=replace(options, stall_timeout=None, meta={**options.meta, **meta}),
            writer=writer,
            on_batch=on_batch,
        )

    return make

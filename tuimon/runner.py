"""Launching one training run as a subprocess and streaming what it writes.

A run pushes source events (`Lines`, `Stderr`, `Exited`) onto an asyncio queue; the session
consumes them. Children run in their own process group, so terminating a run reaches the whole
group (a shell and what it started, dataloader workers ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuimon.errors import LaunchError
from tuimon.readers import LineParser, Reading, line_parser, streamable
from tuimon.steplog import Record, Step

MAX_LINE = 16 * 1024 * 1024
"""A line longer than this without a newline is passed on as it stands (kept whole on disk)."""
CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Lines:
    """Complete stdout (or log-file) lines from one side, bytes as they arrived."""

    side: str
    lines: list[bytes]
    records: list[Record] | None = None
    """The lines already parsed (a replay has them), so the session does not parse twice."""


@dataclass(frozen=True, slots=True)
class Stderr:
    """A chunk of one side's stderr."""

    side: str
    data: bytes


@dataclass(frozen=True, slots=True)
class Exited:
    """One side is over: its exit code and how it ended (finished / failed / interrupted)."""

    side: str
    code: int | None
    status: str


SourceEvent = Lines | Stderr | Exited


@dataclass(frozen=True)
class RunSpec:
    """How to launch one side of a pair."""

    side: str
    device: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    shell: bool = False
    log_file: Path | None = None
    """Read the step log from this file (tailed) instead of the child's stdout."""
    reading: Reading | None = None
    """How the log is read (`--pattern`, `--map`): see `tuimon.readers`."""

    def command_text(self) -> str:
        """The command as a user would type it."""
        return self.argv[0] if self.shell else shlex.join(self.argv)


def expand_template(template: Sequence[str], **values: object) -> tuple[str, ...]:
    """Substitute `{seed}`, `{device}`, `{side}` ... in each argument (see `substitute`)."""
    return substitute(template, values)


def substitute(
    template: Sequence[str],
    values: Mapping[str, object],
    quote: Callable[[str], str] | None = None,
) -> tuple[str, ...]:
    """Substitute `{name}` for each of `values` in each argument, in one pass: a value is never
    expanded again (a device named `{side}` stays literal). `quote` (e.g. `shlex.quote` for
    `--shell`) is applied to each substituted value."""
    if not values:
        return tuple(template)
    pattern = re.compile("|".join(re.escape("{" + key + "}") for key in values))

    def value(match: re.Match[str]) -> str:
        found = values[match.group(0)[1:-1]]
        text = "" if found is None else str(found)
        return quote(text) if quote is not None else text

    return tuple(pattern.sub(value, arg) for arg in template)


class LineSplitter:
    """Bytes in, complete lines out; a partial line waits for its newline."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Complete lines (newline kept) in `data` plus what was buffered."""
        self._buf += data
        end = self._buf.rfind(b"\n")
        if end < 0:
            if len(self._buf) <= MAX_LINE:
                return []
            end = len(self._buf) - 1
        chunk, self._buf = bytes(self._buf[: end + 1]), self._buf[end + 1 :]
        *lines, last = chunk.split(b"\n")  # only "\n" ends a line: "\r" is the line's own
        return [line + b"\n" for line in lines] + ([last] if last else [])

    def flush(self) -> list[bytes]:
        """What is left at the end (a last line without newline)."""
        rest, self._buf = bytes(self._buf), bytearray()
        return [rest] if rest else []


class Run:
    """One live training subprocess feeding a queue."""

    def __init__(self, spec: RunSpec, queue: asyncio.Queue[SourceEvent]) -> None:
        self.spec = spec
        self.queue = queue
        self.proc: asyncio.subprocess.Process | None = None
        self.last_output = time.monotonic()
        self.started_at: float | None = None
        self.interrupted = False
        self._done = asyncio.Event()

    async def start(self) -> None:
        """Launch the child; LaunchError with one line when it cannot start."""
        spec = self.spec
        env = {**os.environ, **spec.env}
        try:
            if spec.shell:
                proc = await asyncio.create_subprocess_shell(
                    spec.argv[0],
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
            else:
                proc = await asyncio.create_subprocess_exec(
                    *spec.argv,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
        except OSError as exc:
            raise LaunchError(
                f"run {spec.side}: cannot start {spec.argv[0]!r}: {exc.strerror or exc}"
            ) from exc
        self.proc = proc
        self.started_at = time.monotonic()

    async def pump(self) -> None:
        """Stream stdout / log file and stderr to the queue until the child exits; then `Exited`."""
        assert self.proc is not None and self.proc.stdout and self.proc.stderr
        side = self.spec.side
        out: asyncio.Future[Any]
        if self.spec.log_file is None:
            out = asyncio.create_task(self._read(self.proc.stdout, lines=True))
        else:
            out = asyncio.gather(
                self._tail(self.spec.log_file), self._read(self.proc.stdout, lines=True)
            )
        err = asyncio.create_task(self._read(self.proc.stderr, lines=False))
        code = await self.proc.wait()
        if self.spec.log_file is not None:
            self._done.set()
        await asyncio.gather(out, err)
        status = "interrupted" if self.interrupted else "finished" if code == 0 else "failed"
        await self.queue.put(Exited(side, code, status))

    def _parser(self, *, text: bool = True) -> LineParser:
        """Records from lines (JSON Lines, printed text by patterns unless `text` is False)."""
        return line_parser(self.spec.reading, self.spec.side, text=text)

    async def _read(self, stream: asyncio.StreamReader, *, lines: bool) -> None:
        splitter = LineSplitter()
        parser = self._parser(text=self.spec.log_file is None)  # the log is the file
        side = self.spec.side
        while True:
            data = await stream.read(CHUNK)
            if not data:
                break
            self.last_output = time.monotonic()
            if lines:
                complete = splitter.feed(data)
                if complete:
                    await self.queue.put(Lines(side, complete, parser.feed(complete)))
            else:
                await self.queue.put(Stderr(side, data))
        if lines:
            rest = splitter.flush()
            records = parser.feed(rest) + parser.close()
            if rest or records:
                await self.queue.put(Lines(side, rest, records))

    async def _tail(self, path: Path) -> None:
        """Follow a log file the child writes, until the child has exited and the file is read.
        A file rewritten as a whole (JSON document, CSV, TensorBoard events) is read again when
        it changes, and its new records are passed on as step-log lines."""
        splitter = LineSplitter()
        parser = self._parser()
        side = self.spec.side
        fh = None
        while True:
            if fh is None and path.exists():
                head = b""
                if path.is_file():
                    with open(path, "rb") as peek:
                        head = peek.read(1 << 16)
                if path.is_dir() or (head and not streamable(head)):
                    await self._snapshots(path)
                    return
                if head:
                    fh = open(path, "rb")  # noqa: SIM115 - closed below
            data = fh.read(CHUNK) if fh else b""
            if data:
                self.last_output = time.monotonic()
                if complete := splitter.feed(data):
                    await self.queue.put(Lines(side, complete, parser.feed(complete)))
                continue
            if self._done.is_set():
                break
            await asyncio.sleep(0.05)
        if fh:
            fh.close()
        rest = splitter.flush()
        records = parser.feed(rest) + parser.close()
        if rest or records:
            await self.queue.put(Lines(side, rest, records))

    async def _snapshots(self, path: Path) -> None:
        """Read a whole-file log again whenever it changes; pass on the records not yet sent
        (the last step waits for the end: a later row may still join it)."""
        from tuimon.readers import ReaderError, load, to_line

        sent, seen, records = 0, None, []
        while True:
            done = self._done.is_set()
            try:
                stat = path.stat()
                mark = (stat.st_mtime_ns, stat.st_size)
                if path.is_dir():
                    mark = max((f.stat().st_mtime_ns, f.stat().st_size) for f in path.rglob("*"))
            except (OSError, ValueError):
                mark = None
            if mark is not None and mark != seen:
                seen = mark
                try:
                    loaded = await asyncio.to_thread(load, path, self.spec.reading, self.spec.side)
                    records = loaded.records
                except ReaderError:
                    pass  # half written: read it again when it changes
            ready = records
            if not done:
                at = [i for i, r in enumerate(ready) if isinstance(r, Step)]
                ready = ready[: at[-1]] if at else []
            if len(ready) > sent:
                new = ready[sent:]
                sent = len(ready)
                self.last_output = time.monotonic()
                await self.queue.put(Lines(self.spec.side, [to_line(r) for r in new], new))
            if done:
                return
            await asyncio.sleep(0.5)

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's process group (ignored when it is gone)."""
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    async def terminate(self, grace: float = 5.0) -> None:
        """SIGTERM the group, then SIGKILL after `grace` seconds."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.interrupted = True
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except asyncio.TimeoutError:
            self.signal(signal.SIGKILL)
            await self.proc.wait()

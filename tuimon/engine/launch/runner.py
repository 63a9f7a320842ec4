"""Launching one training run as a subprocess and streaming what it writes.

A run pushes source events (`Lines`, `Stderr`, `Exited`) onto an asyncio queue; the session
consumes them. The pipes of all runs are drained by one thread (`pipes.PipeHub`), which only
cuts lines and saves the bytes as it reads them, so a run never waits on parsing, judging or
drawing; a run's lines are parsed when some have come, at most once a tick (`Run.tick`).
Children run in their own process group, so terminating a run reaches the whole group (a shell
and what it started, dataloader workers ...), and die with tuimon (Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import functools
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tuimon.engine.events import Exited, Lines, SourceEvent, Stderr
from tuimon.engine.launch.descendants import (
    RUN_ENV,
    Tree,
    become_subreaper,
    new_tag,
    run_ended,
    run_started,
    spawned,
    spawning,
)
from tuimon.engine.launch.follower import Follower, FollowError, NotLines, RunFollower, follows_run
from tuimon.engine.launch.pipes import PipeReader, waker
from tuimon.engine.launch.watchdog import Watchdog
from tuimon.errors import LaunchError
from tuimon.readers import (
    RELEASE_AFTER,
    LineParser,
    ReaderError,
    Reading,
    line_parser,
    load,
    to_line,
)
from tuimon.steplog import Record, Step, Text

TICK = 0.05
"""Seconds between two deliveries of what the readers took to the session, at least (a run
that writes nothing costs no delivery: its pump sleeps until a line comes)."""
WALK_EVERY = 0.5
"""Seconds between two walks of a run's process tree (`descendants.Tree.walk`), at least."""
WALK_TICKS = 2
"""A run delivering every `Run.tick` walks its tree at most once in this many ticks: a pair's
runs, ticking every 0.25 s, every 0.5 s (`WALK_EVERY`); a sweep of many pairs, whose runs tick
every 0.5 s, every second (the walks of 128 runs at 0.5 s were ~5% of the monitor's CPU)."""
HALT_GRACE = 0.5
"""Seconds a stopped run's lines are still parsed and judged: a run that stops at once is
judged whole, the backlog of one that floods its output is saved unparsed (a quit in seconds)."""
PARSE_SLICE = 256
"""Lines parsed between two yields to the event loop (a view stays responsive)."""


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
    wandb_dir: Path | None = None
    """The run's `WANDB_DIR`: a W&B run that appears under it is the side's log
    (`RunFollower`), and stdout is then text."""

    def command_text(self) -> str:
        """The command as a user would type it."""
        return self.argv[0] if self.shell else shlex.join(self.argv)


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


_PLACEHOLDER = re.compile(r"(?<![{$])\{([A-Za-z_]\w*)\}(?!})")


def mistyped_placeholder(args: Sequence[str], names: Sequence[str]) -> str | None:
    """One line for a `{name}` in `args` that is close to one of `names` but is none of them
    (`{sed}` for `{seed}`): it would reach the script as written. Other braces (`{i}` in a
    `python -c` f-string, awk's `{print}`, `${HOME}`) are the command's own; None when none."""
    for arg in args:
        for match in _PLACEHOLDER.finditer(arg):
            name = match[1]
            if name in names:
                continue
            close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
            if close:
                known = ", ".join("{" + n + "}" for n in names)
                return (
                    f"{{{name}}} in {arg!r} is not substituted: did you mean {{{close[0]}}}? "
                    f"(substituted: {known})"
                )
    return None


def die_with_parent() -> Callable[[], None] | None:
    """A preexec function that makes the child get SIGKILL when tuimon dies (Linux), else None.

    Run in the child after `setsid`: prctl(PR_SET_PDEATHSIG); if tuimon died before that, the
    child ends at once."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def _killpg(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Run:
    """One live training subprocess feeding a queue.

    Its stdout and stderr are drained by `PipeReader` threads (bytes on disk as read); `pump`
    parses what they read once a tick and puts it on the queue. The child runs in its own
    process group and dies with tuimon (Linux: a parent-death signal; anywhere: a `Watchdog`
    that ends the group if tuimon dies without a word).
    """

    def __init__(
        self,
        spec: RunSpec,
        queue: asyncio.Queue[SourceEvent],
        *,
        grace: float = 5.0,
        save: Callable[[str, bytes], None] | None = None,
        save_stderr: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self.spec = spec
        self.queue = queue
        self.grace = grace
        self.proc: asyncio.subprocess.Process | None = None
        self.interrupted = False
        self._done = asyncio.Event()
        self._save = save
        self._save_stderr = save_stderr
        self._fds: tuple[int, int] | None = None
        self._readers: list[PipeReader] = []
        self._tail_output = time.monotonic()
        self._watchdog: Watchdog | None = None
        self._tree = Tree(new_tag())
        """The run's processes, also those that leave its group (`descendants`)."""
        self._told = 0
        self._tree_ended = False
        self._run_found = False
        self._flushed = False
        """The stdout parser was closed when the W&B run was found."""
        """A W&B run under `spec.wandb_dir` appeared: it is the side's log."""
        self.tick = TICK
        """Seconds between two deliveries at least (a sweep of many pairs takes longer ones)."""

    @property
    def last_output(self) -> float:
        """When the run last wrote anything (stdout, stderr or its log file)."""
        return max([self._tail_output, *(r.last_read for r in self._readers)])

    async def start(self) -> None:
        """Launch the child; LaunchError with one line when it cannot start."""
        spec = self.spec
        become_subreaper()  # an orphaned descendant comes to tuimon, not to init
        env = {**os.environ, **spec.env, RUN_ENV: self._tree.tag}
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        kwargs: dict[str, Any] = {
            "stdin": asyncio.subprocess.DEVNULL,
            "stdout": out_w,
            "stderr": err_w,
            "env": env,
            "start_new_session": True,
            "preexec_fn": die_with_parent(),
        }
        with spawning():  # until both are registered, neither is mistaken for a stray
            try:
                if spec.shell:
                    proc = await asyncio.create_subprocess_shell(spec.argv[0], **kwargs)
                else:
                    proc = await asyncio.create_subprocess_exec(*spec.argv, **kwargs)
            except (OSError, subprocess.SubprocessError) as exc:
                for fd in (out_r, err_r):
                    os.close(fd)
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                raise LaunchError(f"run {spec.side}: cannot start {spec.argv[0]!r}: {why}") from exc
            finally:
                os.close(out_w)
                os.close(err_w)
            self._fds = (out_r, err_r)
            self.proc = proc
            self._watchdog = Watchdog(proc.pid, self.grace, self._tree.tag)
            spawned(proc.pid, *([self._watchdog.proc.pid] if self._watchdog.proc else []))
            run_started()

    async def pump(self) -> None:
        """Stream stdout / log file and stderr to the queue until the child exits; then `Exited`.

        A child that has exited while a descendant still holds its pipes gets the grace, then
        its process group is killed and the run ends."""
        assert self.proc is not None
        side = self.spec.side
        out, err = self._start_readers()
        tail = None
        if self.spec.log_file:
            tail = asyncio.create_task(self._tail(self.spec.log_file))
        elif self.spec.wandb_dir:
            tail = asyncio.create_task(self._follow_run(self.spec.wandb_dir))
        parser = self._parser(text=self.spec.log_file is None)  # the log is the file
        wait = asyncio.create_task(self.proc.wait())
        try:
            await self._drain(wait, out, err, parser)
            code = await wait
            for reader in self._readers:
                reader.join()
            await self._deliver(out, err, parser)
            records = [] if self._flushed else parser.close()
            if records:
                await self.queue.put(Lines(side, [], records, saved=True))
            if tail is not None:
                self._done.set()
                await tail
        finally:
            for reader in self._readers:
                reader.stop()
            if tail is not None and not tail.done():
                tail.cancel()
        await self._end_tree()
        if self._watchdog is not None:
            self._watchdog.release()
        status = "interrupted" if self.interrupted else "finished" if code == 0 else "failed"
        await self.queue.put(Exited(side, code, status))

    def _start_readers(self) -> tuple[PipeReader, PipeReader]:
        """Start the threads that drain the child's stdout (cut into lines) and stderr, each
        saving what it reads."""
        assert self._fds is not None
        side = self.spec.side
        out_fd, err_fd = self._fds
        save_out = functools.partial(self._save, side) if self._save else None
        save_err = functools.partial(self._save_stderr, side) if self._save_stderr else None
        out = PipeReader(out_fd, f"tuimon-{side}-stdout", save=save_out, lines=True)
        err = PipeReader(err_fd, f"tuimon-{side}-stderr", save=save_err, lines=False)
        self._readers = [out, err]
        for reader in self._readers:
            reader.start()
        return out, err

    async def _drain(
        self, wait: asyncio.Task[int], out: PipeReader, err: PipeReader, parser: LineParser
    ) -> None:
        """Deliver what the readers take, at most once a tick and only when something came,
        until both pipes are closed. When the child has exited (`wait` done) but a descendant
        still holds its pipes: after the grace its process group is killed, a second later the
        readers stop."""
        assert self.proc is not None
        exited_at: float | None = None
        killed = False
        walked = 0.0
        every = max(WALK_EVERY, WALK_TICKS * self.tick)
        while True:
            await self._deliver(out, err, parser)
            await self._release(parser, out.last_read)
            if time.monotonic() - walked > every and not wait.done():
                walked = time.monotonic()
                self._walk()
            if all(r.eof.is_set() for r in self._readers):
                return
            if wait.done():
                now = time.monotonic()
                exited_at = exited_at or now
                if not killed and now - exited_at > self.grace:
                    killed = True  # a descendant holds the pipes: end the group, and the rest
                    _killpg(self.proc.pid, signal.SIGKILL)
                    self._signal_tree(signal.SIGKILL)
                elif killed and now - exited_at > self.grace + 1.0:
                    for reader in self._readers:  # held outside the group: stop reading
                        reader.stop()
            await self._next(wait, out, err)

    async def _next(self, wait: asyncio.Task[int], out: PipeReader, err: PipeReader) -> None:
        """Wait for the next tick of the clock (lines that come meanwhile go together; every
        run of the monitor wakes at the same ticks, so a pair's two deliveries make one turn of
        its session), then until a reader has
        something, the child exits, or it is time to walk the run's tree again."""
        await asyncio.sleep(self.tick - time.monotonic() % self.tick)  # on the clock's ticks
        came = asyncio.Event()
        wake = waker(came)
        if not (out.notify(wake) and err.notify(wake)):
            return
        waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(came.wait())}
        if not wait.done():
            waits.add(wait)
        _, pending = await asyncio.wait(
            waits, timeout=WALK_EVERY, return_when=asyncio.FIRST_COMPLETED
        )
        for task in pending - {wait}:
            task.cancel()

    async def _deliver(self, out: PipeReader, err: PipeReader, parser: LineParser) -> None:
        """What the readers took since the last tick, parsed, onto the queue (in slices, so a
        view stays responsive)."""
        side = self.spec.side
        if chunks := err.take():
            await self.queue.put(Stderr(side, b"".join(chunks), saved=True))
        lines = out.take()
        for i in range(0, len(lines), PARSE_SLICE):
            if self.halted is not None and time.monotonic() > self.halted:
                rest = lines[i:]  # stopped a while ago: the rest as read, never parsed (runs
                await self.queue.put(Lines(side, rest, [], saved=True, unread=True))  # that
                return  # flood leave minutes of lines behind them)
            part = lines[i : i + PARSE_SLICE]
            if self._run_found and not self._flushed:  # what the parser holds comes first
                self._flushed = True
                if held := parser.close():
                    await self.queue.put(Lines(side, [], held, saved=True))
            if self._run_found:  # a W&B run is the log: what the script prints is text
                texts: list[Record] = [
                    Text(line.decode("utf-8", "replace").rstrip("\r\n")) for line in part
                ]
                await self.queue.put(Lines(side, part, texts, saved=True))
                continue
            await self.queue.put(Lines(side, part, parser.feed(part), saved=True))
            if len(lines) > PARSE_SLICE:
                await asyncio.sleep(0)

    async def _release(self, parser: LineParser, last_read: float) -> None:
        """The step the parser holds, once the stream has been quiet for `RELEASE_AFTER`
        seconds (a run that pauses, or stops without an end record, shows its last step)."""
        quiet = time.monotonic() - last_read >= RELEASE_AFTER
        if parser.holding and quiet and (records := parser.release()):
            await self.queue.put(Lines(self.spec.side, [], records, saved=True))

    def _parser(self, *, text: bool = True) -> LineParser:
        """Records from lines (JSON Lines, printed text by patterns unless `text` is False)."""
        return line_parser(self.spec.reading, self.spec.side, text=text)

    async def _tail(self, path: Path) -> None:
        """Follow a log file the child writes (`Follower`: its lines saved as cut), until the
        child has exited and the file is read. A log rewritten as a whole (JSON document, CSV,
        TensorBoard events, a folder of them) is read again when it changes (`_snapshots`)."""
        side = self.spec.side
        if follows_run(path) and (not path.is_dir() or RunFollower(path).find() is not None):
            return await self._follow_run(path)
        file = Follower(path, functools.partial(self._save, side) if self._save else None)
        parser = self._parser()
        failed = False
        while not failed:
            try:
                lines = file.read()
            except (FollowError, OSError) as exc:
                if isinstance(exc, NotLines) or path.is_dir():
                    return await self._snapshots(path)
                file.notes.append(f"{exc}: not followed")
                lines, failed = [], True
            self._tail_output = file.last_change
            if file.notes:  # what became of the file, said on its side (kept with its stderr)
                text = "".join(f"tuimon: {note}\n" for note in file.notes)
                file.notes.clear()
                await self.queue.put(Stderr(side, text.encode()))
            if lines:
                await self.queue.put(Lines(side, lines, parser.feed(lines), saved=True))
            await self._release(parser, file.last_change)
            if file.drained and not failed:
                if self._done.is_set():
                    break
                await asyncio.sleep(0.05)
        rest = file.close()
        records = parser.feed(rest) + parser.close()
        if rest or records:
            await self.queue.put(Lines(side, rest, records, saved=True))

    async def _follow_run(self, path: Path) -> None:
        """Follow a W&B run by its records (`RunFollower`: a `.wandb` file, or the first run
        that appears in a folder) until the child has exited and the file is read."""
        side = self.spec.side
        run = RunFollower(path)
        while True:
            done = self._done.is_set()
            try:
                records = run.read()
            except (FollowError, OSError) as exc:
                run.notes.append(f"{exc}: not followed")
                records, done = [], True
            self._run_found = self._run_found or run.appeared
            if run.notes:
                text = "".join(f"tuimon: {note}\n" for note in run.notes)
                run.notes.clear()
                await self.queue.put(Stderr(side, text.encode()))
            if records:
                self._tail_output = time.monotonic()
                await self.queue.put(Lines(side, [to_line(r) for r in records], records))
            if done:
                break
            if run.drained:
                await asyncio.sleep(0.05)
        if rest := run.close():
            await self.queue.put(Lines(side, [to_line(r) for r in rest], rest))

    async def _snapshots(self, path: Path) -> None:
        """Read a whole-file log again whenever it changes; pass on the records not yet sent
        (the last step waits for the end: a later row may still join it)."""
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
                self._tail_output = time.monotonic()
                await self.queue.put(Lines(self.spec.side, [to_line(r) for r in new], new))
            if done:
                return
            await asyncio.sleep(0.5)

    def signal(self, sig: int) -> None:
        """Send `sig` to the child's process group (ignored when it is gone), and to its
        descendants that left the group."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)
        self._signal_tree(sig)

    async def _end_tree(self) -> None:
        """The run is over: whatever it started ends with it, also what left its group
        (once, whether the run ended by itself or was stopped)."""
        if self.proc is None or self._tree_ended:
            return
        self._tree_ended = True
        last = run_ended(self.proc.pid)
        await asyncio.to_thread(self._tree.end, self.grace, self.proc.pid, last=last)

    def _signal_tree(self, sig: int) -> None:
        """Send `sig` to each process of the run outside its first one (`Tree.alive`)."""
        root = self.proc.pid if self.proc is not None else None
        for pid in self._tree.alive() - {root}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _walk(self) -> None:
        """Note the run's descendants now (a process that leaves the group and clears its
        environment is still known), and tell the watchdog of new ones."""
        if self.proc is None:
            return
        self._tree.walk(self.proc.pid, strays_age=WALK_EVERY)
        lines = self._tree.watchdog_lines()
        if self._watchdog is not None and len(lines) > self._told:
            self._watchdog.tell(lines[self._told :])
            self._told = len(lines)

    halted: float | None = None
    """A stop was asked: past this time what the pipes still hold is delivered as read, not
    parsed (`Lines.unread`)."""

    def halt(self) -> None:
        """A stop was asked (`terminate` follows): what is read from `HALT_GRACE` seconds on is
        delivered as read, not parsed (it was saved as it came)."""
        if self.halted is None:
            self.halted = time.monotonic() + HALT_GRACE

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
        await self._end_tree()

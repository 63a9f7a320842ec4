"""A replay's logs read ahead in a child process forked before the view starts (issue 42).

The view's process spends its first half second importing Textual and drawing its first
frames; a child forked before that reads and parses both logs on the other core meanwhile (a
thread per side) and hands their blocks of records over a pipe per side (pickled: unpickling a
1 MiB block costs a tenth of parsing it). The first rows are ready when the view is, and the
view's process never parses the logs it shows.

The child only reads: it ignores Ctrl-C and a hang-up (the view owns the terminal and quits
for both), has no terminal to read or write, and ends when both logs do, when the view closes
the pipes (a write fails) or when `close` kills it. Where a fork is not safe (another thread
runs, no `fork`), `read_ahead` gives None and the view reads in its own threads as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import pickle
import queue
import signal
import struct
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from tuimon.errors import ReplayError
from tuimon.steplog import Record

if TYPE_CHECKING:  # imported where the logs are read (in the child): the view starts without
    from tuimon.engine.sources.saved_pair import SavedPair
    from tuimon.readers import Reading

SIDES = ("a", "b")
"""`tuimon.store.SIDES`, which is not imported before the fork (the store imports numpy)."""

Blocks = Callable[[str], Iterator[list[Record]]]
"""A side's blocks of records, given the side's name."""
FRAME = struct.Struct("<Q")
"""The byte length of the pickled message after it."""
NICE = 5
"""How much lower the child's priority is than the view's."""
QUEUED = 4
"""Blocks a side's thread holds ahead of the view (the pipe holds more)."""
PIPE_BYTES = 1 << 20
"""A pipe's buffer where Linux lets it grow (64 KiB otherwise): the child is blocks ahead."""


class ReadAhead:
    """A forked child sending each side's blocks down its pipe; `blocks(side)` takes them.
    `prepare` runs in the child (what the logs are, resolved there: the view's process goes on
    at once) and gives the function that reads a side. Here, a thread per side takes the blocks
    off its pipe as they come (`QUEUED` ahead at most), so that a block already sent is there
    without a wait (`ready`): the view's loop, busy starting Textual, hands no read to a thread
    and back for it."""

    def __init__(self, sides: tuple[str, ...], prepare: Callable[[], Blocks]) -> None:
        ends = {side: os.pipe() for side in sides}
        for _, write in ends.values():
            with contextlib.suppress(OSError, AttributeError):  # Linux only; a hint
                fcntl.fcntl(write, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            for read, _ in ends.values():
                os.close(read)
            _child({side: write for side, (_, write) in ends.items()}, prepare)
        self.closed = False
        self.pipes: dict[str, BinaryIO] = {}
        self.queues: dict[str, queue.Queue[tuple[str, Any]]] = {}
        self.pumps: list[threading.Thread] = []
        for side, (read, write) in ends.items():
            os.close(write)
            self.pipes[side] = os.fdopen(read, "rb", buffering=PIPE_BYTES)
            self.queues[side] = queue.Queue(QUEUED)
            pump = threading.Thread(target=self._pump, args=(side,), daemon=True)
            pump.start()
            self.pumps.append(pump)

    def _pump(self, side: str) -> None:
        """Take the side's messages off its pipe into its queue, until its end."""
        pipe, queued = self.pipes[side], self.queues[side]
        while True:
            try:
                head = pipe.read(FRAME.size)
                body = pipe.read(FRAME.unpack(head)[0]) if len(head) == FRAME.size else b""
            except (OSError, ValueError):  # closed here
                body = b""
            message = pickle.loads(body) if body else ("cut", None)
            while not self.closed:
                try:
                    queued.put(message, timeout=0.1)
                    break
                except queue.Full:
                    continue
            if message[0] != "block" or self.closed:
                return

    def ready(self, side: str) -> bool:
        """Whether the side's next block (or its end) is here: `next` does not wait."""
        return not self.queues[side].empty()

    def blocks(self, side: str) -> Iterator[list[Record]]:
        """The side's blocks as the child read them; its error raised here, as if read here."""
        while True:
            kind, value = self.queues[side].get()
            if kind == "end":
                return
            if kind == "error":
                raise value
            if kind == "cut":
                raise ReplayError(f"the reader of log {side} ended before the log did")
            yield value

    def close(self) -> None:
        """End the child (what it reads is not needed any more) and reap it."""
        self.closed = True
        if self.pid:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(self.pid, 0)
            self.pid = 0
        for pump in self.pumps:  # the pipes give their end now: the pumps stop
            pump.join(timeout=1.0)
        for pipe in self.pipes.values():
            pipe.close()


def read_ahead(prepare: Callable[[], Blocks], sides: tuple[str, ...] = SIDES) -> ReadAhead | None:
    """A child reading each side's blocks, or None where a fork is not safe here: no
    `os.fork`, or another thread runs (a lock it holds would stay held in the child)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    try:
        return ReadAhead(sides, prepare)
    except OSError:  # no process or pipe to spare: read in the view's process
        return None


def resolved_blocks(paths: list[str], reading: Reading | None) -> Blocks:
    """`side_blocks` of the logs `tuimon replay PATH...` names (`resolve_logs`)."""
    from tuimon.engine.sources.saved_pair import resolve_logs

    return functools.partial(side_blocks, resolve_logs(paths, reading))


def side_blocks(logs: SavedPair, side: str) -> Iterator[list[Record]]:
    """A side's blocks of records: as `read_blocks` reads them, or the whole log."""
    from tuimon.readers import ReaderError, read_blocks

    try:
        blocks = read_blocks(getattr(logs, side), logs.reading, side)
    except ReaderError as exc:
        raise ReplayError(str(exc)) from None
    if blocks is None:
        return iter([logs.records(side)])
    return _translated(blocks)


def _translated(blocks: Iterator[list[Record]]) -> Iterator[list[Record]]:
    """Blocks whose reader errors are `ReplayError`s (one line, as `read_records` says)."""
    from tuimon.readers import ReaderError

    try:
        yield from blocks
    except ReaderError as exc:
        raise ReplayError(str(exc)) from None


def _child(pipes: dict[str, int], prepare: Callable[[], Blocks]) -> None:
    """Send each side's blocks down its pipe (a thread per side), then exit: no cleanup of
    the parent's in here."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        with contextlib.suppress(OSError):  # the view's own start comes first on a busy CPU
            os.nice(NICE)
        quiet = os.open(os.devnull, os.O_RDWR)  # the terminal is the view's: not read, not
        for std in (0, 1, 2):  # written (a library's warning would land mid-frame)
            os.dup2(quiet, std)
        try:
            blocks: Blocks | None = prepare()
            failed: Exception | None = None
        except Exception as exc:
            blocks, failed = None, exc
        threads = [
            threading.Thread(target=_send, args=(fd, side, blocks, failed), daemon=True)
            for side, fd in pipes.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        os._exit(0)


def _send(fd: int, side: str, blocks: Blocks | None, failed: Exception | None) -> None:
    """One side's blocks down `fd`, then "end"; an error instead, as the reader raised it."""
    with contextlib.suppress(OSError), os.fdopen(fd, "wb") as out:  # OSError: the view is gone

        def send(kind: str, value: object) -> None:
            body = pickle.dumps((kind, value), protocol=pickle.HIGHEST_PROTOCOL)
            out.write(FRAME.pack(len(body)) + body)
            out.flush()

        try:
            if blocks is None:
                raise failed or ReplayError("the logs could not be opened")
            for block in blocks(side):
                send("block", block)
        except OSError as exc:
            if isinstance(exc, BrokenPipeError):
                return
            send("error", _portable(exc))
        except Exception as exc:  # said by the view as its own reader would have said it
            send("error", _portable(exc))
        else:
            send("end", None)


def _portable(exc: Exception) -> Exception:
    """`exc` itself where it survives pickling, else a ReplayError of its words."""
    try:
        return pickle.loads(pickle.dumps(exc))
    except Exception:
        return ReplayError(str(exc))

"""Draining the pipes of every run of one monitor: one thread for all of them.

A `PipeReader` is one pipe of one run (its stdout cut into lines, or its stderr in chunks). The
bytes are saved as they are read, so a killed monitor leaves every line it read on disk; the
session takes the lines later (`PipeReader.take`). All readers of a process are served by one
`PipeHub` thread that sleeps in a selector until some pipe has data, so a monitor with many
quiet runs costs nothing while they are quiet, and a run that writes wakes only its own pump
(`PipeReader.notify`), at most once per pump wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import threading
import time
from collections.abc import Callable

from tuimon.readers.cut import LineCutter

READ_SIZE = 1 << 20
"""Bytes a reader takes per read."""
PIPE_SIZE = 1 << 20
"""Pipe capacity asked for (Linux): about 50 ms of a run printing flat out."""
PIPE_NAP = 0.02
"""Seconds the hub waits after a round of small reads, so the next reads take more at once."""


class PipeReader:
    """One pipe of a run, drained by the hub: bytes saved as read (`save`), cut into `lines`
    (stdout: `readers.cut.LineCutter`, each saved as cut) or passed on in chunks (stderr)."""

    def __init__(
        self, fd: int, name: str, *, save: Callable[[bytes], None] | None, lines: bool
    ) -> None:
        self.fd = fd
        self.name = name
        self.last_read = time.monotonic()
        self.eof = threading.Event()
        self._save = save or (lambda data: None)
        self._cutter = LineCutter(save) if lines else None
        self._pending: list[bytes] = []
        self._lock = threading.Lock()
        self._waiter: Callable[[], None] | None = None
        self.halted = False
        self.small_read = READ_SIZE // 8 if _grow_pipe(fd) else 0
        """Reads below this many bytes let the hub nap (the pipe holds `PIPE_SIZE`)."""

    def start(self) -> None:
        """Hand the pipe to the hub."""
        PipeHub.get().add(self)

    def read(self) -> int:
        """One read (in the hub's thread): the bytes read, 0 at the end of the stream or on
        an error."""
        try:
            data = os.read(self.fd, READ_SIZE)
        except OSError:
            data = b""
        if not data:
            return 0
        self.last_read = time.monotonic()
        if self._cutter is None:
            self._save(data)
            self._put([data])
        else:
            self._put(self._cutter.feed(data))
        return len(data)

    def close(self) -> None:
        """The end (in the hub's thread): the last line, the fd closed, EOF told."""
        if self._cutter is not None:
            with contextlib.suppress(Exception):  # a save error is the writer's to report
                self._put(self._cutter.flush())
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.eof.set()
        self._put([])

    def _put(self, out: list[bytes]) -> None:
        with self._lock:
            self._pending += out
            wake = self._waiter if (out or self.eof.is_set()) else None
            if wake is not None:
                self._waiter = None
        if wake is not None:
            wake()

    def take(self) -> list[bytes]:
        """The lines (or stderr chunks) read since the last call."""
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def notify(self, wake: Callable[[], None]) -> bool:
        """Call `wake` (once, from the hub's thread) when data or the end comes; False (and no
        call) when some is here already."""
        with self._lock:
            if self._pending or self.eof.is_set():
                return False
            self._waiter = wake
            return True

    def join(self, timeout: float | None = None) -> None:
        """Until the pipe is drained to its end (or stopped)."""
        self.eof.wait(timeout)

    def stop(self) -> None:
        """Stop reading (what holds the other end is not ours to wait for)."""
        if not self.halted and not self.eof.is_set():
            self.halted = True
            PipeHub.get().halt(self)


def waker(event: asyncio.Event) -> Callable[[], None]:
    """A `PipeReader.notify` callback that sets `event` in the loop running now."""
    loop = asyncio.get_running_loop()

    def wake() -> None:
        with contextlib.suppress(RuntimeError):  # the loop has closed
            loop.call_soon_threadsafe(event.set)

    return wake


class PipeHub(threading.Thread):
    """The one thread that drains every `PipeReader` of this process (a selector: it sleeps
    until a pipe has data)."""

    _instance: PipeHub | None = None
    _guard = threading.Lock()

    @classmethod
    def get(cls) -> PipeHub:
        """The process's hub, started on first use."""
        with cls._guard:
            if cls._instance is None or not cls._instance.is_alive():
                cls._instance = cls()
                cls._instance.start()
            return cls._instance

    def __init__(self) -> None:
        super().__init__(name="tuimon-pipes", daemon=True)
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._new: list[PipeReader] = []
        self._halted: list[PipeReader] = []
        self._lock = threading.Lock()

    def add(self, reader: PipeReader) -> None:
        """Drain `reader` from now on."""
        with self._lock:
            self._new.append(reader)
        self.wake()

    def halt(self, reader: PipeReader) -> None:
        """Stop draining `reader` (its fd is closed, its end told)."""
        with self._lock:
            self._halted.append(reader)
        self.wake()

    def wake(self) -> None:
        """Interrupt the wait (a reader added or stopped)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def run(self) -> None:
        while True:
            self._admit()
            nap = False
            for key, _ in self._selector.select():
                reader = key.data
                if reader is None:
                    with contextlib.suppress(OSError):
                        os.read(self._wake_r, 4096)
                    continue
                try:
                    got = reader.read()
                except Exception:  # one reader's failure must not stop the others
                    got = 0
                if not got:
                    self._drop(reader)
                nap = nap or 0 < got < reader.small_read
            if nap:
                time.sleep(PIPE_NAP)  # let the pipes fill: fewer, larger reads

    def _admit(self) -> None:
        """Readers added or halted since the last round."""
        with self._lock:
            new, self._new = self._new, []
            halted, self._halted = self._halted, []
        for reader in new:
            try:
                self._selector.register(reader.fd, selectors.EVENT_READ, reader)
            except (OSError, ValueError):
                reader.close()
        for reader in halted:
            if not reader.eof.is_set():
                self._drop(reader)

    def _drop(self, reader: PipeReader) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(reader.fd)
        reader.close()


def _grow_pipe(fd: int) -> bool:
    """Make the pipe hold `PIPE_SIZE` bytes (Linux), so a fast run never waits on a reader
    that naps between reads; False where it cannot."""
    try:
        import fcntl

        return fcntl.fcntl(fd, 1031, PIPE_SIZE) >= PIPE_SIZE  # F_SETPIPE_SZ
    except (ImportError, OSError, ValueError):
        return False

"""Standard streams that a closed pipe cannot break: `tuimon compare ... | head` exits with
the verdict's code, whatever the reader of stdout or stderr did.

When the reader of a pipe goes (`| head`, `2>&1 | head -1`), the next write raises
BrokenPipeError (Python ignores SIGPIPE); once the terminal has hung up (its window closed, an
ssh link dropped), EIO. `guarded` swaps `sys.stdout` and `sys.stderr` for
`Guarded` streams for the length of a command: the first failed write points the stream's file
descriptor at /dev/null, and every later write succeeds without a trace, so the command goes on
to its verdict and its exit code (and Python's final flush cannot fail either). A stream that
was closed before tuimon started (`>&-`) is /dev/null from the start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

GONE = (errno.EPIPE, errno.EBADF, errno.ECONNRESET, errno.EIO)
"""A reader gone: a closed pipe or socket, a closed descriptor, a terminal that hung up (EIO)."""


class Guarded:
    """A text stream whose writes never raise once its reader is gone (`gone` says so)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        """Write, or drop the text when the reader is gone."""
        if not self.gone:
            try:
                return self._stream.write(text)
            except (OSError, ValueError) as exc:
                self._lost(exc)
        return len(text)

    def flush(self) -> None:
        """Flush, or drop what is buffered when the reader is gone."""
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._lost(exc)

    def _lost(self, exc: Exception) -> None:
        if isinstance(exc, OSError) and exc.errno not in GONE:
            raise exc
        self.gone = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _stream(current: TextIO | None) -> TextIO:
    if current is None:  # closed before Python started: sys.stdout is None
        return open(os.devnull, "w")  # lives as long as the process
    return current


@contextlib.contextmanager
def guarded() -> Iterator[None]:
    """`sys.stdout` and `sys.stderr` as `Guarded` streams while the block runs."""
    saved = sys.stdout, sys.stderr
    sys.stdout = Guarded(_stream(sys.stdout))
    sys.stderr = Guarded(_stream(sys.stderr))
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = saved

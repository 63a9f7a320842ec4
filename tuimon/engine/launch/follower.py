"""The one follower of a growing file: what it gains, cut into lines (`readers.cut`).

A live run's `--log-file` (`runner.Run`) and `tuimon watch` (`sources.follow`) read their files
with it. A file that is not there yet, or still empty, is waited for; a file truncated in place
(rewritten, `copytruncate`) or rewritten from its start by a restarted run is read again from its
start; a file rotated away (the path now names a new file) is read to its end, then the new one
from its start. Each of these is said, once, as a note. A log rewritten as a whole (a JSON
document, a CSV, TensorBoard events) is `NotLines`: it is read again as a whole instead.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tuimon.readers import streamable
from tuimon.readers.capped import NotRegular, open_regular
from tuimon.readers.cut import LineCutter
from tuimon.sanitize import clean

READ_SIZE = 1 << 20
"""Bytes one `Follower.read` takes at most (a read never holds the loop for long)."""
HEAD = 256
"""Bytes of a file's start kept to see it rewritten by a restarted run."""


class FollowError(Exception):
    """A followed path cannot be read as a log (a FIFO, a folder, no permission); one line."""


class NotLines(FollowError):
    """The file is a log rewritten as a whole, not one that grows by lines."""


class Follower:
    """One followed file: where it is read up to, and what became of it."""

    def __init__(
        self, path: Path, save: Callable[[bytes], None] | None = None, *, sniff: bool = True
    ) -> None:
        self.path = path
        self.sniff = sniff
        """Refuse a log rewritten as a whole (`NotLines`); False: any file is read as lines."""
        self.name = clean(str(path), 200)
        self.save = save
        """Gets the bytes of each line as it is cut (the raw log)."""
        self.cutter = LineCutter(save)
        self.fh: IO[bytes] | None = None
        self.ident: tuple[int, int] | None = None
        """(device, inode) of the open file: a new one at the path means it was rotated."""
        self.head = b""
        """The file's first bytes as read (up to `HEAD`): others there mean it was rewritten."""
        self.size = 0
        self.appeared = False
        self.gone = False
        """The path was found removed or renamed (said once)."""
        self.drained = True
        """The last `read` reached the end of what the file holds."""
        self.last_change = time.monotonic()
        self.notes: list[str] = []
        """What became of the file, for the caller to say (and clear)."""

    def read(self) -> list[bytes]:
        """The lines the file gained (up to `READ_SIZE` bytes; a rotated file's to its end);
        none while it is not there or empty. `FollowError` (`NotLines`), OSError."""
        if self.fh is None and not self._open():
            return []
        assert self.fh is not None
        self._check_truncated()
        data = self.fh.read(READ_SIZE)
        self.drained = len(data) < READ_SIZE
        if data:
            self.last_change = time.monotonic()
            self.head += data[: HEAD - len(self.head)]
        out = self.cutter.feed(data)
        return out + self._turn() if self._rotated() else out

    def _turn(self) -> list[bytes]:
        """The path names another file now (rotated, or removed): the lines of the old file to
        its end, then the new one opened from its start (when there is one)."""
        assert self.fh is not None
        out = self.cutter.feed(self.fh.read())
        if not self.path.exists():
            if not self.gone:
                self.gone = True
                self.notes.append(f"{self.name} was removed or renamed: waiting for a new one")
            return out
        if not self.gone:
            self.notes.append(
                f"{self.name} was rotated: the old file was read to its end, now the new one"
            )
        out += self.close()
        self._open()
        return out

    def close(self) -> list[bytes]:
        """The end: a last line without newline (as it came); the file closed."""
        rest = self.cutter.flush()
        if self.fh is not None:
            self.fh.close()
            self.fh = None
        return rest

    def _open(self) -> bool:
        """Open the file once it is there and has bytes; False while it is not."""
        try:  # non-blocking, regular files only: a FIFO or a device is refused, never read
            fh = open_regular(self.path)
        except FileNotFoundError:
            return False
        except NotRegular as exc:
            raise FollowError(f"{self.name} is {exc.kind}, not a log file (refused)") from None
        except OSError as exc:
            raise FollowError(f"cannot read {self.name}: {exc.strerror or exc}") from None
        head = fh.read(1 << 16)
        if not head:
            fh.close()
            return False
        if self.sniff and not streamable(head):
            fh.close()
            raise NotLines(
                f"{self.name} is not a line log (a whole-file JSON/CSV or TensorBoard file): "
                "compare it when it is written with `tuimon compare`"
            )
        fh.seek(0)
        stat = os.fstat(fh.fileno())
        self.fh, self.ident = fh, (stat.st_dev, stat.st_ino)
        self.head, self.size = b"", 0
        if self.gone:
            self.notes.append(f"{self.name} is there again: reading the new file from its start")
        self.gone = False
        self.appeared = True
        self.last_change = time.monotonic()
        return True

    def _check_truncated(self) -> None:
        """Shorter than what was read (truncated), or its first bytes changed (rewritten from
        the start by a restarted run): read it again from its start."""
        assert self.fh is not None
        try:
            size = os.fstat(self.fh.fileno()).st_size
            read = self.fh.tell()
            if size < read:
                why = f"was truncated (now {size:,} bytes, read up to {read:,})"
            elif (
                size != self.size
                and self.head
                and os.pread(self.fh.fileno(), len(self.head), 0)
                != self.head[: min(size, len(self.head))]
            ):
                why = "was rewritten from its start"
            else:
                self.size = size
                return
        except OSError:
            return
        self.notes.append(f"{self.name} {why}: reading it again from its start")
        self.fh.seek(0)
        self.size, self.head = size, b""
        self.cutter = LineCutter(self.save)  # a half line of the old content is not kept
        self.last_change = time.monotonic()

    def _rotated(self) -> bool:
        """The path now names another file (renamed away and created anew, or removed)."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return (stat.st_dev, stat.st_ino) != self.ident and stat.st_size > 0

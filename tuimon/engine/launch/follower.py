"""The one follower of a growing file: what it gains, cut into lines (`readers.cut`).

A live run's `--log-file` (`runner.Run`) and `tuimon watch` (`sources.follow`) read their files
with it. A file that is not there yet, or still empty, is waited for; a file truncated in place
(rewritten, `copytruncate`) or rewritten from its start by a restarted run is read again from its
start; a file rotated away (the path now names a new file) is read to its end, then the new one
from its start. Each of these is said, once, as a note. A log rewritten as a whole (a JSON
document, a CSV, TensorBoard events) is `NotLines`: it is read again as a whole instead. A W&B
run grows by records, not lines: `RunFollower` follows it (`follows_run` tells which to use).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

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


class RunFollower:
    """A W&B run being written, followed by records (`readers.wandb_run.WandbStream`), not
    lines: its `.wandb` file, or the first one that appears in a folder (a run folder, a
    `wandb/` folder, or a folder W&B writes its `wandb/` under: `WANDB_DIR`). A record not all
    written waits for the rest; a damaged one ends the reading there, said as a note."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = clean(str(path), 200)
        self.file: Path | None = None
        """The `.wandb` file followed, once found."""
        self.fh: IO[bytes] | None = None
        self.stream: Any = None
        self.appeared = False
        self.over = False
        """The run was read to its end (its exit record, or `close`): never opened again."""
        self.drained = True
        self.last_change = time.monotonic()
        self.notes: list[str] = []

    def find(self) -> Path | None:
        """The `.wandb` file: the path itself, or the first run's in the folder."""
        if not self.path.is_dir():
            return self.path if self.path.is_file() else None
        for folder in (self.path, self.path / "wandb"):
            found = sorted(f for f in folder.glob("*.wandb") if f.is_file())
            if not found:
                runs = (d for d in folder.glob("*run-*") if d.is_dir() and not d.is_symlink())
                found = sorted(f for d in runs for f in d.glob("*.wandb") if f.is_file())
            if found:
                return found[0]
        return None

    def _open(self) -> bool:
        from tuimon.readers.tensorboard import MissingExtra
        from tuimon.readers.wandb_run import WandbStream, records_type

        file = self.find()
        if file is None:
            return False
        try:
            fh = open_regular(file)
        except FileNotFoundError:
            return False
        except NotRegular as exc:
            raise FollowError(f"{clean(str(file), 200)} is {exc.kind}, not a log file") from None
        except OSError as exc:
            raise FollowError(
                f"cannot read {clean(str(file), 200)}: {exc.strerror or exc}"
            ) from None
        try:
            records_type()
        except MissingExtra as exc:
            fh.close()
            raise FollowError(str(exc)) from None
        self.fh, self.file, self.appeared = fh, file, True
        self.stream = WandbStream(file.name)
        self.last_change = time.monotonic()
        if file != self.path:
            self.notes.append(f"following the W&B run {clean(str(file), 200)}")
        return True

    def read(self) -> list[Any]:
        """The records the run's file gained (up to `READ_SIZE` bytes); none while it is not
        there. `FollowError`, OSError; `readers.MissingExtra` without the wandb package."""
        if self.over or (self.fh is None and not self._open()):
            return []
        assert self.fh is not None
        data = self.fh.read(READ_SIZE)
        self.drained = len(data) < READ_SIZE
        if not data:
            return []
        self.last_change = time.monotonic()
        out = list(self.stream.feed(data))
        if self.drained and self.stream.run.exit is not None:  # its exit record: it is over
            out += self.close()
        return out

    def close(self) -> list[Any]:
        """The end: what is left of the file read, then the records that follow the steps
        (the summary, where reading stopped, the end record)."""
        self.over = True
        if self.fh is None:
            return []
        out: list[Any] = []
        while data := self.fh.read(READ_SIZE):
            out += self.stream.feed(data)
        self.fh.close()
        self.fh = None
        return out + list(self.stream.close())


def follows_run(path: Path) -> bool:
    """Whether `path` is followed as a W&B run (`RunFollower`): a folder, a `.wandb` file by
    its name, or a file that begins as one."""
    from tuimon.readers.wandb_run import is_wandb

    if path.is_dir() or path.suffix == ".wandb":
        return True
    try:
        with open_regular(path) as fh:
            return is_wandb(fh.read(8))
    except OSError:
        return False

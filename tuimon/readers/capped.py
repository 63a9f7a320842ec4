"""Reading a file that came from elsewhere within bounds: regular files only, opened without
blocking, gzip / xz expanded as a stream with a cap on what it may expand to (counted before
a line is read), and a `.npy` checked against its file's size before its array is allocated.

A compressed log may expand to at most `MAX_RATIO` times its own size (a floor of
`RATIO_FLOOR` bytes is always allowed) and never to more than `MAX_BYTES`; `--max-bytes` raises
the absolute cap (`set_max_bytes`). Past either, reading stops with `TooLarge`, an OSError whose
message is the one line the user sees, before more than the cap is held in memory.
"""

from __future__ import annotations

import errno
import gzip
import io
import lzma
import os
import stat
from pathlib import Path
from typing import IO, Any

import numpy as np

MAX_RATIO = 100
"""A compressed log may expand to 100 times its size (JSON Lines logs compress 3-10 times)."""
RATIO_FLOOR = 16 << 20
"""...but always to 16 MiB, so a small, very repetitive log still reads."""
DEFAULT_MAX_BYTES = 256 << 20
"""No compressed log expands past 256 MiB unless `--max-bytes` says more."""
CHUNK = 1 << 20

_max_bytes = DEFAULT_MAX_BYTES
_ratio: int | None = MAX_RATIO


def set_max_bytes(limit: int | None) -> None:
    """The cap on what a compressed log expands to: ``limit`` alone (`--max-bytes`), or None
    for the default (`DEFAULT_MAX_BYTES` and `MAX_RATIO`)."""
    global _max_bytes, _ratio
    _max_bytes = DEFAULT_MAX_BYTES if limit is None else int(limit)
    _ratio = MAX_RATIO if limit is None else None


def max_bytes() -> int:
    """The absolute cap in force."""
    return _max_bytes


def _size(n: int) -> str:
    """Bytes in words: `256 MiB`, `4.5 KiB`."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} bytes"


class TooLarge(OSError):
    """A file or a field that claims more than tuimon reads (one line in `strerror`)."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.EFBIG, message)


class NotRegular(OSError):
    """A FIFO, a device, a socket or a directory where a file is read (never opened to read)."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"{kind}, not a regular file (refused, never read)")
        self.path = path
        self.kind = kind


def kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((word for test, word in kinds if test(mode)), "a special file")


def open_regular(path: str | os.PathLike[str], *, follow: bool = True) -> IO[bytes]:
    """``path`` opened for reading when it is a regular file, else `NotRegular`. Opened
    non-blocking (a FIFO never blocks the open) and checked on its descriptor before a byte
    is read; with ``follow=False`` a link is refused (ELOOP) rather than followed."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(Path(path), kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class _Capped(io.RawIOBase):
    """A decompressing stream that raises `TooLarge` once it has given ``limit`` bytes."""

    def __init__(self, inner: Any, source: IO[bytes], limit: int, what: str) -> None:
        self._inner = inner
        self._source = source
        self._limit = limit
        self._what = what
        self._given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        room = self._limit - self._given
        if room <= 0:
            if self._inner.read(1):  # one byte more than allowed exists
                raise TooLarge(self._what)
            return 0
        got = self._inner.readinto(view[: min(len(view), room + 1, CHUNK)])
        if self._given + got > self._limit:
            raise TooLarge(self._what)
        self._given += got
        return got

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
            self._source.close()
        super().close()


def _gzip(fh: IO[bytes]) -> Any:
    return gzip.GzipFile(fileobj=fh, mode="rb")


def _xz(fh: IO[bytes]) -> Any:
    return lzma.LZMAFile(fh, mode="rb")


_COMPRESSED = ((b"\x1f\x8b", _gzip, "gzip"), (b"\xfd7zXZ\x00", _xz, "xz"))


def open_capped(fh: IO[bytes], magic: bytes) -> IO[bytes] | None:
    """``fh`` (at offset 0) decompressed as a capped stream when ``magic`` says gzip or xz;
    None for a file that is not compressed."""
    found = next(((c, n) for m, c, n in _COMPRESSED if magic.startswith(m)), None)
    if found is None:
        return None
    opener, name = found
    size = os.fstat(fh.fileno()).st_size
    limit = _max_bytes if _ratio is None else min(_max_bytes, max(_ratio * size, RATIO_FLOOR))
    cap = f"{_size(_max_bytes)}; --max-bytes raises it"
    if _ratio is not None:
        cap = f"{_ratio} times its size, from {_size(RATIO_FLOOR)}, and {cap}"
    why = (
        f"{name} data that expands past {_size(limit)} ({_size(size)} compressed): not read "
        f"(a compressed log expands to at most {cap})"
    )
    if not _fits(opener, fh, limit):
        raise TooLarge(why)
    fh.seek(0)
    inner = opener(fh)
    return io.BufferedReader(_Capped(inner, fh, limit, why), CHUNK)


def _fits(opener: Any, fh: IO[bytes], limit: int) -> bool:
    """Whether ``fh`` expands to ``limit`` bytes at most: counted by expanding it once into
    nothing, before a line is read (a bomb is refused in a second, not after minutes of
    parsing what it expands to). A damaged stream counts as fitting: its reader tells it."""
    inner = opener(fh)
    given = 0
    try:
        while chunk := inner.read(CHUNK):
            given += len(chunk)
            if given > limit:
                return False
    except (EOFError, OSError, lzma.LZMAError):
        pass
    return True


def load_npy(fh: IO[bytes]) -> np.ndarray:
    """The array of an open `.npy` file, once its header's shape and dtype are checked against
    the bytes the file holds (`TooLarge` before anything is allocated; ValueError for a file
    that is not a .npy or holds objects)."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    if dtype.hasobject:
        raise ValueError("an object array, not numbers")
    need = dtype.itemsize
    for length in shape:
        need *= int(length)
    have = os.fstat(fh.fileno()).st_size - fh.tell()
    if need > have:
        raise TooLarge(
            f"a .npy whose header says {tuple(shape)} {dtype} ({_size(need)}) in "
            f"{_size(have)} of data: not read"
        )
    fh.seek(0)
    array: np.ndarray = np.load(fh, allow_pickle=False)
    return array


def read_npy(path: str | os.PathLike[str]) -> np.ndarray:
    """The array of the regular file ``path`` (`open_regular`, `load_npy`)."""
    with open_regular(path) as fh:
        return load_npy(fh)

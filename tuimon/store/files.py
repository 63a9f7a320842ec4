"""Pair directories on disk: names, atomic writes, regular files only, the running lock."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import stat
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO, cast

import orjson

from tuimon.errors import StoreError
from tuimon.readers import capped
from tuimon.readers.capped import kind as _kind

try:  # POSIX: a running pair holds an flock on its lock file (released when the monitor dies)
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, a pair never reads as running
    fcntl = None  # type: ignore[assignment]

DEFAULT_STORE = "tuimon_pairs"
PAIR_FORMAT = "tuimon.pair/1"
STORE_ENV = "TUIMON_STORE"
SIDES = ("a", "b")
"""The two sides of every pair, in order (the one definition the engine and the views share)."""


def other_side(side: str) -> str:
    """The side of a pair that is not `side`."""
    return "b" if side == "a" else "a"


PAIR_JSON = "pair.json"
ALIGNED_JSONL = "aligned.jsonl"

_FORMAT_FAMILY = "tuimon.pair/"
_DUMP_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
NO_PAIR_JSON = "no pair.json (interrupted, or still running)"
LOCK_FILE = ".monitor.lock"
"""Held (flock) by the monitor writing the pair, from its first moment until pair.json is saved."""
MAX_PAIR_JSON = 64 << 20
_NOT_A_PAIR = "pair.json is not a tuimon pair"


def _reason(exc: BaseException) -> str:
    """A one-line reason for an exception: the OS message when there is one."""
    if isinstance(exc, OSError) and exc.strerror:
        text = exc.strerror
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def resolve_store(path: str | os.PathLike[str] | None) -> Path:
    """The store directory: explicit path > ``$TUIMON_STORE`` > ``./tuimon_pairs``."""
    if path is not None and str(path) != "":
        return Path(path).expanduser()
    env = os.environ.get(STORE_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(DEFAULT_STORE)


def check_writable(root: Path) -> None:
    """Create ``root`` if missing and prove a file can be written there (then removed)."""
    root = Path(root)
    try:
        if root.exists() and not root.is_dir():
            raise StoreError(f"store {root} is not writable: it is not a directory")
        root.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=root, prefix=".tuimon-probe-", suffix=".tmp")
        try:
            os.write(fd, b"ok\n")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise StoreError(f"store {root} is not writable: {_reason(exc)}") from exc


def _fsync_dir(path: Path) -> None:
    """Best effort: make a rename in ``path`` durable (not possible on every platform)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_atomic(path: Path, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` to a temp file next to ``path``, fsync it, then ``os.replace`` it."""
    path = Path(path)
    tmp: str | None = None
    try:
        tmp = str(path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        with open(tmp, "xb") as fh:  # "x": never another's file; the mode follows the umask
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise StoreError(f"cannot write {path}: {_reason(exc)}") from exc
    except (TypeError, ValueError) as exc:  # orjson.JSONEncodeError is a TypeError
        raise StoreError(f"cannot write {path}: {_reason(exc)}") from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _fsync_dir(path.parent)


def _encode_json(path: Path, obj: dict[str, Any]) -> bytes:
    """``obj`` as indented JSON; StoreError naming ``path`` when a value cannot be encoded."""
    try:
        return orjson.dumps(
            obj, option=_DUMP_OPTS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
        )
    except orjson.JSONEncodeError as exc:
        raise StoreError(f"cannot write {path}: a value cannot be encoded: {_reason(exc)}") from exc


def write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    """Write ``obj`` as indented JSON: temp file in the same dir + fsync + ``os.replace``.

    Raises StoreError (one line) when the file cannot be written or ``obj`` is not JSON-able.
    """
    path = Path(path)
    _write_atomic(path, (_encode_json(path, obj),))


def _plain_name(name: object) -> bool:
    """One path component naming a file of a pair directory (no directory part, no '..')."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and not any(c in name for c in "/\\\0")
    )


def _inside(path: Path, root: Path) -> tuple[Path, os.stat_result]:
    """The real path of ``path`` and its stat; StoreError unless it lies inside ``root``."""
    try:
        info = os.lstat(path)
        if not stat.S_ISLNK(info.st_mode):  # a plain name that is no link lies inside root
            return path, info
        real = path.resolve(strict=True)
        if not real.is_relative_to(root.resolve(strict=True)):
            raise StoreError(f"{root}: {path.name} is a link that leads outside the pair directory")
        return real, real.stat()
    except FileNotFoundError:
        raise StoreError(f"{root}: missing {path.name}") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python 3.10-3.12)
        raise StoreError(f"{root}: cannot read {path.name}: {_reason(exc)}") from None


def pair_file(pair_dir: Path, name: str) -> Path:
    """The regular file ``name`` of ``pair_dir``; StoreError for anything else, never blocking.

    Refused: a name with a directory part, a link that leads outside the pair directory, a FIFO,
    a device, a socket, a directory. Only ``stat`` is used, so a FIFO is never opened.
    """
    pair_dir = Path(pair_dir)
    if not _plain_name(name):
        raise StoreError(f"{pair_dir}: {name!r} is not a file name inside the pair directory")
    _, info = _inside(pair_dir / name, pair_dir)
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{pair_dir}: {name} is {_kind(info.st_mode)}, not a regular file")
    return pair_dir / name


def open_pair_dir(store: Path, name: str) -> Path:
    """The pair directory ``name`` of ``store``, to be written (`sweep --attach`): a plain
    name, a directory that is no link and lies in the store, without a saved pair.json (one
    that says "interrupted", an attach stopped before, is taken up again); StoreError (one
    line) otherwise."""
    store = Path(store)
    if not _plain_name(name):
        raise StoreError(f"{name!r} is not a pair directory name")
    path = store / name
    try:
        info = os.lstat(path)
        inside = path.resolve(strict=True).parent == store.resolve(strict=True)
    except OSError as exc:
        raise StoreError(f"pair directory {path}: {_reason(exc)}") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or not inside:
        what = "a link" if stat.S_ISLNK(info.st_mode) else _kind(info.st_mode)
        raise StoreError(f"pair directory {path} is {what}: not written (a pair is a closed box)")
    if os.path.lexists(path / PAIR_JSON):  # only an interrupted attach's pair is taken up again
        try:
            status = orjson.loads(_read_regular(path / PAIR_JSON)).get("status")
        except (StoreError, orjson.JSONDecodeError, AttributeError):
            status = None
        if status != "interrupted":
            raise StoreError(f"pair {path} is already saved: its pair.json is never rewritten")
    return path


def special(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a directory (`a FIFO`, `a
    device`, `a socket`), else None; only ``stat`` is used, so nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return _kind(mode)


def _read_regular(path: Path, limit: int = MAX_PAIR_JSON) -> bytes:
    """The bytes of a regular file inside its directory; StoreError otherwise (never blocks)."""
    pair_file(path.parent, path.name)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise StoreError(f"cannot read {path.name}: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)  # it may have been swapped since the check
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{path.name} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise StoreError(f"{path.name} is too large ({info.st_size} bytes)")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    except OSError as exc:
        raise StoreError(f"cannot read {path.name}: {_reason(exc)}") from None
    finally:
        os.close(fd)


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading when it is a regular file; StoreError (one line) for a FIFO,
    a device, a socket, a directory or a file that cannot be opened. Never blocks: the file is
    opened non-blocking and checked on its descriptor before a byte is read
    (`tuimon.readers.capped.open_regular`)."""
    path = Path(path)
    try:
        return cast(BinaryIO, capped.open_regular(path))
    except capped.NotRegular as exc:
        raise StoreError(f"{path} is {exc.kind}, not a regular file") from None
    except FileNotFoundError:
        raise StoreError(f"{path}: no such file") from None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {_reason(exc)}") from None


def read_regular(path: Path, limit: int = MAX_PAIR_JSON) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); StoreError otherwise."""
    with open_regular(path) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {_reason(exc)}") from None
    if len(data) > limit:
        raise StoreError(f"{path} is too large (over {limit} bytes)")
    return data


def _take_lock(pair_dir: Path) -> int | None:
    """Create and flock the lock file of a pair being written (None where flock is missing)."""
    if fcntl is None:
        return None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(pair_dir / LOCK_FILE, flags, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:  # a filesystem without flock: the pair is written, it just never reads RUNNING
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(pair_dir / LOCK_FILE)
        return None
    return fd


def _release_lock(pair_dir: Path, fd: int | None) -> None:
    """Remove the lock file, then let go of the lock."""
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.unlink(pair_dir / LOCK_FILE)
    with contextlib.suppress(OSError):
        os.close(fd)


class LockHeld(StoreError):
    """Another live process holds the lock."""


def hold_lock(path: Path, owner: str, settle: float = 2.0) -> int | None:
    """Take the flock of ``path`` (created if missing) for as long as this process lives or
    until `release_lock`: a process killed with SIGKILL lets go of it with its last breath.
    ``owner`` is written into it. LockHeld when another live process holds it; None where
    there is no flock.

    A holder killed a moment ago may have left a child between fork and exec that still
    shares the lock for a few milliseconds: when the owner the file names is a pid of this
    host that is gone, this waits up to ``settle`` seconds for the lock to come free."""
    if fcntl is None:
        return None
    deadline = time.monotonic() + settle
    while True:
        try:
            return _try_lock(path, owner)
        except LockHeld as held:
            if time.monotonic() >= deadline or not _owner_gone(str(held)):
                raise
        time.sleep(0.05)


def lock_owner() -> str:
    """This process, as a lock file (and a sweep record) names it: `pid 123 on host`."""
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _owner_gone(owner: str) -> bool:
    """True when ``owner`` (see `lock_owner`) names a process of this host that is gone."""
    found = re.fullmatch(r"pid (\d+) on (\S+)", owner.strip())
    if found is None or found[2] != socket.gethostname():
        return False
    try:
        os.kill(int(found[1]), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):
        return False
    return False


def _try_lock(path: Path, owner: str) -> int | None:
    """One try at `hold_lock`."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise StoreError(f"cannot lock {path}: {_reason(exc)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StoreError(f"{path} is {_kind(os.fstat(fd).st_mode)}, not a lock file")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_by = os.pread(fd, 200, 0).decode(errors="replace").strip()
            raise LockHeld(held_by or "another process") from None
        except OSError:  # a filesystem without flock: nothing to hold
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{owner}\n".encode(), 0)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd


def release_lock(fd: int | None) -> None:
    """Let go of a lock taken with `hold_lock` (the file stays: removing it would race)."""
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def is_running(pair_dir: str | os.PathLike[str]) -> bool:
    """True while the monitor writing ``pair_dir`` is alive (it holds the pair's lock)."""
    if fcntl is None:
        return False
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(os.path.join(pair_dir, LOCK_FILE), flags)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)

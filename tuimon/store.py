"""Pair directories on disk: streamed raw logs, atomic save, an index of past pairs, load.

A store is a directory (default ``./tuimon_pairs``, like ``mlruns/``) holding one directory per
pair::

    20261130-091502_s0_cpu-mps_3fa2/
        a.jsonl  b.jsonl        raw stdout lines of each side, appended as they arrive
        a.stderr b.stderr       raw stderr of each side (only when a side wrote any)
        aligned.jsonl           the aligned record, written once at the end
        pair.json               metadata + summary, written last: a pair without it was
                                interrupted (or is still running)

``aligned.jsonl`` and ``pair.json`` are written to a temp file in the same directory and moved
into place with ``os.replace``, so a reader never sees half of either. Nothing here imports
textual or torch.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import orjson

from tuimon.errors import StoreError
from tuimon.readers import Reading

try:  # POSIX: a running pair holds an flock on its lock file (released when the monitor dies)
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, a pair never reads as running
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_STORE",
    "PAIR_FORMAT",
    "PairDoc",
    "PairInfo",
    "PairWriter",
    "RunDoc",
    "SavedLogs",
    "StoreError",
    "check_writable",
    "delete_pair",
    "is_pair_dir",
    "is_running",
    "list_pairs",
    "pair_file",
    "read_pair",
    "resolve_store",
    "write_json_atomic",
]

DEFAULT_STORE = "tuimon_pairs"
PAIR_FORMAT = "tuimon.pair/1"
STORE_ENV = "TUIMON_STORE"
SIDES = ("a", "b")
"""The two sides of every pair, in order (the one definition the engine and the views share)."""
PAIR_JSON = "pair.json"
ALIGNED_JSONL = "aligned.jsonl"

_FORMAT_FAMILY = "tuimon.pair/"
_DUMP_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS
_DEVICE_BAD = re.compile(r"[^A-Za-z0-9.-]+")
_LABEL_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_DEVICE = 32
_MAX_LABEL = 64
_MKDIR_TRIES = 1000
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


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((word for test, word in kinds if test(mode)), "a special file")


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


def is_running(pair_dir: Path) -> bool:
    """True while the monitor writing ``pair_dir`` is alive (it holds the pair's lock)."""
    if fcntl is None:
        return False
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(Path(pair_dir) / LOCK_FILE, flags)
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


def _sanitise_device(device: str) -> str:
    text = _DEVICE_BAD.sub("-", str(device)).strip("-")[:_MAX_DEVICE].strip("-")
    return text or "dev"


def _sanitise_label(label: str) -> str:
    return _LABEL_BAD.sub("-", str(label)).strip("-")[:_MAX_LABEL].strip("-")


def _now() -> datetime:
    """The current local time, timezone-aware (a seam for tests)."""
    return datetime.now().astimezone()


def _random_hex() -> str:
    """Four random hex digits (a seam for tests)."""
    return secrets.token_hex(2)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


_RUN_KEYS = ("device", "command", "status", "exit_code", "steps", "env", "hyper")


@dataclass
class RunDoc:
    """One side's entry in ``pair.json`` (``runs.a`` / ``runs.b``)."""

    device: str | None = None
    command: str | None = None
    """The command as a user would type it (a saved argv list reads back joined by spaces)."""
    status: str | None = None
    exit_code: int | None = None
    steps: int | None = None
    env: dict[str, Any] | None = None
    hyper: dict[str, Any] | None = None
    more: dict[str, Any] = field(default_factory=dict)
    """Further fields kept as written (last_step, wall_s, stderr_tail ...)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object written in pair.json."""
        out: dict[str, Any] = {
            "device": self.device,
            "command": self.command,
            "status": self.status,
            "exit_code": self.exit_code,
            "steps": self.steps,
        }
        out.update(self.more)
        out["env"] = self.env
        out["hyper"] = self.hyper
        return out

    @classmethod
    def from_json(cls, raw: object) -> RunDoc:
        """Read a run entry defensively: a field of the wrong type reads as missing."""
        run = raw if isinstance(raw, dict) else {}
        command = run.get("command")
        if isinstance(command, list):
            command = " ".join(map(str, command))
        return cls(
            device=_str(run.get("device")),
            command=_str(command),
            status=_str(run.get("status")),
            exit_code=_int(run.get("exit_code")),
            steps=_int(run.get("steps")),
            env=_dict(run.get("env")),
            hyper=_dict(run.get("hyper")),
            more={k: v for k, v in run.items() if k not in _RUN_KEYS},
        )


_DOC_KEYS = (
    "format",
    "created",
    "status",
    "seed",
    "devices",
    "tolerance",
    "runs",
    "env_diff",
    "hyper_diff",
    "summary",
    "artifacts",
    "files",
)


@dataclass
class PairDoc:
    """``pair.json``: what ran, where, how it ended, and the judgement (format :data:`PAIR_FORMAT`).

    The one owner of the document: :meth:`write` alone writes it and :meth:`read` alone reads
    it; everything else gets a ``PairDoc``. Reading is defensive: a field of the wrong type
    reads as missing, unknown fields are kept in ``more``.
    """

    created: str | None = None
    status: str | None = None
    """finished / failed / interrupted"""
    seed: int | None = None
    devices: tuple[str, str] | None = None
    tolerance: float | None = None
    runs: dict[str, RunDoc] = field(default_factory=dict)
    env_diff: dict[str, Any] = field(default_factory=dict)
    hyper_diff: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    """``Summary.to_dict()`` of the judgement."""
    artifacts: dict[str, Any] | None = None
    files: dict[str, str] = field(default_factory=dict)
    """What the pair directory holds: a, b, aligned, a_stderr, b_stderr, emb_a, emb_b. Read back,
    only plain names count (a path such as ``../x`` or ``/etc/passwd`` reads as missing)."""
    more: dict[str, Any] = field(default_factory=dict)
    """Further fields (label, commands, threads, compared_from ...), kept as written."""

    def run(self, side: str) -> RunDoc:
        """The entry of ``side`` (an empty one when pair.json has none)."""
        return self.runs.get(side) or RunDoc()

    def file(self, key: str) -> str:
        """The file name of ``key`` (``a``, ``b``, ``aligned`` ...), default ``{key}.jsonl``."""
        return self.files.get(key) or f"{key}.jsonl"

    def to_json(self) -> dict[str, Any]:
        """The JSON object written as pair.json, ``format`` first."""
        out: dict[str, Any] = {
            "format": PAIR_FORMAT,
            "created": self.created,
            "status": self.status,
            "seed": self.seed,
            "devices": list(self.devices) if self.devices else None,
            "tolerance": self.tolerance,
        }
        out.update(self.more)
        out["runs"] = {side: run.to_json() for side, run in self.runs.items()}
        out["env_diff"] = self.env_diff
        out["hyper_diff"] = self.hyper_diff
        out["summary"] = self.summary
        if self.artifacts is not None:
            out["artifacts"] = self.artifacts
        out["files"] = self.files
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PairDoc:
        """A document from parsed JSON (any ``format`` is taken as this one)."""
        runs = _dict(raw.get("runs")) or {}
        files = _dict(raw.get("files")) or {}
        return cls(
            created=_str(raw.get("created")),
            status=_str(raw.get("status")),
            seed=_int(raw.get("seed")),
            devices=_devices(raw),
            tolerance=_float(raw.get("tolerance")),
            runs={side: RunDoc.from_json(runs[side]) for side in SIDES if side in runs},
            env_diff=_dict(raw.get("env_diff")) or {},
            hyper_diff=_dict(raw.get("hyper_diff")) or {},
            summary=_dict(raw.get("summary")) or {},
            artifacts=_dict(raw.get("artifacts")),
            files={str(k): v for k, v in files.items() if _plain_name(v)},
            more={k: v for k, v in raw.items() if k not in _DOC_KEYS},
        )

    @classmethod
    def read(cls, path: Path) -> PairDoc:
        """pair.json of a pair directory (or the file itself); StoreError when unusable."""
        return cls.from_json(read_pair(path))

    def write(self, pair_dir: Path) -> Path:
        """Write ``pair_dir/pair.json`` atomically; returns its path (StoreError on failure)."""
        target = Path(pair_dir) / PAIR_JSON
        write_json_atomic(target, self.to_json())
        return target


def pair_files(pair_dir: Path) -> dict[str, str]:
    """The ``files`` of pair.json: the logs, the aligned record, and what else the pair holds."""
    files = {side: f"{side}.jsonl" for side in SIDES}
    files["aligned"] = ALIGNED_JSONL
    for side in SIDES:
        for key, name in ((f"{side}_stderr", f"{side}.stderr"), (f"emb_{side}", f"emb-{side}.npy")):
            if (pair_dir / name).exists():
                files[key] = name
    return files


@dataclass
class SavedLogs:
    """Two logs on disk, with what pair.json says of them when they come from a pair."""

    a: Path
    b: Path
    doc: PairDoc = field(default_factory=PairDoc)
    pair_dir: Path | None = None
    reading: Reading = field(default_factory=Reading)
    """How the logs are read (`--pattern`, `--map`); a saved pair's own from pair.json."""

    def stderr(self, side: str) -> Path | None:
        """The stderr file saved next to a pair's log, if any."""
        if self.pair_dir is None:
            return None
        try:
            return pair_file(
                self.pair_dir, self.doc.files.get(f"{side}_stderr") or f"{side}.stderr"
            )
        except StoreError:
            return None


class _AlignedSpool:
    """Aligned rows, each serialised once, kept in an anonymous temp file rather than in memory."""

    SPILL_AT = 256

    def __init__(self) -> None:
        self._fh: IO[bytes] | None = None
        self._pending: list[bytes] = []
        self.error: str | None = None
        """Why a row could not be kept (the first such reason); the save then fails with it."""

    def add(self, row: Mapping[str, Any]) -> None:
        try:
            line = orjson.dumps(row, option=_DUMP_OPTS | orjson.OPT_APPEND_NEWLINE)
        except orjson.JSONEncodeError as exc:  # never raise into the run's reading loop
            step = row.get("step")
            self.error = self.error or f"step {step}: a value cannot be encoded: {_reason(exc)}"
            return
        self._pending.append(line)
        if len(self._pending) >= self.SPILL_AT:
            self._spill()

    def _spill(self) -> None:
        if self._fh is None:
            self._fh = tempfile.TemporaryFile(prefix="tuimon-aligned-")  # noqa: SIM115
        self._fh.write(b"".join(self._pending))
        self._pending = []

    def chunks(self) -> Iterator[bytes]:
        """Every row added, in order, as written (may be read again, e.g. after a failed save)."""
        if self._fh is not None:
            self._fh.seek(0)
            while chunk := self._fh.read(1 << 20):
                yield chunk
            self._fh.seek(0, os.SEEK_END)
        yield from self._pending

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self._pending = []


class PairWriter:
    """Writes one pair directory: raw logs as lines arrive, aligned log + pair.json at the end.

    Raw-file write errors (e.g. a full disk) never raise: the first one is kept in ``error``,
    what was written stays, and writing to that file stops. Safe to call from several threads.
    """

    path: Path
    error: str | None
    created: str
    """ISO time (UTC) the pair directory was made; ``finish`` uses it when meta has none."""

    def __init__(self, path: Path, created: str) -> None:
        """Wrap an existing, empty pair directory; use :meth:`create` to make one."""
        self.path = Path(path)
        self.created = created
        self.error = None
        self._lock = threading.Lock()
        self._files: dict[str, IO[bytes]] = {}
        self._stopped: set[str] = set()
        self._closed = False
        self._finished = False
        self._spool = _AlignedSpool()
        self._lock_fd: int | None = None
        self.save_error: str | None = None
        """Why :meth:`finish` failed (None until it fails): the pair is then not saved."""

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        seed: int | None,
        devices: tuple[str, str],
        label: str | None = None,
    ) -> PairWriter:
        """Make a new, uniquely named pair directory in ``root`` and open its raw logs.

        Name: ``{YYYYmmdd-HHMMSS}_s{seed}_{devA}-{devB}_{4 hex}[_{label}]`` (local time). The
        directory is made with an exclusive ``os.mkdir`` and retried with new hex on collision.
        """
        root = Path(root)
        now = _now()
        seed_part = "x" if seed is None else str(int(seed))
        dev_a, dev_b = (_sanitise_device(d) for d in devices)
        suffix = _sanitise_label(label) if label is not None else ""
        stem = f"{now:%Y%m%d-%H%M%S}_s{seed_part}_{dev_a}-{dev_b}"
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store {root}: {_reason(exc)}") from exc
        for _ in range(_MKDIR_TRIES):
            name = f"{stem}_{_random_hex()}" + (f"_{suffix}" if suffix else "")
            path = root / name
            try:
                os.mkdir(path)
            except FileExistsError:
                continue
            except OSError as exc:
                raise StoreError(
                    f"cannot create a pair directory in {root}: {_reason(exc)}"
                ) from exc
            break
        else:
            raise StoreError(f"cannot create a unique pair directory in {root}")
        created = now.astimezone(timezone.utc).isoformat(timespec="seconds")
        writer = cls(path, created)
        try:
            writer._lock_fd = _take_lock(path)  # RUNNING for the browser until saved or dead
            for side in SIDES:  # open both now: the directory is a pair from its first moment
                writer._open(f"{side}.jsonl")
        except OSError as exc:
            writer.close()
            raise StoreError(f"cannot write in {path}: {_reason(exc)}") from exc
        return writer

    @property
    def name(self) -> str:
        """The pair directory's name."""
        return self.path.name

    @property
    def finished(self) -> bool:
        """True once :meth:`finish` has succeeded."""
        return self._finished

    def __enter__(self) -> PairWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self, filename: str) -> IO[bytes]:
        fh = self._files.get(filename)
        if fh is None:
            fh = open(self.path / filename, "ab")  # noqa: SIM115 - kept open for the writer's life
            self._files[filename] = fh
        return fh

    def _append(self, filename: str, data: bytes) -> None:
        with self._lock:
            if self._closed or filename in self._stopped or not data:
                return
            try:
                fh = self._open(filename)
                fh.write(data)
                fh.flush()
            except OSError as exc:
                self._stop(filename, exc)

    def _stop(self, filename: str, exc: OSError) -> None:
        """Record a write error and stop writing ``filename`` (its bytes so far stay)."""
        self._stopped.add(filename)
        if self.error is None:
            self.error = f"cannot write {self.path / filename}: {_reason(exc)}"
        fh = self._files.pop(filename, None)
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()

    @staticmethod
    def _check_side(side: str) -> None:
        if side not in SIDES:
            raise ValueError(f"side must be 'a' or 'b', not {side!r}")

    def raw(self, side: str, lines: list[bytes]) -> None:
        """Append raw stdout lines of ``side`` to ``{side}.jsonl`` and flush.

        Each line keeps its bytes; a missing trailing newline is added. A no-op once closed.
        """
        self._check_side(side)
        if not lines:
            return
        data = b"".join(line if line.endswith(b"\n") else bytes(line) + b"\n" for line in lines)
        self._append(f"{side}.jsonl", data)

    def raw_bytes(self, side: str, data: bytes) -> None:
        """Append bytes of ``side``'s stdout as a pipe reader read them (thread-safe), flush."""
        self._check_side(side)
        self._append(f"{side}.jsonl", bytes(data))

    def stderr(self, side: str, data: bytes) -> None:
        """Append raw stderr bytes of ``side`` to ``{side}.stderr`` and flush."""
        self._check_side(side)
        self._append(f"{side}.stderr", bytes(data))

    def aligned(self, row: Mapping[str, Any]) -> None:
        """Keep one aligned row (serialised once, now) for ``aligned.jsonl`` at :meth:`finish`."""
        self._spool.add(row)

    def finish(
        self,
        doc: PairDoc | Mapping[str, Any],
        aligned: Iterable[Mapping[str, Any]] | None = None,
    ) -> Path:
        """Write ``aligned.jsonl`` then ``pair.json`` atomically, close the raw logs.

        The aligned rows are ``aligned`` when given, else those kept by :meth:`aligned`.
        ``created`` is filled in when the document lacks it, and ``files`` lists what the pair
        directory holds. Returns the ``pair.json`` path. On failure (a full disk, a value that
        cannot be encoded) raises StoreError (one line, also kept in ``save_error``), leaves the
        raw logs as they are (still open) and no partial ``aligned.jsonl``/``pair.json`` behind.
        """
        try:
            return self._finish(doc, aligned)
        except StoreError as exc:
            self.save_error = str(exc)
            raise

    def _finish(
        self,
        doc: PairDoc | Mapping[str, Any],
        aligned: Iterable[Mapping[str, Any]] | None,
    ) -> Path:
        if self._finished:
            raise StoreError(f"pair {self.path} is already finished")
        pair = doc if isinstance(doc, PairDoc) else PairDoc.from_json(doc)
        pair = replace(pair, created=pair.created or self.created, files=pair_files(self.path))
        target = self.path / PAIR_JSON
        data = _encode_json(target, pair.to_json())  # before anything is written
        if aligned is None and self._spool.error:
            raise StoreError(f"cannot write {self.path / ALIGNED_JSONL}: {self._spool.error}")
        with self._lock:
            for fh in list(self._files.values()):  # best effort: the raw lines are flushed already
                with contextlib.suppress(OSError):
                    os.fsync(fh.fileno())

        def lines() -> Iterator[bytes]:
            for record in aligned or ():
                yield orjson.dumps(record, option=_DUMP_OPTS | orjson.OPT_APPEND_NEWLINE)

        rows = lines() if aligned is not None else self._spool.chunks()
        _write_atomic(self.path / ALIGNED_JSONL, rows)
        try:
            _write_atomic(target, (data,))
        except StoreError:
            with contextlib.suppress(OSError):  # both or neither: no aligned.jsonl alone
                os.unlink(self.path / ALIGNED_JSONL)
            raise
        self._finished = True
        self.close()
        return target

    def close(self) -> None:
        """Close the raw logs without finishing (idempotent); later writes are dropped."""
        with self._lock:
            self._closed = True
            self._spool.close()
            _release_lock(self.path, self._lock_fd)
            self._lock_fd = None
            files, self._files = self._files, {}
            for filename, fh in files.items():
                try:
                    fh.close()
                except OSError as exc:
                    if self.error is None:
                        self.error = f"cannot write {self.path / filename}: {_reason(exc)}"


@dataclass(frozen=True)
class PairInfo:
    """One row of the store index, read from ``pair.json`` only (never from the logs)."""

    path: Path
    name: str
    created: str | None
    seed: int | None
    devices: tuple[str, str] | None
    status: str | None
    verdict: str | None
    steps: int | None
    first_divergent_step: int | None
    max_divergence: float | None
    damaged: str | None
    sweep: str | None = None
    """The sweep the pair belongs to (`tuimon sweep`), if any."""
    running: bool = False
    """Its monitor is alive and still writing it (it holds the pair's lock)."""


def _load(pair_json: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Read ``pair.json``: (document, None), or (dict-or-None, short reason it is damaged)."""
    try:
        os.lstat(pair_json)
    except FileNotFoundError:
        return None, NO_PAIR_JSON
    except OSError as exc:
        return None, f"cannot read pair.json: {_reason(exc)}"
    try:
        data = _read_regular(pair_json)  # a FIFO or a link outside is refused, never opened
    except StoreError as exc:
        return None, str(exc).removeprefix(f"{pair_json.parent}: ")
    if not data.strip():
        return None, "pair.json is empty"
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None, "pair.json is not valid JSON"
    if not isinstance(doc, dict):
        return None, _NOT_A_PAIR
    fmt = doc.get("format")
    if fmt == PAIR_FORMAT:
        return doc, None
    if isinstance(fmt, str) and fmt.startswith(_FORMAT_FAMILY):
        return doc, f"pair.json has unsupported format {fmt}"
    return doc, _NOT_A_PAIR


def _devices(doc: Mapping[str, Any]) -> tuple[str, str] | None:
    devices = doc.get("devices")
    if isinstance(devices, (list, tuple)) and len(devices) == 2:
        a, b = devices
        if isinstance(a, str) and isinstance(b, str):
            return (a, b)
    runs = doc.get("runs")
    if isinstance(runs, dict):
        run_a, run_b = runs.get("a"), runs.get("b")
        if isinstance(run_a, dict) and isinstance(run_b, dict):
            a, b = run_a.get("device"), run_b.get("device")
            if isinstance(a, str) and isinstance(b, str):
                return (a, b)
    return None


def _info(path: Path, mtime: float) -> PairInfo:
    """Build a PairInfo for a pair directory (read as a `PairDoc`); never raises on a damaged
    pair.json."""
    raw, damaged = _load(path / PAIR_JSON)
    doc = PairDoc.from_json(raw or {})
    summary = doc.summary
    created = doc.created
    if created is None:
        created = datetime.fromtimestamp(mtime, tz=timezone.utc).isoformat(timespec="seconds")
    return PairInfo(
        path=path,
        name=path.name,
        created=created,
        seed=doc.seed,
        devices=doc.devices,
        status=doc.status,
        verdict=_str(summary.get("verdict")),
        steps=_int(summary.get("steps_compared")),
        first_divergent_step=_int(summary.get("first_divergent_step")),
        max_divergence=_float(summary.get("max_divergence")),
        damaged=damaged,
        sweep=_str(doc.more.get("sweep")),
        running=is_running(path),
    )


def _timestamp(created: str | None, fallback: float) -> float:
    """Seconds since the epoch for an ISO time (naive means local); ``fallback`` if unparseable."""
    if not created:
        return fallback
    text = created.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        return datetime.fromisoformat(text).timestamp()
    except (ValueError, OverflowError, OSError):
        return fallback


def list_pairs(root: Path) -> list[PairInfo]:
    """Every pair directory in ``root`` (has pair.json, a.jsonl or b.jsonl), newest first.

    Sorted by creation time, then name. Reads only each ``pair.json``. A missing root gives
    ``[]``; a damaged pair is listed with ``damaged`` set. A root that exists but cannot be
    listed (not a directory, no permission) raises StoreError.
    """
    root = Path(root)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(f"cannot list store {root}: {_reason(exc)}") from exc
    rows: list[tuple[float, str, PairInfo]] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if not entry.is_dir():
                continue
            path = Path(entry.path)
            if not any((path / f).exists() for f in (PAIR_JSON, "a.jsonl", "b.jsonl")):
                continue
            mtime = entry.stat().st_mtime
        except OSError:  # vanished or unreadable while listing
            continue
        info = _info(path, mtime)
        rows.append((_timestamp(info.created, mtime), info.name, info))
    rows.sort(key=lambda row: (row[0], row[1]), reverse=True)
    return [info for _, _, info in rows]


def read_pair(path: Path) -> dict[str, Any]:
    """``pair.json`` of a pair directory (or the pair.json file itself) as a dict.

    Raises StoreError with one clear line when it is missing, unreadable or not a tuimon pair.
    """
    path = Path(path)
    pair_json = path / PAIR_JSON if path.name != PAIR_JSON or path.is_dir() else path
    if not pair_json.parent.is_dir():
        raise StoreError(f"no pair directory at {pair_json.parent}")
    doc, damaged = _load(pair_json)
    if damaged is not None or doc is None:
        raise StoreError(f"{pair_json.parent}: {damaged}")
    return doc


def is_pair_dir(path: Path) -> bool:
    """True for a directory holding ``pair.json``, or both ``a.jsonl`` and ``b.jsonl``."""
    path = Path(path)
    try:
        if not path.is_dir():
            return False
        if (path / PAIR_JSON).is_file():
            return True
        # lexists: a FIFO or a dangling link still makes a pair, refused later with its reason
        return all(os.path.lexists(path / f"{side}.jsonl") for side in SIDES)
    except OSError:
        return False


def delete_pair(path: Path) -> None:
    """Remove a pair directory and everything in it.

    Refuses (StoreError) a symlink, anything that :func:`is_pair_dir` rejects, a directory
    whose ``pair.json`` is valid JSON from some other tool, and a pair still being written.
    """
    path = Path(path)
    if path.is_symlink():
        raise StoreError(f"{path} is a symlink, not a tuimon pair directory; not deleting")
    if not is_pair_dir(path):
        raise StoreError(f"{path} is not a tuimon pair directory; not deleting")
    _, damaged = _load(path / PAIR_JSON)
    if damaged == _NOT_A_PAIR:
        raise StoreError(f"{path} has a pair.json not written by tuimon; not deleting")
    if is_running(path):
        raise StoreError(f"{path} is still being written by a running tuimon; not deleting")
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise StoreError(f"cannot delete {path}: {_reason(exc)}") from exc

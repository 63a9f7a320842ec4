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
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = [
    "DEFAULT_STORE",
    "PAIR_FORMAT",
    "PairInfo",
    "PairWriter",
    "StoreError",
    "check_writable",
    "delete_pair",
    "is_pair_dir",
    "list_pairs",
    "read_pair",
    "resolve_store",
    "write_json_atomic",
]

DEFAULT_STORE = "tuimon_pairs"
PAIR_FORMAT = "tuimon.pair/1"
STORE_ENV = "TUIMON_STORE"
SIDES = ("a", "b")
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
_NOT_A_PAIR = "pair.json is not a tuimon pair"


class StoreError(Exception):
    """One-line, user-facing message."""


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


def write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    """Write ``obj`` as indented JSON: temp file in the same dir + fsync + ``os.replace``.

    Raises StoreError (one line) when the file cannot be written or ``obj`` is not JSON-able.
    """
    path = Path(path)
    try:
        data = orjson.dumps(
            obj, option=_DUMP_OPTS | orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
        )
    except orjson.JSONEncodeError as exc:
        raise StoreError(f"cannot write {path}: {_reason(exc)}") from exc
    _write_atomic(path, (data,))


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

    def stderr(self, side: str, data: bytes) -> None:
        """Append raw stderr bytes of ``side`` to ``{side}.stderr`` and flush."""
        self._check_side(side)
        self._append(f"{side}.stderr", bytes(data))

    def _files_meta(self) -> dict[str, str]:
        files = {side: f"{side}.jsonl" for side in SIDES}
        files["aligned"] = ALIGNED_JSONL
        for side in SIDES:
            if (self.path / f"{side}.stderr").exists():
                files[f"{side}_stderr"] = f"{side}.stderr"
        return files

    def finish(self, meta: dict[str, Any], aligned: Iterable[dict[str, Any]]) -> Path:
        """Write ``aligned.jsonl`` then ``pair.json`` atomically, close the raw logs.

        ``pair.json`` is ``meta`` with ``"format"`` set to :data:`PAIR_FORMAT` (and ``created``
        and ``files`` filled in when meta lacks them). Returns the ``pair.json`` path. On failure
        raises StoreError (one line), leaves the raw logs as they are (still open) and no
        partial ``aligned.jsonl``/``pair.json`` behind.
        """
        if self._finished:
            raise StoreError(f"pair {self.path} is already finished")
        doc: dict[str, Any] = {"format": PAIR_FORMAT}
        doc.update((k, v) for k, v in meta.items() if k != "format")
        doc.setdefault("created", self.created)
        doc.setdefault("files", self._files_meta())
        with self._lock:
            for fh in list(self._files.values()):  # best effort: the raw lines are flushed already
                with contextlib.suppress(OSError):
                    os.fsync(fh.fileno())

        def lines() -> Iterator[bytes]:
            for record in aligned:
                yield orjson.dumps(record, option=_DUMP_OPTS | orjson.OPT_APPEND_NEWLINE)

        _write_atomic(self.path / ALIGNED_JSONL, lines())
        target = self.path / PAIR_JSON
        write_json_atomic(target, doc)
        self._finished = True
        self.close()
        return target

    def close(self) -> None:
        """Close the raw logs without finishing (idempotent); later writes are dropped."""
        with self._lock:
            self._closed = True
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


def _load(pair_json: Path) -> tuple[dict[str, Any] | None, str | None]:
    """Read ``pair.json``: (document, None), or (dict-or-None, short reason it is damaged)."""
    try:
        data = pair_json.read_bytes()
    except FileNotFoundError:
        return None, NO_PAIR_JSON
    except OSError as exc:
        return None, f"cannot read pair.json: {_reason(exc)}"
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


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _devices(doc: dict[str, Any]) -> tuple[str, str] | None:
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
    """Build a PairInfo for a pair directory; never raises on a damaged pair.json."""
    doc, damaged = _load(path / PAIR_JSON)
    doc = doc or {}
    summary = doc.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    created = _str(doc.get("created"))
    if created is None:
        created = datetime.fromtimestamp(mtime, tz=timezone.utc).isoformat(timespec="seconds")
    return PairInfo(
        path=path,
        name=path.name,
        created=created,
        seed=_int(doc.get("seed")),
        devices=_devices(doc),
        status=_str(doc.get("status")),
        verdict=_str(summary.get("verdict")),
        steps=_int(summary.get("steps_compared")),
        first_divergent_step=_int(summary.get("first_divergent_step")),
        max_divergence=_float(summary.get("max_divergence")),
        damaged=damaged,
        sweep=_str(doc.get("sweep")),
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
        return all((path / f"{side}.jsonl").is_file() for side in SIDES)
    except OSError:
        return False


def delete_pair(path: Path) -> None:
    """Remove a pair directory and everything in it.

    Refuses (StoreError) a symlink, anything that :func:`is_pair_dir` rejects, and a directory
    whose ``pair.json`` is valid JSON from some other tool.
    """
    path = Path(path)
    if path.is_symlink():
        raise StoreError(f"{path} is a symlink, not a tuimon pair directory; not deleting")
    if not is_pair_dir(path):
        raise StoreError(f"{path} is not a tuimon pair directory; not deleting")
    _, damaged = _load(path / PAIR_JSON)
    if damaged == _NOT_A_PAIR:
        raise StoreError(f"{path} has a pair.json not written by tuimon; not deleting")
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise StoreError(f"cannot delete {path}: {_reason(exc)}") from exc

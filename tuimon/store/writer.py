"""Writing a pair: raw logs streamed as they arrive, the aligned spool, pair.json last."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import orjson

from tuimon.errors import StoreError
from tuimon.store.doc import PairDoc, pair_files
from tuimon.store.files import (
    _DUMP_OPTS,
    ALIGNED_JSONL,
    PAIR_JSON,
    SIDES,
    _encode_json,
    _reason,
    _release_lock,
    _take_lock,
    _write_atomic,
)

_DEVICE_BAD = re.compile(r"[^A-Za-z0-9.-]+")
_LABEL_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_DEVICE = 32
_MAX_LABEL = 64
_MKDIR_TRIES = 1000


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
        if fh is None:  # unbuffered: a write is on its way to disk when it returns
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
            fd = os.open(self.path / filename, flags, 0o644)  # never through a planted link
            fh = os.fdopen(fd, "ab", buffering=0)
            self._files[filename] = fh
        return fh

    def _append(self, filename: str, data: bytes) -> None:
        with self._lock:
            if self._closed or filename in self._stopped or not data:
                return
            try:
                fh = self._open(filename)
                view = memoryview(data)
                while view:  # a short write (a disk filling up): the rest, or its error
                    written = fh.write(view)
                    if not written:
                        raise OSError(errno.EIO, "nothing written")
                    view = view[written:]
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

        Each line keeps its bytes; a missing trailing newline is added (`raw_bytes` keeps a
        stream's cut last line as it came). A no-op once closed.
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

"""The store index: past pairs listed from their pair.json, loaded, deleted."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tuimon.errors import StoreError
from tuimon.store.doc import PairDoc, _float, _int, _load, _str
from tuimon.store.files import _NOT_A_PAIR, PAIR_JSON, SIDES, _reason, is_running

try:  # POSIX: a running pair holds an flock on its lock file (released when the monitor dies)
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, a pair never reads as running
    fcntl = None  # type: ignore[assignment]


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


def _info(path: Path, mtime: float) -> PairInfo:
    """Build a PairInfo for a pair directory (read as a `PairDoc`); never raises on a damaged
    pair.json."""
    raw, damaged = _load(path / PAIR_JSON)
    doc = PairDoc.from_json(raw or {})
    summary = doc.summary
    created = doc.created
    if created is None:
        created = datetime.fromtimestamp(mtime, tz=timezone.utc).isoformat(timespec="seconds")
    seed, devices = doc.seed, doc.devices
    if raw is None:  # no pair.json yet (a pair still running): what its name says
        seed, devices = _from_name(path.name)
    return PairInfo(
        path=path,
        name=path.name,
        created=created,
        seed=seed,
        devices=devices,
        status=doc.status,
        verdict=_str(summary.get("verdict")),
        steps=_int(summary.get("steps_compared")),
        first_divergent_step=_int(summary.get("first_divergent_step")),
        max_divergence=_float(summary.get("max_divergence")),
        damaged=damaged,
        sweep=_str(doc.more.get("sweep")),
        running=is_running(path),
    )


_NAME = re.compile(r"^\d{8}-\d{6}_s(\d+|x)_([A-Za-z0-9.]+)-([A-Za-z0-9.]+)_[0-9a-f]{4}(?:_|$)")


def _from_name(name: str) -> tuple[int | None, tuple[str, str] | None]:
    """Seed and devices from a pair directory's name (`20261130-101502_s0_cpu-cpu_3f9a`), where
    the name says them unambiguously; (None, None) otherwise."""
    match = _NAME.match(name)
    if match is None:
        return None, None
    seed = int(match[1]) if match[1] != "x" else None
    return seed, (match[2], match[3])


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

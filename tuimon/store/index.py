"""The store index: past pairs listed from their pair.json, loaded, deleted.

Listing a large store reads every pair.json; what each gave is kept in the store's hidden
`.tuimon-index` file, keyed by its pair.json's (mtime_ns, size, inode), so a later listing
reads only the pair.json files that changed. The index is a cache: unreadable or damaged, it is
ignored and written again; a pair.json that is a link or not a regular file is never cached."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from tuimon.errors import StoreError
from tuimon.store.doc import PairDoc, _float, _int, _load, _str
from tuimon.store.files import (
    _NOT_A_PAIR,
    PAIR_JSON,
    SIDES,
    _read_regular,
    _reason,
    _write_atomic,
    is_running,
)


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


INDEX_FILE = ".tuimon-index"
_INDEX_FORMAT = "tuimon.index/1"
_CACHED = (
    "created", "seed", "devices", "status", "verdict", "steps", "first_divergent_step",
    "max_divergence", "damaged", "sweep",
)  # fmt: skip
Key = list[int]
"""A pair.json's (mtime_ns, size, inode): the index entry holds while these hold."""


def _key(pair_dir: str) -> Key | None:
    """The cache key of a pair directory's pair.json; None when it has none, or when it is a
    link or not a regular file (never cached: read every time, as the listing says)."""
    try:
        info = os.lstat(os.path.join(pair_dir, PAIR_JSON))
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return [info.st_mtime_ns, info.st_size, info.st_ino]


def _read_index(root: Path) -> dict[str, Any]:
    """The index's entries by pair name ({} when missing, unreadable or not ours)."""
    try:
        doc = orjson.loads(_read_regular(root / INDEX_FILE))
    except (StoreError, orjson.JSONDecodeError):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != _INDEX_FORMAT:
        return {}
    pairs = doc.get("pairs")
    return pairs if isinstance(pairs, dict) else {}


def _cached(path: Path, entry: Any, key: Key) -> tuple[float, PairInfo] | None:
    """(sort time, PairInfo) from an index entry that still holds for `key`, else None."""
    if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == key):
        return None
    when, fields = entry[1], entry[2]
    if not isinstance(when, (int, float)) or not isinstance(fields, dict):
        return None
    devices = fields.get("devices")
    pair = (
        (devices[0], devices[1])
        if isinstance(devices, list)
        and len(devices) == 2
        and all(isinstance(d, str) for d in devices)
        else None
    )
    info = PairInfo(
        path=path, name=path.name, created=_str(fields.get("created")),
        seed=_int(fields.get("seed")), devices=pair, status=_str(fields.get("status")),
        verdict=_str(fields.get("verdict")), steps=_int(fields.get("steps")),
        first_divergent_step=_int(fields.get("first_divergent_step")),
        max_divergence=_float(fields.get("max_divergence")), damaged=_str(fields.get("damaged")),
        sweep=_str(fields.get("sweep")), running=is_running(path),
    )  # fmt: skip
    return float(when), info


def _entry(key: Key, when: float, info: PairInfo) -> list[Any]:
    """The index entry of a pair read from its pair.json."""
    fields = {name: getattr(info, name) for name in _CACHED}
    if info.devices is not None:
        fields["devices"] = list(info.devices)  # as JSON gives it back
    return [key, when, fields]


def _write_index(root: Path, pairs: dict[str, Any], entries: list[os.DirEntry[str]]) -> None:
    """Write the index (best effort: a read-only store is listed all the same), only in a
    store of tuimon's own (`indexed`): `browse --store sample_logs` writes nothing into a
    checkout."""
    if not indexed(root, entries):
        return
    doc = {"format": _INDEX_FORMAT, "pairs": pairs}
    with contextlib.suppress(StoreError):
        _write_atomic(root / INDEX_FILE, (orjson.dumps(doc),))


def indexed(root: Path, entries: list[os.DirEntry[str]]) -> bool:
    """Whether listing `root` may write its index there: one is there already, or the folder
    holds pairs and tuimon's own files only (no file of someone else's: sample_logs/ has its
    README), or it lies in no git checkout (a folder of pairs someone keeps)."""
    if os.path.lexists(root / INDEX_FILE):
        return True
    if not any(e.name[:1] != "." and not e.is_dir(follow_symlinks=False) for e in entries):
        return True
    here = root.resolve()
    return not any(os.path.lexists(d / ".git") for d in (here, *here.parents))


_LOGS = tuple(f"{side}.jsonl" for side in SIDES)


def _listed(entry: os.DirEntry[str]) -> tuple[bool, Key | None]:
    """Whether a listed entry is a pair directory (pair.json, a.jsonl or b.jsonl inside), and
    its pair.json's cache key."""
    if entry.name.startswith(".") or not entry.is_dir():
        return False, None
    key = _key(entry.path)
    if key is not None:
        return True, key
    found = any(os.path.exists(os.path.join(entry.path, f)) for f in (PAIR_JSON, *_LOGS))
    return found, None


Row = tuple[float, str, PairInfo]
"""A listed pair: its sort time, its directory's name, what its pair.json gave."""


def _scan(root: Path) -> list[os.DirEntry[str]]:
    """The store's entries ([] when it does not exist); StoreError when it cannot be listed."""
    try:
        return list(os.scandir(root))
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StoreError(f"cannot list store {root}: {_reason(exc)}") from exc


def _row(entry: os.DirEntry[str], old: dict[str, Any]) -> tuple[Key | None, Row] | None:
    """A listed entry's cache key and row (from the index while its key holds), or None when
    it is no pair directory (or vanished or became unreadable while listed)."""
    try:
        listed, key = _listed(entry)
        if not listed:
            return None
        path = Path(entry.path)
        hit = None if key is None else _cached(path, old.get(entry.name), key)
        if hit is None:
            mtime = entry.stat().st_mtime
    except OSError:
        return None
    if hit is None:
        info = _info(path, mtime)
        hit = (_timestamp(info.created, mtime), info)
    return key, (hit[0], entry.name, hit[1])


def _newest_first(rows: list[Row]) -> list[PairInfo]:
    """The pairs by creation time, then name, newest first."""
    rows.sort(key=lambda row: (row[0], row[1]), reverse=True)
    return [info for _, _, info in rows]


def list_pairs(root: Path) -> list[PairInfo]:
    """Every pair directory in ``root`` (has pair.json, a.jsonl or b.jsonl), newest first.

    Sorted by creation time, then name. Reads only each ``pair.json`` (those unchanged since
    the last listing: from the store's index). A missing root gives ``[]``; a damaged pair is
    listed with ``damaged`` set. A root that exists but cannot be listed (not a directory, no
    permission) raises StoreError.
    """
    root = Path(root)
    entries = _scan(root)
    old = _read_index(root)
    new: dict[str, Any] = {}
    rows: list[Row] = []
    for entry in entries:
        found = _row(entry, old)
        if found is None:
            continue
        key, row = found
        if key is not None:
            new[entry.name] = _entry(key, row[0], row[2])
        rows.append(row)
    if new != old:
        _write_index(root, new, entries)
    return _newest_first(rows)


def _indexed_time(entry: Any) -> float | None:
    """The sort time an index entry holds (None when it holds none)."""
    if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], (int, float)):
        return float(entry[1])
    return None


def list_newest(root: Path, count: int) -> list[PairInfo] | None:
    """About the newest `count` pairs of a large store, fast: a first screenful to show while
    :func:`list_pairs` reads the rest (it is exact; this is a preview).

    Candidates: the `count` newest by the times in the store's index (which a pair's rewrite
    does not change), and of the directories the index lacks, the `count` last by name (a
    pair's name starts with its time). Each candidate is listed as `list_pairs` lists it
    (checked against its pair.json's key); the index is not written. None when the store
    holds no more than `count` entries (`list_pairs` reads it as fast). Raises as `list_pairs`.
    """
    root = Path(root)
    old = _read_index(root)
    known: list[tuple[float, str, os.DirEntry[str]]] = []
    unknown: list[os.DirEntry[str]] = []
    for entry in _scan(root):
        if entry.name.startswith("."):
            continue
        when = _indexed_time(old.get(entry.name))
        if when is None:
            unknown.append(entry)
        else:
            known.append((when, entry.name, entry))
    if len(known) + len(unknown) <= count:
        return None
    known.sort(key=lambda item: (item[0], item[1]), reverse=True)
    unknown.sort(key=lambda entry: entry.name, reverse=True)
    candidates = [entry for _, _, entry in known[:count]] + unknown[:count]
    rows = [found[1] for entry in candidates if (found := _row(entry, old)) is not None]
    return _newest_first(rows)[:count]


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

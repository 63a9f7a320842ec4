"""pair.json as one typed document (PairDoc, RunDoc): built, written and read here alone."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tuimon.errors import StoreError
from tuimon.readers import Reading
from tuimon.store.files import (
    _FORMAT_FAMILY,
    _NOT_A_PAIR,
    ALIGNED_JSONL,
    NO_PAIR_JSON,
    PAIR_FORMAT,
    PAIR_JSON,
    SIDES,
    _plain_name,
    _read_regular,
    _reason,
    pair_file,
    write_json_atomic,
)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _tolerance(value: object) -> float | None:
    """A tolerance as written: a finite number >= 0 (anything else reads as missing)."""
    found = _float(value)
    return found if found is not None and 0 <= found < float("inf") else None


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
            tolerance=_tolerance(raw.get("tolerance")),
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
        target = self.where(pair_dir)
        write_json_atomic(target, self.to_json())
        return target

    @staticmethod
    def where(pair_dir: Path) -> Path:
        """The path of a pair directory's pair.json (for a message that names it)."""
        return Path(pair_dir) / PAIR_JSON

    @staticmethod
    def written(pair_dir: Path) -> bool:
        """Whether a pair directory has its pair.json: its monitor finished (else killed, or
        still running)."""
        return PairDoc.where(pair_dir).is_file()


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
    damaged: str | None = None
    """Why the pair's pair.json is there but unusable (cut, not JSON ...): it did not finish."""

    @classmethod
    def open(cls, pair_dir: Path, reading: Reading | None = None) -> SavedLogs:
        """A pair directory's two logs and its pair.json; one cut or damaged (its monitor
        killed while writing it) reads as an interrupted pair, `damaged` saying why.
        StoreError when a log is not a regular file inside the pair (never opened)."""
        damaged = None
        try:
            doc = PairDoc.read(pair_dir)
        except StoreError as exc:
            doc = PairDoc()  # judged as a pair without pair.json, which did not finish
            if PairDoc.where(pair_dir).exists():
                damaged = str(exc).removeprefix(f"{pair_dir}: ")
                doc.status = "interrupted"
        a, b = (pair_file(pair_dir, doc.file(side)) for side in SIDES)
        return cls(a, b, doc, pair_dir, reading or Reading(), damaged)

    @property
    def no_doc(self) -> bool:
        """A pair directory without pair.json: its monitor did not finish (killed?)."""
        return self.pair_dir is not None and not PairDoc.written(self.pair_dir)

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

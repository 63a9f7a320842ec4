"""What `tuimon read` shows: how one log is read, from the same readers every command uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuimon.readers import load, open_log, to_line
from tuimon.readers.account import NOTE, Account
from tuimon.readers.formats import BY_NAME
from tuimon.readers.reading import Reading
from tuimon.readers.rows_to_steps import STEP_KEYS, step_key
from tuimon.readers.text import _RANK, _STEP, LEVELS_NOTE, _key
from tuimon.steplog import Header, Record, Step, Text


def _step_key(loaded_format: str, records: list[Record], path: Path, reading: Reading) -> str:
    """The step key as a person checks it: the field, column or printed word."""
    notes = [
        r.text[len(NOTE) :] for r in records if isinstance(r, Text) and r.text.startswith(NOTE)
    ]
    if any(LEVELS_NOTE in n for n in notes):
        return "two levels: epoch and iteration (step = epoch * 1e9 + iteration)"
    if reading.step_key:
        return f"{reading.step_key} (--step-key)"
    rows = next((n for n in notes if "the row number" in n and "JSON rows" in n), None)
    if rows is not None:
        return rows
    table = next((n for n in notes if "separated table" in n), None)
    if table is not None:
        return table.split("; ", 1)[1]
    if loaded_format == "tuimon step log":
        return "step"
    if loaded_format == "text":
        return _printed_key(path) or "a printed step"
    if loaded_format == "JSON files":
        return "each file's step key, else the number in its name"
    if loaded_format in ("tensorboard", "MLflow run", "sacred metrics.json"):
        return "each value's own step"
    if loaded_format == "CSV":
        with open(path, "rb") as fh:
            head = fh.readline(1 << 16).decode("utf-8", "replace").lower()
        return next((k for k in STEP_KEYS if k in [c.strip() for c in head.split(",")]), "step")
    return _json_key(path) or "step"


def _printed_key(path: Path) -> str | None:
    with open_log(path) as fh:
        for _, line in zip(range(2000), fh, strict=False):
            found = list(_STEP.finditer(line.decode("utf-8", "replace")))
            if found:
                m = min(found, key=lambda m: _RANK.get(_key(m), 9))
                return f"printed `{_key(m)} N`"
    return None


def _json_key(path: Path) -> str | None:
    import orjson

    with open_log(path) as fh:
        for _, line in zip(range(2000), fh, strict=False):
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if isinstance(obj, dict) and (key := step_key(obj)) is not None:
                return key
    return None


@dataclass
class Read:
    """A log as read without a record per step (`describe`'s `blocks`): its format, step key
    (None: as `_step_key` finds it), account, metric and clock names in the order first
    seen, and its first records as read."""

    format: str
    step_key: str | None
    account: Account
    metrics: list[str]
    clocks: list[str]
    records: list[Record]
    rules: dict[str, int] | None = None
    """For a log of lines: the lines each rule of its format's entry read (`Loaded.rules`)."""


def describe(
    path: str | Path,
    reading: Reading | None = None,
    blocks: Callable[[Path, Reading], Read | None] | None = None,
) -> dict[str, Any]:
    """How a log is read: format and why, the rules that read its lines (a log of lines),
    step key, metrics judged, clocks, text lines,
    skipped lines by reason, the first records (ReaderError when it cannot be read).
    `blocks`: the block readers `compare` reads a side with (`log_blocks.read_one`), for a log
    they read whole as rows; None from it, or without it, the log is loaded record by record."""
    path = Path(path)
    reading = reading or Reading()
    got = blocks(path, reading) if blocks is not None else None
    if got is None:
        got = _loaded(path, reading)
    account, records = got.account, got.records
    firsts = [r for r in records if isinstance(r, (Step, Header))][:5]
    data = account.to_dict()
    return {
        "path": str(path),
        "format": got.format,
        "why": BY_NAME[got.format].recognised if got.format in BY_NAME else "",
        "streams": BY_NAME[got.format].streams if got.format in BY_NAME else False,
        "step_key": got.step_key or _step_key(got.format, records, path, reading),
        "read_by": got.rules or {},
        "steps": account.steps,
        "metrics": got.metrics,
        "clocks": got.clocks,
        "text_lines": data["text"] + sum(data["skipped"].values()),
        "skipped": data["skipped"],
        "first_skipped": data["first_skipped"],
        "notes": data["notes"],
        "account": account.line(),
        "first": [to_line(r).decode("utf-8", "replace").rstrip("\n") for r in firsts],
    }


def _loaded(path: Path, reading: Reading) -> Read:
    """A log read whole by the readers' registry (`load`), record by record."""
    loaded = load(path, reading)
    account = Account()
    metrics: dict[str, None] = {}
    clocks: dict[str, None] = {}
    for record in loaded.records:
        account.add(record)
        if isinstance(record, Step):
            metrics.update(dict.fromkeys(record.metrics))
            clocks.update(dict.fromkeys(record.clocks))
    return Read(
        loaded.format,
        loaded.step_key,
        account,
        list(metrics),
        list(clocks),
        loaded.records,
        loaded.rules,
    )

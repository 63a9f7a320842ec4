"""Readers: a log file or a run's output stream -> the same records as `tuimon.steplog`.

One pluggable step, chosen by content (never by file name alone):

| format | how it is recognised |
| --- | --- |
| tuimon step log | a first line `{"type": "header", "format": "tuimon.steplog/1", ...}` |
| JSON Lines | objects with a step key (`step`, `_step`, `global_step`, `iter`, `epoch` ...) |
| JSON document | one object (or list): `trainer_state.json`, a metrics file with settings + steps |
| CSV | a header line with a step column (Lightning's `metrics.csv`) |
| TensorBoard | event files, or a run directory holding them (extra `tuimon[tensorboard]`) |
| text | printed lines: `step 100: loss 2.31`, `iter 100: loss 2.31, time 77ms`, `--pattern` |

The engine calls `log_lines` (a file as step-log lines) and `line_parser` (a live stream);
everything else here is for them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from tuimon.clocks import is_clock
from tuimon.readers.documents import read_document
from tuimon.readers.literal import literal_row
from tuimon.readers.rows import StreamMerger, as_number, merge, renamed, row_step, step_key
from tuimon.readers.tabular import csv_columns, read_csv
from tuimon.readers.tensorboard import MissingExtra, event_dirs, read_events
from tuimon.readers.account import Account
from tuimon.readers.text import (
    PatternError,
    compile_pattern,
    last_state,
    metric_like,
    parse_text,
)
from tuimon.steplog import (
    NO_STEP_KEY,
    UNMATCHED_TEXT,
    End,
    Header,
    Record,
    Step,
    Text,
    dumps,
    loads_checked,
    parse_line,
    parse_obj,
    suspect,
)

__all__ = [
    "FORMATS_TRIED",
    "Account",
    "Loaded",
    "PatternError",
    "ReaderError",
    "Reading",
    "line_parser",
    "load",
    "log_lines",
    "no_steps",
    "parse_map",
    "require_steps",
    "streamable",
    "to_line",
]

FORMATS_TRIED = (
    "tuimon step log, JSON Lines with a step key, JSON document (metrics file, "
    "trainer_state.json), CSV with a step column, TensorBoard events, printed text"
)
HELP = 'see README "Use with your script"; --pattern REGEX reads other printed lines'


class ReaderError(Exception):
    """A file no reader can read (one line for the user)."""


@dataclass(frozen=True)
class Reading:
    """How to read a pair's logs: the user's text patterns and the metric names of side b
    mapped onto side a's (`--map a_name=b_name`)."""

    patterns: tuple[str, ...] = ()
    rename: Mapping[str, str] = field(default_factory=dict)
    """b's name -> a's name."""

    @cached_property
    def compiled(self) -> tuple[Any, ...]:
        return tuple(compile_pattern(p) for p in self.patterns)

    def renames(self, side: str) -> Mapping[str, str]:
        """The renames that apply to one side's metrics."""
        return self.rename if side == "b" else {}

    def to_dict(self) -> dict[str, Any] | None:
        """For pair.json (None when nothing was asked)."""
        if not self.patterns and not self.rename:
            return None
        return {"patterns": list(self.patterns), "map": {a: b for b, a in self.rename.items()}}

    @classmethod
    def from_dict(cls, data: Any) -> Reading:
        """From pair.json's `reading` block (anything malformed reads as the default)."""
        if not isinstance(data, Mapping):
            return cls()
        patterns = data.get("patterns")
        mapping = data.get("map")
        pats = (
            tuple(p for p in patterns if isinstance(p, str)) if isinstance(patterns, list) else ()
        )
        try:
            for p in pats:
                compile_pattern(p)
        except PatternError:
            pats = ()
        pairs = mapping.items() if isinstance(mapping, Mapping) else ()
        return cls(pats, {str(b): str(a) for a, b in pairs})


def parse_map(items: Sequence[str] | None) -> dict[str, str]:
    """`--map a_name=b_name` arguments as {b_name: a_name}; ValueError with one line when bad."""
    out: dict[str, str] = {}
    for item in items or ():
        a, sep, b = item.partition("=")
        if not sep or not a.strip() or not b.strip():
            raise ValueError(f"--map takes A_NAME=B_NAME (got {item!r})")
        out[b.strip()] = a.strip()
    return out


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return loads_checked(data)  # NaN / Infinity tokens; 1e400 kept as unreadable text


def _load_document(data: bytes) -> Any:
    """A whole JSON document, as `_loads`; integers beyond 64 bits kept as unreadable text too
    (orjson reads them as floats without a word; a line is checked by `suspect` instead)."""
    return loads_checked(data) if _LONG_INTEGER.search(data) else _loads(data)


_LONG_INTEGER = re.compile(rb"(?<![\d.eE])\d{19,}(?![\d.eE])")
"""An integer of 19 digits or more: it may not fit an int64."""


class LineParser:
    """Lines of one stream (a run's stdout, a log) -> records, in order.

    JSON objects with a step key are steps; a tuimon log is read exactly as `parse_line` does;
    other lines go through the text patterns. Rows of one step on consecutive lines are merged
    (a step is shown when the next one starts, or at the end: call `close`).
    """

    def __init__(
        self, reading: Reading | None = None, side: str = "a", *, text: bool = True
    ) -> None:
        self.reading = reading or Reading()
        self.text = text
        """Read printed text by patterns (False: only JSON lines are records)."""
        self.rename = self.reading.renames(side)
        self.patterns = self.reading.compiled
        self.tuimon = False
        """A tuimon header was seen: its other lines are text, not patterns."""
        self._merger = StreamMerger()
        self._printed_dicts = 0
        """Printed Python dicts without a step key numbered so far (`literal`)."""
        self._printed_steps = False
        """A printed Python dict had a step key: those without one are not numbered."""

    def parse(self, line: bytes) -> tuple[Record, bool]:
        """One line as a record, and whether it is a complete tuimon step (never merged)."""
        stripped = line.strip()
        if stripped.startswith(b"{"):
            try:
                obj = _loads(stripped)
                if isinstance(obj, dict):
                    kind = obj.get("type")
                    if kind in ("header", "end", "step"):
                        record = parse_obj(obj)
                        if isinstance(record, Step) and suspect(record):  # an int > 64 bits?
                            record = parse_obj(loads_checked(stripped)) or record
                        if isinstance(record, Header) and record.format.startswith("tuimon"):
                            self.tuimon = True
                        if record is not None:
                            return self._renamed(record), kind == "step"
                    elif (step := row_step(obj, self.rename)) is not None:
                        if suspect(step):  # an integer beyond 64 bits, read as a float?
                            step = row_step(loads_checked(stripped), self.rename) or step
                        return step, False
            except (ValueError, RecursionError):
                pass
            if (printed := self._printed_dict(stripped)) is not None:
                return printed, False
            return parse_line(line), False
        if self.tuimon or not self.text or not stripped:
            return parse_line(line), False
        text = last_state(line.decode("utf-8", "replace"))
        step = parse_text(text, self.patterns)
        if step is not None:
            return self._renamed(step), False
        record = parse_line(line)
        if isinstance(record, Text) and metric_like(text):
            record = Text(record.text, UNMATCHED_TEXT)
        return record, False

    def _printed_dict(self, stripped: bytes) -> Step | Text | None:
        """A printed Python dict (`{'loss': 0.69, 'epoch': 0.01}`, as the Hugging Face Trainer
        prints) as a step: its own step key (`epoch` only as an int), else the number of such
        dicts before it."""
        if self.tuimon or not self.text or self.patterns or not stripped.startswith(b"{'"):
            return None
        row = literal_row(last_state(stripped.decode("utf-8", "replace")))
        if row is None or not any(as_number(v) is not None for v in row.values()):
            return None
        finer = step_key({k: v for k, v in row.items() if k != "epoch"})
        if finer is not None or type(row.get("epoch")) is int:  # HF's float epochs are metrics
            self._printed_steps = True
            return row_step(row, self.rename)
        if self._printed_steps:
            return Text(stripped.decode("utf-8", "replace")[:4096], NO_STEP_KEY)
        row = {"step": self._printed_dicts, **{k: v for k, v in row.items() if k != "step"}}
        self._printed_dicts += 1
        return row_step(row, self.rename)

    def _renamed(self, record: Record) -> Record:
        return renamed(record, self.rename) if isinstance(record, Step) else record

    def feed(self, lines: Iterable[bytes]) -> list[Record]:
        """Records of these lines that are ready (a step waits for the next line of another)."""
        out: list[Record] = []
        for line in lines:
            record, complete = self.parse(line)
            out += self._merger.feed(record, complete=complete)
        return out

    def close(self) -> list[Record]:
        """What is held at the end of the stream."""
        return self._merger.close()


def line_parser(
    reading: Reading | None = None, side: str = "a", *, text: bool = True
) -> LineParser:
    """A parser for one live stream (stdout of a run, a tailed log file)."""
    return LineParser(reading, side, text=text)


@dataclass
class Loaded:
    """A file read: its format, its records, and its lines when they are a step log as they
    stand (else None: `log_lines` writes the records as step-log lines)."""

    format: str
    records: list[Record]
    raw: list[bytes] | None = None

    @property
    def steps(self) -> list[Step]:
        return [r for r in self.records if isinstance(r, Step)]


def _lines(data: bytes) -> list[bytes]:
    return [line for line in data.splitlines(keepends=True) if line.strip()]


def load(path: str | Path, reading: Reading | None = None, side: str = "a") -> Loaded:
    """Read any supported log; ReaderError (one line) when it cannot be read at all."""
    path = Path(path)
    reading = reading or Reading()
    rename = reading.renames(side)
    try:
        if path.is_dir():
            if not event_dirs(path):
                raise ReaderError(f"{path}: a directory without TensorBoard event files ({HELP})")
            return _renamed(Loaded("tensorboard", read_events(path)), rename)
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise ReaderError(f"{path}: {exc.strerror or exc}") from None
    except MissingExtra as exc:
        raise ReaderError(f"{path}: {exc}") from None
    if b"brain.Event:" in data[:256] or ("tfevents" in path.name and b"\x00" in data[:64]):
        try:
            return _renamed(Loaded("tensorboard", read_events(path)), rename)
        except MissingExtra as exc:
            raise ReaderError(f"{path}: {exc}") from None
    document = _json_document(path, data)
    if document is not None:
        return _renamed(document, rename)
    return _line_log(data, reading, side)


def _json_document(path: Path, data: bytes) -> Loaded | None:
    """A whole-file JSON document (trainer_state.json, a list of rows, per-metric arrays) as
    its steps; None when the data is not one (a JSON Lines file of one line is not).
    ReaderError when it is one without steps."""
    body = data.lstrip()
    if body[:1] not in (b"{", b"["):
        return None
    try:
        doc = _load_document(body)
    except (ValueError, RecursionError):
        return None
    single_row = (  # a JSON Lines file of one line
        isinstance(doc, dict)
        and b"\n" not in body.strip()
        and ("type" in doc or step_key(doc) is not None)
    )
    if single_row:
        return None
    records = read_document(doc)
    kind = (
        "trainer_state.json"
        if isinstance(doc, dict) and "log_history" in doc
        else ("JSON document")
    )
    if not records:
        raise ReaderError(
            f"{path}: a JSON document with no steps (no list of objects with a step "
            f"key, no per-metric arrays beside a step array; {HELP})"
        )
    return Loaded(kind, records)


def _line_log(data: bytes, reading: Reading, side: str) -> Loaded:
    """A log of lines: CSV, a tuimon step log, JSON Lines or printed text (`LineParser`)."""
    rename = reading.renames(side)
    lines = _lines(data)
    first = next((line for line in lines if line.strip()), b"").decode("utf-8", "replace")
    if csv_columns(first.strip()):
        return _renamed(Loaded("CSV", read_csv(data.decode("utf-8", "replace"))), rename)
    parser = LineParser(reading, side)
    parsed = [parser.parse(line) for line in lines]
    records = [r for r, _ in parsed]
    if parser.tuimon:
        return Loaded("tuimon step log", records, None if rename else lines)
    json_steps = (
        isinstance(r, Step) and line.lstrip()[:1] == b"{"
        for (r, _), line in zip(parsed, lines, strict=True)
    )
    kind = "JSON Lines" if any(json_steps) else "text"
    return Loaded(kind, merge(records))


def _renamed(loaded: Loaded, rename: Mapping[str, str]) -> Loaded:
    if rename:
        loaded.records = [renamed(r, rename) if isinstance(r, Step) else r for r in loaded.records]
    return loaded


def no_steps(path: str | Path, reading: Reading | None = None) -> str:
    """The one-line error for a log in which no reader found a step."""
    asked = " and your --pattern" if reading is not None and reading.patterns else ""
    return f"{path}: no training steps found (formats tried: {FORMATS_TRIED}{asked}; {HELP})"


def require_steps(loaded: Loaded, path: str | Path) -> list[Step]:
    """The steps of a file; ReaderError naming the formats tried when there is none."""
    if not loaded.steps:
        raise ReaderError(no_steps(path))
    return loaded.steps


_JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")


def _token(value: str) -> bytes:
    """`name=text` of a value that does not fit as `,"name":text` (a JSON number token that
    parses back as unreadable; a text cell such as `+1E400` as the overflow it stands for)."""
    name, _, text = value.rpartition("=")
    text = text.strip().lstrip("+")
    if not _JSON_NUMBER.fullmatch(text):
        text = "-1e999" if text.startswith("-") else "1e999"
    return b"," + orjson.dumps(name) + b":" + text.encode()


def to_line(record: Record) -> bytes:
    """A record as one step-log line (what `parse_line` reads back as the same record)."""
    if isinstance(record, Header):
        return dumps(
            {"type": "header", "format": record.format, "run": record.run,
             "hyper": record.hyper, "env": record.env}
        )  # fmt: skip
    if isinstance(record, Step):
        obj: dict[str, Any] = {"type": "step", "step": record.step}
        obj.update((k, v) for k, v in record.clocks.items() if is_clock(k))
        obj.update(record.metrics)
        if record.t is not None:
            obj["t"] = record.t
        if record.digest is not None:
            obj["param_digest"] = record.digest
        if record.digests:
            obj["param_digests"] = record.digests
        line = dumps(obj)
        if record.unreadable:  # as the number tokens they were, so they are read back as such
            tokens = b"".join(_token(value) for value in record.unreadable)
            line = line.rstrip()[:-1] + tokens + b"}\n"
        return line
    if isinstance(record, End):
        return dumps(
            {"type": "end", "status": record.status, "steps": record.steps,
             "wall_s": record.wall_s, "artifacts": record.artifacts}
        )  # fmt: skip
    text = record.text.replace("\n", " ")
    return (text if not text.lstrip().startswith("{") else " " + text).encode() + b"\n"


def _tuimon_lines(path: Path) -> list[bytes] | None:
    """The lines of a file whose first line is a tuimon header, else None (cheap check)."""
    if not path.is_file():
        return None
    with open(path, "rb") as fh:
        first = fh.readline(1 << 20)
        if b'"header"' not in first or b"tuimon.steplog" not in first:
            return None
        record = parse_line(first)
        if not (isinstance(record, Header) and record.format.startswith("tuimon")):
            return None
        return [line for line in (first, *fh) if line.strip()]


def log_lines(path: str | Path, reading: Reading | None = None, side: str = "a") -> list[bytes]:
    """Any supported log as step-log lines: a step log's own lines, else its records written
    as step-log lines. What compare, replay and the browser read."""
    if not (reading and reading.renames(side)) and (lines := _tuimon_lines(Path(path))):
        return lines  # a tuimon step log: its own lines, parsed once by the caller
    loaded = load(path, reading, side)
    if loaded.raw is not None:
        return loaded.raw
    return [to_line(r) for r in loaded.records]


def streamable(head: bytes) -> bool:
    """True when a log file that begins with `head` can be followed line by line (JSON Lines,
    text); False for documents rewritten as a whole (JSON, CSV) and binary event files."""
    if b"brain.Event:" in head or b"\x00" in head[:64]:
        return False
    body = head.lstrip()
    first = body.split(b"\n", 1)[0].strip()
    if body[:1] == b"[" or (body[:1] == b"{" and not first.endswith(b"}")):
        return False
    return csv_columns(first.decode("utf-8", "replace")) is None

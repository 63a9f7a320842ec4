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

The engine calls `load` (a file as records, every line accounted for: `account`),
`line_parser` (a live stream: the same `LineParser` that reads a file of lines) and
`log_lines` (a file as step-log lines, for the views that show lines).
"""

from __future__ import annotations

import gzip
import lzma
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from tuimon.clocks import is_clock
from tuimon.readers.account import Account
from tuimon.readers.capped import open_capped, open_regular
from tuimon.readers.documents import cut_document, read_document
from tuimon.readers.folder import json_files, read_folder
from tuimon.readers.lines import BOM, LineParser, load_document
from tuimon.readers.per_metric import is_sacred, mlflow_metrics, read_mlflow, read_sacred
from tuimon.readers.reading import Reading, parse_map
from tuimon.readers.rows import renamed, step_key
from tuimon.readers.tabular import csv_columns, read_csv
from tuimon.readers.tensorboard import MissingExtra, event_dirs, read_events
from tuimon.readers.text import PatternError
from tuimon.steplog import (
    CUT_TAIL,
    IN_RECORD,
    End,
    Header,
    Record,
    Step,
    Text,
    dumps,
    parse_line,
)

__all__ = [
    "FORMATS_TRIED",
    "Account",
    "LineParser",
    "Loaded",
    "PatternError",
    "ReaderError",
    "Reading",
    "describe",
    "line_parser",
    "load",
    "locate",
    "log_lines",
    "no_steps",
    "parse_map",
    "read_log",
    "require_steps",
    "streamable",
    "to_line",
]

FORMATS_TRIED = (
    "tuimon step log, JSON Lines with a step key, JSON document (metrics file, "
    "trainer_state.json, sacred metrics.json), CSV or a table of numbers, TensorBoard events, "
    "an MLflow run folder, printed text"
)
HELP = "see docs/reading-logs.md; --pattern REGEX reads other printed lines"


class ReaderError(Exception):
    """A file no reader can read (one line for the user)."""


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
    step_key: str | None = None
    """The step key the reader found (`tuimon read`), where it names one."""

    @property
    def steps(self) -> list[Step]:
        return [r for r in self.records if isinstance(r, Step)]


_CORRUPT = (EOFError, lzma.LZMAError, gzip.BadGzipFile)


def open_log(path: Path) -> IO[bytes]:
    """A log file's bytes, decompressed when it is gzip or xz (told by content, not name) as
    a stream capped in what it expands to (`capped`). Regular files only, opened without
    blocking: a FIFO or a device is `NotRegular` (an OSError), never read."""
    fh = open_regular(path)
    try:
        magic = fh.read(6)
        fh.seek(0)
        return open_capped(fh, magic) or fh
    except BaseException:
        fh.close()
        raise


def _lines(data: bytes) -> list[bytes]:
    """The lines of a log as a live stream cuts them: at `\\n` only (a `\\r` redraw stays in
    its line, read at its last state, as live)."""
    lines = [line + b"\n" for line in data.split(b"\n") if line.strip()]
    if lines and not data.endswith(b"\n") and data.strip():
        lines[-1] = lines[-1][:-1]  # the last line as it is: without its newline (cut?)
    return lines


def read_bytes(path: Path) -> bytes:
    """A log file's bytes, decompressed: the one place a reader opens a file (OSError when it
    cannot, `TooLarge` past the cap on expansion)."""
    with open_log(path) as fh:
        return fh.read()


def load(path: str | Path, reading: Reading | None = None, side: str = "a") -> Loaded:
    """Read any supported log; ReaderError (one line) when it cannot be read at all."""
    path = Path(path)
    reading = reading or Reading()
    try:
        loaded = _load(path, reading, side)
    except _CORRUPT as exc:  # a cut or damaged .gz / .xz
        raise ReaderError(f"{path}: cannot decompress: {exc or type(exc).__name__}") from None
    except OSError as exc:
        raise ReaderError(f"{path}: {exc.strerror or exc}") from None
    except MissingExtra as exc:
        raise ReaderError(f"{path}: {exc}") from None
    return loaded


def _load(path: Path, reading: Reading, side: str) -> Loaded:
    """`load` by content: TensorBoard, a JSON document, else a log of lines."""
    if path.is_dir():
        if event_dirs(path):
            return _as_asked(Loaded("tensorboard", read_events(path)), reading, side)
        if (metrics := mlflow_metrics(path)) is not None:
            return _as_asked(Loaded("MLflow run", read_mlflow(metrics)), reading, side)
        if files := json_files(path):
            return _as_asked(Loaded("JSON files", read_folder(files)), reading, side)
        raise ReaderError(
            f"{path}: a directory without TensorBoard event files, an MLflow metrics/ "
            f"folder or numbered JSON files ({HELP})"
        )
    data = read_bytes(path).removeprefix(BOM)
    if b"brain.Event:" in data[:256] or ("tfevents" in path.name and b"\x00" in data[:64]):
        return _as_asked(Loaded("tensorboard", read_events(path)), reading, side)
    document = _json_document(path, data, reading)
    if document is not None:
        return _as_asked(document, reading, side)
    return _line_log(data, reading, side)


def _as_asked(loaded: Loaded, reading: Reading, side: str) -> Loaded:
    """Records renamed (`--map`) and with the clocks `--judge` names judged."""
    rename = reading.renames(side)
    if rename or reading.judge:
        loaded.records = [reading.promote(renamed(r, rename)) if isinstance(r, Step) else r
                          for r in loaded.records]  # fmt: skip
    return loaded


_DOCUMENT = re.compile(rb"""[\[{]\s*(["{\[]|$)""")
"""The first line of a JSON document written over lines: `{`, `[`, `{"key": ...`, `[{...`."""


def _rows_follow(rest: bytes, lines: int = 16) -> bool:
    """After a first line that opens JSON but does not parse: whether whole JSON objects follow
    on lines of their own (JSON Lines whose first lines are damaged, read as a live pair reads
    them), or nothing does (one line cut short); a document over lines has rows that end in
    `,` or does not close them on one line."""
    body = rest.strip()
    if not body:
        return True
    for line in body.split(b"\n", lines)[:-1] or [body]:
        line = line.strip()
        if line[:1] == b"{" and line[-1:] == b"}":
            try:
                if isinstance(orjson.loads(line), dict):
                    return True
            except orjson.JSONDecodeError:
                continue
    return False


def _json_document(path: Path, data: bytes, reading: Reading) -> Loaded | None:
    """A whole-file JSON document (trainer_state.json, a list of rows, per-metric arrays) as
    its steps; None when the data is not one (a JSON Lines file of one line is not).
    ReaderError when it is one without steps. One cut short is read up to its last whole
    row, with a note that says where it stopped (`cut_document`)."""
    body = data.lstrip()
    if body[:1] not in (b"{", b"["):
        return None
    first, _, rest = body.partition(b"\n")
    if first.rstrip()[-1:] in (b"}", b"]") and rest.strip():
        return None  # a whole value on the first line, and more lines: JSON Lines
    notes: list[Record] = []
    try:
        doc = load_document(body)
    except (ValueError, RecursionError) as exc:
        cut = cut_document(body)
        opened = _DOCUMENT.match(first) and first.rstrip()[-1:] not in (b"}", b"]")
        if cut is None and opened and not _rows_follow(rest):
            at = getattr(exc, "pos", None)
            where = f" at byte {at}" if isinstance(at, int) else ""
            raise ReaderError(
                f"{path}: a JSON document that cannot be read: cut short or damaged{where}, "
                f"before any whole row"
            ) from None
        if cut is None:
            return None
        doc, note = cut
        notes.append(note)
    single_row = (  # a JSON Lines file of one line
        isinstance(doc, dict)
        and b"\n" not in body.strip()
        and ("type" in doc or step_key(doc) is not None)
    )
    if single_row:
        return None
    if is_sacred(doc):
        return Loaded("sacred metrics.json", [*notes, *read_sacred(doc)])
    records = read_document(doc, reading.step_key)
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
    return Loaded(kind, [*notes, *records])


def _line_log(data: bytes, reading: Reading, side: str) -> Loaded:
    """A log of lines: CSV, a tuimon step log, JSON Lines or printed text (`LineParser`)."""
    first = data.lstrip().partition(b"\n")[0][: 1 << 24].decode("utf-8", "replace")
    if csv_columns(first.strip(), reading.step_key):
        records = read_csv(data.decode("utf-8", "replace"), reading.step_key)
        return _as_asked(Loaded("CSV", records), reading, side)
    lines = _lines(data)
    parser = LineParser(reading, side)
    records = parser.feed(lines) + parser.close()  # as a live stream is read: the same rows
    if parser.tuimon:
        return Loaded("tuimon step log", records, lines if reading.as_written(side) else None)
    kind = "JSON Lines" if parser.json_rows or parser.numbered else "text"
    kind = "table" if parser.tables.step is not None and kind == "text" else kind
    return Loaded(kind, records, step_key=parser.first_key)


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
    try:
        with open_log(path) as fh:
            first = fh.readline(1 << 20)
            if b'"header"' not in first or b"tuimon.steplog" not in first:
                return None
            record = parse_line(first)
            if not (isinstance(record, Header) and record.format.startswith("tuimon")):
                return None
            return [line for line in (first, *fh) if line.strip()]
    except (*_CORRUPT, OSError):
        return None  # `load` reads it again and says why


def read_log(
    path: str | Path, reading: Reading | None = None, side: str = "a"
) -> tuple[list[bytes], list[Record]]:
    """Any supported log as step-log lines and their records, one for one: a step log's own
    lines, else its records written as lines. The records are the readers' own (a skipped
    line keeps its reason), so a replay judges what `compare` and a live pair judge."""
    plain = reading is None or reading.as_written(side)
    if plain and (lines := _tuimon_lines(Path(path))):
        return lines, [parse_line(line) for line in lines]
    loaded = load(path, reading, side)
    if loaded.raw is not None and len(loaded.raw) == len(loaded.records):
        return loaded.raw, loaded.records
    return [to_line(r) for r in loaded.records], loaded.records


def log_lines(path: str | Path, reading: Reading | None = None, side: str = "a") -> list[bytes]:
    """Any supported log as step-log lines (`read_log`). What the views that show lines
    read."""
    return read_log(path, reading, side)[0]


def streamable(head: bytes) -> bool:
    """True when a log file that begins with `head` can be followed line by line (JSON Lines,
    text); False for documents rewritten as a whole (JSON, CSV) and binary event files."""
    if b"brain.Event:" in head or b"\x00" in head[:64]:
        return False
    body = head.lstrip()
    first = body.split(b"\n", 1)[0].strip()
    if (body[:1] == b"[" and _DOCUMENT.match(body)) or (
        body[:1] == b"{" and not first.endswith(b"}")
    ):
        return False  # a JSON document (a `[11/19 08:55:03] INFO` line is not one)
    return csv_columns(first.decode("utf-8", "replace")) is None


def locate(
    path: str | Path,
    reading: Reading | None = None,
    side: str = "a",
    *,
    step: int | None = None,
    occurrence: int = 0,
    text: int | None = None,
) -> int | None:
    """The line (1-based) of a log of lines where the `occurrence`-th record of `step` begins,
    or where its `text`-th text line is; None for a file that is not lines of records (CSV,
    a JSON document, TensorBoard) or when it is not there. Reads up to that line only."""
    path = Path(path)
    if path.is_dir() or (step is None and text is None):
        return None
    parser = LineParser(reading, side)
    seen = texts = 0
    previous: int | None = None
    try:
        with open_log(path) as fh:
            head = fh.read(1 << 16)
            fh.seek(0)
            if streamable(head.removeprefix(BOM)) is False:
                return None
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                record, _ = parser.parse(line)
                if isinstance(record, Step):
                    if record.step == step and previous != step:
                        if seen == occurrence:
                            return number
                        seen += 1
                    previous = record.step
                elif (
                    isinstance(record, Text)
                    and not record.text.startswith("tuimon: ")
                    and record.skipped not in (CUT_TAIL, IN_RECORD)  # as the text judge counts
                ):
                    texts += 1
                    if texts == text:
                        return number
    except (*_CORRUPT, OSError):
        return None
    return None


def describe(path: str | Path, reading: Reading | None = None) -> dict[str, Any]:
    """How one log is read (`tuimon read`): `tuimon.readers.readout.describe`."""
    from tuimon.readers.readout import describe as _describe

    return _describe(path, reading)

"""Readers: a log file or a run's output stream -> the same records as `tuimon.steplog`.

One step, chosen by content through the registry of formats (`tuimon.readers.formats`:
every format, how it is recognised, who writes it, whether it streams live).

The engine calls `load` (a file as records, every line accounted for: `account`),
`line_parser` (a live stream: the same `LineParser` that reads a file of lines),
`read_blocks` (a large file of lines a block at a time) and `log_lines` (a file as step-log
lines, for the views that show lines).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from tuimon.clocks import is_clock
from tuimon.readers.account import Account
from tuimon.readers.cut import LineCutter
from tuimon.readers.formats import (
    _CORRUPT,
    BY_NAME,
    FORMATS,
    FORMATS_TRIED,
    HELP,
    Format,
    Loaded,
    ReaderError,
    _binary,
    open_log,
    read_bytes,
    read_path,
)
from tuimon.readers.lines import BOM, RELEASE_AFTER, LineParser
from tuimon.readers.reading import Reading, parse_map
from tuimon.readers.rows_to_steps import renamed
from tuimon.readers.tensorboard import MissingExtra
from tuimon.readers.text import PatternError
from tuimon.readers.wandb_run import WandbStream, is_wandb, records_type, run_files
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
    "BY_NAME",
    "FORMATS",
    "FORMATS_TRIED",
    "HELP",
    "RELEASE_AFTER",
    "Account",
    "Format",
    "LineParser",
    "Loaded",
    "PatternError",
    "ReaderError",
    "Reading",
    "head_format",
    "line_parser",
    "load",
    "locate",
    "log_lines",
    "no_steps",
    "open_log",
    "parse_map",
    "read_blocks",
    "read_bytes",
    "read_log",
    "require_steps",
    "streamable",
    "to_line",
    "wandb_blocks",
]


def line_parser(
    reading: Reading | None = None, side: str = "a", *, text: bool = True
) -> LineParser:
    """A parser for one live stream (stdout of a run, a tailed log file)."""
    return LineParser(reading, side, text=text)


def load(path: str | Path, reading: Reading | None = None, side: str = "a") -> Loaded:
    """Read any supported log; ReaderError (one line) when it cannot be read at all."""
    path = Path(path)
    try:
        with _unreadable(path):
            return read_path(path, reading or Reading(), side)
    except MissingExtra as exc:
        raise ReaderError(f"{path}: {exc}") from None


@contextmanager
def _unreadable(path: Path) -> Iterator[None]:
    """A file that cannot be read (cut or damaged .gz / .xz, OSError) as a one-line ReaderError."""
    try:
        yield
    except _CORRUPT as exc:
        raise ReaderError(f"{path}: cannot decompress: {exc or type(exc).__name__}") from None
    except OSError as exc:
        raise ReaderError(f"{path}: {exc.strerror or exc}") from None


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


HEAD_LINES = 16
"""Lines of a file's start read to name the format of lines it is (`head_format`)."""


def head_format(head: bytes) -> Format | None:
    """The registry entry that reads a file beginning with `head` (its first bytes, a BOM
    removed), told as a growing file is: the first entry whose `head` takes it (a TensorBoard
    event file, a JSON document, a CSV), else the format of lines that reads its first lines
    (`LineParser.format`); None for bytes that are no text (a NUL in the first 64)."""
    for entry in FORMATS:
        if entry.head is not None and entry.head(head):
            return entry
    if b"\x00" in head[:64]:
        return None
    parser = LineParser()
    first = LineCutter().feed(head[: 1 << 16])[:HEAD_LINES]
    parser.feed([line for line in first if line.strip()])
    return parser.format


def streamable(head: bytes) -> bool:
    """True when a log file that begins with `head` is followed line by line: what the
    registry entry that reads it says (`Format.streams`, `head_format`); False for bytes that
    are no text."""
    entry = head_format(head)
    return entry is not None and entry.streams


BLOCK = 1 << 20
"""Bytes a log of lines is read in at a time (`read_blocks`)."""


def read_blocks(
    path: str | Path, reading: Reading | None = None, side: str = "a"
) -> Iterator[list[Record]] | None:
    """A large log of lines as blocks of records, read as a live stream is (the records
    `load` gives, a block at a time: memory holds one block); None for a file that is not
    lines (a folder, a JSON document, a CSV, TensorBoard, binary data) or that is small: `load`
    reads those whole. ReaderError (one line) when it cannot be read."""
    path = Path(path)
    if (runs := wandb_blocks(path, reading or Reading(), side)) is not None:
        return runs
    if path.is_dir():
        return None
    with _unreadable(path), open_log(path) as fh:
        head = fh.read(BLOCK).removeprefix(BOM)
        whole = len(head) < BLOCK - len(BOM)
    if whole or not streamable(head) or _binary(head[:65536]):
        return None
    return _blocks(path, LineParser(reading, side))


FIRST_BLOCK = 1 << 16
"""Bytes of a W&B run read first (some 200 rows of 20 metrics): the first rows are shown
before a whole block is parsed."""


def wandb_blocks(path: Path, reading: Reading, side: str) -> Iterator[list[Record]] | None:
    """A W&B run (its `.wandb` file, its folder, a `wandb/` folder of its parts) as blocks of
    records, read as its bytes come (`WandbStream`, as a run being written is followed): the
    first rows are there once the first MiB is read. None for any other log."""
    if path.is_dir():
        files = run_files(path)
        if not files:
            return None
    else:
        with _unreadable(path), open_log(path) as fh:
            if not is_wandb(fh.read(8)):
                return None
        files = [path]
    records_of(path)  # the wandb package: its absence is one line
    return _wandb_blocks(path.name, files, reading, side)


def records_of(path: Path) -> None:
    """ReaderError (one line) without the wandb package, whose definitions read a run."""
    try:
        records_type()
    except MissingExtra as exc:
        raise ReaderError(f"{path}: {exc}") from None


def _wandb_blocks(
    name: str, files: list[Path], reading: Reading, side: str
) -> Iterator[list[Record]]:
    stream = WandbStream(name)
    rename = reading.renames(side)

    def asked(records: list[Record]) -> list[Record]:
        if not (rename or reading.judge):
            return records
        return [reading.promote(renamed(r, rename)) if isinstance(r, Step) else r
                for r in records]  # fmt: skip

    for index, file in enumerate(files):
        if index:
            stream.next_file(file.name)
        with _unreadable(file), open_log(file) as fh:
            size = FIRST_BLOCK  # the first rows at once, then a block at a time
            while data := fh.read(size):
                size = BLOCK
                if records := stream.feed(data):
                    yield asked(records)
                if stream.stopped is not None:
                    break
        if stream.stopped is not None:
            break
    yield asked(stream.close())


def _blocks(path: Path, parser: LineParser) -> Iterator[list[Record]]:
    cutter = LineCutter()
    with _unreadable(path), open_log(path) as fh:
        data = fh.read(BLOCK).removeprefix(BOM)
        while data:  # blank lines left out, as `lines_of` leaves them out of a whole log
            yield parser.feed([line for line in cutter.feed(data) if line.strip()])
            data = fh.read(BLOCK)
    yield parser.feed([line for line in cutter.flush() if line.strip()]) + parser.close()


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

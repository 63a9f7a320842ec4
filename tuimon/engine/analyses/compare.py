"""`tuimon compare`: judge two existing logs (or a saved pair) at once, optionally save a pair.

Logs are read block by block (`CHUNK` bytes of lines at a time, each line parsed by orjson),
turned into columns without building a record per step (a CSV of numbers straight into one
array: `tuimon.readers.columnar`), and matched on the step by
`matcher.ColumnMatcher` as they stream: memory holds the unmatched rows, not the logs. A log
whose steps repeat, or a saved comparison (`--save`, which writes every aligned row), goes
through `align.compare_steps` instead: the same judge, record by record.
"""

from __future__ import annotations

import ctypes
import gc
import gzip
import io
import lzma
import multiprocessing
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from itertools import chain, compress, islice
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import IO, Annotated, Any, Literal

import msgspec
import numpy as np
import orjson

from tuimon.clocks import is_clock
from tuimon.engine.judge.align import PairAligner, compare_steps
from tuimon.engine.judge.byte_rule import hold
from tuimon.engine.judge.columns import Columns, MetricFilter, RowTable, sparse
from tuimon.engine.judge.fingerprints import env_diff
from tuimon.engine.judge.matcher import ColumnMatcher
from tuimon.engine.judge.verdict import Ending, Summary
from tuimon.engine.sources.saved import SavedPair, resolve_logs, saved_ending
from tuimon.errors import CompareError, ReplayError, StoreError
from tuimon.readers import (
    Account,
    LineParser,
    ReaderError,
    Reading,
    load,
    locate,
    no_steps,
    open_log,
    to_line,
)
from tuimon.readers.columnar import CsvColumns, read_csv_columns, read_csv_pair
from tuimon.readers.formats import JSON_LINES, STEPLOG
from tuimon.readers.readout import Read
from tuimon.readers.rows import COUNTERS, step_key
from tuimon.readers.tabular import csv_hint
from tuimon.steplog import (
    HUGE,
    MAX_LINE,
    STEP_KEYS,
    End,
    Header,
    Record,
    Step,
    Text,
    parse_line,
    parse_obj,
    suspect,
)
from tuimon.store import SIDES, PairDoc, RunDoc, SavedLogs
from tuimon.store.aligned import AlignedStep

CHUNK = 1 << 20
"""Bytes of lines read at a time, each line parsed on its own (about 4,000 steps of a step
log: a block is judged at once, and the judge's cost per block is spread over its rows)."""
TABLE_ROWS = 1 << 14
"""Rows of a CSV read into columns judged at a time, at most (the judge's arrays stay small)."""
TABLE_VALUES = 1 << 18
"""Values judged at a time, when a CSV is wide: fewer rows per block, down to `TABLE_MIN`."""
TABLE_MIN = 64
"""Rows judged at a time, at least (the judge's cost per block grows with the metrics)."""
_FLOATS = frozenset({float})
_NUMBERS = frozenset({float, int})
_SKIP = frozenset({"type", "step"})
_TYPE = itemgetter("type")
_STEP = itemgetter("step")


@dataclass
class SideLog:
    """What one log held besides its steps: header, end record, lines, text lines."""

    path: Path
    header: Header | None = None
    end: End | None = None
    steps: int = 0
    texts: int = 0
    first_text: str | None = None
    lines: list[bytes] = field(default_factory=list)
    """All lines, kept only when the pair is saved."""
    native: bool = False
    """A tuimon step log read as written, its lines straight from the file."""
    plain_key: str | None = None
    """The step key of plain JSON Lines, read block by block (`_plain_key`)."""
    segments: list[tuple[int, int, int, int, int]] | None = field(default_factory=list)
    """Blocks of lines whose every line is at most one record (line, byte offset, lines,
    lowest and highest step), so `first_lines` finds a step's line without parsing the
    whole log again; None when a line may have been cut between blocks."""
    line: int = 0
    """Lines read so far (raw blocks)."""
    byte: int = 0
    """Bytes read so far (raw blocks)."""

    @property
    def tuimon(self) -> bool:
        """A tuimon step log (its runs write an end record), however it was read."""
        return self.header is not None and self.header.format.startswith("tuimon")


def _records(path: Path, reading: Reading, side: str) -> list[Record]:
    """Any format the readers know as records (`tuimon.readers.load`), straight: no step-log
    text in between, so every skipped line keeps its reason."""
    try:
        return load(path, reading, side).records
    except ReaderError as exc:
        raise CompareError(str(exc)) from None


def resolve(paths: list[str], reading: Reading | None) -> SavedPair:
    """A saved pair directory or two log files, opened by the one loader (`resolve_logs`);
    CompareError when they cannot be."""
    try:
        return resolve_logs(paths, reading)
    except ReplayError as exc:
        raise CompareError(str(exc)) from None


_CORRUPT = (EOFError, lzma.LZMAError, gzip.BadGzipFile)
"""A cut or damaged .gz / .xz (as `tuimon.readers.load` tells them)."""
WORKERS_FROM = 8 << 20
"""A pair whose larger log holds at least this many bytes (on disk) is read by two worker
processes at once, one a side, where the machine has more than one CPU (`_workers`)."""


@contextmanager
def _opened(path: Path) -> Iterator[Any]:
    """A log's bytes, decompressed as a capped stream when it is gzip or xz (`open_log`);
    what cannot be read is a `CompareError` worded as `tuimon.readers.load` words it."""
    try:
        with open_log(path) as fh:
            yield fh
    except _CORRUPT as exc:
        raise CompareError(f"{path}: cannot decompress: {exc or type(exc).__name__}") from None
    except OSError as exc:
        raise CompareError(f"{path}: {exc.strerror or exc}") from None


def _line_source(
    logs: SavedLogs,
    side: str,
    log: SideLog,
    keep: bool,
    reader: _BlockReader | None = None,
    apart: Callable[[], CsvColumns | None] | None = None,
    twin: SideLog | None = None,
) -> Iterator[Block | _Same]:
    """A log in blocks: a tuimon step log's lines straight from the file (decompressed when
    it is gzip or xz), plain JSON Lines the same way, a CSV of numbers as columns (unless its
    lines are kept), any other format as the records `tuimon.readers` reads. With `reader`,
    a worker process reads the lines into columns (`_worker_blocks`); `apart`: the CSV's
    columns as read with a worker process (`_csv_pair`). `twin`: side a's log, read the
    same way (side b's worker passes over the blocks the two logs share, `_twin`)."""
    path: Path = getattr(logs, side)
    if logs.reading.as_written(side) and path.is_file():
        with _opened(path) as fh:
            first = fh.readline(1 << 20)
            if b'"header"' in first and b"tuimon.steplog" in first:
                log.native = True
                yield [first]
                if reader is not None:
                    yield from _worker_blocks(reader, path, None, _twin(log, twin))
                    return
                while block := fh.readlines(CHUNK):
                    yield block
                return
    if (key := _plain_key(path, logs.reading, side)) is not None:
        log.plain_key = key
        if reader is not None:
            yield from _worker_blocks(reader, path, key, _twin(log, twin))
            return
        with _opened(path) as fh:
            while block := fh.readlines(CHUNK):
                yield _PlainBlock(block)
        return
    read = apart or (lambda: _csv_columns(path, logs.reading, side))
    if not keep and (table := read()) is not None:
        rows = _rows_at_a_time(table)
        for start in range(0, len(table.steps), rows):
            yield _CsvBlock(table, start, start + rows)
        return
    records = _records(path, logs.reading, side)
    for i in range(0, len(records), 4096):
        yield _RecordBlock(records[i : i + 4096])


def _plain_key(path: Path, reading: Reading, side: str) -> str | None:
    """The step key of plain JSON Lines (`{"step": 5, "loss": 0.3}` on every line), read
    block by block into columns like a step log; None for any other format."""
    if reading.renames(side) or reading.judge or not path.is_file():
        return None
    with _opened(path) as fh:
        first = fh.readline(1 << 20).strip()
    if not (first.startswith(b"{") and first.endswith(b"}")):
        return None
    try:
        row = orjson.loads(first)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(row, dict) or "type" in row:
        return None
    return step_key(row, reading.step_key)


def _csv_columns(path: Path, reading: Reading, side: str) -> CsvColumns | None:
    """A CSV of numbers straight into columns (`read_csv_columns`); None for any other file,
    or where `_as_columns` says no."""
    return read_csv_columns(path, reading.step_key) if _as_columns(path, reading, side) else None


def _as_columns(path: Path, reading: Reading, side: str) -> bool:
    """Whether a side's CSV may be read straight into columns: a file, its names neither
    renamed nor promoted (the records path applies those)."""
    return not reading.renames(side) and not reading.judge and path.is_file()


def _csv_pair(logs: SavedLogs) -> dict[str, Callable[[], CsvColumns | None]]:
    """Each side's CSV read into columns with a worker process (`read_csv_pair`), started
    now: side b's rows there while this process reads side a's; none where `_csv_columns`
    would not read side b (or it is not a CSV), side b's only where it would not read a."""
    reading = logs.reading
    if not _as_columns(logs.b, reading, "b"):
        return {}
    a_too = _as_columns(logs.a, reading, "a")
    tables = read_csv_pair(logs.a, logs.b, reading.step_key, a_too=a_too)
    if tables is None:
        return {}
    read = cache(tables)
    return {"a": lambda: read()[0], "b": lambda: read()[1]}


@dataclass
class _CsvBlock:
    """Rows `start:stop` of a CSV read into columns (`read_csv_columns`)."""

    table: CsvColumns
    start: int
    stop: int


class _PlainBlock(list):
    """A block of lines of plain JSON Lines (`_plain_key`)."""


class _RecordBlock(list):
    """A block of records a reader gave (not lines)."""


@dataclass
class _Prepared:
    """A block of lines as far as it reads without its side's state (`_BlockReader.prepare`;
    in a worker process when the pair is large, `_worker_blocks`)."""

    key: str | None
    """None: a tuimon step log's lines; else the step key of plain JSON Lines."""
    count: int
    """Lines in the block."""
    size: int
    """Bytes in the block."""
    args: tuple[Any, ...] | None = None
    """Uniform step rows: the arguments of `_BlockReader._counted`."""
    first: int = 0
    final: int = 0
    """The first and last steps of uniform plain rows."""
    slow: bool = False
    """A step log's block read line by line (`parse_line`): a line too long, a huge number."""
    lines: list[bytes] | None = None
    """The lines (None when a worker read them into `args`)."""
    rows: list[Any] | None = None
    """The lines parsed, when they are not uniform steps (not sent by a worker)."""

    def __getstate__(self) -> dict[str, Any]:
        """What a worker sends: a column of digests as one string (pickled at once, not
        string by string) when no digest holds a newline."""
        state = dict(self.__dict__)
        if self.args is not None and (digest := self.args[3]) is not None:
            joined = "\n".join(digest)
            if joined.count("\n") == len(digest) - 1:
                state["args"] = (*self.args[:3], joined, self.args[4])
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        args = state["args"]
        if args is not None and isinstance(args[3], str):
            state["args"] = (*args[:3], args[3].split("\n"), args[4])
        self.__dict__.update(state)


def _workers(logs: SavedLogs, keep: bool) -> bool:
    """Whether to read the two logs in worker processes at once: large logs, more than one
    CPU, nothing kept."""
    if keep:
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        size = max(logs.a.stat().st_size, logs.b.stat().st_size)
    except OSError:
        return False
    return cpus > 1 and size >= WORKERS_FROM and "fork" in multiprocessing.get_all_start_methods()


def _twin(log: SideLog, twin: SideLog | None) -> Path | None:
    """Side a's log when side b's is read the same way (both step logs as written, or both
    plain JSON Lines with the same step key): a block of b whose bytes are a's is not
    parsed twice (`_SAME`)."""
    if twin is None or (twin.native, twin.plain_key) != (log.native, log.plain_key):
        return None
    return twin.path


class _Same:
    """What side b's worker sends for a block whose lines are, byte for byte, side a's block
    of the same place (each of the blocks before it too): side a's prepared block stands for
    it. The two sides' readers hold the same state there, so it reads as its own lines
    would."""


_SAME = _Same()


def _worker_blocks(
    reader: _BlockReader, path: Path, key: str | None, twin: Path | None = None
) -> Iterator[_Prepared | _Same]:
    """A side's blocks as a forked worker process prepares them (`_BlockReader.prepare`: the
    parse, the columns of uniform rows), in order; this process counts and judges them
    (`_BlockReader.apply`), so the verdict is the one a single process gives. The pipe holds
    a few blocks: memory stays bounded however far one side runs ahead. `twin`: side a's
    log, read beside this one while they agree (`_SAME`)."""
    from tuimon.engine.launch.runner import die_with_parent  # only when workers read

    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    tie = die_with_parent()  # a signal that ends this process ends the worker too
    worker = ctx.Process(target=_serve, args=(reader, path, key, send, twin, tie), daemon=True)
    worker.start()
    send.close()
    try:
        while True:
            try:
                got = receive.recv()
            except EOFError:
                raise CompareError(f"{path}: the process reading it stopped") from None
            if got is None:
                return
            if isinstance(got, BaseException):
                with _opened(path):
                    raise got
            yield got
    finally:
        receive.close()
        if worker.is_alive():
            worker.terminate()
        worker.join()


def _serve(
    reader: _BlockReader,
    path: Path,
    key: str | None,
    send: Any,
    twin: Path | None,
    tie: Callable[[], None] | None = None,
) -> None:
    """The worker of `_worker_blocks`: the log's blocks, prepared, into `send`; `_SAME` for
    each block that is, from the first on, the `twin` log's block of the same place. `tie`
    (Linux) has it killed when the process that forked it dies: a SIGTERM to compare left it
    reading on, holding compare's stdout open."""
    if tie is not None:
        tie()
    gc.disable()
    other = _beside(twin, header=key is None)
    try:
        with open_log(path) as fh:
            if key is None:
                fh.readline(1 << 20)  # the header line, read by the parent
            while block := fh.readlines(CHUNK):
                if other is not None and _same(block, other):
                    send.send(_SAME)
                    continue
                if other is not None:  # the logs part here: each block is read from now on
                    other.close()
                    other = None
                send.send(reader.prepare(block, key, whole=False))
        send.send(None)
    except Exception as exc:  # told to the parent, which words it
        send.send(exc)
    finally:
        send.close()
        if other is not None:
            other.close()


def _beside(twin: Path | None, *, header: bool) -> IO[bytes] | None:
    """Side a's log opened to be read beside side b's (`_SAME`), past its header line when
    it has one; None when there is none, it is compressed (expanding it twice would cost what
    it saves) or it cannot be read (side a's own reader tells why)."""
    if twin is None:
        return None
    try:
        fh = open_log(twin)
    except (OSError, *_CORRUPT):
        return None
    try:
        if isinstance(getattr(fh, "raw", None), io.FileIO):
            if header:
                fh.readline(1 << 20)
            return fh
    except OSError:
        pass
    fh.close()
    return None


def _same(block: list[bytes], other: IO[bytes]) -> bool:
    """Whether the next bytes of `other` are the block's lines, and `readlines(CHUNK)` cuts
    `other` where it cut them (the block ends a line, and it filled a block or both logs end
    there)."""
    data = b"".join(block)
    try:
        if not data.endswith(b"\n") or other.read(len(data)) != data:
            return False
        return len(data) > CHUNK or other.read(1) == b""
    except OSError:  # side a's reader tells it
        return False


Block = list[bytes] | _RecordBlock | _PlainBlock | _CsvBlock | _Prepared


class _BlockReader:
    """Lines of one side -> `Columns` of its steps (plus the header, end and text lines)."""

    def __init__(
        self, side: str, log: SideLog, aligner: PairAligner, keep: bool, reading: Reading
    ) -> None:
        self.side, self.log, self.aligner, self.keep = side, log, aligner, keep
        self.select = aligner.select
        self.parser = LineParser(reading, side)
        """Plain JSON Lines that are not uniform are read as a live pair reads them."""
        self.last = -(2**63) - 1
        """The highest step read so far (plain JSON Lines)."""
        self.sparse = False
        """A block had thousands of names, a few a row: the log is judged record by record."""
        self.whole = False
        """The last block of plain JSON Lines was read into columns whole (`_plain`)."""
        self.shape: _Shape | None = None
        """How the last uniform block's lines read (`prepare`)."""

    def block(self, lines: Block) -> Columns | None:
        """The steps of a block of lines (or records) as columns (None when it holds no
        step)."""
        if isinstance(lines, _PlainBlock):
            return self.apply(self.prepare(lines, self.log.plain_key, whole=True))
        if isinstance(lines, _Prepared):
            return self.apply(lines)
        if isinstance(lines, _CsvBlock):
            return self._table(lines.table, lines.start, lines.stop)
        if isinstance(lines, _RecordBlock):
            if self.keep:
                self.log.lines += [to_line(r) for r in lines]
            return self._slow(lines)
        return self.apply(self.prepare(lines, None, whole=True))

    def prepare(self, lines: list[bytes], key: str | None, *, whole: bool) -> _Prepared:
        """What can be read of a block of lines without this side's state (so a worker
        process may do it, `_workers`): its rows parsed, and when they are uniform steps
        the arguments of `_counted` (read by the `_Shape` of the side's last uniform block
        when the lines fit it). `key`: None for a tuimon step log, else the step key of plain
        JSON Lines. `whole`: keep the lines and rows (else only when needed)."""
        got = _Prepared(key, len(lines), sum(map(len, lines)), lines=lines)
        if got.size > MAX_LINE and max(map(len, lines)) > MAX_LINE:  # skipped, as live
            got.slow = True
            return got
        shape, self.shape = self.shape, None
        if shape is not None and (made := shape.read(lines)) is not None:
            self.shape = shape
            if key is None:
                got.args = made
            elif (plain := _rising(made)) is not None:
                got.args, got.first, got.final = plain
        if got.args is None:
            try:
                rows = list(map(orjson.loads, lines))
            except orjson.JSONDecodeError:  # text lines, NaN tokens
                got.slow = key is None
                return got
            try:
                if key is None:
                    got.args = self._steps_only(rows)
                elif (plain := self._plain_columns(rows)) is not None:
                    got.args, got.first, got.final = plain
            except _Suspect:  # a huge number
                got.slow = key is None
            except (KeyError, TypeError):
                pass
            if got.args is not None and self.shape is None:
                plan = self._plan(tuple(rows[0]), key or "step")
                self.shape = _shape(plan) if plan is not None else None
            elif got.args is None and key is None and not got.slow and whole:
                got.rows = rows
        if got.args is not None and not whole:
            got.lines = None
        return got

    def _steps_only(self, rows: list[Any]) -> tuple[Any, ...] | None:
        """`_uniform` of a block of a step log that holds step rows only, all with the same
        keys (the usual block); None for any other."""
        try:
            if not rows or list(map(_TYPE, rows)).count("step") != len(rows):
                return None
        except (KeyError, TypeError, IndexError):  # a row without a type, not an object
            return None
        keys = tuple(rows[0])
        if set(map(len, rows)) != {len(keys)}:
            return None
        try:
            return self._uniform(rows, keys)
        except KeyError:  # not every row has these keys
            return None

    def apply(self, got: _Prepared) -> Columns | None:
        """A prepared block counted on this side (in the order of the side's blocks) and its
        steps as columns: what `block` gives for its lines."""
        if got.lines is None and (got.args is None or (got.key and got.first <= self.last)):
            got.lines = self._reread(got)
        lines: list[bytes] = got.lines or []
        if self.keep:
            self.log.lines += lines
        if got.key is not None:
            return self._placed(got, self._plain(got), got.key)
        if self.log.line == 0 and lines and not lines[0].endswith(b"\n"):
            self.log.segments = None  # a first line longer than `_line_source` reads at once
        if got.args is not None:
            cols: Columns | None = Columns.concat([self._counted(*got.args)])
        elif got.slow:
            cols = self._slow(self._lines(lines))
        else:
            try:
                rows = got.rows if got.rows is not None else list(map(orjson.loads, lines))
                cols = self._rows(rows)
            except (orjson.JSONDecodeError, _Suspect):  # text lines, NaN tokens, huge numbers
                cols = self._slow(self._lines(lines))
        return self._placed(got, cols, "step")

    def _lines(self, lines: list[bytes]) -> list[Record]:
        """A step log's lines one by one (`parse_line`); a last line without its newline as
        the side's `LineParser` reads it (cut short? not judged), as `tuimon.readers` does."""
        return [
            parse_line(line) if line.endswith(b"\n") else self.parser.parse(line)[0]
            for line in lines
            if line.strip()
        ]

    def _reread(self, got: _Prepared) -> list[bytes]:
        """The lines of a block a worker read, read again from the file (a block the worker
        could not read alone: rare)."""
        with _opened(self.log.path) as fh:
            skip = self.log.byte
            while skip > 0 and (chunk := fh.read(min(skip, 1 << 20))):
                skip -= len(chunk)
            return list(islice(fh, got.count))

    def _placed(self, got: _Prepared, cols: Columns | None, key: str | None) -> Columns | None:
        """Note where a block of lines lies in its file and the steps it gave (`segments`),
        when each of its lines is one record of its own (a step log's lines, a block of plain
        JSON Lines read into columns whole)."""
        line, byte = self.log.line, self.log.byte
        self.log.line += got.count
        self.log.byte += got.size
        if cols is None or not len(cols.steps) or self.log.segments is None:
            return cols
        if key != "step" and not self.whole:
            return cols  # plain JSON Lines read by the parser: a record may span blocks
        steps = cols.steps
        self.log.segments.append((line, byte, got.count, int(steps.min()), int(steps.max())))
        return cols

    def _rows(self, rows: list[Any]) -> Columns | None:
        """Parsed rows: the step rows that share their keys column-wise, the rest as records.
        Raises `_Suspect` (before counting anything) when a value needs its line read again."""
        try:
            kinds = list(map(_TYPE, rows))
        except (KeyError, TypeError, IndexError):
            kinds = [r.get("type") if r.__class__ is dict else None for r in rows]
        if kinds.count("step") == len(rows):
            steps, others = rows, []
        else:
            steps = [r for r, k in zip(rows, kinds, strict=True) if k == "step"]
            others = [r for r, k in zip(rows, kinds, strict=True) if k != "step"]
        uniform = None
        if steps:
            keys = tuple(steps[0])
            if set(map(len, steps)) == {len(keys)}:
                try:
                    uniform = self._uniform(steps, keys)
                except KeyError:  # not every row has these keys
                    uniform = None
            if uniform is None:
                others += steps
        records = [self._record(r) for r in others]
        if any(isinstance(r, Step) and suspect(r) for r in records):
            raise _Suspect
        made = self._counted(*uniform) if uniform is not None else None
        cols = [c for c in (made, self._slow(records)) if c is not None]
        return Columns.concat(cols) if cols else None

    def _record(self, row: Any) -> Step | Header | End | Text:
        if isinstance(row, dict):
            got = parse_obj(row)
            if got is not None:
                return got
        return parse_line(orjson.dumps(row))

    def _plain(self, got: _Prepared) -> Columns | None:
        """A block of plain JSON Lines: its rows as columns when they are uniform (the same
        keys, numbers, steps rising past the last one read), else line by line through the
        side's `LineParser` (what a live pair reads): the same records either way."""
        self.whole = False
        if got.args is None or got.first <= self.last:
            lines = [line for line in got.lines or () if line.strip()]  # as `load` cuts them
            return self._records_of(self.parser.feed(lines))
        self.last = got.final
        held = self._records_of(self.parser.close())
        self.whole = held is None
        fast = self._counted(*got.args)
        return fast if held is None else Columns.concat([held, fast])

    def _plain_columns(self, rows: list[Any]) -> tuple[tuple[Any, ...], int, int] | None:
        """`_uniform` for rows of plain JSON Lines, when nothing in them needs merging, with
        the block's first and last steps (they must rise past the side's last step)."""
        key = self.log.plain_key
        if not rows or key is None or not all(type(r) is dict for r in rows):
            return None
        keys = tuple(rows[0])
        if key not in keys or "type" in keys or set(map(len, rows)) != {len(keys)}:
            return None
        made = self._uniform(rows, keys, key)
        return None if made is None else _rising(made)

    def _records_of(self, records: list[Any]) -> Columns | None:
        """Records the side's parser gave, counted and as columns."""
        steps = [r.step for r in records if isinstance(r, Step)]
        if steps:
            self.last = max(self.last, *steps)
        return self._slow(records)

    def finish(self) -> Columns | None:
        """What the side's parser still holds at the end of its log."""
        return self._records_of(self.parser.close())

    def _plan(self, keys: tuple[str, ...], key: str = "step") -> _Plan | None:
        """What each of a uniform block's keys is (`_Plan`); None when the block needs the
        record-by-record reader (a step log row with a second step key). `key`: the step key
        of plain JSON Lines (their other counters are not metrics)."""
        plain = key != "step" or "type" not in keys
        if not plain and any(k in keys for k in STEP_KEYS[1:]):
            return None
        skip = (_SKIP | COUNTERS | {key}) if plain else _SKIP
        plan = _Plan(keys, key, "type" in keys and not plain)
        for name in keys:
            if name in skip:
                continue
            if name in ("param_digest", "param_digests"):
                setattr(plan, name[6:], name)
            elif is_clock(name) or not self.select.judged(name):
                plan.ignored.append(name)
            else:
                plan.numbers.append(name)
        return plan

    def _uniform(
        self, rows: list[dict[str, Any]], keys: tuple[str, ...], key: str = "step"
    ) -> tuple[Any, ...] | None:
        """Step rows with the same keys, column by column: the arguments of `_counted`, which
        counts them and gives their `Columns`; None when a value needs the record-by-record
        reader (a string, a nested object); `_Suspect` when a number may be an integer a
        float64 rounds. `key`: as in `_plan`."""
        plan = self._plan(keys, key)
        if plan is None:
            return None
        step = list(map(itemgetter(key), rows))
        if set(map(type, step)) != {int} or max(step) >= 2**63 or min(step) < -(2**63):
            return None
        values: dict[str, np.ndarray] = {}
        for name in plan.numbers:
            col = list(map(itemgetter(name), rows))  # KeyError: rows differ in their keys
            if (arr := _numbers(col)) is None:
                return None
            values[name] = arr
        digest: Any = None
        digests = None
        if plan.digest is not None:
            digest = list(map(itemgetter(plan.digest), rows))
            if not set(map(type, digest)) <= {str}:
                return None
        if plan.digests is not None:
            col = list(map(itemgetter(plan.digests), rows))
            if not all(type(d) is dict for d in col):
                return None
            digests = [{k: v for k, v in d.items() if isinstance(v, str)} for d in col]
        return (np.array(step, np.int64), values, list(plan.ignored), digest, digests)

    def _counted(
        self,
        step: np.ndarray,
        values: dict[str, np.ndarray],
        ignored: list[str],
        digest: list[str] | None,
        digests: list[dict[str, str]] | None,
    ) -> Columns:
        """Count a block `_uniform` read (its steps, metric names, ignored names) on this side
        and give its `Columns`."""
        n = len(step)
        self.log.steps += n
        self.aligner.accounts[self.side].steps += n
        self.aligner.names[self.side].update(values)
        self.aligner.ignored.update(ignored)
        self.aligner.top[self.side] = max(self.aligner.top[self.side], int(step.max()))
        self.aligner.last_step[self.side] = int(step[-1])
        digest_array = np.empty(n, dtype=object)
        if digest is not None:
            digest_array[:] = digest
        return Columns(
            steps=step,
            occ=np.zeros(n, np.int64),
            values=values,
            present={k: np.ones(n, bool) for k in values},
            digest=digest_array,
            digests=digests,
        )

    def _table(self, table: CsvColumns, start: int, stop: int) -> Columns:
        """Rows `start:stop` of a CSV read into columns, counted (the whole table with its
        first rows)."""
        if start == 0:
            self.count_table(table)
        return self.table_rows(table, slice(start, stop))

    def count_table(self, table: CsvColumns) -> None:
        """A CSV read into columns, counted on this side as its records would be (`_slow`):
        steps, judged and ignored names, clocks."""
        judged = list(map(self.select.judged, table.metrics))
        self.aligner.names[self.side].update(compress(table.metrics, judged))
        self.aligner.ignored.update(n for n, j in zip(table.metrics, judged, strict=True) if not j)
        self.aligner.ignored.update(table.clocks)
        n = len(table.steps)
        self.log.steps += n
        self.aligner.accounts[self.side].steps += n
        self.aligner.top[self.side] = max(self.aligner.top[self.side], int(table.steps.max()))
        self.aligner.last_step[self.side] = int(table.steps[-1])

    def table_rows(self, table: CsvColumns, rows: slice | np.ndarray) -> Columns:
        """Some rows of a CSV read into columns (a slice: views, no copy), its judged
        metrics; rows of its `values`, past the rows it shares with side a."""
        judged = list(map(self.select.judged, table.metrics))
        values = table.values if all(judged) else table.values[np.flatnonzero(judged)]
        steps = table.steps[table.shared :][rows]
        n = len(steps)
        present = np.ones(n, bool)  # shared: every row has every metric (never written to)
        names = list(compress(table.metrics, judged))
        return Columns(
            steps=steps,
            occ=np.zeros(n, np.int64),
            values=RowTable(names, values[:, rows]),
            present=dict.fromkeys(names, present),
            digest=np.empty(n, dtype=object),
        )

    def _slow(self, records: list[Any]) -> Columns | None:
        steps = []
        for record in records:
            if isinstance(record, Step):
                steps.append(record)
                self.aligner.note(self.side, record)
                continue
            self.aligner.note_other(self.side, record)
            if isinstance(record, Header):
                self.log.header = self.log.header or record
            elif isinstance(record, End):
                self.log.end = record
            else:
                self.log.texts += 1
                if self.log.first_text is None:
                    self.log.first_text = record.text
        self.log.steps += len(steps)
        if not steps:
            return None
        if sparse(steps):  # thousands of names, a few a row: judged row by row, in order
            self.sparse = True
            return None
        return Columns.of_steps(steps, [0] * len(steps), self.select)


def _rising(made: tuple[Any, ...]) -> tuple[tuple[Any, ...], int, int] | None:
    """Columns of plain JSON Lines with their first and last steps, when the steps rise."""
    step = made[0]
    if len(step) > 1 and not (step[1:] > step[:-1]).all():
        return None
    return made, int(step[0]), int(step[-1])


@dataclass
class _Plan:
    """What each key of a block of uniform step rows is (`_BlockReader._plan`)."""

    keys: tuple[str, ...]
    step: str
    typed: bool
    """A step log's rows (their "type" is "step")."""
    numbers: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    digest: str | None = None
    digests: str | None = None


_INT53 = Annotated[int, msgspec.Meta(gt=-(2**53), lt=2**53)]
"""An integer a float64 holds exactly (a larger one is judged record by record, `_numbers`)."""
_INT64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


def _shape(plan: _Plan) -> _Shape | None:
    """The typed rows of a plan; None where msgspec will not name a field so (a name holding
    a tab, a backslash, a quote or a control character): its blocks are read by orjson."""
    try:
        return _Shape(plan)
    except (ValueError, TypeError):
        return None


class _Shape:
    """A plan's lines decoded by msgspec straight into typed rows (no dict per line, about
    twice as fast as orjson's): a line of any other shape (a key more or less, a string for a
    number, a text line, an integer a float64 rounds) fails the whole block, which is read
    as before (`_BlockReader.prepare`): what the shape reads is what that path reads."""

    def __init__(self, plan: _Plan) -> None:
        kinds: dict[str, Any] = {plan.step: _INT64, "type": Literal["step"]}
        kinds.update(dict.fromkeys(plan.numbers, _INT53 | float))
        kinds.update({k: t for k, t in ((plan.digest, str), (plan.digests, dict)) if k})
        fields = [(f"f{i}", kinds.get(name, Any)) for i, name in enumerate(plan.keys)]
        rename = {f"f{i}": name for i, name in enumerate(plan.keys)}
        row = msgspec.defstruct("Row", fields, rename=rename, forbid_unknown_fields=True, gc=False)
        self.plan = plan
        self.decode = msgspec.json.Decoder(row).decode
        self.get = {name: attrgetter(f"f{i}") for i, name in enumerate(plan.keys)}

    def read(self, lines: list[bytes]) -> tuple[Any, ...] | None:
        """A block's lines as `_uniform` reads their rows; None when one is not of the
        shape, or the first line's keys come in another order (the order of the metrics)."""
        plan, get = self.plan, self.get
        try:
            if tuple(orjson.loads(lines[0])) != plan.keys:
                return None
            rows = list(map(self.decode, lines))
        except (msgspec.DecodeError, orjson.JSONDecodeError, TypeError):
            return None
        n = len(rows)
        values = {k: np.fromiter(map(get[k], rows), np.float64, n) for k in plan.numbers}
        if any(float(np.abs(v).max()) >= HUGE for v in values.values()):
            return None  # an integer beyond 64 bits, read as a float: `_numbers`
        digests = None
        if plan.digests is not None:
            digests = [
                {k: v for k, v in d.items() if isinstance(v, str)}
                for d in map(get[plan.digests], rows)
            ]
        return (
            np.fromiter(map(get[plan.step], rows), np.int64, n),
            values,
            list(plan.ignored),
            list(map(get[plan.digest], rows)) if plan.digest is not None else None,
            digests,
        )


def _numbers(col: list[Any]) -> np.ndarray | None:
    """A column of JSON numbers as float64; None when it holds anything else; `_Suspect`
    when a number may not fit (an int beyond int64, or one beyond 64 bits read as a float)."""
    kinds = set(map(type, col))
    if not kinds <= _NUMBERS:
        return None
    if kinds != _FLOATS and any(type(v) is int and not -(2**53) < v < 2**53 for v in col):
        raise _Suspect  # an integer a float64 may round: judged exactly, record by record
    arr = np.array(col, dtype=np.float64)
    if len(arr) and float(np.abs(arr).max()) >= HUGE:
        raise _Suspect
    return arr


class _Suspect(Exception):
    """A block holds a number that its line must tell (an integer beyond 64 bits)."""


@dataclass
class Judged:
    """Two logs compared: the summary, the aligned steps (when kept), the pair document, the
    logs' raw lines (when kept)."""

    summary: Summary
    aligned: list[AlignedStep]
    doc: PairDoc
    logs: tuple[SideLog, SideLog]


Progress = Callable[[PairAligner, dict[str, SideLog]], None]
"""Told after each block judged (the aligner, each side as far as it is read): a replay's
progress (`judge_pair`); it may raise to stop the reading."""


def _read_both(
    logs: SavedLogs,
    aligner: PairAligner,
    keep: bool,
    progress: Progress | None = None,
    *,
    fork: bool = True,
) -> tuple[tuple[SideLog, SideLog], ColumnMatcher | None]:
    """Stream both logs through a `ColumnMatcher`, a block of each side in turn; two CSVs
    read into columns are matched whole (`_judge_tables`: no matcher, None)."""
    _keep_heap()
    sides = {side: SideLog(getattr(logs, side)) for side in SIDES}
    readers = {side: _BlockReader(side, sides[side], aligner, keep, logs.reading) for side in SIDES}
    matcher = ColumnMatcher(aligner)
    workers = fork and _workers(logs, keep)
    apart = _csv_pair(logs) if workers else {}
    sources = {
        side: _line_source(
            logs,
            side,
            sides[side],
            keep,
            readers[side] if workers else None,
            apart.get(side),
            sides["a"] if side == "b" else None,
        )
        for side in SIDES
    }
    firsts = {side: next(sources[side], None) for side in SIDES}
    a, b = firsts["a"], firsts["b"]
    if isinstance(a, _CsvBlock) and isinstance(b, _CsvBlock):
        _judge_tables(readers, a.table, b.table)
        return (sides["a"], sides["b"]), None
    sources = {
        side: chain([first] if first is not None else [], sources[side])
        for side, first in firsts.items()
    }
    last: Block | None = None  # side a's block of this turn (`_SAME`)
    while sources:
        for side in list(sources):
            got = next(sources[side], None)
            lines = last if isinstance(got, _Same) else got
            last = lines
            cols = readers[side].block(lines) if lines is not None else readers[side].finish()
            if lines is None:
                del sources[side]
            if readers[side].sparse:
                matcher.repeated = True  # the record-by-record path (`_by_records`)
            if cols is not None and not matcher.repeated and not keep:
                matcher.add(side, cols)
            if progress is not None:
                progress(aligner, sides)
    return (sides["a"], sides["b"]), matcher


def _keep_heap() -> None:
    """Keep freed memory for the next block (glibc; the peak is the same, and only `tuimon
    compare`, a process that ends, reads logs here): each block's numpy temporaries, a few
    hundred KiB, were handed back to the system when freed and faulted in again for the next
    block (a quarter of the judge's time in page faults)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return
    mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
    mallopt(-3, 1 << 25)  # M_MMAP_THRESHOLD: blocks up to 32 MiB from the heap


def _judge_tables(readers: dict[str, _BlockReader], a: CsvColumns, b: CsvColumns) -> None:
    """Two CSVs read into columns (steps unique in each), merged on the step and judged
    `_rows_at_a_time` matched rows at a time: what `ColumnMatcher` does with their blocks, without
    taking every metric's rows apart twice (a CSV of 100,000 columns). Side b's first rows
    that are side a's (`CsvColumns.shared`) are matched row for row with them (no other row
    of either side can hold their steps: steps are unique within a side)."""
    n = b.shared
    if _same_rising(a.steps[n:], b.steps[n:]):  # the usual pair: no sort
        i = j = np.arange(n, len(a.steps))
    else:
        _, i, j = np.intersect1d(a.steps[n:], b.steps[n:], assume_unique=True, return_indices=True)
        i, j = i + n, j + n
    aligner = readers["a"].aligner
    for side, table in (("a", a), ("b", b)):  # count every row, as the blocks would be
        readers[side].count_table(table)
    most = min(_rows_at_a_time(a), _rows_at_a_time(b))
    for start in range(0, n, most):  # side b's rows read as side a's: the same rows
        same = slice(start, min(start + most, n))
        x, y = (readers[s].table_rows(a, same) for s in SIDES)
        aligner.judge(x, y, ulps=False)
    for start in range(0, len(i), most):
        rows = [_as_slice(i[start : start + most]), _as_slice(j[start : start + most] - n)]
        x, y = (readers[s].table_rows(t, r) for s, t, r in zip(SIDES, (a, b), rows, strict=True))
        aligner.judge(x, y, ulps=False)
    aligner.unmatched_extra["a"] = len(a.steps) - n - len(i)
    aligner.unmatched_extra["b"] = len(b.steps) - n - len(j)


def _same_rising(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two sides have the same steps, rising (so row i of one is row i of the other,
    in the order `np.intersect1d` gives)."""
    return len(a) == len(b) and np.array_equal(a, b) and bool((a[1:] > a[:-1]).all())


def _rows_at_a_time(table: CsvColumns) -> int:
    """Rows of a CSV judged at a time: `TABLE_VALUES` values, within `TABLE_MIN` and
    `TABLE_ROWS` rows."""
    rows = TABLE_VALUES // max(len(table.metrics), 1)
    return max(1, min(max(rows, TABLE_MIN), TABLE_ROWS))


def _as_slice(index: np.ndarray) -> slice | np.ndarray:
    """Rising consecutive row numbers as a slice (numpy takes views), others as they are."""
    if len(index) and int(index[-1]) - int(index[0]) == len(index) - 1:
        return slice(int(index[0]), int(index[-1]) + 1)
    return index


def judge(
    logs: SavedLogs, tolerance: float, select: MetricFilter | None = None, *, keep: bool = False
) -> Judged:
    """Compare two logs at once; `keep` also keeps every aligned step and the raw lines."""
    aligner = PairAligner(tolerance, select)
    sides, matcher = _streamed(logs, aligner, keep)
    empty = [(side, log) for side, log in zip(SIDES, sides, strict=True) if not log.steps]
    if aligner.text.compared and logs.reading.step_key is None:  # text logs: lines judged
        empty = []
    if len(empty) == 2 and logs.pair_dir is None:  # two files with no step: not logs it reads
        side, log = empty[0]
        raise CompareError(_no_steps(log, logs.reading, aligner.accounts[side]))
    aligned, aligner = _settled(logs, aligner, matcher, keep)
    ending = _ending(logs, sides, aligner)  # a run that logged no step: INCOMPLETE, as live
    summary = aligner.summary(
        complete=ending.complete, reason=ending.reason, interrupted=ending.interrupted
    )
    summary.first_divergent_lines = first_lines(logs, aligner, summary, sides)
    hold(summary, logs.a, logs.b, reading=logs.reading, select=select, devices=_devices(sides))
    return Judged(summary, aligned, _doc(logs, sides, summary, whole=keep), sides)


def _devices(sides: tuple[SideLog, SideLog]) -> tuple[str, str] | None:
    """The two sides' devices, as their step logs' headers name them (None when one does not)."""
    named = [str(log.header.env.get("device") or "") if log.header else "" for log in sides]
    return (named[0], named[1]) if all(named) else None


def judge_pair(
    logs: SavedLogs,
    tolerance: float,
    select: MetricFilter | None = None,
    progress: Progress | None = None,
    *,
    fork: bool = True,
) -> tuple[PairAligner, tuple[SideLog, SideLog]]:
    """Both logs judged as `judge` judges them (the block readers, the worker processes, the
    prefix the logs share parsed once), for a replay that shows the verdict without reading
    a record per step: the aligner that judged every step, and each side's header, end
    record, text lines and steps counted (`SideLog`). `progress` is told after each block.
    `fork`: worker processes may read the logs (not from a thread of a process whose event
    loop handles signals: a forked worker would share its wakeup pipe).
    Two logs with no step are not refused here: the replay says so as a live pair does."""
    aligner = PairAligner(tolerance, select)
    sides, matcher = _streamed(logs, aligner, False, progress, fork=fork)
    return _settled(logs, aligner, matcher, False)[1], sides


def _streamed(
    logs: SavedLogs,
    aligner: PairAligner,
    keep: bool,
    progress: Progress | None = None,
    *,
    fork: bool = True,
) -> tuple[tuple[SideLog, SideLog], ColumnMatcher | None]:
    """`_read_both` with the cyclic collector off."""
    gc.disable()  # parsing makes many short-lived dicts and no cycles: no collector passes
    try:
        return _read_both(logs, aligner, keep, progress, fork=fork)
    finally:
        gc.enable()


def _settled(
    logs: SavedLogs, aligner: PairAligner, matcher: ColumnMatcher | None, keep: bool
) -> tuple[list[AlignedStep], PairAligner]:
    """The steps still held by the matcher judged; a log whose steps repeat (or a pair kept
    whole) judged again record by record, in order (its accounts and text as streamed)."""
    aligned: list[AlignedStep] = []
    if keep or (matcher is not None and matcher.repeated):  # record by record, in order
        accounts, text = aligner.accounts, aligner.text
        aligned, judged = _by_records(logs, aligner.tolerance, aligner.select)
        judged.accounts, judged.text = accounts, text
        return aligned, judged
    if matcher is not None:
        matcher.finish()
    return aligned, aligner


def _devices(sides: tuple[SideLog, SideLog]) -> tuple[str, str] | None:
    """The two sides' devices, as their step logs' headers name them (None when one does not)."""
    named = [str(log.header.env.get("device") or "") if log.header else "" for log in sides]
    return (named[0], named[1]) if all(named) else None


HEAD_LINES = 64
"""Lines of a log read by its parser as well, when `read_one` reads it: its format, its step
key and its first records as read, and the order its names come in."""


def read_one(path: Path, reading: Reading) -> Read | None:
    """One log read as `compare` reads a side (`_line_source`, `_BlockReader`: a worker
    process parses a large log while this one counts it), for `tuimon read`: its account,
    its metrics and clocks, and from its first lines (`HEAD_LINES`, through the side's
    `LineParser`, as `load` reads them) its format, step key, first records and the order of
    its names. None, for the readers' `load` to read it record by record, unless it is a
    tuimon step log as written or plain JSON Lines of `HEAD_LINES` lines at least whose every
    line was a row: no text line, nothing skipped, no name its first lines do not have."""
    side = "a"
    try:
        if not path.is_file():
            return None
        with _opened(path) as fh:
            first = fh.readline(1 << 20)
            head = [first, *islice(fh, HEAD_LINES - 1)]
        if len(head) < HEAD_LINES:  # a short file (or a document on one line): `load` reads it
            return None
        native = reading.as_written(side) and b'"header"' in first and b"tuimon.steplog" in first
        if not native and _plain_key(path, reading, side) is None:
            return None
        parser = LineParser(reading, side)
        records = parser.feed([line for line in head if line.strip()]) + parser.close()
        logs = SavedLogs(path, path, reading=reading)
        aligner = PairAligner(0.0)
        log = SideLog(path)
        reader = _BlockReader(side, log, aligner, False, reading)
        for block in _line_source(
            logs, side, log, False, reader if _workers(logs, False) else None
        ):
            if isinstance(block, (_CsvBlock, _RecordBlock, _Same)):
                return None
            reader.block(block)
        reader.finish()
    except (CompareError, ReaderError, OSError):
        return None
    account = aligner.accounts[side]
    if (
        not (log.native or log.plain_key)
        or reader.sparse
        or log.texts
        or account.text
        or account.reasons()
        or account.notes
        or any(isinstance(r, Text) for r in records)
        or not (parser.tuimon or parser.json_rows)
    ):
        return None
    steps = [r for r in records if isinstance(r, Step)]
    metrics = dict.fromkeys(name for r in steps for name in r.metrics)
    clocks = dict.fromkeys(name for r in steps for name in r.clocks)
    if set(metrics) != aligner.names[side] or set(clocks) != aligner.ignored:
        return None
    rules = parser.read_by()
    if len(rules) != 1 or account.steps + account.meta != log.line:
        return None  # a line that is not one record of its own, or read by another rule
    kind = STEPLOG.name if parser.tuimon else JSON_LINES.name
    key = None if parser.tuimon else parser.first_key
    read_by = dict.fromkeys(rules, log.line)
    return Read(kind, key, account, list(metrics), list(clocks), records, read_by)


def first_lines(
    logs: SavedLogs,
    aligner: PairAligner,
    summary: Summary,
    sides: tuple[SideLog, SideLog] | None = None,
) -> dict[str, int | None] | None:
    """The line of each log where the runs part first (a text line or a step record), so a
    user opens both files there; None without a divergence. `sides`: the logs as `compare`
    streamed them (a step's line found in the block that held it)."""
    first = aligner.text.first
    metrics = summary.first_divergent_metrics
    by_text = bool(metrics) and metrics[0].startswith("text line")
    if summary.first_divergent_step is None and not by_text:
        return None
    where: dict[str, int | None] = {}
    for i, side in enumerate(SIDES):
        path = getattr(logs, side)
        log = sides[i] if sides is not None else None
        if by_text and first is not None:
            index = first.line_a if side == "a" else first.line_b
            where[side] = locate(path, logs.reading, side, text=index)
        else:
            key = aligner.tally.first_divergent or (summary.first_divergent_step, 0)
            found = _located(log, key) if log is not None else None
            if found is None:
                found = locate(path, logs.reading, side, step=key[0], occurrence=key[1])
            where[side] = found
    return where


def _located(log: SideLog, key: tuple[Any, int]) -> int | None:
    """The line of a step's record in a log streamed as lines (`SideLog.segments`): only the
    block that holds it is read again. None when not known so (`locate` reads the log)."""
    step, occurrence = key
    if occurrence or not log.segments or not (log.native or log.plain_key):
        return None
    name = "step" if log.native else log.plain_key
    try:
        with _opened(log.path) as fh:
            at = 0
            for line, byte, count, low, high in log.segments:
                if not low <= step <= high:
                    continue
                if isinstance(fh, io.BufferedReader):
                    fh.seek(byte)
                else:  # a decompressed stream: read on to the block's line
                    for _ in islice(fh, line - at):
                        pass
                    at = line + count
                for number, text in enumerate(islice(fh, count), line + 1):
                    try:
                        row = orjson.loads(text)
                    except orjson.JSONDecodeError:
                        record = parse_line(text) if log.native and text.strip() else None
                        if isinstance(record, Step) and record.step == step:
                            return number
                        continue
                    if (
                        type(row) is dict
                        and (not log.native or row.get("type") == "step")
                        and type(row.get(name)) is int
                        and row[name] == step
                    ):
                        return number
    except (OSError, CompareError):
        return None
    return None


def _by_records(
    logs: SavedLogs, tolerance: float, select: MetricFilter | None
) -> tuple[list[AlignedStep], PairAligner]:
    """The steps of both logs through the one loader (`SavedPair`), judged record by record."""
    pair = SavedPair.of(logs)
    try:
        return compare_steps(pair.steps("a"), pair.steps("b"), tolerance, select)
    except ReplayError as exc:
        raise CompareError(str(exc)) from None


def _no_steps(log: SideLog, reading: Reading, account: Account) -> str:
    message = no_steps(log.path, reading)
    if why := account.why(every=True):  # records skipped: why, and the flag that helps
        return f"{message}; skipped {why}"
    if log.first_text is not None and (hint := csv_hint(log.first_text, reading.step_key)):
        return f"{message}; {hint}"
    if log.first_text is not None:
        shown = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in log.first_text[:80])
        message += f"; {log.texts} lines, first: `{shown}`"
    return message


def _ending(logs: SavedLogs, sides: tuple[SideLog, SideLog], aligner: PairAligner) -> Ending:
    """How the pair ended (`saved_ending`), from the end records and the lines streamed."""
    by_side = dict(zip(SIDES, sides, strict=True))
    return saved_ending(
        logs,
        {side: log.end for side, log in by_side.items()},
        [side for side, log in by_side.items() if log.tuimon],
        {side: (log.steps, log.texts, log.first_text) for side, log in by_side.items()},
        aligner.text.compared,
    )


def _doc(
    logs: SavedLogs, sides: tuple[SideLog, SideLog], summary: Summary, *, whole: bool = True
) -> PairDoc:
    """The pair document of a comparison; with its summary when `whole` (a comparison to be
    saved; `save` adds it otherwise): the summary of 100,000 metrics takes seconds to write."""
    ha, hb = (log.header for log in sides)
    seed = ha.run.get("seed") if ha else None
    env_a, env_b = (h.env if h else {} for h in (ha, hb))
    hyper_a, hyper_b = (h.hyper if h else {} for h in (ha, hb))
    diff: dict[str, dict[str, list[Any]]] = {"env": {}, "hyper": {}}
    if env_a != env_b or hyper_a != hyper_b:
        diff = {"env": env_diff(env_a, env_b), "hyper": env_diff(hyper_a, hyper_b)}
    return PairDoc(
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        status="finished" if summary.complete or summary.reason is None else "failed",
        seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
        devices=tuple(str((h.env.get("device") if h else None) or "?") for h in (ha, hb)),  # type: ignore[arg-type]
        tolerance=summary.tolerance,
        more={
            "compared_from": [str(logs.a), str(logs.b)],
            "reading": logs.reading.to_dict(),
        },
        runs={
            side: RunDoc(
                device=(log.header.env.get("device") if log.header else None),
                command=str(log.path),
                status="finished" if log.end is None or log.end.status == "ok" else "failed",
                exit_code=None,
                steps=log.steps,
                env=log.header.env if log.header else None,
                hyper=log.header.hyper if log.header else None,
            )
            for side, log in zip(SIDES, sides, strict=True)
        },
        env_diff=diff["env"],
        hyper_diff=diff["hyper"],
        summary=summary.to_dict() if whole else {},
    )


def save(judged: Judged, save_to: str | None) -> Path:
    """Save a judged comparison as a pair in the store `save_to` names; its directory."""
    from tuimon.store import PairWriter, resolve_store

    doc = judged.doc
    if not doc.summary:
        doc.summary = judged.summary.to_dict()
    writer = PairWriter.create(
        resolve_store(save_to), seed=doc.seed, devices=doc.devices or ("?", "?"), label="compare"
    )
    for side, log in zip(SIDES, judged.logs, strict=True):
        writer.raw_bytes(side, b"".join(log.lines))  # as read: a cut last line stays cut
    for step in judged.aligned:
        writer.aligned(step.to_dict())
    try:
        return writer.finish(doc).parent
    except StoreError:
        writer.close()
        raise

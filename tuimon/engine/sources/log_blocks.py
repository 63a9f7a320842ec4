"""Where a side's blocks come from, and both sides read into the matcher.

A log's lines straight from the file (`CHUNK` bytes at a time, decompressed when it is gzip or
xz), a CSV of numbers read into columns (`tuimon.readers.csv_columns`; a pair of them with a worker
process), any other format as the records its reader gives. A large pair is read by one worker
process a side, which prepares the blocks (`BlockReader.prepare`), and side b's passes over the
prefix the two logs share (`_SAME`: parsed once). `read_both` streams the two sides, a block of
each in turn, through `matcher.ColumnMatcher` (two CSVs are matched whole, `_judge_tables`);
`read_one` reads one log so, for `tuimon read`; `located` finds a step's line again in the block
that held it.
"""

from __future__ import annotations

import ctypes
import gc
import io
import multiprocessing
import os
from collections.abc import Callable, Iterator
from functools import cache
from itertools import chain, islice
from pathlib import Path
from typing import IO, Any

import numpy as np
import orjson

from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.block_reader import (
    CORRUPT,
    Block,
    BlockReader,
    CsvBlock,
    PlainBlock,
    Prepared,
    RecordBlock,
    SideLog,
    opened,
)
from tuimon.engine.judge.matcher import ColumnMatcher
from tuimon.errors import CompareError
from tuimon.readers import LineParser, ReaderError, Reading, load, open_log, wandb_blocks
from tuimon.readers.csv_columns import CsvColumns, read_csv_columns, read_csv_pair
from tuimon.readers.formats import JSON_LINES, STEPLOG
from tuimon.readers.readout import Read
from tuimon.readers.rows_to_steps import step_key
from tuimon.steplog import Record, Step, Text, parse_line
from tuimon.store import SIDES, SavedLogs

CHUNK = 1 << 20
"""Bytes of lines read at a time, each line parsed on its own (about 4,000 steps of a step
log: a block is judged at once, and the judge's cost per block is spread over its rows)."""
TABLE_ROWS = 1 << 14
"""Rows of a CSV read into columns judged at a time, at most (the judge's arrays stay small)."""
TABLE_VALUES = 1 << 18
"""Values judged at a time, when a CSV is wide: fewer rows per block, down to `TABLE_MIN`."""
TABLE_MIN = 64
"""Rows judged at a time, at least (the judge's cost per block grows with the metrics)."""


def _records(path: Path, reading: Reading, side: str) -> list[Record]:
    """Any format the readers know as records (`tuimon.readers.load`), straight: no step-log
    text in between, so every skipped line keeps its reason."""
    try:
        return load(path, reading, side).records
    except ReaderError as exc:
        raise CompareError(str(exc)) from None


WORKERS_FROM = 8 << 20
"""A pair whose larger log holds at least this many bytes (on disk) is read by two worker
processes at once, one a side, where the machine has more than one CPU (`_workers`)."""


def _line_source(
    logs: SavedLogs,
    side: str,
    log: SideLog,
    keep: bool,
    reader: BlockReader | None = None,
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
        with opened(path) as fh:
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
        with opened(path) as fh:
            while block := fh.readlines(CHUNK):
                yield PlainBlock(block)
        return
    read = apart or (lambda: _csv_columns(path, logs.reading, side))
    if not keep and (table := read()) is not None:
        rows = _rows_at_a_time(table)
        for start in range(0, len(table.steps), rows):
            yield CsvBlock(table, start, start + rows)
        return
    try:  # a W&B run: read as its bytes come, the first rows judged at once
        runs = wandb_blocks(path, logs.reading, side)
    except ReaderError as exc:
        raise CompareError(str(exc)) from None
    if runs is not None:
        for block in runs:
            yield RecordBlock(block)
        return
    records = _records(path, logs.reading, side)
    for i in range(0, len(records), 4096):
        yield RecordBlock(records[i : i + 4096])


def _plain_key(path: Path, reading: Reading, side: str) -> str | None:
    """The step key of plain JSON Lines (`{"step": 5, "loss": 0.3}` on every line), read
    block by block into columns like a step log; None for any other format."""
    if reading.renames(side) or reading.judge or not path.is_file():
        return None
    with opened(path) as fh:
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
    reader: BlockReader, path: Path, key: str | None, twin: Path | None = None
) -> Iterator[Prepared | _Same]:
    """A side's blocks as a forked worker process prepares them (`BlockReader.prepare`: the
    parse, the columns of uniform rows), in order; this process counts and judges them
    (`BlockReader.apply`), so the verdict is the one a single process gives. The pipe holds
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
                with opened(path):
                    raise got
            yield got
    finally:
        receive.close()
        if worker.is_alive():
            worker.terminate()
        worker.join()


def _serve(
    reader: BlockReader,
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
    except (OSError, *CORRUPT):
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


Progress = Callable[[PairAligner, dict[str, SideLog]], None]
"""Told after each block judged (the aligner, each side as far as it is read): a replay's
progress (`compare.judge_pair`); it may raise to stop the reading."""


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
    readers = {side: BlockReader(side, sides[side], aligner, keep, logs.reading) for side in SIDES}
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
    if isinstance(a, CsvBlock) and isinstance(b, CsvBlock):
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
                matcher.repeated = True  # the record-by-record path (`compare._by_records`)
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


def _judge_tables(readers: dict[str, BlockReader], a: CsvColumns, b: CsvColumns) -> None:
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


def read_both(
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


HEAD_LINES = 64
"""Lines of a log read by its parser as well, when `read_one` reads it: its format, its step
key and its first records as read, and the order its names come in."""


def read_one(path: Path, reading: Reading) -> Read | None:
    """One log read as `compare` reads a side (`_line_source`, `BlockReader`: a worker
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
        with opened(path) as fh:
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
        reader = BlockReader(side, log, aligner, False, reading)
        for block in _line_source(
            logs, side, log, False, reader if _workers(logs, False) else None
        ):
            if isinstance(block, (CsvBlock, RecordBlock, _Same)):
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


def located(log: SideLog, key: tuple[Any, int]) -> int | None:
    """The line of a step's record in a log streamed as lines (`SideLog.segments`): only the
    block that holds it is read again. None when not known so (`locate` reads the log)."""
    step, occurrence = key
    if occurrence or not log.segments or not (log.native or log.plain_key):
        return None
    name = "step" if log.native else log.plain_key
    try:
        with opened(log.path) as fh:
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

"""A CSV of numbers straight into columns: `compare`'s fast path, no record per row.

`read_csv_columns` reads a CSV whose every cell is a number (a step column of integers, no
empty cell, no text, no quote, nothing beyond float64) a block of lines at a time into one
float64 array, and gives its steps and metric columns. It gives exactly what
`tuimon.readers.csv_records.read_csv` gives for such a file (the same steps, values and clocks);
for any other file, one whose steps repeat or one that holds several runs, it gives None
before anything is counted, and the caller reads it the general way. `read_csv_pair` reads a
pair's two files at once, side b's rows in a forked process, the lines both hold from their
start read once.
"""

from __future__ import annotations

import csv
import io
import mmap
import multiprocessing
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tuimon.clocks import is_clock
from tuimon.readers.csv_records import csv_columns, step_names
from tuimon.readers.rows_to_steps import COUNTERS, STEP_KEYS

LINES = 1 << 18
"""Bytes of lines parsed at a time."""
SHARED_BLOCK = 1 << 20
"""Bytes of two files compared at a time (`_shared`)."""
_MAX_STEP = 2.0**63
_AS_JSON = bytes(
    c if chr(c) in "0123456789.eE-, \t" else ord(",") if c == ord("\n") else ord("x")
    for c in range(256)
)
"""Lines whose cells may all be JSON numbers as the items of one JSON array (a line's end a
comma); any other byte one that no JSON reads."""
_INT_NEG_ZERO = re.compile(rb"-0(?![0-9.eE])")
"""`-0`: JSON reads it as the integer 0, `float()` as -0.0."""


@dataclass
class CsvColumns:
    """A numeric CSV as columns: its steps (unique), metric and clock names, and the metric
    values as one (metrics x rows) array."""

    steps: np.ndarray
    metrics: list[str]
    clocks: list[str]
    values: np.ndarray
    shared: int = 0
    """Side b of a pair: its first rows are, byte for byte, side a's table's first rows
    (read once, `read_csv_pair`), and `values` holds the rows after them."""


class _NotUniform(Exception):
    """A line that the general reader must read (or a file it must)."""


def read_csv_columns(path: Path, key: str | None = None) -> CsvColumns | None:
    """The file at `path` as `CsvColumns` when it is a CSV of numbers with a step column
    (`key` when given) whose steps do not repeat; None for anything else."""
    head = _header(path, key)
    if head is None:
        return None
    try:
        steps, blocks, _ = _rows(path, head, head.end, None)
    except (OSError, _NotUniform, ValueError):
        return None
    return _columns(head, steps, blocks)


@dataclass
class _Head:
    """A CSV's header line as this path reads it: the column names, the step column's
    index, and where the rows start (bytes)."""

    names: list[str]
    k: int
    end: int


def _header(path: Path, key: str | None) -> _Head | None:
    """The header of the file at `path`; None when it is not a CSV this path reads (or not
    a file it can open)."""
    try:
        with open(path, "rb") as fh:
            header = fh.readline(1 << 20)
    except OSError:
        return None
    names = _names(header, key)
    if names is None:
        return None
    where = key if key is not None else next((k for k in STEP_KEYS if k in names), "")
    if where not in names or len(set(names)) != len(names):
        return None
    return _Head(names, names.index(where), len(header))


_Read = tuple[list[np.ndarray], list[np.ndarray], int]
"""Rows as `_rows` reads them: the steps and the (rows x columns) cells of each block, and
how many of the rows lie before the mark."""


def _rows(path: Path, head: _Head, start: int, stop: int | None, mark: int = 0) -> _Read:
    """The rows of the lines from byte `start` (a line's start) to `stop` (a line's start,
    or None: the file's end), a block at a time, and how many end by byte `mark`;
    `_NotUniform` or ValueError when a line is not a row this path reads."""
    steps, blocks, before = [], [], 0
    with open(path, "rb") as fh:
        fh.seek(start)
        at = start
        while (stop is None or at < stop) and (
            data := fh.read(LINES if stop is None else min(LINES, stop - at))
        ):
            if stop is None or at + len(data) < stop:
                data += fh.readline()
            block_steps, block = _block(data, len(head.names), head.k)
            if at < mark:
                before += data.count(b"\n", 0, mark - at)
            at += len(data)
            steps.append(block_steps)
            blocks.append(block)
    return steps, blocks, before


def read_csv_pair(
    a: Path, b: Path, key: str | None = None, *, a_too: bool = True
) -> Callable[[], tuple[CsvColumns | None, CsvColumns | None]] | None:
    """`read_csv_columns` of both sides of a pair, with a forked process (started now) that
    reads side b's rows while this one reads side a's: call what it gives for the two
    tables. The lines both files hold from their first byte on (a rerun's rows before it
    parts) are read once, as side a's rows, and the process also takes side a's last rows,
    so that each reads about as many bytes. Its rows reach this process in a memory file
    (`os.memfd_create`; not copied through the pipe, which carries their counts). None when
    side b's header is not one `read_csv_columns` reads, or nothing forks here (not Linux);
    `a_too=False`: side a is not read here (a table for side b only)."""
    head_b = _header(b, key)
    head_a = _header(a, key) if a_too else None
    if head_b is None:
        return None
    try:
        size_a = a.stat().st_size if head_a is not None else 0
        size_b = b.stat().st_size
        shared = _shared(a, b, head_b.end) if head_a is not None else 0
        split = _split(a, head_a, size_a, size_b - max(shared, head_b.end))
        ctx = multiprocessing.get_context("fork")
        fd = os.memfd_create("tuimon-csv")
    except (OSError, ValueError, AttributeError):
        return None
    parts = ((a, head_a, split, size_a, shared), (b, head_b, max(shared, head_b.end), size_b, 0))
    receive, send = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_serve, args=(parts, fd, send), daemon=True)
    worker.start()
    send.close()

    def tables() -> tuple[CsvColumns | None, CsvColumns | None]:
        mine = None
        if head_a is not None:
            try:
                mine = _rows(a, head_a, head_a.end, split, shared)
            except (OSError, _NotUniform, ValueError):
                mine = None
        try:
            got = receive.recv()
        except EOFError:  # the process stopped
            got = False
        finally:
            receive.close()
            worker.join()
        try:
            if not got:  # an error: read here, as without a worker
                table_a = read_csv_columns(a, key) if head_a is not None else None
                return table_a, read_csv_columns(b, key)
            theirs = _received(fd, got, [head.names if head else [] for _, head, *_ in parts])
        finally:
            os.close(fd)
        table_a = None
        if head_a is not None and mine is not None and theirs[0] is not None:
            table_a = _columns(head_a, mine[0] + theirs[0][0], mine[1] + theirs[0][1])
        if theirs[1] is None:
            return table_a, None
        if shared <= head_b.end:
            return table_a, _columns(head_b, *theirs[1][:2])
        if table_a is None or mine is None or theirs[0] is None:  # side b's first rows: here
            return table_a, read_csv_columns(b, key)
        steps = [table_a.steps[: mine[2] + theirs[0][2]], *theirs[1][0]]
        return table_a, _columns(head_b, steps, theirs[1][1])

    return tables


def _shared(a: Path, b: Path, start: int) -> int:
    """The bytes two files hold alike from their first on, to the end of a line; 0 when
    they part before byte `start` (the header's end)."""
    x, y = bytearray(SHARED_BLOCK), bytearray(SHARED_BLOCK)
    at = line_end = 0
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            n, k = fa.readinto(x), fb.readinto(y)
            alike = n
            if not (n == k == len(x) and x == y):
                n = min(n, k)  # the bytes read into both (the rest of a buffer: an earlier block's)
                m = np.frombuffer(x, np.uint8, n) != np.frombuffer(y, np.uint8, n)
                alike = int(m.argmax()) if m.any() else n
            if (last := x.rfind(b"\n", 0, alike)) >= 0:
                line_end = at + last + 1
            if alike < len(x):
                break
            at += alike
    return line_end if line_end > start else 0


def _split(a: Path, head: _Head | None, size: int, theirs: int) -> int:
    """Where side a's rows are cut (a line's start) so that this process reads as many bytes
    as the worker, which reads side b's `theirs` bytes and side a's rows past the cut."""
    if head is None:
        return size
    at = (head.end + size + theirs) // 2
    if at >= size:
        return size
    with open(a, "rb") as fh:
        fh.seek(at)
        fh.readline()
        return min(fh.tell(), size)


_Part = tuple[Path, "_Head | None", int, int, int]
"""A file's rows the worker of `read_csv_pair` reads: path, header, from, to and the mark
(bytes, `_rows`)."""


def _serve(parts: tuple[_Part, ...], fd: int, send: Any) -> None:
    """The process of `read_csv_pair`: each part's rows into the memory file `fd` (its cells
    as (rows x columns) float64, then its steps), and for each its rows and rows before the
    mark into `send` (None for a part that is not rows this path reads); False when reading
    failed (the parent then reads both files itself)."""
    try:
        read: list[_Read | None] = []
        for path, head, start, stop, mark in parts:
            try:
                read.append(_rows(path, head, start, stop, mark) if head else None)
            except (_NotUniform, ValueError):
                read.append(None)
        counts = [None if r is None else (sum(map(len, r[0])), r[2]) for r in read]
        sizes = _sizes(counts, [head.names if head else [] for _, head, *_ in parts])
        if sum(sizes):
            os.ftruncate(fd, sum(sizes))
            shared = mmap.mmap(fd, sum(sizes))
            at = 0
            for got, size in zip(read, sizes, strict=True):
                if got is not None and size:
                    n, width = sum(map(len, got[0])), got[1][0].shape[1]
                    cells = np.ndarray((n, width), np.float64, shared, at)
                    np.concatenate(got[1], out=cells)
                    np.concatenate(got[0], out=np.ndarray(n, np.int64, shared, at + cells.nbytes))
                    at += size
        send.send(counts)
    except Exception:
        send.send(False)
    finally:
        send.close()


def _sizes(counts: list[tuple[int, int] | None], names: list[list[str]]) -> list[int]:
    """Bytes of each part's cells and steps in the memory file."""
    return [8 * c[0] * (len(w) + 1) if c else 0 for c, w in zip(counts, names, strict=True)]


def _received(
    fd: int, counts: list[tuple[int, int] | None], names: list[list[str]]
) -> list[_Read | None]:
    """The parts the worker of `read_csv_pair` read, as `_rows` gives them (one block each),
    their arrays in the memory file (mapped once; freed with the last of them)."""
    sizes = _sizes(counts, names)
    shared = mmap.mmap(fd, sum(sizes)) if sum(sizes) else None
    out: list[_Read | None] = []
    at = 0
    for count, width, size in zip(counts, names, sizes, strict=True):
        if count is None or shared is None or not size:
            out.append(None if count is None else ([], [], count[1]))
            continue
        n, before = count
        cells = np.ndarray((n, len(width)), np.float64, shared, at)
        out.append(([np.ndarray(n, np.int64, shared, at + cells.nbytes)], [cells], before))
        at += size
    return out


def _names(header: bytes, key: str | None) -> list[str] | None:
    """The columns of a plain CSV header line, named as `read_csv` names them; None when the
    file is not one this path reads (compressed, not ASCII, quoted, leading blanks...)."""
    if not header.endswith(b"\n") or (not header[:1].isalpha() and header[:1] != b"_"):
        return None
    text = header[:-1]
    if not text.isascii() or any(c in text for c in (b'"', b"\r", b"\x00")):
        return None
    decoded = text.decode()
    if csv_columns(decoded.strip(), key) is None:
        return None
    columns = [c.strip() for c in next(csv.reader([decoded]))]
    return step_names(columns, key)


def _block(data: bytes, width: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """A block of whole data lines: their steps and their cells as a (rows x width) array;
    `_NotUniform` when a line is not a full row of plain numbers (or the last lacks its
    newline: `read_csv` reads a cut file row by row)."""
    if not data.endswith(b"\n") or not data.isascii():
        raise _NotUniform
    if any(c in data for c in (b'"', b"\r", b"\x00")):
        raise _NotUniform
    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    commas = np.searchsorted(np.flatnonzero(raw == ord(",")), ends)
    if (np.diff(commas, prepend=0) != width - 1).any():
        raise _NotUniform  # a row of another width (two of them cannot make up for each other)
    values = _cells(data, width, k).reshape(-1, width)
    if values.shape != (len(ends), width):
        raise _NotUniform  # a blank line (loadtxt skips it; `read_csv` does not)
    if np.isinf(values).any() or (np.abs(values) >= 2.0**53).any():
        raise _NotUniform  # an infinity, an overflow, an integer a float64 may round: row by row
    column = values[:, k]
    if len(column) and float(np.abs(column).max()) < 2.0**53:  # the float is the integer
        return column.astype(np.int64), values
    steps = [int(line.split(b",", k + 1)[k]) for line in data.splitlines()]
    return np.array(steps, np.int64), values


@lru_cache(maxsize=8)
def _not_step_cell(k: int) -> re.Pattern[bytes]:
    """The start of a line whose cell `k` is not an integer of at most 19 characters (what
    `read_csv` takes as a step, give or take blanks other than spaces and tabs, left to it):
    one search, no match object per line."""
    cell = rb"(?:[^,\n]*,){%d}[ \t]*(?:-[0-9]{1,18}|[0-9]{1,19})[ \t]*[,\n]" % k
    return re.compile(rb"(?m)^(?!\Z)(?!" + cell + rb")")


def _cells(data: bytes, width: int, k: int) -> np.ndarray:
    """The cells of whole lines of plain numbers, `width` a line, in order: read by orjson as
    one JSON array when every cell is a JSON number that reads as `float()` reads its text
    (not `-0`, which JSON reads as the integer 0), else by `np.loadtxt` (which reads what
    `float()` reads, or fails); ValueError when a cell is not a number, `_NotUniform` when
    cell `k` of a line (the step) is not an integer of at most 19 characters."""
    if b"-" not in data or not _INT_NEG_ZERO.search(data):  # the usual: no sign to look at
        try:
            cells = orjson.loads(b"".join((b"[", memoryview(data.translate(_AS_JSON))[:-1], b"]")))
        except orjson.JSONDecodeError:
            cells = None  # `1.`, `.5`, `1e400`, `nan` ...: loadtxt reads them as float() does
        if cells is not None:  # a JSON integer has no leading zero, no fraction, no exponent
            step = cells[k::width]
            if set(map(type, step)) != {int} or min(step) <= -(10**18) or max(step) >= 10**19:
                raise _NotUniform
            return np.array(cells, np.float64)
    if _not_step_cell(k).search(data):
        raise _NotUniform
    text = io.StringIO(data.decode())
    return np.loadtxt(text, delimiter=",", comments=None, dtype=np.float64).ravel()


def _columns(head: _Head, steps: list[np.ndarray], blocks: list[np.ndarray]) -> CsvColumns | None:
    """The blocks as `CsvColumns`: metric and clock columns; None when the file holds no row,
    its steps repeat or it holds several runs (merged, or compared run by run and in order,
    by `read_csv`). Steps before the blocks' are rows side a's table holds
    (`CsvColumns.shared`)."""
    step = np.concatenate(steps) if steps else np.empty(0, np.int64)
    if not len(step):
        return None
    rising = len(step) < 2 or bool((step[1:] > step[:-1]).all())  # the usual: no search
    if not rising and (_runs(step) > 1 or len(np.unique(step)) != len(step)):
        return None
    names, k = head.names, head.k
    clocks = _clocks(tuple(names))
    metric = [i for i, n in enumerate(names) if i != k and n not in COUNTERS and not clocks[i]]
    clock = [i for i, n in enumerate(names) if i != k and n not in COUNTERS and clocks[i]]
    before = len(step) - sum(map(len, blocks))
    values = np.empty((len(metric), len(step) - before))
    _transposed(blocks, metric, values)
    names_of = [names[i] for i in metric], [names[i] for i in clock]
    return CsvColumns(step, *names_of, values, shared=before)


def _transposed(blocks: list[np.ndarray], columns: list[int], out: np.ndarray) -> None:
    """The `columns` of the blocks' rows into `out`, a (columns x rows) array, block by
    block, each block let go once copied (`blocks` ends empty: the rows are never held
    twice)."""
    pick: slice | list[int] = columns
    if columns and columns[-1] - columns[0] == len(columns) - 1:
        pick = slice(columns[0], columns[-1] + 1)  # the usual case: a view, not a copy
    at = 0
    blocks.reverse()
    while blocks:
        block = blocks.pop()
        out[:, at : at + len(block)] = block[:, pick].T
        at += len(block)


@lru_cache(maxsize=2)
def _clocks(names: tuple[str, ...]) -> list[bool]:
    """`is_clock` of each column, once for both sides of a pair (the same header)."""
    return list(map(is_clock, names))


def _runs(steps: np.ndarray) -> int:
    """How many runs the file holds (the rule of `csv_records.last_run`: a step below the one
    before it and at or below its run's first starts a run)."""
    runs = 1
    first = int(steps[0])
    for i in (np.flatnonzero(steps[1:] < steps[:-1]) + 1).tolist():
        if int(steps[i]) <= first:
            runs += 1
            first = int(steps[i])
    return runs

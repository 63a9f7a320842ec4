"""A CSV of numbers straight into columns: `compare`'s fast path, no record per row.

`read_csv_columns` reads a CSV whose every cell is a number (a step column of integers, no
empty cell, no text, no quote, nothing beyond float64) a block of lines at a time into one
float64 array, and gives its steps and metric columns. It gives exactly what
`tuimon.readers.tabular.read_csv` gives for such a file (the same steps, values and clocks);
for any other file, one whose steps repeat or one that holds several runs, it gives None
before anything is counted, and the caller reads it the general way. `read_csv_apart` reads
one in a forked process while this one reads the other side of a pair.
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
from tuimon.readers.rows import COUNTERS, STEP_KEYS
from tuimon.readers.tabular import csv_columns, step_names

LINES = 1 << 18
"""Bytes of lines parsed at a time."""
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


class _NotUniform(Exception):
    """A line that the general reader must read (or a file it must)."""


def read_csv_columns(
    path: Path, key: str | None = None, empty: Callable[[tuple[int, int]], np.ndarray] = np.empty
) -> CsvColumns | None:
    """The file at `path` as `CsvColumns` when it is a CSV of numbers with a step column
    (`key` when given) whose steps do not repeat; None for anything else. `empty` makes the
    array of the values (given its shape)."""
    try:
        with open(path, "rb") as fh:
            header = fh.readline(1 << 20)
            names = _names(header, key)
            if names is None:
                return None
            where = key if key is not None else next((k for k in STEP_KEYS if k in names), "")
            if where not in names or len(set(names)) != len(names):
                return None
            k = names.index(where)
            steps, blocks = [], []
            while data := fh.read(LINES):
                block_steps, block = _block(data + fh.readline(), len(names), k)
                steps.append(block_steps)
                blocks.append(block)
    except (OSError, _NotUniform, ValueError):
        return None
    if not blocks:
        return None
    return _columns(names, k, np.concatenate(steps), blocks, empty)


def read_csv_apart(path: Path, key: str | None = None) -> Callable[[], CsvColumns | None] | None:
    """`read_csv_columns` of the file in a forked process, started now (while this one reads
    the other side of a pair): call what it gives for the columns, whose arrays lie in a
    memory file shared with that process (`os.memfd_create`; not copied through the pipe,
    which carries their names and rows). None when the file's header is not one
    `read_csv_columns` reads, or nothing forks here (not Linux)."""
    try:
        with open(path, "rb") as fh:
            if _names(fh.readline(1 << 20), key) is None:
                return None
        ctx = multiprocessing.get_context("fork")
        fd = os.memfd_create("tuimon-csv")
    except (OSError, ValueError, AttributeError):
        return None
    receive, send = ctx.Pipe(duplex=False)
    worker = ctx.Process(target=_serve, args=(path, key, fd, send), daemon=True)
    worker.start()
    send.close()

    def columns() -> CsvColumns | None:
        try:
            got = receive.recv()
        except EOFError:  # the process stopped
            got = False
        finally:
            receive.close()
            worker.join()
        try:
            if not got:  # None: not a CSV it reads; False: read here, as without a worker
                return None if got is None else read_csv_columns(path, key)
            metrics, clocks, rows = got
            shared = mmap.mmap(fd, _shared_size(len(metrics), rows))
        finally:
            os.close(fd)
        values = np.ndarray((len(metrics), rows), np.float64, buffer=shared)
        steps = np.ndarray(rows, np.int64, buffer=shared, offset=values.nbytes)
        return CsvColumns(steps, metrics, clocks, values)

    return columns


def _serve(path: Path, key: str | None, fd: int, send: Any) -> None:
    """The process of `read_csv_apart`: the columns into the memory file `fd` (the values,
    then the steps), their names and rows into `send`; None (not a CSV it reads) or False
    (an error, told by the parent when it reads the file itself)."""
    shared: list[mmap.mmap] = []

    def empty(shape: tuple[int, int]) -> np.ndarray:
        os.ftruncate(fd, _shared_size(*shape))
        shared.append(mmap.mmap(fd, _shared_size(*shape)))
        return np.ndarray(shape, buffer=shared[0])

    try:
        table = read_csv_columns(path, key, empty)
        if table is not None:
            at = table.values.nbytes
            np.ndarray(len(table.steps), np.int64, buffer=shared[0], offset=at)[:] = table.steps
        send.send(table and (table.metrics, table.clocks, len(table.steps)))
    except Exception:
        send.send(False)
    finally:
        send.close()


def _shared_size(metrics: int, rows: int) -> int:
    """Bytes of the values and the steps of a CSV read apart."""
    return 8 * (metrics + 1) * rows


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


def _columns(
    names: list[str],
    k: int,
    steps: np.ndarray,
    blocks: list[np.ndarray],
    empty: Callable[[tuple[int, int]], np.ndarray],
) -> CsvColumns | None:
    """The blocks as `CsvColumns`: metric and clock columns; None when steps repeat or the
    file holds several runs (merged, or compared run by run and in order, by `read_csv`)."""
    rising = len(steps) < 2 or bool((steps[1:] > steps[:-1]).all())  # the usual: no search
    if not rising and (_runs(steps) > 1 or len(np.unique(steps)) != len(steps)):
        return None
    clocks = _clocks(tuple(names))
    metric = [i for i, n in enumerate(names) if i != k and n not in COUNTERS and not clocks[i]]
    clock = [i for i, n in enumerate(names) if i != k and n not in COUNTERS and clocks[i]]
    values = _transposed(blocks, metric, empty((len(metric), len(steps))))
    return CsvColumns(steps, [names[i] for i in metric], [names[i] for i in clock], values)


def _transposed(blocks: list[np.ndarray], columns: list[int], out: np.ndarray) -> np.ndarray:
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
    return out


@lru_cache(maxsize=2)
def _clocks(names: tuple[str, ...]) -> list[bool]:
    """`is_clock` of each column, once for both sides of a pair (the same header)."""
    return list(map(is_clock, names))


def _runs(steps: np.ndarray) -> int:
    """How many runs the file holds (the rule of `tabular.last_run`: a step below the one
    before it and at or below its run's first starts a run)."""
    runs = 1
    first = int(steps[0])
    for i in (np.flatnonzero(steps[1:] < steps[:-1]) + 1).tolist():
        if int(steps[i]) <= first:
            runs += 1
            first = int(steps[i])
    return runs

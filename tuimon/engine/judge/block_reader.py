"""A side's log read as blocks of columns, in one process: a block of a step log's lines or
of plain JSON Lines (decoded by msgspec into typed rows when its lines have the shape of the
side's last uniform block, `_Shape`; by orjson otherwise), rows of a CSV read into columns, or
records a reader gave, counted on its side (`SideLog`, the aligner's accounts) and turned into
`Columns` without a record per step. `BlockReader.prepare` needs none of the side's state, so a
worker process may run it (`tuimon.engine.sources.log_blocks`); `BlockReader.apply` counts a
prepared block, in the order of the side's blocks.
"""

from __future__ import annotations

import gzip
import lzma
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress, filterfalse, islice
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import numpy as np
import orjson

from tuimon.clocks import is_clock
from tuimon.engine.judge.align import PairAligner
from tuimon.engine.judge.columns import Columns, RowTable, sparse
from tuimon.errors import CompareError
from tuimon.readers import LineParser, Reading, open_log, to_line
from tuimon.readers.csv_columns import CsvColumns
from tuimon.readers.rows_to_steps import COUNTERS
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
    signed_zero,
    suspect,
)

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
    """The step key of plain JSON Lines, read block by block (`log_blocks._plain_key`)."""
    segments: list[tuple[int, int, int, int, int]] | None = field(default_factory=list)
    """Blocks of lines whose every line is at most one record (line, byte offset, lines,
    lowest and highest step), so `log_blocks.located` finds a step's line without parsing the
    whole log again; None when a line may have been cut between blocks."""
    line: int = 0
    """Lines read so far (raw blocks)."""
    byte: int = 0
    """Bytes read so far (raw blocks)."""

    @property
    def tuimon(self) -> bool:
        """A tuimon step log (its runs write an end record), however it was read."""
        return self.header is not None and self.header.format.startswith("tuimon")


CORRUPT = (EOFError, lzma.LZMAError, gzip.BadGzipFile)
"""A cut or damaged .gz / .xz (as `tuimon.readers.load` tells them)."""


@contextmanager
def opened(path: Path) -> Iterator[Any]:
    """A log's bytes, decompressed as a capped stream when it is gzip or xz (`open_log`);
    what cannot be read is a `CompareError` worded as `tuimon.readers.load` words it."""
    try:
        with open_log(path) as fh:
            yield fh
    except CORRUPT as exc:
        raise CompareError(f"{path}: cannot decompress: {exc or type(exc).__name__}") from None
    except OSError as exc:
        raise CompareError(f"{path}: {exc.strerror or exc}") from None


@dataclass
class CsvBlock:
    """Rows `start:stop` of a CSV read into columns (`csv_columns.read_csv_columns`)."""

    table: CsvColumns
    start: int
    stop: int


class PlainBlock(list):
    """A block of lines of plain JSON Lines (`log_blocks._plain_key`)."""


class RecordBlock(list):
    """A block of records a reader gave (not lines)."""


@dataclass
class Prepared:
    """A block of lines as far as it reads without its side's state (`BlockReader.prepare`;
    in a worker process when the pair is large, `log_blocks._worker_blocks`)."""

    key: str | None
    """None: a tuimon step log's lines; else the step key of plain JSON Lines."""
    count: int
    """Lines in the block."""
    size: int
    """Bytes in the block."""
    args: tuple[Any, ...] | None = None
    """Uniform step rows: the arguments of `BlockReader._counted`."""
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


Block = list[bytes] | RecordBlock | PlainBlock | CsvBlock | Prepared


_BLANK = frozenset((b"\n", b"\r\n", b"\r"))


def _filled(lines: list[bytes]) -> list[bytes]:
    """The lines that hold more than white space: the bare newlines passed over at C speed
    first (a log of millions of blank lines costs seconds, not a minute)."""
    return [line for line in filterfalse(_BLANK.__contains__, lines) if line.strip()]


class BlockReader:
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
        if isinstance(lines, PlainBlock):
            return self.apply(self.prepare(lines, self.log.plain_key, whole=True))
        if isinstance(lines, Prepared):
            return self.apply(lines)
        if isinstance(lines, CsvBlock):
            return self._table(lines.table, lines.start, lines.stop)
        if isinstance(lines, RecordBlock):
            if self.keep:
                self.log.lines += [to_line(r) for r in lines]
            return self._slow(lines)
        return self.apply(self.prepare(lines, None, whole=True))

    def prepare(self, lines: list[bytes], key: str | None, *, whole: bool) -> Prepared:
        """What can be read of a block of lines without this side's state (so a worker
        process may do it, `log_blocks._workers`): its rows parsed, and when they are uniform steps
        the arguments of `_counted` (read by the `_Shape` of the side's last uniform block
        when the lines fit it). `key`: None for a tuimon step log, else the step key of plain
        JSON Lines. `whole`: keep the lines and rows (else only when needed)."""
        got = Prepared(key, len(lines), sum(map(len, lines)), lines=lines)
        if got.size > MAX_LINE and max(map(len, lines)) > MAX_LINE:  # skipped, as live
            got.slow = True
            return got
        if signed_zero(b"".join(lines)):  # `-0`: read line by line, its sign kept
            got.slow = key is None
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

    def apply(self, got: Prepared) -> Columns | None:
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
            self.log.segments = None  # a first line longer than a block (`log_blocks`)
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

    def _reread(self, got: Prepared) -> list[bytes]:
        """The lines of a block a worker read, read again from the file (a block the worker
        could not read alone: rare)."""
        with opened(self.log.path) as fh:
            skip = self.log.byte
            while skip > 0 and (chunk := fh.read(min(skip, 1 << 20))):
                skip -= len(chunk)
            return list(islice(fh, got.count))

    def _placed(self, got: Prepared, cols: Columns | None, key: str | None) -> Columns | None:
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

    def _plain(self, got: Prepared) -> Columns | None:
        """A block of plain JSON Lines: its rows as columns when they are uniform (the same
        keys, numbers, steps rising past the last one read), else line by line through the
        side's `LineParser` (what a live pair reads): the same records either way."""
        self.whole = False
        if got.args is None or got.first <= self.last:
            lines = _filled(got.lines or [])  # as `load` cuts them
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
    """What each key of a block of uniform step rows is (`BlockReader._plan`)."""

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
    as before (`BlockReader.prepare`): what the shape reads is what that path reads."""

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

"""Lines of a stream (a run's stdout, a log of lines) -> records, one line at a time.

The same parser reads a live run and a saved log, so both come to the same records: JSON
objects with a step key, a tuimon step log, printed Python dicts (also inside a logger's line,
with colours and `\\r` redraws), printed text by built-in shapes or `--pattern`, and blocks of
indented `name=value` lines under a line that names a step (OLMo). Every line that is not a
record is `Text`, with the reason it was skipped when it looked like one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from tuimon.readers.account import NOTE
from tuimon.readers.literal import literal_row
from tuimon.readers.reading import NATIVE, Reading
from tuimon.readers.rows import (
    Levels,
    StreamMerger,
    as_int,
    as_number,
    content_key,
    renamed,
    row_step,
    step_key,
    step_path,
)
from tuimon.readers.table import ROW, TableRows
from tuimon.readers.text import (
    LEVEL,
    LEVELS_NOTE,
    block_value,
    heading_values,
    last_state,
    metric_like,
    parse_text,
    step_beyond_int64,
    two_level,
)
from tuimon.steplog import (
    CUT_TAIL,
    IN_RECORD,
    NO_STEP_KEY,
    STEP_RANGE,
    UNMATCHED_TEXT,
    UNREADABLE,
    Header,
    Record,
    Step,
    Text,
    loads_checked,
    parse_line,
    parse_obj,
    suspect,
    too_long,
    why_not_step,
)

_DASHES = re.compile(r"-{8,}")
_TABLE_ROW = re.compile(r"\|\s*(?P<key>[^|]*?[^|\s])\s*\|\s*(?P<value>[^|]*?)\s*\|")
_TABLE_STEP = re.compile(
    r"^(total_?timesteps|timesteps(_?so_?far|_total)?|steps|total_?steps|iterations?|iters?"
    r"|n_?updates|nupdates|updates|epochs?|serial_timesteps)$",
    re.IGNORECASE,
)
_TABLE_ORDER = ("timesteps", "steps", "iter", "updates", "epoch", "")
"""Step-like keys of a dumped table, best first."""
BOM = b"\xef\xbb\xbf"
"""UTF-8's byte-order mark, which Windows tools put before a file's first line: not data."""


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return loads_checked(data)  # NaN / Infinity tokens; 1e400 kept as unreadable text


def load_document(data: bytes) -> Any:
    """A whole JSON document, as `_loads`; integers beyond 64 bits kept as unreadable text too
    (orjson reads them as floats without a word; a line is checked by `suspect` instead)."""
    return loads_checked(data) if _LONG_INTEGER.search(data) else _loads(data)


_LONG_INTEGER = re.compile(rb"(?<![\d.eE])\d{19,}(?![\d.eE])")
"""An integer of 19 digits or more: it may not fit an int64."""


def _cut(line: bytes, most: int = 4096) -> str:
    """A line as text for a `Text` record (its first `most` characters)."""
    return line[: most * 4].decode("utf-8", "replace")[:most]


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
        self.key = self.reading.step_key
        self.tuimon = False
        """A tuimon header was seen: its other lines are text, not patterns."""
        self._merger = StreamMerger()
        self._printed_dicts = 0
        """Printed Python dicts without a step key numbered so far (`literal`)."""
        self._printed_steps = False
        """A printed Python dict had a step key: those without one are not numbered."""
        self.json_rows = False
        """A JSON object with a step key was read (the log is JSON Lines)."""
        self._heading: int | None = None
        """The step of a heading line just read (`Epoch 3/10`): the next line's values are
        that step's (`heading_values`)."""
        self._block: int | None = None
        """The step of the line before, whose indented `name=value` lines are its values."""
        self.levels = False
        """Steps of two levels (epoch, iteration) were read: said once in a note."""
        self._told_levels = False
        self._rows = 0
        """JSON objects without a step key numbered so far (`_numbered`)."""
        self._content_key: str | None = None
        """The step key found by content in the first JSON row (`content_key`)."""
        self._levels = Levels()
        """Two-level steps of JSON rows and tables, told by their counters (`Levels`)."""
        self.tables = TableRows(self.key)
        """Tables of numbers under a header of names (`tuimon.readers.table`)."""
        self.first_key: str | None = None
        """The step key of the first record read by key (what `tuimon read` shows)."""
        self._table: dict[str, str] | None = None
        """The rows of a dumped table being read (`_dumped`)."""
        self._tables = 0
        self._notes: list[str] = []
        self._notes_told = False

    def parse(self, line: bytes) -> tuple[Record, bool]:
        """One line as a record, and whether it is a complete tuimon step (never merged). A
        last line without its newline that is not a whole object (`...}`) may be cut short
        (`loss 0.12` of `loss 0.1234`): a step it would give is skipped as unreadable."""
        record, complete = self._parse(line)
        self.levels = self.levels or self._levels.on
        cut = not line.endswith(b"\n") and not line.rstrip().endswith(b"}")
        if isinstance(record, Step) and cut:
            return Text(f"{_cut(line, 200)} [cut short?]", CUT_TAIL), False
        if cut and isinstance(record, Text) and record.text.strip():  # not judged as text
            return Text(record.text, CUT_TAIL), False
        return self.reading.promote(record), complete

    def _parse(self, line: bytes) -> tuple[Record, bool]:
        if line.startswith(BOM):
            line = line[len(BOM) :]
        if too_long(line):
            return parse_line(line), False
        stripped = line.strip()
        if stripped.startswith(b"{"):
            try:
                obj = _loads(stripped)
                if isinstance(obj, dict):
                    kind = obj.get("type")
                    if kind in ("header", "end") or (kind == "step" and self.key in NATIVE):
                        record = parse_obj(obj)
                        if isinstance(record, Step) and suspect(record):  # an int > 64 bits?
                            record = parse_obj(loads_checked(stripped)) or record
                        if isinstance(record, Header) and record.format.startswith("tuimon"):
                            self.tuimon = True
                        if record is not None:
                            return self._renamed(record), kind == "step"
                    elif (step := self._row(obj)) is not None:  # a row
                        if not self.json_rows:
                            path = step_path(obj, self.key)
                            by_content = f"{self._content_key} (by content: a counter's name)"
                            self.first_key = ".".join(path) if path else by_content
                        self.json_rows = True
                        if suspect(step):  # an integer beyond 64 bits, read as a float?
                            step = self._row(loads_checked(stripped)) or step
                        return step, False
                    elif self.key is not None:
                        return Text(_cut(stripped), why_not_step(obj, self.key)), False
                    elif (numbered := self._numbered(obj)) is not None:
                        return numbered, False
            except (ValueError, RecursionError):
                pass
            if (printed := self._printed_dict(stripped)) is not None:
                return printed, False
            return parse_line(line), False
        if self.tuimon or not self.text or not stripped:
            return parse_line(line), False
        return self._text(line), False

    def _text(self, line: bytes) -> Record:
        """A printed line: a value of the open block, a dict inside a logger's line, a step
        by the built-in shapes or `--pattern`, else text (skipped when it looks like data)."""
        text = last_state(line.decode("utf-8", "replace"))
        if (dumped := self._dumped(text)) is not None:
            return dumped
        if not self.patterns and (row := self.tables.feed(text)) is not None:
            if self.tables.note and not self._notes_told:
                self._notes.append(self.tables.note)
            self.first_key = self.first_key or self.tables.note
            step = row_step(row, self.rename, self.tables.step, self._levels)
            if step is not None:
                return step
        if self._block is not None:
            if line[:1] in b" \t" and (found := block_value(text)) is not None:
                step = row_step({"step": self._block, found[0]: found[1]}, self.rename)
                if step is not None:
                    return step
            self._block = None
        heading, self._heading = self._heading, None
        if heading is not None and (under := heading_values(text, heading)) is not None:
            return self._renamed(under)
        if (inner := self._embedded(text)) is not None:
            return inner
        step = parse_text(text, self.patterns, self.key, bare=not self.patterns)
        if step is not None:
            if step.step >= LEVEL and not self.levels:
                self.levels = two_level(text) is not None
            self._block = step.step
            if step.metrics or step.unreadable:
                return self._renamed(step)
            self._heading = step.step
            return parse_line(line)  # a line that names a step and nothing else: a heading
        record = parse_line(line)
        if isinstance(record, Text) and step_beyond_int64(text, self.key):
            record = Text(record.text, STEP_RANGE)
        elif isinstance(record, Text) and metric_like(text):
            record = Text(record.text, UNMATCHED_TEXT)
        return record

    def _embedded(self, text: str) -> Step | Text | None:
        """A printed dict or a JSON object inside a logger's line (`INFO ... - {'loss': 0.7}`),
        read as if it stood alone; None when the line holds none."""
        start = text.find("{")
        end = text.rfind("}")
        if start <= 0 or end < start or text[start + 1 : start + 2] not in ("'", '"'):
            return None
        inner = text[start : end + 1].encode()
        if inner[:2] == b"{'":
            return self._printed_dict(inner)
        try:
            obj = _loads(inner)
        except (ValueError, RecursionError):
            return Text(text[:4096], UNREADABLE)
        if not isinstance(obj, dict):
            return None
        step = row_step(obj, self.rename, self.key)
        return step if step is not None else Text(text[:4096], why_not_step(obj, self.key))

    def _printed_dict(self, stripped: bytes) -> Step | Text | None:
        """A printed Python dict (`{'loss': 0.69, 'epoch': 0.01}`, as the Hugging Face Trainer
        prints) as a step: its own step key (`epoch` only as an int), else the number of such
        dicts before it."""
        if self.tuimon or not self.text or self.patterns or not stripped.startswith(b"{'"):
            return None
        row = literal_row(last_state(stripped.decode("utf-8", "replace")))
        if row is None or not any(as_number(v) is not None for v in row.values()):
            return None
        if self.key is not None:
            found = row_step(row, self.rename, self.key)
            return found or Text(_cut(stripped), why_not_step(row, self.key) or NO_STEP_KEY)
        finer = step_key({k: v for k, v in row.items() if k != "epoch"})
        if finer is not None or type(row.get("epoch")) is int:  # HF's float epochs are metrics
            self._printed_steps = True
            return row_step(row, self.rename)
        if self._printed_steps:
            return Text(_cut(stripped), NO_STEP_KEY)
        row = {"step": self._printed_dicts, **{k: v for k, v in row.items() if k != "step"}}
        self._printed_dicts += 1
        return row_step(row, self.rename)

    def _dumped(self, text: str) -> Record | None:
        """A table dumped between dashed lines, a `| key | value |` row a line (the loggers
        of OpenAI baselines, stable-baselines, rllab): one record per table, stepped by its
        step-like key (`total/steps`, `time/total_timesteps`, `iteration`), else its number."""
        stripped = text.strip()
        if _DASHES.fullmatch(stripped):
            if not self._table:  # none open, or one with no row yet: (re)opened
                self._table = {}
                return Text(text)  # a separator, judged as text, unless rows follow
            table, self._table = self._table, None
            return self._table_step(table) or Text(text)
        if self._table is None:
            return None
        m = _TABLE_ROW.fullmatch(stripped)
        if m is None:  # the table ended without its closing line: what it held is text
            self._table = None
            return None
        self._table[m["key"]] = m["value"]
        return Text(text, IN_RECORD)

    def _table_step(self, table: dict[str, str]) -> Step | None:
        if not table:
            return None
        self._tables += 1
        steppy = [k for k in table if as_int(table[k]) is not None
                  and _TABLE_STEP.search(k.rsplit("/", 1)[-1])]  # fmt: skip
        steppy.sort(key=lambda k: next(i for i, w in enumerate(_TABLE_ORDER) if w in k.lower()))
        key = step_key(table) or (steppy[0] if steppy else None)
        if key is None:
            key = "table" if "table" not in table else "_table"
            table = {key: str(self._tables), **table}
            if not self._notes_told:
                self._notes.append("tables without a step key: the table's number is the step")
        self.first_key = self.first_key or f"{key} (of a dumped | key | value | table)"
        return row_step(table, self.rename, key)

    @property
    def numbered(self) -> bool:
        """JSON objects without a step key were read, stepped by their row number."""
        return self._rows > 0

    def _row(self, obj: dict[str, Any]) -> Step | None:
        """A JSON row's step: by a step key, or by the key found by content in the stream's
        first row (`content_key`)."""
        step = row_step(obj, self.rename, self.key, self._levels)
        if step is not None or self.key is not None or "type" in obj:
            return step
        if self._content_key is None and not self.json_rows:
            self._content_key = content_key(obj)
        if self._content_key is None:
            return None
        return row_step(obj, self.rename, self._content_key, self._levels)

    def _numbered(self, obj: dict[str, Any]) -> Step | None:
        """A JSON object without a step key, in a stream where no object has had one (DETR's
        `log.txt`): its row number (1 = the first such object) is its step, said once."""
        if self.json_rows or self.tuimon or "type" in obj:
            return None
        if not any(as_number(v) is not None for v in obj.values()):
            return None
        self._rows += 1
        key = ROW if ROW not in obj else "_" + ROW
        self.first_key = self.first_key or f"{key}: the row number (no step key)"
        if not self._notes_told:
            self._notes.append(f"JSON rows without a step key: the row number ({key}) is the step")
        return row_step({key: self._rows, **obj}, self.rename, key)

    def _renamed(self, record: Record) -> Record:
        return renamed(record, self.rename) if isinstance(record, Step) else record

    def feed(self, lines: Iterable[bytes]) -> list[Record]:
        """Records of these lines that are ready (a step waits for the next line of another)."""
        out: list[Record] = []
        for line in lines:
            record, complete = self.parse(line)
            if self.levels and not self._told_levels:
                self._told_levels = True
                out += self._merger.feed(Text(NOTE + LEVELS_NOTE))
            if self._notes and not self._notes_told:
                self._notes_told = True
                out += self._merger.feed(Text(NOTE + self._notes.pop()))
            out += self._merger.feed(record, complete=complete)
        return out

    def close(self) -> list[Record]:
        """What is held at the end of the stream."""
        return self._merger.close()

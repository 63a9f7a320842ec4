"""Lines of a stream (a run's stdout, a log of lines) -> records, one line at a time.

The same parser reads a live run and a saved log, so both come to the same records. What a
line can be is said by the rules of the line formats' registry entries
(`tuimon.readers.line_formats`: a tuimon step log, JSON Lines, a table, printed text), asked
in the registry's order; every line that is not a record is `Text`, with the reason it was
skipped when it looked like one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tuimon.readers.account import NOTE
from tuimon.readers.entry import BRACED, OBJECT, PRINTED, Format, LineRule
from tuimon.readers.line_formats import (
    JSON_LINES,
    LINE_FORMATS,
    STEPLOG,
    TEXT,
    NumberedRow,
    cut,
    loads,
)
from tuimon.readers.reading import Reading
from tuimon.readers.rows_to_steps import Levels, StreamMerger
from tuimon.readers.text import (
    LEVELS_NOTE,
    last_state,
    metric_like,
    step_beyond_int64,
)
from tuimon.steplog import (
    CUT_TAIL,
    STEP_RANGE,
    UNMATCHED_TEXT,
    Record,
    Step,
    Text,
    loads_checked,
    parse_line,
    too_long,
)

BOM = b"\xef\xbb\xbf"
RELEASE_AFTER = 0.3
"""Seconds a followed stream (a run's stdout, a log file) stays quiet before the step its
parser holds for merging is shown (`LineParser.release`): a log that stops without an end
record is shown whole, its last line within a second."""
"""UTF-8's byte-order mark, which Windows tools put before a file's first line: not data."""
_loads = loads


def load_document(data: bytes) -> Any:
    """A whole JSON document, as `_loads`; integers beyond 64 bits kept as unreadable text too
    (orjson reads them as floats without a word; a line is checked by `suspect` instead)."""
    return loads_checked(data) if _LONG_INTEGER.search(data) else _loads(data)


_LONG_INTEGER = re.compile(rb"(?<![\d.eE])\d{19,}(?![\d.eE])")
"""An integer of 19 digits or more: it may not fit an int64."""


class LineParser:
    """Lines of one stream (a run's stdout, a log) -> records, in order.

    Each line is read by the first rule of the line formats' registry entries that takes it
    (`tuimon.readers.line_formats`, asked in the registry's order); `rule` is the rule that
    read the last line and `format` the entry that read the stream. A line no rule takes is
    text. Rows of one step on consecutive lines are merged (a step is shown when the next one
    starts, at the end: `close`, or when the stream has gone quiet: `release`).
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
        self.json_rows = False
        """A JSON object with a step key was read (the log is JSON Lines)."""
        self.heading: int | None = None
        """The step of a heading line just read (`Epoch 3/10`): the next line's values are
        that step's (`heading_values`)."""
        self.block: int | None = None
        """The step of the line before, whose indented `name=value` lines are its values."""
        self.levels = False
        """Steps of two levels (epoch, iteration) were read: said once in a note."""
        self._told_levels = False
        self.row_levels = Levels()
        """Two-level steps of JSON rows and tables, told by their counters (`Levels`)."""
        self.first_key: str | None = None
        """The step key of the first record read by key (what `tuimon read` shows)."""
        self.notes: list[str] = []
        self.notes_told = False
        self.rules: list[LineRule] = []
        """Every rule of this stream, in the registry's order."""
        self._entries: list[tuple[Format, list[LineRule]]] = []
        for entry in LINE_FORMATS:
            made = [rule(self) for rule in entry.lines]
            self._entries.append((entry, made))
            self.rules += made
        self._objects = [r for r in self.rules if r.reads == OBJECT]
        self._braced = [r for r in self.rules if r.reads == BRACED]
        self._printed = [r for r in self.rules if r.reads == PRINTED and r.frames]
        self._printed += [r for r in self.rules if r.reads == PRINTED and not r.frames]
        self.rule: LineRule | None = None
        """The rule that read the last line (None: no rule took it, it is text)."""

    @property
    def format(self) -> Format:
        """The entry that read this stream: a step log by its header, else the first entry
        (in the registry's order) one of whose rules gave a step (step records without a
        step log's header are JSON Lines), else text."""
        if self.tuimon:
            return STEPLOG
        for entry, rules in self._entries:
            if any(rule.steps for rule in rules):
                return JSON_LINES if entry is STEPLOG else entry
        return TEXT

    def read_by(self) -> dict[str, int]:
        """The lines each rule read (those that read any), in the registry's order."""
        return {rule.name: rule.lines for rule in self.rules if rule.lines}

    @property
    def numbered(self) -> bool:
        """JSON objects without a step key were read, stepped by their row number."""
        return any(rule.steps for rule in self.rules if isinstance(rule, NumberedRow))

    def parse(self, line: bytes) -> tuple[Record, bool]:
        """One line as a record, and whether it is a complete tuimon step (never merged). A
        last line without its newline that is not a whole object (`...}`) may be cut short
        (`loss 0.12` of `loss 0.1234`): a step it would give is skipped as unreadable."""
        record = self._parse(line)
        rule = self.rule
        complete = rule is not None and rule.whole and record.__class__ is Step
        self.levels = self.levels or self.row_levels.on
        cut_ = not line.endswith(b"\n") and not line.rstrip().endswith(b"}")
        if isinstance(record, Step) and cut_:
            return Text(f"{cut(line, 200)} [cut short?]", CUT_TAIL), False
        if cut_ and isinstance(record, Text) and record.text.strip():  # not judged as text
            return Text(record.text, CUT_TAIL), False
        return self.reading.promote(record), complete

    def _parse(self, line: bytes) -> Record:
        """A line's record by the first rule that takes it (`self.rule`), else as text."""
        self.rule = None
        if line.startswith(BOM):
            line = line[len(BOM) :]
        if too_long(line):
            return parse_line(line)
        stripped = line.strip()
        if stripped.startswith(b"{"):
            try:
                obj = _loads(stripped)
                if isinstance(obj, dict):
                    for rule in self._objects:
                        if (record := rule.read(line, stripped, obj)) is not None:
                            return self._took(rule, record)
            except (ValueError, RecursionError):
                pass
            for rule in self._braced:
                if (record := rule.read(line, stripped, None)) is not None:
                    return self._took(rule, record)
            return parse_line(line)
        if self.tuimon or not self.text or not stripped:
            return parse_line(line)
        text = last_state(line.decode("utf-8", "replace"))
        for rule in self._printed:
            if (record := rule.read(line, stripped, text)) is not None:
                return self._took(rule, record)
        record = parse_line(line)
        if isinstance(record, Text) and step_beyond_int64(text, self.key):
            record = Text(record.text, STEP_RANGE)
        elif isinstance(record, Text) and metric_like(text):
            record = Text(record.text, UNMATCHED_TEXT)
        return record

    def _took(self, rule: LineRule, record: Record) -> Record:
        self.rule = rule
        rule.lines += 1
        if record.__class__ is Step:
            rule.steps += 1
        return record

    def feed(self, lines: Iterable[bytes]) -> list[Record]:
        """Records of these lines that are ready (a step waits for the next line of another)."""
        out: list[Record] = []
        for line in lines:
            record, complete = self.parse(line)
            if self.levels and not self._told_levels:
                self._told_levels = True
                out += self._merger.feed(Text(NOTE + LEVELS_NOTE))
            if self.notes and not self.notes_told:
                self.notes_told = True
                out += self._merger.feed(Text(NOTE + self.notes.pop()))
            out += self._merger.feed(record, complete=complete)
        return out

    @property
    def holding(self) -> bool:
        """Records wait for the next line (the last step, to merge a row of it that may come)."""
        return self._merger.holding

    def release(self) -> list[Record]:
        """What is held, now: the stream has gone quiet (`RELEASE_AFTER`), so its last step is
        shown. A row of that step that comes later is a record of its own (the step logged
        again, compared in order)."""
        return self._merger.close()

    def close(self) -> list[Record]:
        """What is held at the end of the stream."""
        return self._merger.close()

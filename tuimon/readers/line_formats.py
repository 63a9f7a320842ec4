"""The formats of lines: their registry entries (`LINE_FORMATS`, in the order the registry
tries them) and the rules each is read by, one class a shape of line (`LineRule`).

`LineParser` (`tuimon.readers.lines`) makes the rules of every entry for each stream it reads
and asks them, line by line, in the registry's order: a line that is a JSON object the
`OBJECT` rules (a tuimon step record, a JSON row by its step key, a numbered row), a line that
begins with `{` and is no such object the `BRACED` ones (a printed Python dict), any other line
the `PRINTED` ones (a framed `| key | value |` table first, then a table row, then printed
text's shapes). The first rule that gives a record read the line: so the format that read a
stream is known (`LineParser.format`). A line no rule reads is text.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

import orjson

from tuimon.readers.entry import BRACED, OBJECT, Format, LineRule, Stream
from tuimon.readers.literal import literal_row
from tuimon.readers.reading import NATIVE
from tuimon.readers.rows_to_steps import (
    as_int,
    as_number,
    content_key,
    renamed,
    row_step,
    step_key,
    step_path,
)
from tuimon.readers.table_lines import ROW, TableRows
from tuimon.readers.text import (
    LEVEL,
    block_value,
    heading_values,
    last_state,
    parse_text,
    two_level,
)
from tuimon.steplog import (
    IN_RECORD,
    NO_STEP_KEY,
    UNREADABLE,
    Header,
    Record,
    Step,
    Text,
    loads_checked,
    parse_line,
    parse_obj,
    signed_zero,
    suspect,
    why_not_step,
)


def loads(data: bytes) -> Any:
    """A JSON value; NaN / Infinity tokens read too (1e400 kept as unreadable text), `-0` as
    -0.0 (`signed_zero`)."""
    if signed_zero(data):
        return loads_checked(data)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return loads_checked(data)


def cut(line: bytes, most: int = 4096) -> str:
    """A line as text for a `Text` record (its first `most` characters)."""
    return line[: most * 4].decode("utf-8", "replace")[:most]


def _renamed(record: Record, rename: Any) -> Record:
    return renamed(record, rename) if isinstance(record, Step) else record


# --- the tuimon step log ----------------------------------------------------------------------


class StepLogRecord(LineRule):
    """A record of a tuimon step log (`{"type": "header" | "step" | "end", ...}`), read exactly
    as `parse_line` reads it; its steps are whole (never merged with the next line's). A step
    record is a row under another `--step-key` (`JsonRow` reads it then)."""

    name = "tuimon step record"
    reads = OBJECT
    whole = True

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        kind = value.get("type")
        if not (kind in ("header", "end") or (kind == "step" and self.stream.key in NATIVE)):
            return None
        record = parse_obj(value)
        if isinstance(record, Step) and suspect(record):  # an int > 64 bits?
            record = parse_obj(loads_checked(stripped)) or record
        if isinstance(record, Header) and record.format.startswith("tuimon"):
            self.stream.tuimon = True
        if record is None:
            return parse_line(line)
        return _renamed(record, self.stream.rename)


# --- JSON Lines -------------------------------------------------------------------------------


class JsonRow(LineRule):
    """A JSON object with a step key (`step`, `_step`, `global_step`, a nested `trainer.step`,
    the `--step-key`), else the key found by content in the stream's first row (a counter's
    name: `content_key`). Under `--step-key`, an object without it is text saying why."""

    name = "JSON row by its step key"
    reads = OBJECT

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream)
        self.content_key: str | None = None
        """The step key found by content in the first JSON row (`content_key`)."""

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        s = self.stream
        step = self._row(value)
        if step is not None:
            if not s.json_rows:
                path = step_path(value, s.key)
                by_content = f"{self.content_key} (by content: a counter's name)"
                s.first_key = ".".join(path) if path else by_content
            s.json_rows = True
            if suspect(step):  # an integer beyond 64 bits, read as a float?
                step = self._row(loads_checked(stripped)) or step
            return step
        if s.key is not None:
            return Text(cut(stripped), why_not_step(value, s.key))
        return None

    def _row(self, obj: dict[str, Any]) -> Step | None:
        """A JSON row's step: by a step key, or by the key found by content in the stream's
        first row (`content_key`)."""
        s = self.stream
        step = row_step(obj, s.rename, s.key, s.row_levels)
        if step is not None or s.key is not None or "type" in obj:
            return step
        if self.content_key is None and not s.json_rows:
            self.content_key = content_key(obj)
        if self.content_key is None:
            return None
        return row_step(obj, s.rename, self.content_key, s.row_levels)


class NumberedRow(LineRule):
    """A JSON object without a step key, in a stream where no object has had one (DETR's
    `log.txt`): its row number (1 = the first such object) is its step, said once."""

    name = "JSON row by its number"
    reads = OBJECT

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream)
        self.rows = 0
        """JSON objects without a step key numbered so far."""

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        s = self.stream
        if s.key is not None or s.json_rows or s.tuimon or "type" in value:
            return None
        if not any(as_number(v) is not None for v in value.values()):
            return None
        self.rows += 1
        key = ROW if ROW not in value else "_" + ROW
        s.first_key = s.first_key or f"{key}: the row number (no step key)"
        if not s.notes_told:
            s.notes.append(f"JSON rows without a step key: the row number ({key}) is the step")
        return row_step({key: self.rows, **value}, s.rename, key)


# --- tables -----------------------------------------------------------------------------------


class TableRow(LineRule):
    """A row of numbers under a header of names (or of a table without one:
    `tuimon.readers.table_lines.TableRows`), stepped by its step column, else its number. Not
    asked under `--pattern`."""

    name = "table row"

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream)
        self.tables = TableRows(stream.key)

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        s = self.stream
        if s.patterns or (row := self.tables.feed(value)) is None:
            return None
        if self.tables.note and not s.notes_told:
            s.notes.append(self.tables.note)
        s.first_key = s.first_key or self.tables.note
        return row_step(row, s.rename, self.tables.step, s.row_levels)


# --- printed text -----------------------------------------------------------------------------

_DASHES = re.compile(r"-{8,}")
_TABLE_ROW = re.compile(r"\|\s*(?P<key>[^|]*?[^|\s])\s*\|\s*(?P<value>[^|]*?)\s*\|")
_TABLE_STEP = re.compile(
    r"^(total_?timesteps|timesteps(_?so_?far|_total)?|steps|total_?steps|iterations?|iters?"
    r"|n_?updates|nupdates|updates|epochs?|serial_timesteps)$",
    re.IGNORECASE,
)
_TABLE_ORDER = ("timesteps", "steps", "iter", "updates", "epoch", "")
"""Step-like keys of a dumped table, best first."""


class PrintedDict(LineRule):
    """A printed Python dict (`{'loss': 0.69, 'epoch': 0.01}`, as the Hugging Face Trainer
    prints) as a step: its own step key (`epoch` only as an int), else the number of such
    dicts before it. Also read inside a logger's line (`LoggedDict`)."""

    name = "printed dict"
    reads = BRACED

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream)
        self.dicts = 0
        """Printed dicts without a step key numbered so far."""
        self.stepped = False
        """A printed dict had a step key: those without one are not numbered."""

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        return self.dict_of(stripped)

    def dict_of(self, stripped: bytes) -> Step | Text | None:
        s = self.stream
        if s.tuimon or not s.text or s.patterns or not stripped.startswith(b"{'"):
            return None
        row = literal_row(last_state(stripped.decode("utf-8", "replace")))
        if row is None or not any(as_number(v) is not None for v in row.values()):
            return None
        if s.key is not None:
            found = row_step(row, s.rename, s.key)
            return found or Text(cut(stripped), why_not_step(row, s.key) or NO_STEP_KEY)
        finer = step_key({k: v for k, v in row.items() if k != "epoch"})
        if finer is not None or type(row.get("epoch")) is int:  # HF's float epochs are metrics
            self.stepped = True
            return row_step(row, s.rename)
        if self.stepped:
            return Text(cut(stripped), NO_STEP_KEY)
        row = {"step": self.dicts, **{k: v for k, v in row.items() if k != "step"}}
        self.dicts += 1
        return row_step(row, s.rename)


class DumpedTable(LineRule):
    """A table dumped between dashed lines, a `| key | value |` row a line (the loggers of
    OpenAI baselines, stable-baselines, rllab): one record per table, stepped by its step-like
    key (`total/steps`, `time/total_timesteps`, `iteration`), else its number. Its lines are
    text until the table closes (a row is `IN_RECORD`)."""

    name = "| key | value | table"
    frames = True

    def __init__(self, stream: Stream) -> None:
        super().__init__(stream)
        self.table: dict[str, str] | None = None
        """The rows of the table being read."""
        self.tables = 0

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        text: str = value
        body = text.strip()
        if _DASHES.fullmatch(body):
            if not self.table:  # none open, or one with no row yet: (re)opened
                self.table = {}
                return Text(text)  # a separator, judged as text, unless rows follow
            table, self.table = self.table, None
            return self._step(table) or Text(text)
        if self.table is None:
            return None
        m = _TABLE_ROW.fullmatch(body)
        if m is None:  # the table ended without its closing line: what it held is text
            self.table = None
            return None
        self.table[m["key"]] = m["value"]
        return Text(text, IN_RECORD)

    def _step(self, table: dict[str, str]) -> Step | None:
        if not table:
            return None
        s = self.stream
        self.tables += 1
        steppy = [k for k in table if as_int(table[k]) is not None
                  and _TABLE_STEP.search(k.rsplit("/", 1)[-1])]  # fmt: skip
        steppy.sort(key=lambda k: next(i for i, w in enumerate(_TABLE_ORDER) if w in k.lower()))
        key = step_key(table) or (steppy[0] if steppy else None)
        if key is None:
            key = "table" if "table" not in table else "_table"
            table = {key: str(self.tables), **table}
            if not s.notes_told:
                s.notes.append("tables without a step key: the table's number is the step")
        s.first_key = s.first_key or f"{key} (of a dumped | key | value | table)"
        return row_step(table, s.rename, key)


class BlockValue(LineRule):
    """An indented `name=value` line under a line that named a step (OLMo's blocks): a value
    of that step."""

    name = "value of a block"

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        s = self.stream
        if s.block is None:
            return None
        if line[:1] in b" \t" and (found := block_value(value)) is not None:
            step = row_step({"step": s.block, found[0]: found[1]}, s.rename)
            if step is not None:
                return step
        s.block = None
        return None


class HeadingValues(LineRule):
    """The values on the line after a heading that names a step and nothing else (`Epoch
    3/10`, then `loss: 0.1 - acc: 0.9`)."""

    name = "values under a heading"

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        s = self.stream
        heading, s.heading = s.heading, None
        if heading is not None and (under := heading_values(value, heading)) is not None:
            return _renamed(under, s.rename)
        return None


class LoggedDict(LineRule):
    """A printed dict or a JSON object inside a logger's line (`INFO ... - {'loss': 0.7}`),
    read as if it stood alone."""

    name = "dict in a logged line"

    @cached_property
    def printed(self) -> PrintedDict:
        return next(r for r in self.stream.rules if isinstance(r, PrintedDict))

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        text: str = value
        start = text.find("{")
        end = text.rfind("}")
        if start <= 0 or end < start or text[start + 1 : start + 2] not in ("'", '"'):
            return None
        inner = text[start : end + 1].encode()
        if inner[:2] == b"{'":
            return self.printed.dict_of(inner)
        try:
            obj = loads(inner)
        except (ValueError, RecursionError):
            return Text(text[:4096], UNREADABLE)
        if not isinstance(obj, dict):
            return None
        s = self.stream
        step = row_step(obj, s.rename, s.key)
        return step if step is not None else Text(text[:4096], why_not_step(obj, s.key))


class PrintedStep(LineRule):
    """A printed line that names a step (`step 100`, `iter 100:`, `Epoch [7][2750/6207]`) and
    its `name value` pairs, by the built-in shapes or `--pattern`. A line that names a step
    and nothing else is a heading (text; the next line's values are that step's), and opens
    a block of indented values."""

    name = "printed step"

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        s = self.stream
        step = parse_text(value, s.patterns, s.key, bare=not s.patterns)
        if step is None:
            return None
        if step.step >= LEVEL and not s.levels:
            s.levels = two_level(value) is not None
        s.block = step.step
        if step.metrics or step.unreadable:
            return _renamed(step, s.rename)
        s.heading = step.step
        return parse_line(line)  # a line that names a step and nothing else: a heading


# --- the entries ------------------------------------------------------------------------------

STEPLOG = Format(
    "tuimon step log",
    'a first line {"type": "header", "format": "tuimon.steplog/1", ...}',
    "tuimon train, tuimon.adopt.StepLogger, the Lightning and Hugging Face callbacks",
    streams=True,
    lines=(StepLogRecord,),
)
JSON_LINES = Format(
    "JSON Lines",
    "lines of JSON objects: a step key (step, _step, global_step, iter ...), else a counter "
    "found by its name, else the row number",
    "W&B history, LLaMA-Factory, DETR's log.txt, RLlib's result.json",
    streams=True,
    lines=(JsonRow, NumberedRow),
)
TABLE = Format(
    "table",
    "a header of names over rows of numbers (comma, tab or runs of spaces); the step column by "
    "name, else the row number",
    "SB3's progress.csv and monitor.csv, spinning-up's progress.txt, fastai's printed table",
    streams=True,
    lines=(TableRow,),
)
TEXT = Format(
    "text",
    "printed lines: a step named on a line (step 100, iter 100, Epoch [7][2750/6207]), then "
    "name value pairs; blocks and | key | value | tables; every other line judged as text",
    "nanoGPT, llm.c, mmcv/mmengine, MetricLogger scripts, timm, Megatron, OLMo, baselines",
    streams=True,
    lines=(PrintedDict, DumpedTable, BlockValue, HeadingValues, LoggedDict, PrintedStep),
)
LINE_FORMATS: tuple[Format, ...] = (STEPLOG, JSON_LINES, TABLE, TEXT)
"""The formats of lines, in the registry's order (`formats.FORMATS` ends with them)."""

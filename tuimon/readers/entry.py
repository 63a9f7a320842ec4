"""What a registry entry is (`Format`), what a file read gives (`Loaded`), and what a rule of a
format of lines is (`LineRule`): the shapes the registry (`tuimon.readers.formats`) and the
formats' own modules share, below both, so an entry is written beside its rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from tuimon.steplog import Record, Step

if TYPE_CHECKING:
    from tuimon.readers.reading import Reading
    from tuimon.readers.rows_to_steps import Levels


@dataclass
class Loaded:
    """A file read: its format, its records, and its lines when they are a step log as they
    stand (else None: `log_lines` writes the records as step-log lines)."""

    format: str
    records: list[Record]
    raw: list[bytes] | None = None
    step_key: str | None = None
    """The step key the reader found (`tuimon read`), where it names one."""
    rules: dict[str, int] | None = None
    """For a log of lines: the lines each rule read (`LineRule.name`), in the registry's
    order; None for the other formats."""

    @property
    def steps(self) -> list[Step]:
        return [r for r in self.records if isinstance(r, Step)]


@dataclass(frozen=True)
class Format:
    """One format: its name (what `tuimon read` and `--json` say), how it is recognised,
    who writes it, and whether a live run or `watch` can stream it line by line (the one
    decision: `tuimon.readers.streamable` asks the entry that would read a file)."""

    name: str
    recognised: str
    writers: str
    streams: bool
    folder: Callable[[Path], Loaded | None] | None = None
    """For a format that is a folder: its reader (None when the folder is not one)."""
    file: Callable[[Path, bytes, Reading], Loaded | None] | None = None
    """For a format told by a file's whole content: its reader (None when the file is not
    one). Files no entry takes are lines, read by `LineParser` (the formats without one)."""
    lines: tuple[type[LineRule], ...] = ()
    """For a format of lines: its rules, each a shape of line it reads, in the order they are
    asked (`LineParser` asks the entries' rules in the registry's order)."""
    records: bool = False
    """Followed live and read a block at a time by its records, not lines (a W&B run: the
    engine's `RunFollower`, `readers.wandb_blocks`); `streams` is about lines."""
    head: Callable[[bytes], bool] | None = None
    """For a format of files rewritten as a whole: whether a file that begins with these bytes
    is one (what following a growing file and reading in blocks go by: `readers.streamable`)."""


OBJECT, BRACED, PRINTED = "object", "braced", "printed"
"""What a rule reads: a line that is a JSON object (given the object), a line that begins
with `{` and is no JSON object a rule read (given None), any other line (given its text)."""


class Stream(Protocol):
    """What the rules of one stream share (the `LineParser` reading it)."""

    key: str | None
    rename: Mapping[str, str]
    patterns: tuple[Any, ...]
    text: bool
    tuimon: bool
    json_rows: bool
    first_key: str | None
    levels: bool
    block: int | None
    heading: int | None
    notes: list[str]
    notes_told: bool
    row_levels: Levels
    rules: list[LineRule]


class LineRule:
    """One shape of line a format of lines reads, made once per stream (its state is that
    stream's) and attached to its registry entry (`Format.lines`). `read` gives the line's
    record, or None when the line is not of this shape (the next rule is asked)."""

    name: ClassVar[str]
    """What `tuimon read` calls the lines this rule read."""
    reads: ClassVar[str] = PRINTED
    """`OBJECT`, `BRACED` or `PRINTED`: the lines it is asked about."""
    whole: ClassVar[bool] = False
    """Its steps are whole records, never merged with the next line's (a tuimon step)."""
    frames: ClassVar[bool] = False
    """Its records are framed (a table between dashed lines): asked before every other rule of
    printed lines, so the lines inside a frame are its own."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.lines = 0
        """Lines this rule read in this stream."""
        self.steps = 0
        """Steps it gave (its format read the stream when it gave one)."""

    def read(self, line: bytes, stripped: bytes, value: Any) -> Record | None:
        """The record of one line (`line` as it came, `stripped` without surrounding white
        space, `value` what `reads` says), None when it is not this rule's."""
        raise NotImplementedError

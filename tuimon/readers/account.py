"""The account of a side: what every line or record of a log became.

Each record a reader gives is one of: a step (used), a header or end record (metadata), plain
text, or a skipped record with a reason (`tuimon.steplog.SKIP_REASONS`). Lines that are not
steps are still judged, as text against their counterpart (`tuimon.engine.judge.text_judge`); only
records that name a step tuimon cannot use (`BLOCKING`) can make a reading a minority: when more
than `LIMIT` of a side's metric-like records were such, `Account.problem` says why, with the
flag that fixes it, and the pair is INCOMPLETE.

Printed lines with numbers under names are only counted as skipped when their shape (the line
with its numbers blanked) comes `SHAPE_REPEATS` times or more: a line printed once (a config)
is metadata, a line printed at every step is a record nobody read.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tuimon.steplog import (
    CUT_TAIL,
    IN_RECORD,
    KEY_ABSENT,
    NO_STEP_KEY,
    PATTERN_TIMEOUT,
    STEP_RANGE,
    UNJUDGED,
    UNMATCHED_TEXT,
    UNREADABLE,
    End,
    Header,
    Record,
    Step,
    Text,
)

NOTE = "tuimon: "
"""A reader's note on the file as a whole (a `Text` record that begins so)."""
LIMIT = 0.01
"""The share of a side's metric-like records that may be skipped before a verdict is
INCOMPLETE."""
SHAPE_REPEATS = 3
"""How often a printed shape must come before its lines count as skipped records."""
MAX_SHAPES = 4096
"""Distinct printed shapes remembered per side (memory stays bounded on any log)."""
FLAGS = {
    NO_STEP_KEY: "--step-key NAME says which field is the step",
    KEY_ABSENT: "the records have no field of the name --step-key gives: check the name",
    STEP_RANGE: "a step must fit int64; --step-key NAME picks another field",
    UNREADABLE: "damaged, cut or out-of-range records: no flag reads them",
    UNMATCHED_TEXT: "--pattern REGEX reads such lines",
    CUT_TAIL: "the file may have been cut, or is still being written",
    PATTERN_TIMEOUT: "the --pattern backtracks without end on such lines: rewrite it without "
    "nested or overlapping repeats such as (a|aa)+",
}
"""What a user can do about each reason."""
BLOCKING = frozenset({KEY_ABSENT, STEP_RANGE, PATTERN_TIMEOUT})
"""Reasons whose records make a side's reading a minority (`Account.why`): records that name
a step tuimon cannot use, and lines a `--pattern` gave up on (their content was not read).
Every other line is judged as text against its counterpart (`tuimon.engine.judge.text_judge`), and a
cut last line leaves a step missing."""
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def shape(text: str) -> str:
    """A printed line with its numbers blanked (the lines of one logging call share it)."""
    return _NUMBER.sub("#", text.strip())[:160]


@dataclass
class Account:
    """Counts of what one side's records were; `first` keeps an example per reason."""

    steps: int = 0
    meta: int = 0
    text: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    first: dict[str, str] = field(default_factory=dict)
    unjudged: int = 0
    """Lines whose content was not judged at all (too long to parse)."""
    notes: list[str] = field(default_factory=list)
    """What a reader said about the file as a whole (where reading stopped, runs in it)."""
    _shapes: Counter[str] = field(default_factory=Counter)
    _shape_first: dict[str, str] = field(default_factory=dict)

    def add(self, record: Record) -> None:
        """Count one record."""
        if isinstance(record, Step):
            self.steps += 1
        elif isinstance(record, (Header, End)):
            self.meta += 1
        elif isinstance(record, Text):
            self.add_text(record)

    def add_text(self, record: Text) -> None:
        """Count a line that is not a record: plain text, or skipped with its reason."""
        reason = record.skipped
        if reason == IN_RECORD:  # read into the record it belongs to
            return
        if record.text.startswith(NOTE) and len(self.notes) < 20:
            self.notes.append(record.text[len(NOTE) :])
            if reason is None:
                return
        if reason is None:
            self.text += 1
        elif reason == UNMATCHED_TEXT:
            key = shape(record.text)
            if key in self._shapes or len(self._shapes) < MAX_SHAPES:
                self._shapes[key] += 1
                self._shape_first.setdefault(key, record.text)
            else:
                self.text += 1
        else:
            self.skipped[reason] += 1
            self.first.setdefault(reason, record.text)
            if record.text.startswith((UNJUDGED, NOTE)):  # a line, or the rest of a file,
                self.unjudged += 1  # whose content was never read: it blocks (`why`)

    def reasons(self) -> dict[str, int]:
        """Skipped records per reason (printed shapes that repeat included)."""
        out = dict(self.skipped)
        repeated = [k for k, n in self._shapes.items() if n >= SHAPE_REPEATS]
        if repeated:
            out[UNMATCHED_TEXT] = sum(self._shapes[k] for k in repeated)
        return out

    def examples(self) -> dict[str, str]:
        """A first example line per reason."""
        out = dict(self.first)
        repeated = [k for k, n in self._shapes.items() if n >= SHAPE_REPEATS]
        if repeated:
            out[UNMATCHED_TEXT] = self._shape_first[repeated[0]]
        return out

    def problem(self, side: str) -> str | None:
        """Why this side's steps are a minority of what it logged (None when they are not)."""
        why = self.why()
        return None if why is None else f"run {side} skipped {why}"

    def why(self, *, every: bool = False) -> str | None:
        """`N of M metric-like records (reason count: the flag that helps; first: ...)` when
        more than `LIMIT` were skipped, else None."""
        skipped = {
            k: n for k, n in self.reasons().items() if k in BLOCKING or (every and k != CUT_TAIL)
        }
        if self.unjudged and UNREADABLE not in skipped:
            skipped[UNREADABLE] = self.unjudged
        total = sum(skipped.values())
        if not total or (total <= LIMIT * (self.steps + total) and not self.unjudged):
            return None
        reason = max(skipped, key=lambda name: skipped[name])
        example = _shown(self.examples().get(reason, ""), 60)
        return (
            f"{total} of {self.steps + total} metric-like records "
            f"({_counts(skipped)}: {FLAGS[reason]}; first: `{example}`)"
        )

    def line(self) -> str:
        """One line for people: what the records were (`account_line` for a dict)."""
        parts = [f"{self.steps} steps"]
        if skipped := self.reasons():
            parts.append(f"skipped {_counts(skipped)}")
        parts.append(f"{self.meta} header/end, {self.text + self._quiet_shapes()} text")
        return ", ".join(parts) + "".join(f"; {note}" for note in self.notes)

    def _quiet_shapes(self) -> int:
        return sum(n for n in self._shapes.values() if n < SHAPE_REPEATS)

    def to_dict(self) -> dict[str, Any]:
        """For `--json` and pair.json."""
        return {
            "steps": self.steps,
            "meta": self.meta,
            "text": self.text + self._quiet_shapes(),
            "skipped": self.reasons(),
            "first_skipped": {k: v[:200] for k, v in self.examples().items()},
            "notes": list(self.notes),
        }


def _counts(skipped: dict[str, int]) -> str:
    return ", ".join(f"{reason} {count}" for reason, count in skipped.items())


def _shown(text: str, most: int = 80) -> str:
    """A line as one printable line (escaped), cut to `most` characters."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text[:most])


def account_line(account: dict[str, Any]) -> str:
    """`Account.line` of an account as `to_dict` gave it (pair.json, `--json`)."""
    parts = [f"{account.get('steps', 0)} steps"]
    if skipped := account.get("skipped"):
        parts.append(f"skipped {_counts(skipped)}")
    parts.append(f"{account.get('meta', 0)} header/end, {account.get('text', 0)} text")
    return ", ".join(parts) + "".join(f"; {note}" for note in account.get("notes") or ())

"""How a pair's logs are read: the user's `--pattern`, `--map`, `--step-key` and `--judge`."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any

from tuimon.readers.text import PatternError, compile_pattern
from tuimon.steplog import PATTERN_TIMEOUT, Record, Step, Text

NATIVE = (None, "step")
"""Step keys under which a tuimon step record is read as written; under another
(`--step-key iter`), it is read as a row, stepped by that field."""


LINE_LIMIT_S = 0.1
"""The CPU time a `--pattern` may take on one line (the `regex` module's timeout): a plain
pattern takes microseconds on a line of a log; a catastrophic one (`(a|aa)+$` on fifty `a`s
and a `!`) would take years."""
GIVE_UP = 4
"""Lines over the limit after which a pattern is not tried again (every later line it would
read is skipped as `PATTERN_TIMEOUT`): a whole log of such lines costs well under a second."""
_TIMED_OUT = threading.local()
"""Set by `Guarded.search` when the line at hand was not read; taken by `Reading.promote`
(one line's parse runs in one thread)."""


class Guarded:
    """A compiled `--pattern` whose search stops at `LINE_LIMIT_S` (the `regex` module lets
    other threads run meanwhile: the TUI answers keys) and is given up after `GIVE_UP`."""

    def __init__(self, text: str, first: bool = True) -> None:
        self.text = text
        self.pattern = compile_pattern(text)
        self.first = first
        """The first of a reading's patterns: tried first on every line."""
        self.timeouts = 0

    def search(self, line: str) -> Any:
        """The match in `line`, or None: also when the limit was reached (said by `promote`)."""
        if self.first:  # a new line: what an earlier one left is not this one's
            _TIMED_OUT.line = False
        if self.timeouts < GIVE_UP:
            try:
                return self.pattern.search(line, timeout=LINE_LIMIT_S)
            except TimeoutError:
                self.timeouts += 1
        _TIMED_OUT.line = True
        return None


@dataclass(frozen=True)
class Reading:
    """How to read a pair's logs: the user's text patterns and the metric names of side b
    mapped onto side a's (`--map a_name=b_name`)."""

    patterns: tuple[str, ...] = ()
    rename: Mapping[str, str] = field(default_factory=dict)
    """b's name -> a's name."""
    step_key: str | None = None
    """`--step-key NAME`: the field (or printed name, or CSV column) that is the step."""
    judge: tuple[str, ...] = ()
    """`--judge GLOB`: names that look like clocks but are judged."""

    @cached_property
    def compiled(self) -> tuple[Any, ...]:
        """The patterns, compiled as `Guarded` (PatternError names one that cannot be used)."""
        return tuple(Guarded(p, i == 0) for i, p in enumerate(self.patterns))

    def promote(self, record: Record) -> Record:
        """A step with the clocks `--judge` names moved to its metrics; a line a pattern gave
        up on (`Guarded`) skipped as `PATTERN_TIMEOUT`, unless another pattern read it."""
        if getattr(_TIMED_OUT, "line", False):
            _TIMED_OUT.line = False
            if isinstance(record, Text) and self.patterns:
                return Text(record.text, PATTERN_TIMEOUT)
        if not self.judge or not isinstance(record, Step) or not record.clocks:
            return record
        moved = {
            k: v for k, v in record.clocks.items() if any(fnmatchcase(k, g) for g in self.judge)
        }
        if not moved:
            return record
        clocks = {k: v for k, v in record.clocks.items() if k not in moved}
        return replace(record, metrics={**record.metrics, **moved}, clocks=clocks)

    def renames(self, side: str) -> Mapping[str, str]:
        """The renames that apply to one side's metrics."""
        return self.rename if side == "b" else {}

    def as_written(self, side: str) -> bool:
        """A tuimon step log of this side reads as written: no rename, no `--judge`, and no
        step key but its own `step` (else its step records are read as rows, by the key)."""
        return not self.renames(side) and not self.judge and self.step_key in NATIVE

    @property
    def asked(self) -> bool:
        """Whether anything was asked (a flag given), or this is the default reading."""
        return bool(self.patterns or self.rename or self.step_key or self.judge)

    def to_dict(self) -> dict[str, Any] | None:
        """For pair.json (None when nothing was asked)."""
        if not self.asked:
            return None
        return {
            "patterns": list(self.patterns),
            "map": {a: b for b, a in self.rename.items()},
            "step_key": self.step_key,
            "judge": list(self.judge),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Reading:
        """From pair.json's `reading` block (anything malformed reads as the default, but a
        pattern that cannot be used is PatternError naming it: not a verdict under another
        reading)."""
        if not isinstance(data, Mapping):
            return cls()
        patterns = data.get("patterns")
        mapping = data.get("map")
        pats = (
            tuple(p for p in patterns if isinstance(p, str)) if isinstance(patterns, list) else ()
        )
        for p in pats:
            try:
                compile_pattern(p)
            except PatternError as exc:
                raise PatternError(f"the saved reading's {exc}") from None
        pairs = mapping.items() if isinstance(mapping, Mapping) else ()
        key = data.get("step_key")
        judge = data.get("judge")
        return cls(
            pats,
            {str(b): str(a) for a, b in pairs},
            key if isinstance(key, str) and key else None,
            tuple(g for g in judge if isinstance(g, str)) if isinstance(judge, list) else (),
        )


def parse_map(items: Sequence[str] | None) -> dict[str, str]:
    """`--map a_name=b_name` arguments as {b_name: a_name}; ValueError with one line when bad."""
    out: dict[str, str] = {}
    for item in items or ():
        a, sep, b = item.partition("=")
        if not sep or not a.strip() or not b.strip():
            raise ValueError(f"--map takes A_NAME=B_NAME (got {item!r})")
        out[b.strip()] = a.strip()
    return out

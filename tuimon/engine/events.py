"""What a source of a pair posts to its session: lines, stderr, notes, the exit."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuimon.steplog import End, Header, Record


@dataclass(frozen=True, slots=True)
class Lines:
    """Complete stdout (or log-file) lines from one side, bytes as they arrived."""

    side: str
    lines: list[bytes]
    records: list[Record] | None = None
    """The lines already parsed (a replay has them), so the session does not parse twice."""
    saved: bool = False
    """The bytes are on disk already (the pipe reader saved them as it read them)."""
    unread: bool = False
    """Delivered as read, never parsed: a stop was asked while the run flooded its output
    (`Run.halt`); saved, counted, not judged."""


@dataclass(frozen=True, slots=True)
class Stderr:
    """A chunk of one side's stderr."""

    side: str
    data: bytes
    saved: bool = False
    """The bytes are on disk already (the pipe reader saved them as it read them)."""


@dataclass(frozen=True, slots=True)
class Exited:
    """One side is over: its exit code and how it ended (finished / failed / interrupted)."""

    side: str
    code: int | None
    status: str


@dataclass(frozen=True, slots=True)
class Note:
    """A source's news of one side for the status line (a followed file rotated, a job queued)."""

    side: str
    text: str


@dataclass(frozen=True, slots=True)
class Judged:
    """A source that judges its steps itself (a saved pair replayed flat out, read in blocks
    by the judge `compare` uses, no record per step): how far one side is read, and the
    pair's summary so far; the last one of a side (`done`) brings what the side held besides
    its steps, and `aligner`, the aligner that judged every step of both (its summary is the
    pair's)."""

    side: str
    steps: int
    """Steps of this side read so far."""
    step: int | None
    """The last of them."""
    summary: Any = None
    """The pair's summary so far (`Summary`, running)."""
    done: bool = False
    header: Header | None = None
    end: End | None = None
    texts: int = 0
    """Records that are neither steps, header nor end (text lines, skipped lines)."""
    first_text: str | None = None
    device: str | None = None
    """The side's device as its header names it (when the view had not read it)."""
    aligner: Any = None
    """The `PairAligner` that judged the pair (the last event of the pair)."""
    ahead: bool = False
    """The pair judged in full while a paced feed shows it (a replay's view): its `summary`
    is said at once; nothing else changes (the feed still brings the steps)."""


SourceEvent = Lines | Stderr | Exited | Note | Judged

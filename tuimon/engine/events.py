"""What a source of a pair posts to its session: lines, stderr, notes, the exit."""

from __future__ import annotations

from dataclasses import dataclass

from tuimon.steplog import Record


@dataclass(frozen=True, slots=True)
class Lines:
    """Complete stdout (or log-file) lines from one side, bytes as they arrived."""

    side: str
    lines: list[bytes]
    records: list[Record] | None = None
    """The lines already parsed (a replay has them), so the session does not parse twice."""
    saved: bool = False
    """The bytes are on disk already (the pipe reader saved them as it read them)."""


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


SourceEvent = Lines | Stderr | Exited | Note

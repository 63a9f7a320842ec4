"""What is known of one side of a pair (its device, command, progress and how it ended): the
state a session keeps and a saved pair's loader rebuilds; nothing here imports asyncio."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tuimon.steplog import End, Header


@dataclass(slots=True)
class SideState:
    """What is known of one side of a pair."""

    side: str
    device: str
    command: str
    status: str = "starting"
    """starting / running / stalled / finished / failed / interrupted (quit, Ctrl-C, a signal to
    tuimon) / stopped (by tuimon's own rule: `--stop-on-divergence`, `--stop-on-fail`)"""
    exit_code: int | None = None
    step: int | None = None
    total: int | None = None
    rate: float | None = None
    """steps per second over the last few seconds"""
    records: int = 0
    texts: int = 0
    header: Header | None = None
    end: End | None = None
    stderr_tail: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    wall_s: float | None = None

    @property
    def eta(self) -> float | None:
        """Seconds to the last step, when the total and a rate are known."""
        if self.total is None or not self.rate or self.step is None:
            return None
        return max(0.0, (self.total - 1 - self.step) / self.rate)

    @property
    def over(self) -> bool:
        """The run has ended, one way or another."""
        return self.status in ("finished", "failed", "interrupted", "stopped")

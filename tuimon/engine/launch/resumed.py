"""One side of `tuimon pair --resume-at N` as two runs: the first stops after step N with a
checkpoint, the second resumes from it. The session sees one side: the lines of both runs in
one log, the restart said on the side's stderr (and so in its pane), one `Exited` at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tuimon.engine.events import Exited, Lines, SourceEvent, Stderr
from tuimon.engine.launch.runner import LaunchError, Run, RunSpec
from tuimon.steplog import Step


@dataclass(frozen=True)
class Resume:
    """How a side stops and resumes: after step `at`, through the file `checkpoint`, into the
    run `then`. `scratch`: the checkpoint's folder is tuimon's own (no pair directory), removed
    with it."""

    side: str
    at: int
    checkpoint: Path
    then: RunSpec
    scratch: bool = False
    record: dict[str, object] = field(default_factory=dict, compare=False)
    """pair.json's `resume`: the side, N, the second run's command, and whether it started
    (`restarted`, set as it does)."""

    def __post_init__(self) -> None:
        self.record.update(side=self.side, at=self.at, command=list(self.then.argv))
        self.record.setdefault("restarted", False)


def restart_line(side: str, at: int) -> str:
    """What the side's stderr (and pane) says where the second run starts."""
    return f"tuimon: run {side} stopped after step {at} and saved its checkpoint; restarted from it"


class _Held:
    """The queue of the first run: everything passes but its `Exited`, which is kept; the last
    step it logged is noted."""

    def __init__(self, queue: asyncio.Queue[SourceEvent]) -> None:
        self.queue = queue
        self.exited: Exited | None = None
        self.last_step: int | None = None

    async def put(self, event: SourceEvent) -> None:
        if isinstance(event, Exited):
            self.exited = event
            return
        if isinstance(event, Lines) and event.records:
            steps = [r.step for r in event.records if isinstance(r, Step)]
            if steps:
                self.last_step = steps[-1]
        await self.queue.put(event)


class ResumedRun:
    """A `Run` that stops after step `resume.at` with a checkpoint and starts again from it (the
    interface `LiveSource` uses of a `Run`)."""

    def __init__(
        self,
        spec: RunSpec,
        resume: Resume,
        queue: asyncio.Queue[SourceEvent],
        *,
        grace: float = 5.0,
        save: Callable[[str, bytes], None] | None = None,
        save_stderr: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self.spec = spec
        self.resume = resume
        self.queue = queue
        self.grace = grace
        self._held = _Held(queue)
        self._saves = (save, save_stderr)
        self.current = self._make(spec, self._held)  # type: ignore[arg-type]
        self.restarted = False
        """The second run was started."""
        self._stopping = False
        self.tick = self.current.tick

    def _make(self, spec: RunSpec, queue: asyncio.Queue[SourceEvent]) -> Run:
        save, save_stderr = self._saves
        return Run(spec, queue, grace=self.grace, save=save, save_stderr=save_stderr)

    @property
    def proc(self) -> asyncio.subprocess.Process | None:
        return self.current.proc

    @property
    def interrupted(self) -> bool:
        return self.current.interrupted or self._stopping

    @property
    def last_output(self) -> float:
        return self.current.last_output

    async def start(self) -> None:
        """Start the first run (LaunchError when it cannot start)."""
        self.current.tick = self.tick
        try:
            await self.current.start()
        except LaunchError:
            self._remove_checkpoint()  # no pump will: the side never ran
            raise

    async def pump(self) -> None:
        """The first run to its end; when it stopped after step `at` with its checkpoint, the
        second run from it; the side's `Exited` at the end; the checkpoint removed."""
        try:
            await self.current.pump()
            first = self._held.exited
            assert first is not None
            why = self._why_not_restart(first)
            if self._stopping:
                await self.queue.put(Exited(self.spec.side, first.code, "interrupted"))
            elif why is not None:
                code = first.code
                if first.status == "finished":  # exit 0, but not as a resume asks
                    await self._say(f"tuimon: run {self.spec.side} {why}; not restarted")
                    await self.queue.put(Exited(self.spec.side, code, "failed"))
                else:
                    await self.queue.put(first)
                return
            await self._restart()
        finally:
            self._remove_checkpoint()

    def _why_not_restart(self, first: Exited) -> str | None:
        """Why the second run does not start (None: it does)."""
        if first.status != "finished":
            return f"ended ({_exit(first.code)})"
        at, last = self.resume.at, self._held.last_step
        if last is None or last < at:
            shown = "no step" if last is None else f"its last step was {last}"
            return f"ended before step {at} ({shown}), so it saved no checkpoint"
        if last > at:
            return (
                f"went on past step {at} (to step {last}): its script does not stop at "
                "{checkpoint_at}"
            )
        if not os.path.lexists(self.resume.checkpoint):
            return f"stopped after step {at} without saving its checkpoint to {{checkpoint}}"
        return None

    async def _restart(self) -> None:
        """Start the second run on the real queue and pump it to its `Exited`."""
        side = self.spec.side
        await self._say(restart_line(side, self.resume.at))
        self.current = self._make(self.resume.then, self.queue)
        self.current.tick = self.tick
        self.restarted = True
        self.resume.record["restarted"] = True
        try:
            await self.current.start()
        except LaunchError as exc:
            await self._say(str(exc))
            await self.queue.put(Exited(side, None, "failed"))
            return
        if self._stopping:  # stopped while it started
            await self.current.terminate(self.grace)
        await self.current.pump()

    async def _say(self, text: str) -> None:
        await self.queue.put(Stderr(self.spec.side, f"{text}\n".encode()))

    def _remove_checkpoint(self) -> None:
        """The checkpoint is the run's scratch: removed once the side is over (a link is
        removed, never followed)."""
        path = self.resume.checkpoint
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif os.path.lexists(path):
                path.unlink()
            if self.resume.scratch:
                shutil.rmtree(path.parent, ignore_errors=True)

    def signal(self, sig: int) -> None:
        self.current.signal(sig)

    async def terminate(self, grace: float = 5.0) -> None:
        """Stop whichever run is under way; no second run starts after this."""
        self._stopping = True
        await self.current.terminate(grace)


def _exit(code: int | None) -> str:
    """How the first run's process ended: `exit 1`, `killed by SIGKILL`, `did not start`."""
    if code is None:
        return "did not start"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit {code}"

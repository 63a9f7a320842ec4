"""A quit while both runs flood their output is prompt (issue 40: `q`/`y` took 190 s): once a
stop is asked, what the pipes hold past a short grace is delivered as read, never parsed (the
lines were saved as they came), and a session past that grace judges no more lines: it counts
them and says so (a run that stops at once is judged whole). A quit took minutes because a
backlog of millions of lines was parsed and judged before the runs' `Exited` came."""

from __future__ import annotations

import asyncio
import json

from tuimon.engine.events import Lines
from tuimon.engine.launch.runner import HALT_GRACE, PARSE_SLICE, Run, RunSpec
from tuimon.engine.sources.session import LiveSource, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.steplog import Step


class _Reader:
    """What a `PipeReader` took since the last tick."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    def take(self) -> list[bytes]:
        lines, self.lines = self.lines, []
        return lines


def _lines(n: int) -> list[bytes]:
    return [json.dumps({"step": i, "loss": 1.0 / (i + 1)}).encode() + b"\n" for i in range(n)]


def _delivered(halt: bool) -> list[Lines]:
    queue: asyncio.Queue = asyncio.Queue()
    run = Run(RunSpec("a", "cpu", ("true",)), queue)
    if halt:
        run.halt()
        assert run.halted is not None
        run.halted -= HALT_GRACE  # its grace over: no more parsing
    lines = _lines(10 * PARSE_SLICE)
    asyncio.run(run._deliver(_Reader(lines), _Reader([]), run._parser()))  # type: ignore[arg-type]
    got = []
    while not queue.empty():
        got.append(queue.get_nowait())
    assert b"".join(line for event in got for line in event.lines) == b"".join(lines)
    return got


def test_a_halted_run_delivers_its_backlog_unparsed() -> None:
    parsed = _delivered(halt=False)
    assert len(parsed) == 10  # the last record is held for a line that may continue it
    assert sum(len(e.records or ()) for e in parsed) == 10 * PARSE_SLICE - 1
    (unparsed,) = _delivered(halt=True)  # every line, in one event, none parsed
    assert unparsed.records == [] and unparsed.saved and unparsed.unread


def test_a_stopping_session_counts_lines_it_does_not_judge() -> None:
    source = LiveSource((RunSpec("a", "cpu", ("true",)), RunSpec("b", "cpu", ("true",))))
    session = PairSession(source, (SideState("a", "cpu", "x"), SideState("b", "cpu", "x")))
    step = Step(0, {"loss": 1.0})
    session._handle(Lines("a", [b'{"step": 0, "loss": 1.0}\n'], [step], saved=True))
    assert session.sides["a"].records == 1
    session.stop()  # lines parsed within the grace are still judged
    session._handle(Lines("a", [b'{"step": 1, "loss": 1.0}\n'], [Step(1, {"loss": 1.0})]))
    assert session.sides["a"].records == 2
    session._handle(Lines("a", _lines(5), [], saved=True, unread=True))  # the run's backlog
    assert session._stopped_at is not None
    session._stopped_at -= HALT_GRACE  # the grace over: what is still queued is not judged
    session._handle(Lines("b", _lines(3), [Step(0, {"loss": 1.0})], saved=True))
    assert session.sides["a"].records == 2 and session.sides["b"].records == 0
    assert session._unjudged == {"a": 5, "b": 3}

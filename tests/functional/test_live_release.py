"""A live run that prints rows and then goes quiet shows its last row while it still runs
(issue 41: the record merger held the last step until the next line or the end)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tuimon.engine.launch.runner import RunSpec
from tuimon.engine.sources.session import LiveSource, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState

QUIET = (
    "import json, os, sys, time\n"
    "for i in range(5):\n"
    "    print(json.dumps({'step': i, 'loss': 1 / (i + 1)}), flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.02)\n"
)
"""Five rows of a script that is not tuimon's (rows of one step may come on several lines, so
each waits for the next), then quiet until the test lets it end."""


async def test_a_quiet_run_shows_its_last_row_before_it_ends(tmp_path: Path) -> None:
    go = tmp_path / "go"
    specs = tuple(
        RunSpec(side, "cpu", argv=(sys.executable, "-c", QUIET, str(go))) for side in "ab"
    )
    sides = tuple(SideState(side, "cpu", "quiet") for side in "ab")
    session = PairSession(LiveSource(specs, grace=2.0), sides, options=PairOptions())
    run = asyncio.create_task(session.run())
    try:
        for _ in range(1000):  # waits on the rows, not on a clock: 20 s at most
            if all(s.records == 5 for s in session.sides.values()) or run.done():
                break
            await asyncio.sleep(0.02)
        assert [s.records for s in session.sides.values()] == [5, 5]
        assert not any(s.over for s in session.sides.values())  # still running
    finally:
        go.touch()
        summary = await run
    assert summary.verdict == "IDENTICAL" and summary.steps_compared == 5

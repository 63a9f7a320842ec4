"""The headless view of a sweep: a line per pair as it starts and ends, then the Rich table."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from tuimon.engine.runs.submit import attach_line
from tuimon.engine.runs.sweep import COLUMNS, Sweep, hint_lines, row, seed_lines
from tuimon.report.headless import SIGNALS
from tuimon.sanitize import json_text
from tuimon.signal_owner import owned
from tuimon.store import StoreError

PLAIN_EVERY = 15.0
"""Seconds between progress lines of the running pairs when stderr is not a terminal."""
LIVE_EVERY = 0.25
"""Seconds between redraws of the live table (a finished or started pair redraws at once)."""
VERDICT_STYLES = {
    "IDENTICAL": "green",
    "CLOSE": "yellow",
    "DIVERGED": "red",
    "INCOMPLETE": "yellow",
}


def sweep_table(sweep: Sweep) -> Table:
    """Every job of the sweep, one row each (cells are data: plain `Text`, never markup)."""
    table = Table(title=Text(f"sweep {sweep.id}"), title_justify="left")
    for name in COLUMNS:
        table.add_column(name, justify="right" if name in ("seed", "repeat") else "left")
    for job in sweep.jobs:
        cells = [Text(cell) for cell in row(job)]
        cells[3].stylize(VERDICT_STYLES.get(job.verdict or "", ""))
        table.add_row(*cells)
    return table


def run_sweep_headless(sweep: Sweep, *, as_json: bool = False, out: Any = None) -> int:
    """Run the sweep, print its table (or its record as JSON) on `out`; the exit code."""
    out = out or sys.stdout
    console = Console(stderr=True)
    changed = _job_lines(sweep, console)
    todo = len(sweep.todo())
    console.print(
        Text(f"sweep {sweep.id}: {todo} pairs, {sweep.at_once} at a time; record {sweep.path}")
    )
    if console.is_terminal:  # the table, live, on stderr; the final one goes to stdout
        with Live(sweep_table(sweep), console=console, transient=True) as live:
            sweep.on_change = _redraw(sweep, live)
            code = asyncio.run(_run_with_signals(sweep))
    else:
        sweep.on_change = changed
        code = asyncio.run(_run_with_signals(sweep))
    if as_json:
        out.write(json_text(sweep.to_dict()) + "\n")
    else:
        print_result(sweep, out)
    out.flush()
    return code


def _job_lines(sweep: Sweep, console: Console) -> Callable[[int], None]:
    """`Sweep.on_change` for a stderr that is not a terminal: a line when a job starts or
    ends, and every `PLAIN_EVERY` seconds a line for each running job."""
    told: dict[int, str] = {}
    next_plain = time.monotonic() + PLAIN_EVERY

    def changed(index: int) -> None:
        nonlocal next_plain
        job = sweep.jobs[index]
        if time.monotonic() >= next_plain:  # a log file or CI job: how far the running ones are
            next_plain = time.monotonic() + PLAIN_EVERY
            for other in sweep.jobs:
                if other.status == "running":
                    console.print(Text(f"{other.name}: {row(other)[2]} · {row(other)[3]}"))
        if told.get(index) == job.status:
            return
        told[index] = job.status
        if job.status == "running":
            console.print(Text(f"{job.name}: running in {job.pair or '?'}"))
        else:
            console.print(Text(f"{job.name}: {job.status} · {job.verdict or '–'}"))

    return changed


def _redraw(sweep: Sweep, live: Live) -> Callable[[int], None]:
    """`Sweep.on_change` for a terminal: the live table redrawn, at most every `LIVE_EVERY`
    seconds while a job runs, at once when one starts or ends."""
    last = 0.0

    def redraw(index: int) -> None:
        nonlocal last
        if time.monotonic() - last >= LIVE_EVERY or sweep.jobs[index].status != "running":
            last = time.monotonic()
            live.update(sweep_table(sweep))

    return redraw


def print_result(sweep: Sweep, out: Any) -> None:
    """The final table on `out`, the hints, and what is left to run (`--resume`)."""
    width = None if getattr(out, "isatty", lambda: False)() else 200
    printer = Console(file=out, width=width, highlight=False, markup=False, emoji=False)
    printer.print(sweep_table(sweep))
    for line in [*seed_lines(sweep.jobs, sweep.check_seeds), *hint_lines(sweep.jobs)]:
        printer.print(Text(line))
    if sweep.failing.reason:
        printer.print(Text(f"sweep stopped: {sweep.failing.reason}"))
    if rest := sweep.rest_line():
        printer.print(Text(rest))
    if out_there := attach_line(sweep):
        printer.print(Text(out_there))
    printer.print(Text(f"sweep record: {sweep.path}"))


async def _run_with_signals(sweep: Sweep) -> int:
    loop = asyncio.get_running_loop()
    signals = SIGNALS if owned() else ()  # a test process keeps its own (`signal_owner`)
    for sig in signals:  # as a pair: runs stopped, pairs saved as interrupted, exit 3
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, sweep.stop)
    try:
        return await sweep.run()
    except StoreError as exc:
        print(f"tuimon: sweep record not saved: {exc}", file=sys.stderr)
        return 3
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)

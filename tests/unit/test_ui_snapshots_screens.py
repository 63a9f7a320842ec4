"""SVG snapshots at 120x40 and 80x24 of the screens and modals the pair-view snapshots do not
show: the sweep screen, a sweep's pair opened live from it, and the Ask, Lines, Confirm,
Commands and command-palette modals.

Everything shown is made here and fixed: the pair's batch comes from the demo logs through the
real aligner (no clock, no rate), the sweep's jobs and id are set by the test and its pairs are
scripted (nothing runs, nothing is read from or written to disk), the commands are fixed strings,
every path shown is relative, and a text input's cursor does not blink. Update with
``pytest --snapshot-update`` and look at each SVG.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from demo_pairs import demo_records
from helpers import wait_for
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input

from tuimon.engine.judge.align import compare_steps
from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Job, Sweep
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.steplog import End, Header, Record, Step, parse_line
from tuimon.ui.app import TuimonApp
from tuimon.ui.confirm import CommandsScreen
from tuimon.ui.modals import AskScreen, ConfirmScreen, LinesScreen
from tuimon.ui.pair_screen import PairScreen
from tuimon.ui.sweep_screen import SweepPairScreen, SweepScreen

SIZES = {"120x40": (120, 40), "80x24": (80, 24)}
PAIR = Path("store/20260102-030405_s0_cpu-cpu_demo")
SWEEP_PAIR = Path("store/20260102-030405_s2_cpu-cpu_sweep-20260102-030405-5eed")
COMMAND = "/home/u/.venv/bin/python3 -m tuimon train --seed {} --device cpu --threads {}"
SWEEP_ID = "20260102-030405-5eed"


def demo_batch(
    *, steps: int = 120, shown: int, done: bool, seed: int = 0, pair: Path = PAIR
) -> Batch:
    """One batch of a pair of demo logs parting at step 2: the first `shown` steps of each
    side, judged by the real aligner; both runs still running unless `done`."""
    records: dict[str, list[Record]] = {}
    for side in ("a", "b"):
        recs = [parse_line(line) for line in demo_records(side, steps=steps, diverge=2)]
        records[side] = [
            r
            for r in recs
            if not isinstance(r, (Step, End)) or (isinstance(r, Step) and r.step < shown)
        ] + [r for r in recs if done and isinstance(r, End)]
    steps_of = {side: [r for r in recs if isinstance(r, Step)] for side, recs in records.items()}
    aligned, aligner = compare_steps(steps_of["a"], steps_of["b"])
    sides = {}
    for side, threads in (("a", 2), ("b", 1)):
        state = SideState(side, "cpu", COMMAND.format(seed, threads))
        state.status = "finished" if done else "running"
        state.total = steps
        state.step = steps_of[side][-1].step if steps_of[side] else None
        state.records = len(steps_of[side])
        state.rate = None if done else 50.0
        state.exit_code = 0 if done else None
        state.header = next((r for r in records[side] if isinstance(r, Header)), None)
        sides[side] = state
    return Batch(
        records=records,
        stderr={},
        aligned=aligned,
        sides=sides,
        summary=aligner.summary(complete=done, running=not done),
        done=done,
        pair_path=pair if done else None,
        message=f"saved to {pair}" if done else None,
    )


@dataclass
class ScriptedPair:
    """What the pair view and the sweep ask of a session: it plays one fixed batch to its
    owner and to each listener, then waits (a running pair) or ends."""

    batch: Batch
    on_batch: Callable[[Batch], None] = lambda batch: None
    pair_path: Path | None = PAIR
    controls: Any = None
    logs: Any = None
    source: Any = None
    options: PairOptions = field(default_factory=PairOptions)
    artifacts: dict[str, Any] = field(default_factory=dict)
    listeners: list[Callable[[Batch], None]] = field(default_factory=list)
    interrupted: bool = False

    @property
    def sides(self) -> dict[str, SideState]:
        return self.batch.sides

    def play(self) -> None:
        """The batch to the owner, then to each listener (as `PairSession._flush` does)."""
        self.on_batch(self.batch)
        for listener in list(self.listeners):
            listener(self.batch)

    async def run(self) -> None:
        self.play()
        if not self.batch.done:
            await asyncio.Event().wait()

    def listen(self, listener: Callable[[Batch], None]) -> Callable[[], None]:
        self.listeners.append(listener)
        return lambda: self.listeners.remove(listener) if listener in self.listeners else None

    def stop(self) -> None:
        """Nothing runs."""
        self.interrupted = True

    def terminate(self) -> None:
        """Nothing runs."""


def pair_app(*, done: bool) -> TuimonApp:
    """A pair view of a scripted pair: finished, or running (60 of 120 steps shown)."""
    batch = demo_batch(shown=120 if done else 60, done=done)

    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        return ScriptedPair(batch, on_batch)  # type: ignore[return-value]

    return TuimonApp(store=Path("store"), make_session=make)


class ScriptedSweep(Sweep):
    """A sweep whose jobs are set by the test: two ended, one running (its pair scripted),
    one pending. `run` starts nothing and writes nothing; it waits as a running sweep does."""

    def __init__(self) -> None:
        plan = PairPlan(
            seed=None,
            devices=("cpu", "cpu"),
            threads=(2, 1),
            deterministic=False,
            loss_dtype=None,
            template=("python3", "train.py", "--seed", "{seed}", "--threads", "{threads}"),
        )
        batch = demo_batch(shown=60, done=False, seed=2, pair=SWEEP_PAIR)
        name = "20260102-030405_s{}_cpu-cpu_sweep-" + SWEEP_ID
        cause = "more than one CPU thread without deterministic algorithms"
        jobs = [
            Job(0, 1, "finished", name.format(0), "DIVERGED", 2, ["W_E"], 0.05, 120),
            Job(1, 1, "finished", name.format(1), "IDENTICAL", None, [], 0.0, 120),
            Job(2, 1, "running", SWEEP_PAIR.name, batch.summary.verdict, 2, [], None, 60),
            Job(3, 1),
        ]
        jobs[0].hints = [{"tag": "threads", "cause": cause, "evidence": "threads 2 vs 1"}]
        jobs[1].key_frequencies = "14, 35, 41, 42, 52"
        jobs[2].max_divergence, jobs[2].step, jobs[2].total = batch.summary.max_divergence, 59, 120
        super().__init__(
            Path("store"), plan, jobs, at_once=2, sweep_id=SWEEP_ID, created="2026-01-02T03:04:05"
        )
        self.scripted = ScriptedPair(batch, pair_path=SWEEP_PAIR)

    async def run(self) -> int:
        self.sessions[2] = self.scripted  # type: ignore[assignment]
        self.on_change(2)  # the screen gives the running pair a feed, which takes its batch
        self.scripted.play()
        await asyncio.Event().wait()
        return 0


# -- what each snapshot does before it is taken -----------------------------------------------


async def no_blink(pilot: Pilot) -> None:
    """A text input's cursor neither blinks nor shows (the snapshot never catches it half-way)."""
    for field_ in pilot.app.screen.query(Input):
        field_.cursor_blink = False
    await pilot.pause()


async def pair_settled(pilot: Pilot) -> None:
    """The pair view has its batch and no toast is left."""
    await wait_for(
        pilot,
        lambda: isinstance(s := pilot.app.screen, PairScreen) and s.model.summary is not None,
    )
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


def pressing(*keys: str, modal: type, done: bool = True) -> Callable[[Pilot], Awaitable[None]]:
    """Settle the pair view, press `keys`, wait for `modal` on top."""

    async def run(pilot: Pilot) -> None:
        await pair_settled(pilot)
        await pilot.press(*keys)
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, modal))
        await no_blink(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run


async def sweep_settled(pilot: Pilot) -> None:
    """The sweep screen shows its jobs; the running pair has a feed, and its batch was played
    (in the same call: `ScriptedSweep.run`)."""
    await wait_for(pilot, lambda: isinstance(s := pilot.app.screen, SweepScreen) and 2 in s.feeds)
    await pilot.pause()


async def sweep_pair_opened(pilot: Pilot) -> None:
    """Enter on the running row: its live pair view, drawn from the feed."""
    await sweep_settled(pilot)
    await pilot.press("down", "down", "enter")
    await wait_for(
        pilot,
        lambda: isinstance(s := pilot.app.screen, SweepPairScreen) and s.model.aligned_count > 0,
    )
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


async def palette_open(pilot: Pilot) -> None:
    """ctrl+p over a finished pair, "div" typed: the view's commands that match, best first
    (a search, as the order in which Textual's and the view's providers list every command
    with nothing typed is a race)."""
    await pair_settled(pilot)
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommandPalette))
    await pilot.press("d", "i", "v")
    commands = pilot.app.screen.query_one(CommandList)
    await wait_for(pilot, lambda: commands.option_count >= 3)
    await no_blink(pilot)
    await pilot.pause()


def sweep_app() -> TuimonApp:
    return TuimonApp(store=Path("store"), sweep=ScriptedSweep())


def commands_app() -> TuimonApp:
    """A resumed sweep: its command lines, asked about before anything runs."""
    app = TuimonApp(store=Path("store"), sweep=ScriptedSweep())
    app.confirm_lines = [
        "  python3 train.py --seed 2 --threads 2  (run a, cpu)",
        "  python3 train.py --seed 2 --threads 1  (run b, cpu)",
        "  and the same with {seed} = 3 (2 pairs in all)",
    ]
    return app


async def commands_shown(pilot: Pilot) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommandsScreen))
    await pilot.pause()


SCREENS: dict[str, tuple[Callable[[], TuimonApp], Callable[[Pilot], Awaitable[None]]]] = {
    "sweep": (sweep_app, sweep_settled),
    "sweep_pair": (sweep_app, sweep_pair_opened),
    "ask_jump": (lambda: pair_app(done=True), pressing("colon", modal=AskScreen)),
    "ask_search": (lambda: pair_app(done=True), pressing("slash", modal=AskScreen)),
    "lines_info": (lambda: pair_app(done=True), pressing("i", modal=LinesScreen)),
    "lines_parts": (lambda: pair_app(done=True), pressing("p", modal=LinesScreen)),
    "confirm_stop": (lambda: pair_app(done=False), pressing("q", modal=ConfirmScreen)),
    "commands": (commands_app, commands_shown),
    "command_palette": (lambda: pair_app(done=True), palette_open),
}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("screen", list(SCREENS))
def test_snapshot_screen(snap_compare, screen: str, size: str) -> None:
    make, before = SCREENS[screen]
    assert snap_compare(make(), terminal_size=SIZES[size], run_before=before)

"""SVG snapshots at 120x40 and 80x24: each state of the pair view that matters, the environment
differences, the browser.

Everything shown is fixed: demo logs (no clock), commands set by the test, a relative store
path and UTC for the browser's times. The pair-view states are scripted sessions: batches made
from demo logs by the real aligner, with fixed rates, posted in one go, so no snapshot depends
on timing or on how a machine splits the stream into batches. Update with
``pytest --snapshot-update`` and look.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from demo_pairs import demo_records, write_demo, write_demo_store
from helpers import wait_for
from textual.pilot import Pilot

from tuimon.engine.judge.align import compare_steps
from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.engine.sources.session import Batch, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.steplog import End, Header, Record, Step, parse_line
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import BrowserScreen
from tuimon.ui.pair_screen import PairScreen

SIZE = (120, 40)
SMALL = (80, 24)
PAIR = Path("store/20260102-030405_s0_cpu-cpu_demo")


def finished_replay(tmp_path: Path) -> TuimonApp:
    """A replay of two demo logs that part at step 2, with fixed commands."""
    a, b = write_demo(
        tmp_path / "logs",
        steps=120,
        diverge=2,
        extra={"b": [(100, "UserWarning: [bold]not markup[/] \x1b[31m")]},
    )
    logs = resolve_logs([str(a), str(b)])

    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        session = replay_session(logs, speed=1e6, on_batch=on_batch)
        for side, state in session.sides.items():
            state.command = (
                f"tuimon train --seed 0 --device cpu --threads {2 if side == 'a' else 1}"
            )
        return session

    return TuimonApp(store=tmp_path / "store", make_session=make, replay=True)


async def until_done(pilot: Pilot) -> None:
    """Wait for the replay's last batch."""
    await wait_for(pilot, lambda: isinstance(s := pilot.app.screen, PairScreen) and s.model.done)
    await pilot.pause()


def test_snapshot_finished_replay(snap_compare, tmp_path: Path) -> None:
    assert snap_compare(finished_replay(tmp_path), terminal_size=SIZE, run_before=until_done)


def test_snapshot_env_diff(snap_compare, tmp_path: Path) -> None:
    async def open_env(pilot: Pilot) -> None:
        await until_done(pilot)
        await pilot.press("e", "a")
        await pilot.pause()

    assert snap_compare(finished_replay(tmp_path), terminal_size=SIZE, run_before=open_env)


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Times shown in UTC whatever the machine's zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_snapshot_browser(
    snap_compare,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    utc: None,
) -> None:
    monkeypatch.chdir(tmp_path)
    write_demo_store(Path("store"))

    async def loaded(pilot: Pilot) -> None:
        await wait_for(
            pilot, lambda: isinstance(s := pilot.app.screen, BrowserScreen) and bool(s.pairs)
        )
        await pilot.press("j")
        await pilot.pause()

    assert snap_compare(TuimonApp(store=Path("store")), terminal_size=SIZE, run_before=loaded)


# -- scripted pair-view states ---------------------------------------------------------------


@dataclass
class ScriptedSession:
    """What a pair view asks of a session, playing fixed batches (then waiting, if not done)."""

    batches: list[Batch]
    sides: dict[str, SideState]
    on_batch: Callable[[Batch], None]
    pair_path: Path | None = PAIR
    controls: Any = None
    logs: Any = None
    options: PairOptions = field(default_factory=PairOptions)
    artifacts: dict[str, Any] = field(default_factory=dict)

    async def run(self) -> None:
        for batch in self.batches:
            self.on_batch(batch)
        if not (self.batches and self.batches[-1].done):
            await asyncio.Event().wait()

    def stop(self) -> None:
        """Nothing runs."""

    def terminate(self) -> None:
        """Nothing runs."""


COMMAND = "/home/u/.venv/bin/python3 -m tuimon train --seed 0 --device cpu --threads {}"


def scripted_app(
    *,
    steps: int = 120,
    shown: int | None = None,
    shown_b: int | None = None,
    diverge: int | None = 2,
    status: tuple[str, str] = ("finished", "finished"),
    done: bool = True,
    stderr: list[str] | None = None,
    message: str | None = None,
    complete: bool = True,
    reason: str | None = None,
) -> TuimonApp:
    """A live pair view fed one fixed batch: the first `shown` steps of two demo logs."""
    shown = steps if shown is None else shown
    records: dict[str, list[Record]] = {}
    for side in ("a", "b"):
        last = shown_b if side == "b" and shown_b is not None else shown
        recs = [parse_line(line) for line in demo_records(side, steps=steps, diverge=diverge)]
        cut = [r for r in recs if not isinstance(r, (Step, End)) or (
            isinstance(r, Step) and r.step < last)]  # fmt: skip
        if status[0 if side == "a" else 1] == "finished":
            cut += [r for r in recs if isinstance(r, End)]
        records[side] = cut
    steps_of = {k: [r for r in v if isinstance(r, Step)] for k, v in records.items()}
    aligned, aligner = compare_steps(steps_of["a"], steps_of["b"])
    summary = aligner.summary(complete=complete, reason=reason, running=not done)
    sides = {}
    for i, side in enumerate(("a", "b")):
        state = SideState(side, "cpu", COMMAND.format(2 if side == "a" else 1))
        state.status = status[i]
        state.total = steps
        state.step = steps_of[side][-1].step if steps_of[side] else None
        state.records = len(steps_of[side])
        state.rate = None if done or not shown else 50.0
        state.exit_code = {"finished": 0, "failed": 1}.get(status[i]) if done else None
        state.header = next((r for r in records[side] if isinstance(r, Header)), None)
        sides[side] = state
    batch = Batch(
        records=records,
        stderr={"b": stderr or []},
        aligned=aligned,
        sides=sides,
        summary=summary,
        done=done,
        pair_path=PAIR if done else None,
        message=message if message is not None else (f"saved to {PAIR}" if done else None),
    )

    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        return ScriptedSession([batch], sides, on_batch)  # type: ignore[return-value]

    return TuimonApp(store=Path("store"), make_session=make)


STATES: dict[str, Callable[[], TuimonApp]] = {
    "waiting": lambda: scripted_app(shown=0, status=("running", "running"), done=False),
    "running_diverged": lambda: scripted_app(shown=60, status=("running", "running"), done=False),
    "finished_identical": lambda: scripted_app(diverge=None),
    "finished_diverged": lambda: scripted_app(),
    "interrupted": lambda: scripted_app(
        shown=70,
        status=("interrupted", "interrupted"),
        complete=False,
        reason="interrupted by the user",
    ),
    "failed_run": lambda: scripted_app(
        shown_b=40,
        status=("finished", "failed"),
        stderr=["Traceback (most recent call last):", "RuntimeError: out of memory"],
        message=f"run b failed (exit 1): RuntimeError: out of memory; saved to {PAIR}",
        complete=False,
        reason="run b failed (exit 1)",
    ),
}


async def settle(pilot: Pilot) -> None:
    """Wait until the pair view has its batch and the toasts are gone."""
    await wait_for(pilot, lambda: isinstance(s := pilot.app.screen, PairScreen) and (
        s.model.summary is not None))  # fmt: skip
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


@pytest.mark.parametrize("size", [SIZE, SMALL], ids=["120x40", "80x24"])
@pytest.mark.parametrize("state", list(STATES))
def test_snapshot_pair_state(snap_compare, state: str, size: tuple[int, int]) -> None:
    assert snap_compare(STATES[state](), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", [SIZE, SMALL], ids=["120x40", "80x24"])
@pytest.mark.parametrize("key", ["w", "question_mark"], ids=["every_digit", "help"])
def test_snapshot_pair_keys(snap_compare, key: str, size: tuple[int, int]) -> None:
    async def press(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press(key)
        await pilot.pause()

    assert snap_compare(scripted_app(), terminal_size=size, run_before=press)

"""SVG snapshots at 120x40: a finished replay, the environment differences, the browser.

Everything shown is fixed: demo logs (no clock), commands set by the test, a relative store
path and UTC for the browser's times. Update with ``pytest --snapshot-update`` and look.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import wait_for
from textual.pilot import Pilot

from tuimon.demo import write_demo, write_demo_store
from tuimon.replay import replay_session, resolve_logs
from tuimon.session import Batch, PairSession
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import BrowserScreen
from tuimon.ui.pair_screen import PairScreen

SIZE = (120, 40)


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

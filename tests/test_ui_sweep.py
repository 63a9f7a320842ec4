"""The sweep screen with the Pilot: a table filling in live, a pair one Enter away, Esc back."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import helpers
from textual.widgets import Input

from tuimon.plan import PairPlan
from tuimon.sweep import Sweep
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import BrowserScreen, PairTable
from tuimon.ui.modals import ConfirmScreen
from tuimon.ui.pair_screen import PairScreen
from tuimon.ui.sweep_screen import SweepScreen, SweepTable

FAKE = str(Path(__file__).with_name("fake_trainer.py"))
SIZE = (140, 30)


wait_for = partial(helpers.wait_for, timeout=30.0)  # sweeps of real pairs take longer


def make_sweep(store: Path, *fake_args: str, seeds=(0, 1, 2), at_once: int = 2) -> Sweep:
    plan = PairPlan(
        seed=None,
        devices=("cpu", "cpu"),
        threads=(1, 1),
        deterministic=False,
        loss_dtype=None,
        template=(sys.executable, FAKE, "--side", "{side}", *fake_args),
    )
    return Sweep.create(store, plan, list(seeds), 1, at_once)


def cells(screen: SweepScreen) -> list[list[str]]:
    table = screen.query_one(SweepTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_sweep_table_fills_in_and_opens_pairs(tmp_path):
    store = tmp_path / "store"
    sweep = make_sweep(store, "--steps", "40", "--sleep", "0.02", "--diverge-at", "5")
    app = TuimonApp(store=store, sweep=sweep)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        assert [r[0] for r in cells(screen)] == ["0", "1", "2"]
        await wait_for(pilot, lambda: cells(screen)[0][2].startswith("running "))
        assert cells(screen)[2][2] == "pending"  # two at a time
        await wait_for(pilot, lambda: screen.done)
        rows = cells(screen)
        assert [r[2] for r in rows] == ["finished"] * 3
        assert [r[3] for r in rows] == ["DIVERGED"] * 3
        assert [r[4] for r in rows] == ["5"] * 3 and [r[5] for r in rows] == ["W_E"] * 3
        assert "exit code 1" in str(screen.query_one("#sweep-status").render())
        screen.query_one(SweepTable).move_cursor(row=1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen))
        pair = app.screen
        assert isinstance(pair, PairScreen) and pair.saved_path == store / sweep.jobs[1].pair
        await wait_for(pilot, lambda: pair.saved is not None)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("q")
    assert app.return_code == 1 or app.return_value == 1


async def test_quitting_a_running_sweep_stops_and_saves(tmp_path):
    store = tmp_path / "store"
    sweep = make_sweep(store, "--steps", "100000", "--sleep", "0.01", at_once=1)
    app = TuimonApp(store=store, sweep=sweep)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: cells(screen)[0][2].startswith("running "))
        await pilot.press("enter")  # a running pair: as far as it got
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen))
        pair = app.screen
        await wait_for(pilot, lambda: pair.saved is not None)
        assert pair.saved.model.sides["a"].step is not None
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.click("#yes")
        await wait_for(pilot, lambda: screen.done)
    assert [j.status for j in sweep.jobs] == ["interrupted", "pending", "pending"]
    assert sweep.never_ran() == [1, 2] and not sweep.sessions
    assert (store / sweep.jobs[0].pair / "pair.json").exists()


async def test_browser_filters_by_sweep(tmp_path):
    store = tmp_path / "store"
    sweep = make_sweep(store, "--steps", "3", seeds=(0, 1))
    await sweep.run()
    other = make_sweep(store, "--steps", "3", seeds=(7,))
    await other.run()
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, BrowserScreen) and app.screen.pairs)
        browser = app.screen
        assert isinstance(browser, BrowserScreen) and len(browser.shown) == 3
        table = browser.query_one(PairTable)
        row = next(i for i, p in enumerate(browser.shown) if p.sweep == sweep.id)
        table.move_cursor(row=row)
        await pilot.press("w")
        await wait_for(pilot, lambda: len(browser.shown) == 2)
        assert {p.sweep for p in browser.shown} == {sweep.id}
        assert browser.query_one("#filter", Input).value == sweep.id
        assert f"[sweep {sweep.id}]" in str(table.get_row_at(0)[-1])

"""The sweep screen with the Pilot: a table filling in live, a pair one Enter away, Esc back."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import helpers
import pytest
from helpers import TESTS
from textual.widgets import Input

from tuimon.engine.runs.plan import PairPlan
from tuimon.engine.runs.sweep import Sweep
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import BrowserScreen, PairTable
from tuimon.ui.modals import ConfirmScreen
from tuimon.ui.pair_screen import PairScreen, Shows
from tuimon.ui.sweep_screen import SweepScreen, SweepTable

FAKE = str(TESTS / "fake_trainer.py")
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
    # a pair runs ~2 s, so its row is seen running (at 0.8 s a CI run once never saw it: not
    # reproduced alone or under load; a run that ends between two looks is the likely cause)
    sweep = make_sweep(store, "--steps", "40", "--sleep", "0.05", "--diverge-at", "5")
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
        # the fake trainer ignores its seed: every row says so once the sweep has ended
        named = lambda: all(r[8].startswith("seed not applied") for r in cells(screen))  # noqa: E731
        await wait_for(pilot, named)
        said = "the seed is not applied: seeds 0 and 1 gave the same log (as did seed 2)"
        assert said in str(screen.query_one("#sweep-status").render())
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
        await pilot.press("enter")  # a running pair: its live view
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen))
        pair = app.screen
        assert pair.shows is Shows.LIVE and pair.saved_path is None
        await wait_for(pilot, lambda: pair.model.sides["a"].step is not None)
        await pilot.press("q")  # quitting from the pair goes through the sweep: it asks
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Stop the sweep?" in str(app.screen.query_one("#question").render())
        await pilot.click("#yes")
        await wait_for(pilot, lambda: screen.done)
    assert [j.status for j in sweep.jobs] == ["interrupted", "pending", "pending"]
    assert sweep.never_ran() == [1, 2] and not sweep.sessions
    assert (store / sweep.jobs[0].pair / "pair.json").exists()


@pytest.mark.alone
async def test_a_running_pair_opens_live_and_runs_on_after_esc(tmp_path):
    store = tmp_path / "store"
    sweep = make_sweep(
        store, "--steps", "200", "--sleep", "0.03", "--diverge-at", "30", seeds=(0,), at_once=1
    )
    app = TuimonApp(store=store, sweep=sweep)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, SweepScreen)
        await wait_for(pilot, lambda: cells(screen)[0][2].startswith("running "))
        await wait_for(pilot, lambda: (sweep.jobs[0].step or 0) >= 3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen))
        pair = app.screen
        assert pair.shows is Shows.LIVE and pair.saved_path is None
        assert pair.sub_title.startswith("live pair")
        pane = pair.panes.pane("a")
        await wait_for(pilot, lambda: pane.virtual_size.height > 4)  # what it had, drawn
        drawn = pane.virtual_size.height
        await wait_for(pilot, lambda: pane.virtual_size.height > drawn + 3)  # and more, live
        assert pair.panes.follow and pane.max_scroll_y > 0  # following the new rows

        def following() -> bool:  # once drawn: the feed may hold a batch the view has not drawn
            rows = pair.feed.rows
            behind = len(rows) - rows.follow_end()  # rows of the side ahead, below
            return pane.scroll_y == max(0, pane.max_scroll_y - behind)

        await wait_for(pilot, following)
        await pilot.press("escape")  # back: the pair runs on, the table keeps filling in
        await wait_for(pilot, lambda: app.screen is screen)
        assert 0 in sweep.sessions and not sweep.sessions[0].interrupted
        before = cells(screen)[0][2]
        assert before.startswith("running ")
        await wait_for(pilot, lambda: cells(screen)[0][2] != before)
        await pilot.press("enter")  # again: a new live view, from everything seen so far
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen) and app.screen is not pair)
        again = app.screen
        assert isinstance(again, PairScreen) and again.shows is Shows.LIVE
        await wait_for(pilot, lambda: again.sub_title.startswith("finished"))
        assert str(again.query_one("#verdict").render()) == "verdict: DIVERGED"
        # every line once: header, 200 steps, end (nothing lost or doubled where the view joined)
        assert [len(again.panes.pane(side).buffer) for side in "ab"] == [202, 202]
        assert again.model.aligned_count == 200 and again.model.first_divergent_step == 30
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen and screen.done)
        row = cells(screen)[0]
        assert row[2:5] == ["finished", "DIVERGED", "30"]
        await pilot.press("enter")  # a finished pair opens saved
        await wait_for(pilot, lambda: isinstance(app.screen, PairScreen))
        assert app.screen.shows is Shows.SAVED
        await pilot.press("q")
    assert app.return_code == 1 or app.return_value == 1


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


def test_after_the_sweep_tui_the_shell_keeps_its_table(tmp_path, capsys, monkeypatch):
    """The alternate screen goes with the app: the sweep's table, as headless prints it, and
    the record's path stay in the shell (not the summary of a pair opened from it)."""
    from tuimon.engine.runs.sweep import Job
    from tuimon.ui import app as app_module

    sweep = make_sweep(tmp_path / "store", seeds=(0, 1))
    sweep.jobs = [Job(0, 1, "finished", verdict="IDENTICAL"), Job(1, 1, "pending")]

    def run(self):  # the user watched the sweep, opened a pair, and quit
        self.summary_lines = ["DIVERGED: a pair's own summary"]

    monkeypatch.setattr(app_module.TuimonApp, "run", run)
    app_module.run_app(store=tmp_path / "store", sweep=sweep)
    out = capsys.readouterr().out
    assert "IDENTICAL" in out and "never ran: seeds 1" in out and str(sweep.path) in out
    assert "a pair's own summary" not in out


async def test_sweep_table_moves_updates_one_row_and_opens():
    """The Line-API table: keys move the cursor (scrolling it into view), a row whose cells did
    not change is not drawn again, a wider cell widens its column, Enter posts the row."""
    from rich.text import Text
    from textual.app import App, ComposeResult

    from tuimon.ui.keymap import Key, KeyedScreen
    from tuimon.ui.line_table import MOVES

    selected: list[int] = []

    class Jobs(KeyedScreen):  # a table's keys are its screen's (`line_table.MOVES`)
        KEYS = (Key("open", "enter", "select_cursor", "Open", "Open", view="table"), *MOVES)

        @property
        def table(self) -> SweepTable:
            return self.query_one(SweepTable)

        def compose(self) -> ComposeResult:
            yield SweepTable(["seed", "rep", "status"], id="jobs")

        def on_line_table_row_selected(self, message: SweepTable.RowSelected) -> None:
            selected.append(message.cursor_row)

    class One(App[None]):
        def on_mount(self) -> None:
            self.push_screen(Jobs())

    app = One()
    async with app.run_test(size=(40, 8)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(SweepTable)
        for i in range(30):
            table.add_row([Text(str(i)), Text("1"), Text("pending")])
        table.focus()
        assert table.row_count == 30 and table.cursor_row == 0
        await pilot.press("down", "down", "j", "k")
        assert table.cursor_row == 2
        await pilot.press("end")
        assert table.cursor_row == 29 and table.scroll_offset.y > 0  # scrolled into view
        await pilot.press("home", "enter")
        await pilot.pause()
        assert selected == [0]
        same = [Text("3"), Text("1"), Text("pending")]
        assert not table.update_row(3, same)  # nothing changed: nothing drawn
        assert table.update_row(3, [Text("3"), Text("1"), Text("running 12/300 steps")])
        assert table.widths[2] == len("running 12/300 steps")
        await pilot.pause()
        assert "running 12/300" in str(table.render_line(4).text)  # header, then rows 0..

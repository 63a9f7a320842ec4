"""The browser of past pairs over a store written by the test (three pairs and a damaged one)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from demo_pairs import DEMO_PAIRS, write_demo_pair, write_demo_store
from helpers import wait_for
from textual.pilot import Pilot
from textual.widgets import Input

from tuimon.store import PairInfo
from tuimon.ui import browser
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import BrowserScreen, Listing, PairTable
from tuimon.ui.modals import ConfirmScreen
from tuimon.ui.pair_screen import PairScreen, Shows

SIZE = (120, 40)
NAMES = DEMO_PAIRS


def rows(screen: BrowserScreen) -> list[list[str]]:
    """The table's rows as plain text."""
    table = screen.query_one(PairTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


def names(screen: BrowserScreen) -> list[str]:
    """The pair names of the rows shown."""
    return [row[-1].split(" ")[0] for row in rows(screen)]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A store with three pairs and a damaged one."""
    return write_demo_store(tmp_path / "store")


async def loaded(pilot: Pilot, app: TuimonApp) -> BrowserScreen:
    """The browser once the store has been read."""
    await wait_for(pilot, lambda: isinstance(app.screen, BrowserScreen) and bool(app.screen.pairs))
    assert isinstance(app.screen, BrowserScreen)
    return app.screen


async def test_lists_pairs_newest_first_with_damaged_ones(store: Path) -> None:
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        table = rows(screen)
        assert [r[-1] for r in table[:3]] == list(NAMES[:3])
        assert [r[4] for r in table] == ["DIVERGED", "IDENTICAL", "DIVERGED", "DAMAGED"]
        assert [r[5] for r in table] == ["failed", "finished", "finished", "damaged"]
        assert table[0][1:4] == ["2", "cuda vs cpu", "40"]
        assert table[0][6] == "10" and table[2][6] == "2" and table[1][6] == "–"
        assert table[1][7] == "0"
        assert "pair.json is not valid JSON" in table[3][-1]
        assert "4 of 4 pairs" in str(screen.query_one("#browser-status").render())


async def test_keys_move_open_and_go_back(store: Path) -> None:
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        cursor = screen.query_one(PairTable)
        await pilot.press("j", "j")
        assert cursor.cursor_row == 2
        await pilot.press("k")
        assert cursor.cursor_row == 1
        await pilot.press("j", "enter")
        assert isinstance(app.screen, PairScreen)
        view = app.screen
        await wait_for(pilot, lambda: view.saved is not None)
        await pilot.pause()
        assert view.shows is Shows.SAVED
        assert str(view.query_one("#first-divergence").render()).startswith(
            "first divergence: step 2 (train_loss"
        )
        assert str(view.query_one("#verdict").render()) == "verdict: DIVERGED"
        assert len(view.panes.pane("a").buffer) == 42  # header, 40 steps, end
        await pilot.press("g")
        assert not view.panes.follow
        await pilot.press("escape")
        assert app.screen is screen
        # the damaged pair opens to an error, never a crash
        await pilot.press("j", "enter")
        await pilot.pause(0.3)
        assert app.is_running
        await pilot.press("escape")
        await pilot.press("q")
    assert app.return_code == 0


async def test_filter_narrows_and_escape_clears(store: Path) -> None:
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        await pilot.press("slash")
        assert screen.query_one("#filter", Input).has_focus
        await pilot.press(*"mps")
        assert names(screen) == [NAMES[1]]
        await pilot.press("enter")
        assert screen.query_one(PairTable).has_focus
        await pilot.press("escape")
        assert len(rows(screen)) == 4
        await pilot.press("slash", *"damaged")
        assert len(rows(screen)) == 1
        await pilot.press("escape", "slash", *"seed", "space", "2")
        assert names(screen) == [NAMES[0]]


async def test_filter_gives_new_rows_only_when_they_change_and_draws_no_row_twice(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[str] = []
    given: list[int] = []
    row, set_rows = BrowserScreen._row, PairTable.set_rows
    monkeypatch.setattr(
        BrowserScreen, "_row", lambda s, info, plain: drawn.append(info.name) or row(s, info, plain)
    )
    monkeypatch.setattr(
        PairTable,
        "set_rows",
        lambda s, keys, **k: given.append(len(keys)) or set_rows(s, keys, **k),
    )
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        await pilot.pause()
        assert sorted(drawn) == sorted(p.name for p in screen.pairs) and given == [4]
        await pilot.press("slash", *"cpu")  # every pair runs on a cpu: the same rows, kept
        assert given == [4] and len(rows(screen)) == 4
        assert "filter: cpu" in str(screen.query_one("#browser-status").render())
        await pilot.press(*" mps")
        assert names(screen) == [NAMES[1]] and given[-1] == 1  # "cpu m" gave 2 rows first
        await pilot.press("escape")
        await pilot.pause()
        assert len(rows(screen)) == 4 and given[-1] == 4
        assert len(drawn) == 4  # the rows shown again were drawn once, when the store was read


def fake_pairs(count: int) -> list[PairInfo]:
    """`count` pairs as the store would list them (no files behind them)."""
    return [
        PairInfo(
            path=Path(f"/nowhere/p{i}"),
            name=f"20260101-000000_s{i}_cpu-cpu_{i:04x}",
            created="2026-01-01T00:00:00+00:00",
            seed=i,
            devices=("cpu", "cpu"),
            status="finished",
            verdict="DIVERGED" if i % 2 else "IDENTICAL",
            steps=10,
            first_divergent_step=2 if i % 2 else None,
            max_divergence=0.5 if i % 2 else 0.0,
            damaged=None,
        )
        for i in range(count)
    ]


async def test_many_pairs_draw_only_the_rows_on_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """5,000 pairs: only the rows on screen are drawn, on first paint, a filter, paging."""
    drawn: list[int] = []
    row = BrowserScreen._row
    monkeypatch.setattr(
        BrowserScreen, "_row", lambda s, info, plain: drawn.append(info.seed) or row(s, info, plain)
    )
    app = TuimonApp(store=tmp_path / "empty")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        screen._show_pairs(Listing.of(fake_pairs(5000)))
        await pilot.pause()
        table = screen.query_one(PairTable)
        height = table.size.height
        assert table.row_count == 5000 and 0 < len(drawn) <= height
        await pilot.press("end")
        await pilot.pause()
        assert table.cursor_row == 4999 and screen.selected() == screen.pairs[-1]
        assert 4999 in drawn and len(drawn) <= 2 * height
        await pilot.press("slash", *"s4321")
        await pilot.pause()
        assert [p.seed for p in screen.shown] == [4321]
        # each of the 6 keys showed a screenful of other rows at most: never all 5,000
        assert rows(screen)[0][1] == "4321" and len(drawn) <= 8 * height
        await pilot.press("enter", "pageup", "home")
        assert table.cursor_row == 0


async def test_delete_asks_first(store: Path) -> None:
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        await pilot.press("j", "d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert (store / NAMES[1]).is_dir()
        await pilot.press("d", "y")
        await pilot.pause()
        assert not (store / NAMES[1]).exists()
        assert names(screen)[:2] == [NAMES[0], NAMES[2]]


async def test_mouse_and_replay(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tuimon.ui.browser.REPLAY_SPEED", 4.0)  # still running when paused
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        table = screen.query_one(PairTable)
        await pilot.click(PairTable, offset=(5, 3))  # header row, then rows 0, 1, 2
        assert table.cursor_row == 2
        await pilot.click(PairTable, offset=(5, 3))  # a click on the selected row opens it
        assert isinstance(app.screen, PairScreen)
        await pilot.press("escape")
        await pilot.press("r")
        assert isinstance(app.screen, PairScreen)
        view = app.screen
        assert view.shows is Shows.REPLAY
        await pilot.press("space")
        assert view.session is not None and view.session.source.paused
        await pilot.press("escape")
        assert app.screen is screen


async def test_empty_store(tmp_path: Path) -> None:
    app = TuimonApp(store=tmp_path / "nothing")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, BrowserScreen)
        assert "No pairs in" in str(screen.query_one("#browser-status").render())
        await pilot.press("enter", "d", "r")
        assert app.screen is screen


async def test_saved_pair_jump_reads_the_lines_around_the_first_divergence(tmp_path: Path) -> None:
    path = write_demo_pair(tmp_path / "store", "long", steps=400, diverge=10)
    app = TuimonApp(store=tmp_path / "store")
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot, app)
        view = PairScreen(saved=path, can_go_back=True, max_lines=100)
        await app.push_screen(view)
        await wait_for(pilot, lambda: view.saved is not None)
        assert view.panes.pane("a").buffer.index_of(10) is None  # only the last 100 lines are kept
        await pilot.press("g")
        await wait_for(pilot, lambda: view.panes.pane("a").buffer.index_of(10) is not None)
        await pilot.pause()
        for side in ("a", "b"):
            pane = view.panes.pane(side)
            index = pane.buffer.index_of(10)
            assert pane.scroll_y <= index < pane.scroll_y + pane.size.height - 1
            assert len(pane.buffer) <= 100


async def test_a_running_pair_is_running_and_kept(store: Path, tmp_path: Path) -> None:
    """A pair whose monitor is alive: RUNNING (not DAMAGED), its state in full, no delete;
    a FIFO in another pair neither hangs the browser nor hides the good pairs."""
    import os

    from tuimon.store import PairWriter

    writer = PairWriter.create(store, seed=9, devices=("cpu", "cpu"), label="live")
    hostile = store / "20260101-000001_s0_cpu-cpu_fifo"
    hostile.mkdir()
    os.mkfifo(hostile / "pair.json")
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        table = rows(screen)
        assert table[0][4:6] == ["RUNNING", "running"] and table[0][-1] == writer.name
        assert len(table) == len(NAMES) + 3  # the demo store holds a damaged pair too
        status = str(screen.query_one("#browser-status").render())
        assert f"{writer.name}: still running (it cannot be deleted)" in status
        await pilot.press("d")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen) and writer.path.is_dir()
        fifo_row = next(r for r in table if r[-1].startswith(hostile.name))
        assert fifo_row[4:6] == ["DAMAGED", "damaged"]
        assert "pair.json is a FIFO" in fifo_row[-1]
    writer.close()


async def test_a_large_store_shows_its_newest_pairs_first_then_all(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More pairs than the first screenful: the newest are shown while the rest is read (here
    held until released); a pair deleted meanwhile stays deleted when the rest arrives."""
    release = threading.Event()
    whole = browser.list_pairs

    def held(root: Path) -> list[PairInfo]:
        assert release.wait(30)
        return whole(root)

    monkeypatch.setattr(browser, "PREVIEW", 2)
    monkeypatch.setattr(browser, "list_pairs", held)
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        assert names(screen) == list(NAMES[:2]) and not screen.listing.complete
        status = str(screen.query_one("#browser-status").render())
        assert "2 of the newest 2 pairs" in status and "reading the rest" in status
        await pilot.press("d", "y")
        await wait_for(pilot, lambda: not (store / NAMES[0]).exists())
        release.set()
        await wait_for(pilot, lambda: screen.listing.complete)
        assert len(names(screen)) == 3 and names(screen)[:2] == [NAMES[1], NAMES[2]]
        assert "3 of 3 pairs" in str(screen.query_one("#browser-status").render())


async def test_the_rest_of_a_large_store_unreadable_is_said(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest pairs are shown, then the rest of the store cannot be read: they stay, and the
    status line says why instead of "reading the rest"."""

    def broken(root: Path) -> list[PairInfo]:
        raise browser.StoreError(f"cannot list store {root}: Permission denied")

    monkeypatch.setattr(browser, "PREVIEW", 2)
    monkeypatch.setattr(browser, "list_pairs", broken)
    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        status = screen.query_one("#browser-status")
        await wait_for(pilot, lambda: "could not be read" in str(status.render()))
        assert names(screen) == list(NAMES[:2])
        assert "Permission denied" in str(status.render())
        assert "reading the rest" not in str(status.render())


async def test_keys_typed_in_a_burst_after_slash_reach_the_filter(store: Path) -> None:
    """`/` then `d12` arriving together (a fast typist, a paste): every key goes to the filter,
    none is lost and none is taken as a command (`d` would ask to delete)."""
    from textual import events

    app = TuimonApp(store=store)
    async with app.run_test(size=SIZE) as pilot:
        screen = await loaded(pilot, app)
        for key, char in (("slash", "/"), ("d", "d"), ("1", "1"), ("2", "2")):
            event = events.Key(key, char)
            event.set_sender(app)
            app._driver.send_message(event)  # type: ignore[union-attr]  # as a terminal sends
        field = screen.query_one("#filter", Input)
        await wait_for(pilot, lambda: field.value == "d12")
        assert app.screen is screen  # no delete question

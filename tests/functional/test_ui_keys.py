"""Issue 41, items 4, 5 and 8: the keys of each view as one table (the Footer and `?` drawn from
it), Home and End moving the cursor, `/` searching the whole log and wrapping, the next step on
the bottom line of a diverged pair, and the browser's columns at 80x24."""

from __future__ import annotations

import shutil
from pathlib import Path

from demo_pairs import write_demo
from helpers import wait_for
from textual.pilot import Pilot
from textual.widgets import Input

from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.ui.app import TuimonApp
from tuimon.ui.browser import COLUMNS, BrowserScreen, PairTable
from tuimon.ui.keymap import Key, drop_order
from tuimon.ui.modals import AskScreen, HelpScreen
from tuimon.ui.pair_keys import PAIR_KEYS
from tuimon.ui.pair_screen import PairScreen

SAMPLES = Path(__file__).resolve().parents[2] / "sample_logs"
THREADS_PAIR = SAMPLES / "cpu-cpu-threads-1-vs-2"


def replay_of(logs: list[str], *, max_lines: int = 2000) -> PairScreen:
    """A pair view replaying `logs` (a pair directory or two logs) at once, keeping
    `max_lines` rows."""
    saved = resolve_logs(logs)
    return PairScreen(
        make_session=lambda on_batch: replay_session(saved, speed=1e6, on_batch=on_batch),
        replay=True,
        max_lines=max_lines,
    )


def demo_logs(tmp_path: Path, steps: int) -> list[str]:
    a, b = write_demo(tmp_path / "logs", steps=steps, diverge=2)
    return [str(a), str(b)]


async def replayed(pilot: Pilot, screen: PairScreen) -> PairScreen:
    """The pair view shown, once its replay has ended (over an empty browser)."""
    await pilot.app.push_screen(screen)
    await wait_for(pilot, lambda: screen.model.done)
    await pilot.pause()
    return screen


async def search(pilot: Pilot, text: str) -> None:
    """`/`, the text put in its field (typing it key by key only costs time), Enter."""
    await pilot.press("slash")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, AskScreen))
    pilot.app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await pilot.pause()


async def test_home_and_end_move_the_cursor(tmp_path: Path) -> None:
    async with TuimonApp(store=tmp_path / "store").run_test(size=(120, 40)) as pilot:
        screen = await replayed(pilot, replay_of(demo_logs(tmp_path, 60)))
        pager = screen.panes.pager
        assert pager.cursor is None
        await pilot.press("home")
        await pilot.pause()
        first = next(step for step, _ in screen.feed.rows.entries if step is not None)
        assert pager.index() == 0 and pager.cursor_step() in (None, first)
        assert not screen.panes.follow
        await pilot.press("end")
        await pilot.pause()
        assert pager.index() == len(screen.feed.rows) - 1
        assert screen.panes.follow  # End follows new lines again
        assert 59 in {step for step, _ in list(screen.feed.rows.entries)[-3:]}


async def test_search_wraps_past_the_end(tmp_path: Path) -> None:
    """From the last row, `/` finds an earlier step (round the end), and says so; a search
    for nothing there says not found."""
    async with TuimonApp(store=tmp_path / "store").run_test(size=(120, 40)) as pilot:
        screen = await replayed(pilot, replay_of(demo_logs(tmp_path, 60)))
        pager = screen.panes.pager
        await pilot.press("end")
        await search(pilot, "step 7")
        await wait_for(pilot, lambda: pager.cursor_step() == 7)
        await wait_for(pilot, lambda: "search wrapped to the top" in screen.panel.notes)
        await pilot.press("N")  # backwards from step 7: round the top to the last match
        await wait_for(pilot, lambda: pager.cursor_step() == 7)
        await search(pilot, "no such text")
        await wait_for(pilot, lambda: "not found: no such text" in screen.panel.notes)
        assert pager.cursor_step() == 7


async def test_after_home_search_finds_a_step_the_panes_no_longer_hold(tmp_path: Path) -> None:
    """Issue 41: after Home, `/287` said "not found" while step 287 exists. The view keeps 30
    rows of 150 steps: after Home, the search reads both logs and puts the cursor on 137."""
    async with TuimonApp(store=tmp_path / "store").run_test(size=(120, 40)) as pilot:
        screen = await replayed(pilot, replay_of(demo_logs(tmp_path, 150), max_lines=30))
        rows, pager = screen.feed.rows, screen.panes.pager
        first = next(step for step, _ in rows.entries if step is not None)
        assert first > 100
        await pilot.press("home")  # the cursor on the first row kept, the lines before it read
        await wait_for(pilot, lambda: rows.index_of(first - 1) is not None)
        assert pager.cursor_step() == first and rows.index_of(137) is None
        await search(pilot, "137")  # a number: the step, never digits inside a value
        await wait_for(pilot, lambda: pager.cursor_step() == 137)
        assert len(rows) <= 30
        await search(pilot, "step 12")  # and back round the end to an early step
        await wait_for(pilot, lambda: pager.cursor_step() == 12)
        assert "search wrapped to the top" in screen.panel.notes


async def test_help_lists_every_key_of_the_pair_view(tmp_path: Path) -> None:
    async with TuimonApp(store=tmp_path / "store").run_test(size=(80, 24)) as pilot:
        screen = await replayed(pilot, replay_of(demo_logs(tmp_path, 20)))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))
        help_screen = pilot.app.screen
        assert isinstance(help_screen, HelpScreen)
        listed = dict(help_screen.keys)
        for key in ("↑", "↓", "PgUp", "PgDn", "Home", "End", "←", "→", "?", "q", "/", "n", "N"):
            assert key in listed, key
        assert "wraps" in listed["/"]
        # what `?` lists is the view's table, less the keys that do nothing here
        assert list(help_screen.keys) == screen.help_rows()
        assert "Esc" not in listed  # no browser to go back to
        assert all(k.shown in listed for k in PAIR_KEYS if k.view != "replay" and k.id != "back")
        await pilot.press("escape")
        await pilot.pause()
        assert pilot.app.screen is screen


async def test_help_over_the_browser_lists_its_moves_and_esc(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(THREADS_PAIR, store / THREADS_PAIR.name)
    async with TuimonApp(store=store).run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(s := pilot.app.screen, BrowserScreen) and s.pairs)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, HelpScreen))
        listed = dict(pilot.app.screen.keys)  # type: ignore[attr-defined]
        for key in ("↑ k", "↓ j", "PgUp", "PgDn", "Home", "End", "Esc", "Enter", "/", "r"):
            assert key in listed, key
        assert listed["Esc"] == "Clear and hide the filter"


async def test_the_bottom_line_of_a_diverged_pair_names_what_to_try(tmp_path: Path) -> None:
    """The sample pair ran one thread against two: the bottom line leads with the headless
    hint's remedy, before anything else it says."""
    async with TuimonApp(store=tmp_path / "store").run_test(size=(80, 24)) as pilot:
        screen = await replayed(pilot, replay_of([str(THREADS_PAIR)]))
        said = str(screen.query_one("#message").render())
        assert said.startswith("try --threads 1 or --deterministic: maybe more than one CPU")
        assert said.index("maybe: the embedding's gradient") < said.index("emb at the end")


async def test_the_browser_shows_the_pair_and_its_max_divergence_at_80x24(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    name = "20261130-125230_s0_cpu-cpu_threads"
    shutil.copytree(THREADS_PAIR, store / name)
    async with TuimonApp(store=store).run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(s := pilot.app.screen, BrowserScreen) and s.pairs)
        await pilot.pause()
        table = pilot.app.screen.query_one(PairTable)
        labels = [c.label for c in table.columns]
        assert labels[-2:] == ["max div", "pair"] and "status" not in labels
        assert sum(c.width + 2 for c in table.columns[:-1]) + 2 + len("20261130-125230") <= 80
        header, row = (table.render_line(y).text for y in (0, 1))
        assert "max div" in header and "pair" in header
        assert "0.108" in row and "20261130-125230_s0" in row
        await pilot.resize_terminal(140, 30)
        await pilot.pause()
        assert [c.label for c in table.columns] == list(COLUMNS)  # all of them when they fit


def test_the_footer_drops_the_keys_of_lowest_priority_first() -> None:
    table = (
        Key("a", "a", "x", "A", "a", 3),
        Key("b", "b", "y", "B", "b"),  # never in the Footer
        Key("c", "c", "z", "C", "c", 1),
        Key("d", "d", "w", "D", "d", 3),
    )
    assert drop_order(table) == ["c", "a", "d"]
    order = drop_order(PAIR_KEYS)
    assert order[0] == "folder" and order[-3:] == ["back", "help", "quit"]
    assert table[1].binding().show is False and table[0].binding().tooltip == "a"
    assert Key("m", "up,k", "u", "U", "u").shown == "↑ k"

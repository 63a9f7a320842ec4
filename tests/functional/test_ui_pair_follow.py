"""The pair view's panes on a live pair: following survives resizes (issue 41)."""

from __future__ import annotations

from pathlib import Path

from helpers import wait_for
from test_ui_pair import live_app, pair_screen


async def test_follow_survives_resizes(tmp_path: Path) -> None:
    app = live_app(tmp_path, steps=5000, delay=0.02)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.aligned_count >= 10)
        for size in ((160, 45), (50, 15), (80, 24), (120, 40), (40, 10)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert screen.panes.follow, size
            assert all(screen.panes.pane(s).follow for s in "ab"), size
            assert "held" not in screen.sub_title, size
        at = {side: screen.panes.pane(side).scroll_y for side in "ab"}
        panes = [screen.panes.pane(side) for side in "ab"]  # they go on with the runs
        await wait_for(pilot, lambda: all(p.scroll_y > at[p.side] + 5 for p in panes))
        assert screen.panes.follow and "following" in screen.sub_title


async def test_held_and_wide_survive_resizes(tmp_path: Path) -> None:
    app = live_app(tmp_path, steps=5000, delay=0.02)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.aligned_count >= 10)
        await pilot.press("f", "w")
        assert not screen.panes.follow
        for size in ((160, 45), (50, 15), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            assert not screen.panes.follow and "held (f follows)" in screen.sub_title, size
            assert all(screen.panes.pane(s).wide for s in "ab"), size
        await pilot.press("f")
        assert screen.panes.follow

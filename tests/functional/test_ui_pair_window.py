"""The pair view holds what it shows (issue 38): a long replay keeps a bounded window of rows,
and a jump outside it reads that window from the logs, around the step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from demo_pairs import write_demo, write_demo_pair
from helpers import wait_for

from tuimon.cli import main
from tuimon.engine.analyses.compare import judge_pair
from tuimon.engine.sources.replay import replay_session
from tuimon.engine.sources.saved_pair import SavedPair, read_records, resolve_logs
from tuimon.steplog import Step
from tuimon.ui.app import TuimonApp
from tuimon.ui.pair_model import PairFeed
from tuimon.ui.pair_screen import MAX_LINES, PairScreen

SIZE = (120, 40)
STEPS = 30_000
PART = 20_000


def _steps(path: Path) -> dict[int, dict[str, float]]:
    """Every step's metrics in a log, as the readers read it whole."""
    return {r.step: r.metrics for r in read_records(path)[1] if isinstance(r, Step)}


async def test_a_long_replay_at_full_speed_holds_a_window_and_jumps_read_around_the_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = write_demo(tmp_path / "logs", steps=STEPS, diverge=PART)
    logs = resolve_logs([str(a), str(b)])
    most = 0
    take = PairFeed.take

    def counted(self: PairFeed, batch: object) -> None:
        nonlocal most
        take(self, batch)  # type: ignore[arg-type]
        most = max(most, len(self.rows))

    monkeypatch.setattr(PairFeed, "take", counted)
    app = TuimonApp(
        store=tmp_path / "store",
        make_session=lambda on_batch: replay_session(  # as `tuimon replay` makes it
            logs, speed=1e6, on_batch=on_batch, judge=judge_pair, stream=True
        ),
        replay=True,
    )
    async with app.run_test(size=SIZE) as pilot:
        screen = next(s for s in app.screen_stack if isinstance(s, PairScreen))
        await wait_for(pilot, lambda: screen.model.done, timeout=120)
        assert screen.model.aligned_count == STEPS
        assert 0 < most <= MAX_LINES  # the rows never grew with the pair
        assert not logs.held  # nor were its logs read whole
        rows = screen.feed.rows
        assert rows.index_of(1234) is None
        await pilot.press("colon")
        await pilot.press(*"1234", "enter")
        await wait_for(pilot, lambda: rows.index_of(1234) is not None, timeout=30)
        assert len(rows) <= MAX_LINES and not logs.held
        for side, path in (("a", a), ("b", b)):
            assert rows.metrics_of(1234, side) == _steps(path)[1234]
        pager = screen.panes.pager
        await wait_for(pilot, lambda: pager.cursor_step() == 1234)  # after its refresh
        first = next(step for step, _ in rows.entries if step is not None)
        assert 0 < first < 1234 and rows.index_of(first - 1) is None
        screen.panes.pane("a").focus()
        await pilot.press("home")  # scrolled back past the first row kept: the lines before it
        await wait_for(pilot, lambda: rows.index_of(first - 1) is not None, timeout=30)
        assert len(rows) <= MAX_LINES and not logs.held
        for side, path in (("a", a), ("b", b)):
            assert rows.metrics_of(first - 1, side) == _steps(path)[first - 1]
        top = screen.panes.pane("a").scroll_y
        assert top == rows.index_of(first)  # the view held on the row it was on


async def test_the_saved_view_opens_a_long_pair_with_compares_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The browser's saved view: the last lines at once, the verdict from compare's judge
    (what `tuimon compare` says), the sparklines from the aligned steps streamed, and a jump
    to the first divergence read around it; neither log read whole."""
    pair = write_demo_pair(tmp_path / "store", "long", steps=STEPS, diverge=PART)
    assert main(["compare", str(pair), "--json"]) == 1
    compared = json.loads(capsys.readouterr().out)

    def no_records(self: SavedPair, side: str) -> list[object]:
        raise AssertionError("the saved view read a log whole")

    monkeypatch.setattr(SavedPair, "records", no_records)
    app = TuimonApp(store=tmp_path / "store")
    async with app.run_test(size=SIZE) as pilot:
        screen = PairScreen(saved=pair)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.model.done, timeout=60)
        summary = screen.model.summary
        assert summary is not None
        assert (
            (summary.verdict, summary.first_divergent_step)
            == (
                compared["verdict"],
                compared["first_divergent_step"],
            )
            == ("DIVERGED", PART)
        )
        panel = str(screen.panel.query_one("#verdict").render())
        assert "DIVERGED" in panel
        await wait_for(pilot, lambda: screen.model.first is not None, timeout=60)
        assert screen.model.aligned_count == STEPS and screen.model.first.step == PART
        rows = screen.feed.rows
        assert len(rows) <= MAX_LINES and rows.index_of(PART) is None
        await pilot.press("g")
        await wait_for(pilot, lambda: screen.panes.pager.cursor_step() == PART, timeout=30)
        assert len(rows) <= MAX_LINES
        for side in ("a", "b"):
            expected = _steps(pair / f"{side}.jsonl")[PART]
            assert rows.metrics_of(PART, side) == expected
        assert rows.metrics_of(PART, "a") != rows.metrics_of(PART, "b")

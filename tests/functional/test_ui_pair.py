"""The pair view driven by the real engine: replays of small logs and live fake trainers."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from demo_pairs import write_demo
from helpers import FAKE_TRAINER, alive, pair_json, wait_for
from textual.widgets import ContentSwitcher, DataTable

from tuimon.engine.launch.runner import RunSpec
from tuimon.engine.sources.replay import ReplaySource, replay_session
from tuimon.engine.sources.saved_pair import resolve_logs
from tuimon.engine.sources.session import Batch, LiveSource, PairOptions, PairSession
from tuimon.engine.sources.side_state import SideState
from tuimon.steplog import Step
from tuimon.store import PairWriter
from tuimon.ui.app import TuimonApp, terminate_leftovers
from tuimon.ui.chart import LossChart
from tuimon.ui.command_palette import ScreenActions
from tuimon.ui.divergence import DivergencePanel
from tuimon.ui.modals import ConfirmScreen, EnvDiffScreen
from tuimon.ui.pair_model import env_rows
from tuimon.ui.pair_screen import PairScreen
from tuimon.ui.panes import SideHeader, StepPane

SIZE = (120, 40)
MARKUP = "[bold red]boom[/] [@click=app.quit]x[/]"
ANSI = "\x1b[31mred alert\x1b[0m"


def pair_screen(app: TuimonApp) -> PairScreen:
    """The pair view (under any modal)."""
    return next(s for s in app.screen_stack if isinstance(s, PairScreen))


def pane_lines(screen: PairScreen, side: str) -> list[str]:
    """Every kept line of a pane, as plain text."""
    pane = screen.panes.pane(side)
    return [pane.line_text(i).plain for i in range(len(pane.buffer))]


def replay_app(
    tmp_path: Path, *, steps: int = 40, diverge: int | None = 2, speed: float = 1e6
) -> TuimonApp:
    """An app replaying two demo logs; run b prints markup and an ANSI sequence at step 5."""
    a, b = write_demo(
        tmp_path / "logs", steps=steps, diverge=diverge, extra={"b": [(5, MARKUP), (5, ANSI)]}
    )
    logs = resolve_logs([str(a), str(b)])
    return TuimonApp(
        store=tmp_path / "store",
        make_session=lambda on_batch: replay_session(logs, speed=speed, on_batch=on_batch),
        replay=True,
    )


def live_app(tmp_path: Path, *, steps: int, delay: float, diverge: int = 3) -> TuimonApp:
    """An app running two fake trainers that part at `diverge`, saving into tmp_path/store."""

    def make(on_batch: Callable[[Batch], None]) -> PairSession:
        args = ["--steps", str(steps), "--diverge-at", str(diverge), "--sleep", str(delay)]
        args.append("--chatter")  # a markup line on stdout, a warning on stderr
        specs = tuple(
            RunSpec(side, "cpu", argv=(sys.executable, FAKE_TRAINER, "--side", side, *args))
            for side in ("a", "b")
        )
        sides = tuple(SideState(side, "cpu", f"fake trainer {side}") for side in ("a", "b"))
        writer = PairWriter.create(tmp_path / "store", seed=0, devices=("cpu", "cpu"))
        return PairSession(
            LiveSource(specs, writer=writer, grace=2.0),
            sides,
            options=PairOptions(),
            writer=writer,
            on_batch=on_batch,
        )

    return TuimonApp(store=tmp_path / "store", make_session=make)


async def test_finished_replay_shows_both_runs_and_where_they_part(tmp_path: Path) -> None:
    app = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.pause()
        first = screen.query_one("#first-divergence").render()
        assert str(first) == (
            "first divergence: step 2 (train_loss, test_loss, train_acc) · tensors: W_E"
        )
        assert str(screen.query_one("#verdict").render()) == "verdict: DIVERGED"
        assert screen.query_one("#verdict").has_class("verdict-diverged")
        for side in ("a", "b"):
            header = screen.query_one(f"#header-{side}", SideHeader)
            assert header.status_text == "finished · 40/40 steps · exit 0"
        lines_b = pane_lines(screen, "b")
        # untrusted text is shown literally, escapes made visible; the app did not quit
        assert MARKUP in lines_b
        assert "^[[31mred alert^[[0m" in lines_b
        assert app.is_running
        # step 0 and 1 are equal; from step 2 on the differing digits are highlighted
        pane = screen.panes.pane("a")
        diff_style = pane.get_component_rich_style("step-pane--diff")
        spans = {
            step: [
                s for s in pane.line_text(pane.buffer.index_of(step)).spans if s.style == diff_style
            ]
            for step in (1, 2, 30)
        }
        assert spans[1] == [] and spans[2] and spans[30]
        assert pane_lines(screen, "a")[pane.buffer.index_of(2)].startswith("▶")
        said = str(screen.query_one("#message").render())  # what to try first (issue 41)
        assert said.startswith("try --threads 1 or --deterministic: maybe more than one CPU")
        assert said.endswith("; replay finished")


async def test_metric_curves_env_and_palette(tmp_path: Path) -> None:
    app = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        assert screen.panel.series == "divergence"
        await pilot.press("m")
        assert screen.panel.series == "train_loss"
        assert "train_loss (m)" in str(screen.query_one("#spark-legend").render())
        for _ in range(len(screen.model.series_names()) - 1):
            await pilot.press("m")
        assert screen.panel.series == "divergence"

        pane = screen.panes.pane("a")
        narrow = pane.line_text(pane.buffer.index_of(2)).plain
        assert "…" in narrow  # 1e-10 apart: more digits than fit, flagged
        await pilot.press("w")
        wide = pane.line_text(pane.buffer.index_of(2)).plain
        assert pane.wide and "…" not in wide and len(wide) > len(narrow)
        await pilot.press("w")
        assert not pane.wide

        await pilot.press("c")
        assert screen.query_one("#views", ContentSwitcher).current == "curves"
        chart = screen.query_one("#chart-0", LossChart)
        assert chart.metric == "train_loss" and set(chart.curves) == {"a", "b"}
        assert "A = B" in str(chart.render())
        await pilot.press("c")
        assert screen.query_one("#views", ContentSwitcher).current == "panes"

        await pilot.press("e")
        assert isinstance(app.screen, EnvDiffScreen)
        table = app.screen.query_one(DataTable)
        keys = [str(table.get_row_at(i)[0]).strip("≠ ") for i in range(table.row_count)]
        assert keys == ["command", "env.env_vars.OMP_NUM_THREADS", "env.threads"]
        await pilot.press("a")
        assert table.row_count > 2
        await pilot.press("escape")
        assert app.screen is screen

        provider = ScreenActions(screen)
        await provider._wait_init()
        found = [hit.text async for hit in provider.discover()]
        assert {
            "Follow",
            "First div.",
            "Metric",
            "Curves",
            "Env",
            "Folder",
            "Digits",
            "Quit",
        } <= set(found)
        assert "Pause" not in found  # replay keys are gone once the replay is over
        assert "Focus Next" not in found  # only tuimon's own actions


async def test_replay_keys_pause_speed_and_jump(tmp_path: Path) -> None:
    app = replay_app(tmp_path, steps=400, diverge=120, speed=5)  # slow: a loaded CI machine
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.aligned_count > 3)
        source = screen.session.source
        assert isinstance(source, ReplaySource)
        await pilot.press("space")
        assert source.paused and "paused" in screen.sub_title
        await pilot.press("space")
        assert not source.paused
        await pilot.press("plus")
        assert source.speed == 10
        await pilot.press("minus", "minus")
        assert source.speed == 2.5
        assert screen.model.first is None
        await pilot.press("g")  # not reached yet: the replay fast-forwards to it and pauses
        await wait_for(pilot, lambda: screen.replay.pending_jump is None and source.paused)
        assert screen.model.first is not None and screen.model.first.step == 120
        assert not screen.panes.follow
        await pilot.pause()
        for side in ("a", "b"):
            pane = screen.panes.pane(side)
            index = pane.buffer.index_of(120)
            assert index is not None
            assert pane.scroll_y <= index < pane.scroll_y + pane.size.height - 1
        await pilot.press("f")
        assert screen.panes.follow
        await pilot.press("q")
    assert app.return_code == 0


EMBEDDING = (
    "the embedding's gradient (index_put with accumulate, not deterministic with more than one "
    "CPU thread or on MPS) parted first"
)


async def test_live_pair_is_saved_and_says_where(tmp_path: Path) -> None:
    app = live_app(tmp_path, steps=12, delay=0.005)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.pause()
        [saved] = (tmp_path / "store").iterdir()
        assert (saved / "pair.json").is_file()
        said = str(screen.query_one("#message").render())  # the likely cause first (issue 41)
        assert said == f"maybe: {EMBEDDING}; pair saved in {saved}"
        assert app.summary_lines[0].startswith("DIVERGED: first divergent step 3")
        assert app.summary_lines[-1] == f"pair saved in {saved}"  # printed after the app exits
        assert "first divergence: step 3 (train_loss, test_loss)" in str(
            screen.query_one("#first-divergence").render()
        )
        for side in ("a", "b"):
            assert screen.query_one(f"#header-{side}", SideHeader).status_text == (
                "finished · 12/12 steps · exit 0"
            )
            lines = pane_lines(screen, side)
            assert f"[bold red]boom[/] from {side}" in lines
            assert f"! warning on stderr {side}" in lines
        await pilot.press("o")
        assert app.clipboard == str(saved)
        note = screen.query_one(DivergencePanel).notes[-1]  # issue 31: it showed a literal ^J
        assert note == f"pair folder: {saved.resolve()} (copied to the clipboard)", note
        await pilot.press("e")
        assert isinstance(app.screen, EnvDiffScreen)
        await pilot.press("escape")
        await pilot.press("q")  # finished: no question asked
    assert app.return_code == 0


async def test_quitting_a_running_live_pair_asks_stops_and_saves(tmp_path: Path) -> None:
    app = live_app(tmp_path, steps=2000, delay=0.2)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.aligned_count >= 3)
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert app.screen is screen and not screen.stopping
        await pilot.press("q")
        await pilot.press("y")
        await wait_for(pilot, lambda: not app.is_running)
    assert app.return_code == 130
    [saved] = (tmp_path / "store").iterdir()
    meta = pair_json(saved)
    assert meta["status"] == "interrupted"
    assert {run["status"] for run in meta["runs"].values()} == {"interrupted"}


async def test_panes_stay_bounded_on_a_long_replay(tmp_path: Path) -> None:
    app = replay_app(tmp_path, steps=6000, diverge=3)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done, timeout=30)
        for side in ("a", "b"):
            pane = screen.panes.pane(side)
            assert isinstance(pane, StepPane)
            assert len(pane.buffer) == pane.buffer.max_lines == 2000
        assert all(len(series) <= 200 for series in screen.model.spark.values())
        assert screen.model.aligned_count == 6000
        await pilot.press("g")  # step 3 has left the panes: its lines are read from the logs
        await wait_for(pilot, lambda: screen.panes.pane("a").buffer.index_of(3) is not None)
        assert not screen.panes.follow
        assert len(screen.panes.pane("a").buffer) <= 2000


async def test_no_run_outlives_the_app(tmp_path: Path) -> None:
    app = live_app(tmp_path, steps=5000, delay=0.05)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.aligned_count >= 1)
        pids = [run.proc.pid for run in screen.session.source.runs.values() if run.proc]
        app.exit()  # no confirmation, no stop: the app just ends
    terminate_leftovers(app.sessions)
    for _ in range(100):
        if not any(alive(pid) for pid in pids):
            break
        time.sleep(0.05)
    assert pids and not any(alive(pid) for pid in pids)


async def test_env_diff_of_identical_environments_shows_every_key(tmp_path: Path) -> None:
    app = TuimonApp(store=tmp_path / "store")
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(
            EnvDiffScreen(
                env_rows({"threads": 2, "torch": "2.13"}, {"threads": 2, "torch": "2.13"})
            )
        )
        await pilot.pause()
        assert app.screen.query_one(DataTable).row_count == 2
        assert "identical (2 keys)" in str(app.screen.query_one("#env-title").render())


async def test_finished_live_pair_jump_reads_its_saved_logs(tmp_path: Path) -> None:
    make = live_app(tmp_path, steps=300, delay=0.0, diverge=5).make_session
    app = TuimonApp(store=tmp_path / "store")
    async with app.run_test(size=SIZE) as pilot:
        view = PairScreen(make_session=make, max_lines=50)
        await app.push_screen(view)
        await wait_for(pilot, lambda: view.model.done and view.model.pair_path is not None)
        assert view.panes.pane("a").buffer.index_of(5) is None  # only the last 50 lines are kept
        await pilot.press("g")
        await wait_for(pilot, lambda: view.panes.pane("b").buffer.index_of(5) is not None)
        assert view.panes.pane("a").buffer.index_of(5) is not None


async def test_help_opens_with_question_mark_and_f1_and_ctrl_c_quits(tmp_path: Path) -> None:
    from tuimon.ui.modals import HelpScreen

    app = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        for key in ("question_mark", "f1"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            await pilot.press("escape")
            await pilot.pause()
            assert app.screen is screen
        await pilot.press("ctrl+c")  # a finished pair: ctrl+c quits as q does
        await pilot.pause()
    assert app.return_code == 0
    assert app.summary_lines[0].startswith("DIVERGED: first divergent step 2")


async def test_a_side_behind_leaves_blank_rows_beside_the_other(tmp_path: Path) -> None:
    app = replay_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        a, b = screen.panes.pane("a"), screen.panes.pane("b")
        assert a.buffer.index_of(10) == b.buffer.index_of(10)  # one row, both sides
        screen.panes.set_follow(False)
        await pilot.pause()
        a.scroll_to(y=5, animate=False, immediate=True)
        await pilot.pause()
        assert b.scroll_y == a.scroll_y == 5  # the panes scroll together
        rows = screen.feed.rows
        rows.add("a", [Step(10_000, {"train_loss": 1.0})])
        last = len(rows) - 1
        assert a.line_text(last).plain.strip().startswith("10000")
        assert b.line_text(last).plain == ""  # b has not logged it: a blank beside it


async def test_footer_at_80_columns_keeps_help_and_quit(tmp_path: Path) -> None:
    """A short Footer drops the keys of least use (they still work, `?` lists them), never
    `? Help` or `q Quit` at its right end."""
    from textual.widgets._footer import FooterKey

    from tuimon.ui.modals import HelpScreen

    app = replay_app(tmp_path, steps=400, speed=5)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.aligned_count > 3)
        await pilot.pause()
        keys = {k.key for k in screen.query(FooterKey)}
        assert {"question_mark", "q", "space", "g"} <= keys and "o" not in keys
        width = sum(k.size.width for k in screen.query(FooterKey))
        assert width <= 80
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        listed = {shown for shown, _ in app.screen.keys}
        assert {"o", "w", "e", "m", ":", "]", "[", "/", "n", "N", "p", "y", "Y", "x", "i"} <= listed
        await pilot.press("escape")
        await pilot.press("w")  # a key left out of the Footer still works
        assert screen.panes.pane("a").wide
        await app.run_action("app.quit")
    async with replay_app(tmp_path / "wide", steps=40).run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        keys = {k.key for k in pilot.app.screen.query(FooterKey)}
        assert {"w", "e", "m", "q", "colon", "right_square_bracket", "i"} <= keys


async def test_a_frame_with_nothing_new_draws_no_pane(tmp_path: Path) -> None:
    """An idle batch (a quiet run: nothing new) costs no pane redraw; a new row does."""
    app = replay_app(tmp_path, steps=12)
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.pause()
        drawn: list[str] = []
        for side in ("a", "b"):
            pane = screen.panes.pane(side)
            pane.refresh = lambda *a, _side=side, **k: drawn.append(_side)  # type: ignore[method-assign]
        screen._draw()
        assert drawn == []
        screen.feed.add({"a": [Step(12, {"train_loss": 1.0})]}, {})
        screen._draw()
        assert sorted(set(drawn)) == ["a", "b"]


async def test_the_view_keeps_what_lives_as_long_as_it_out_of_the_cyclic_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What exists once the view's session runs (the app, a replay's parsed logs) lives as long
    as the view: frozen (`FREEZE_AFTER` s after the start, not before the first rows), a full
    collection over it (~90 ms at 25,000 steps) does not stall keys; once the view closes, it
    is collectable again."""
    import gc

    import tuimon.ui.pair_screen as pair_screen_module

    monkeypatch.setattr(pair_screen_module, "FREEZE_AFTER", 0.05)
    gc.unfreeze()
    app = replay_app(tmp_path, steps=300, speed=1.0)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = pair_screen(app)
            await wait_for(pilot, lambda: screen.session is not None)
            source = screen.session.source
            assert isinstance(source, ReplaySource)
            records = sum(len(source.logs.records(side)) for side in ("a", "b"))
            await wait_for(pilot, lambda: gc.get_freeze_count() > records)
        assert gc.get_freeze_count() == 0  # the view closed: all of it may be collected again
    finally:
        gc.unfreeze()


async def test_replayed_pair_says_its_artifacts_once(tmp_path: Path) -> None:
    """A saved pair with a compared W_E: its line (`emb at the end: …; key frequencies …`) is
    on the bottom line once, not again from the last batch's news."""
    from helpers import ROOT

    logs = resolve_logs([str(ROOT / "sample_logs" / "cpu-cpu-threads2")])
    app = TuimonApp(
        store=tmp_path / "store",
        make_session=lambda on_batch: replay_session(logs, speed=1e6, on_batch=on_batch),
        replay=True,
    )
    async with app.run_test(size=SIZE) as pilot:
        screen = pair_screen(app)
        await wait_for(pilot, lambda: screen.model.done)
        await pilot.pause()
        message = str(screen.query_one("#message").render())
        assert message.startswith("emb at the end: bitwise equal; key frequencies a 15 49 41 16 25")
        assert message.count("key frequencies") == 1, message
        assert message.endswith("replay finished")

"""The tuimon Textual app and its one entry point for the CLI, `run_app`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from textual.app import App

from tuimon.session import Batch, PairSession
from tuimon.sweep import Sweep
from tuimon.ui.browser import BrowserScreen
from tuimon.ui.pair_screen import PairScreen, SessionStarted
from tuimon.ui.sweep_screen import SweepScreen
from tuimon.ui.workers import ReportsWorkerErrors

SessionFactory = Callable[[Callable[[Batch], None]], PairSession]


class TuimonApp(ReportsWorkerErrors, App[int]):
    """The browser of past pairs, or a pair view straight away when given a session factory."""

    CSS_PATH = "tuimon.tcss"
    TITLE = "tuimon"

    def __init__(
        self,
        *,
        store: Path,
        make_session: SessionFactory | None = None,
        title: str = "tuimon",
        replay: bool = False,
        sweep: Sweep | None = None,
    ) -> None:
        super().__init__()
        self.sweep = sweep
        self.store = Path(store)
        self.make_session = make_session
        self.replay = replay
        self.title = title
        self.sessions: list[PairSession] = []
        """Sessions started by pair views (so no child run outlives the app)."""

    def on_mount(self) -> None:
        """The first screen: a pair view for a session, else the browser."""
        if self.sweep is not None:
            self.push_screen(SweepScreen(self.sweep))
        elif self.make_session is not None:
            self.push_screen(PairScreen(make_session=self.make_session, replay=self.replay))
        else:
            self.push_screen(BrowserScreen(self.store))

    def on_session_started(self, message: SessionStarted) -> None:
        """Keep each session a pair view starts (see `terminate_leftovers`)."""
        self.sessions.append(message.session)

    async def action_quit(self) -> None:
        """Quit (ctrl+q, ctrl+c, the palette): a running live pair or sweep asks first."""
        for screen in self.screen_stack:
            if isinstance(screen, SweepScreen):
                screen.request_quit()
                return
        for screen in reversed(self.screen_stack):
            if isinstance(screen, PairScreen):
                screen.request_quit()
                return
        self.exit(0)

    async def action_help_quit(self) -> None:  # type: ignore[override]  # textual awaits it
        """ctrl+c quits too (a live pair asks first), as in any terminal program."""
        await self.action_quit()


def run_app(
    *,
    store: Path,
    make_session: SessionFactory | None = None,
    title: str = "tuimon",
    replay: bool = False,
    sweep: Sweep | None = None,
    explain: bool = False,
) -> int:
    """Run the app until the user quits; the exit code (130 after stopping a live pair).

    With `explain`, a pair that ended DIVERGED is explained after the app closes (`pair
    --explain`): progress and the one-line answer go to the terminal, the result to pair.json.
    """
    app = TuimonApp(store=store, make_session=make_session, title=title, replay=replay, sweep=sweep)
    try:
        result = app.run()
    finally:
        terminate_leftovers(app.sessions + (list(sweep.sessions.values()) if sweep else []))
    for session in app.sessions:  # a pair that could not be saved is said after the screen
        writer = session.writer
        if writer is not None and writer.save_error and not writer.finished:
            print(f"tuimon: pair NOT saved: {writer.save_error}", file=sys.stderr)
            return 3
    if explain:
        from tuimon.explain import describe, explain_after

        for session in app.sessions:
            if (done := explain_after(session, print)) is not None:
                print(describe(done))
    if isinstance(result, int):
        return result
    return app.return_code or 0


def terminate_leftovers(sessions: list[PairSession]) -> None:
    """SIGTERM the process group of any live run still there (the app ended without a stop)."""
    for session in sessions:
        session.terminate()

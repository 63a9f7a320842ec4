"""The tuimon Textual app and its one entry point for the CLI, `run_app`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from tuimon.session import Batch, PairSession
from tuimon.ui.browser import BrowserScreen
from tuimon.ui.modals import HelpScreen
from tuimon.ui.pair_screen import PairScreen, SessionStarted
from tuimon.ui.workers import ReportsWorkerErrors

SessionFactory = Callable[[Callable[[Batch], None]], PairSession]


class TuimonApp(ReportsWorkerErrors, App[int]):
    """The browser of past pairs, or a pair view straight away when given a session factory."""

    CSS_PATH = "tuimon.tcss"
    TITLE = "tuimon"
    BINDINGS = [  # noqa: RUF012
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("f1", "help", "Help", show=False),
    ]

    def __init__(
        self,
        *,
        store: Path,
        make_session: SessionFactory | None = None,
        title: str = "tuimon",
        replay: bool = False,
    ) -> None:
        super().__init__()
        self.store = Path(store)
        self.make_session = make_session
        self.replay = replay
        self.title = title
        self.sessions: list[PairSession] = []
        """Sessions started by pair views (so no child run outlives the app)."""
        self.summary_lines: list[str] = []
        """What the shell shows after the app exits (the pair view's summary, as headless)."""

    def on_mount(self) -> None:
        """The first screen: a pair view for a session, else the browser."""
        if self.make_session is not None:
            self.push_screen(PairScreen(make_session=self.make_session, replay=self.replay))
        else:
            self.push_screen(BrowserScreen(self.store))

    def on_session_started(self, message: SessionStarted) -> None:
        """Keep each session a pair view starts (see `terminate_leftovers`)."""
        self.sessions.append(message.session)

    async def action_quit(self) -> None:
        """Quit (ctrl+q, ctrl+c, the palette): a running live pair asks first."""
        for screen in reversed(self.screen_stack):
            if isinstance(screen, PairScreen):
                screen.request_quit()
                return
        self.exit(0)

    def action_help(self) -> None:
        """F1 (and ? in the pair view): the keys of the screen shown."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen.active_bindings))

    async def action_help_quit(self) -> None:  # type: ignore[override]  # textual awaits it
        """ctrl+c quits too (a live pair asks first), as in any terminal program."""
        await self.action_quit()


def run_app(
    *,
    store: Path,
    make_session: SessionFactory | None = None,
    title: str = "tuimon",
    replay: bool = False,
) -> int:
    """Run the app until the user quits; the exit code (130 after stopping a live pair)."""
    app = TuimonApp(store=store, make_session=make_session, title=title, replay=replay)
    try:
        result = app.run()
    finally:
        terminate_leftovers(app.sessions)
        for line in app.summary_lines:  # the alternate screen is gone: the shell keeps these
            print(line)
    if isinstance(result, int):
        return result
    return app.return_code or 0


def terminate_leftovers(sessions: list[PairSession]) -> None:
    """SIGTERM the process group of any live run still there (the app ended without a stop)."""
    for session in sessions:
        session.terminate()

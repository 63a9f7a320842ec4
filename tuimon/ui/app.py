"""The tuimon Textual app and its one entry point for the CLI, `run_app`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from textual.app import App
from textual.binding import Binding

from tuimon.engine.session import Batch, PairSession
from tuimon.engine.sweep import Sweep
from tuimon.report.sweep import print_result
from tuimon.ui.browser import BrowserScreen
from tuimon.ui.footer_fit import FitsFooter
from tuimon.ui.modals import HELP_TEXT, HelpScreen
from tuimon.ui.pair_screen import PairScreen, SessionStarted
from tuimon.ui.sweep_screen import SweepScreen
from tuimon.ui.workers import ReportsWorkerErrors

SessionFactory = Callable[[Callable[[Batch], None]], PairSession]
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Signals that stop tuimon as quitting does: runs stopped, partial pair saved, terminal back."""
NO_TERMINAL_WAIT = 20.0
"""Seconds a hung-up tuimon waits for its pairs to be saved before it exits anyway."""


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
        self.signalled: int | None = None
        """The signal that ended the app (SIGTERM, SIGINT, SIGHUP), if one did."""
        self._caught: list[int] = []
        self.summary_lines: list[str] = []
        """What the shell shows after the app exits (the pair view's summary, as headless)."""

    def on_mount(self) -> None:
        """The first screen: a pair view for a session, else the browser."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.on_signal, sig)
                self._caught.append(sig)
        if self.sweep is not None:
            self.push_screen(SweepScreen(self.sweep))
        elif self.make_session is not None:
            self.push_screen(PairScreen(make_session=self.make_session, replay=self.replay))
        else:
            self.push_screen(BrowserScreen(self.store))

    def on_unmount(self) -> None:
        """Give the signals back."""
        loop = asyncio.get_running_loop()
        for sig in self._caught:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
        self._caught = []

    def on_signal(self, sig: int) -> None:
        """A signal to tuimon: stop each live pair as quitting does (process groups terminated,
        killed after the grace, the partial pair saved as interrupted), then exit, restoring the
        terminal. A second signal exits without waiting for the save."""
        again = self.signalled is not None
        self.signalled = sig
        code = 128 + sig
        if sig == signal.SIGHUP and not terminal_alive():  # nothing to restore; drawing blocks
            threading.Thread(target=self._exit_once_saved, args=(code,), daemon=True).start()
        if not again:
            views = [s for s in self.screen_stack if isinstance(s, (PairScreen, SweepScreen))]
            if any([view.stop_now() for view in views]):
                return  # the pair view exits once the partial pair is saved
        self.exit(code, return_code=code)

    def _exit_once_saved(self, code: int) -> None:
        """(thread) The terminal is gone: exit as soon as every pair is saved (or given up)."""
        deadline = time.monotonic() + NO_TERMINAL_WAIT
        while time.monotonic() < deadline and not all(s.ended for s in self.sessions):
            time.sleep(0.05)
        terminate_leftovers(self.sessions)
        os._exit(code)

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

    def action_help(self) -> None:
        """F1 (and ? in the pair view): the keys of the screen shown."""
        if not isinstance(self.screen, HelpScreen):
            screen = self.screen
            bindings = screen.all_bindings if isinstance(screen, FitsFooter) else None
            text = HELP_TEXT if isinstance(screen, PairScreen) else ""
            self.push_screen(HelpScreen(bindings or screen.active_bindings, text))

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
    # the alternate screen is gone: the shell keeps the sweep's table or the pair's summary
    if sweep is not None:
        print_result(sweep, sys.stdout)
    else:
        for line in app.summary_lines:
            print(line)
    for session in app.sessions:  # a pair that could not be saved is said after the screen
        writer = session.writer
        if writer is not None and writer.save_error and not writer.finished:
            print(f"tuimon: pair NOT saved: {writer.save_error}", file=sys.stderr)
            return 3
    if app.signalled is not None:
        return 128 + app.signalled
    if explain:
        from tuimon.engine.explain import describe, explain_after

        for session in app.sessions:
            if (done := explain_after(session, print)) is not None:
                print(describe(done))
    if isinstance(result, int):
        return result
    return app.return_code or 0


def terminal_alive() -> bool:
    """The controlling terminal is still there (False after a hang-up)."""
    try:
        import termios

        termios.tcgetattr(sys.__stdout__.fileno() if sys.__stdout__ else 1)
    except Exception:  # termios.error (EIO) once the terminal has hung up; no termios
        return False
    return True


def terminate_leftovers(sessions: list[PairSession]) -> None:
    """SIGTERM the process group of any live run still there (the app ended without a stop)."""
    for session in sessions:
        session.terminate()

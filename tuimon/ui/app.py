"""The tuimon Textual app and its one entry point for the CLI, `run_app`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import RenderableType
from textual import events
from textual.app import App
from textual.binding import Binding
from textual.widgets import Input

from tuimon.engine.sources.session import Batch, PairSession
from tuimon.sanitize import clean
from tuimon.signal_owner import owned
from tuimon.ui.confirm import REFUSED, CommandsScreen
from tuimon.ui.keymap import KeyedScreen
from tuimon.ui.modals import HELP_TEXT, HelpScreen
from tuimon.ui.pair_screen import PairScreen, SessionStarted
from tuimon.ui.workers import ReportsWorkerErrors

if TYPE_CHECKING:  # the sweep's modules (and the browser's) are imported when one is shown:
    # a replay or a pair starts without them (see tests/unit/test_startup_imports.py)
    from tuimon.engine.runs.sweep import Sweep
    from tuimon.ui.sweep_screen import SweepScreen

SessionFactory = Callable[[Callable[[Batch], None]], PairSession]
SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""Signals that stop tuimon as quitting does: runs stopped, partial pair saved, terminal back."""
GC_THRESHOLD = (20_000, 20, 20)
"""The cyclic collector's thresholds while the app runs (Python's are 700, 10, 10): a full
collection of a view's objects took 40-60 ms at 1,000 steps/s, the tail of the key lag; with
these, the young objects are collected in fewer, larger passes and a full one is rare."""
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
        self.title = clean(title, None)  # a replay's title holds a path: data, never control
        self.sessions: list[PairSession] = []
        """Sessions started by pair views (so no child run outlives the app)."""
        self.signalled: int | None = None
        """The signal that ended the app (SIGTERM, SIGINT, SIGHUP), if one did."""
        self._caught: list[int] = []
        self._hung_up = False
        """The terminal hung up (its SIGHUP, or Textual failing to read it): nothing can be
        drawn, so no later signal ends the app before its pairs are saved."""
        self.summary_lines: list[str] = []
        """What the shell shows after the app exits (the pair view's summary, as headless)."""
        self.confirm_lines: list[str] | None = None
        """Command lines read from a saved file, asked about before the sweep runs any."""
        self.refused = False
        self.crashed = False
        """An exception nobody caught ended the app (exit 2, never a verdict's code)."""

    def _handle_exception(self, error: Exception) -> None:
        self.crashed = True
        super()._handle_exception(error)

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """Textual's Screenshot command (ctrl+p), saved as `tuimon-YYYYmmdd-HHMMSS.svg` in the
        current directory. Textual's own default failed: it names the file after the title (a
        replay's title holds a path) and saves it in ~/Downloads (often missing on a server)."""
        name = filename or f"tuimon-{datetime.now():%Y%m%d-%H%M%S}.svg"
        return super().deliver_screenshot(name, path or str(Path.cwd()), time_format)

    def on_mount(self) -> None:
        """The first screen: a pair view for a session, else the browser."""
        loop = asyncio.get_running_loop()
        for sig in SIGNALS if owned() else ():  # a test process keeps its own
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.on_signal, sig)
                self._caught.append(sig)
        if self.sweep is not None and self.confirm_lines is not None:
            what = f"sweep --resume {self.sweep.id}"
            self.push_screen(CommandsScreen(what, self.confirm_lines), self._confirmed)
        elif self.sweep is not None:
            from tuimon.ui.sweep_screen import SweepScreen

            self.push_screen(SweepScreen(self.sweep))
        elif self.make_session is not None:
            self.push_screen(PairScreen(make_session=self.make_session, replay=self.replay))
        else:
            from tuimon.ui.browser import BrowserScreen

            self.push_screen(BrowserScreen(self.store))

    def _confirmed(self, yes: bool | None) -> None:
        """The answer to `CommandsScreen`: the sweep runs, or the app ends with nothing run."""
        if yes and self.sweep is not None:
            from tuimon.ui.sweep_screen import SweepScreen

            self.confirm_lines = None
            self.push_screen(SweepScreen(self.sweep))
        else:
            self.refused = True
            self.exit(2, return_code=2)

    def on_key(self, event: events.Key) -> None:
        """A printable key that reaches the app while an input has the focus was typed before
        that input took it (`:12` or `/loss` in one burst: the keys were already on their way
        to the view): it goes to the input, not lost. (An input keeps the keys it gets.)"""
        field = self.focused
        if isinstance(field, Input) and event.is_printable and event.character:
            field.insert_text_at_cursor(event.character)
            event.stop()

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
        if self._hung_up:  # the terminal is gone: `_exit_once_saved` ends the process
            return
        again = self.signalled is not None
        self.signalled = sig
        code = 128 + sig
        if sig == signal.SIGHUP and not terminal_alive():  # nothing to restore; drawing blocks
            self._hung_up = True
            threading.Thread(target=self._exit_once_saved, args=(code,), daemon=True).start()
            if again:
                return  # the pairs are already stopping: the thread waits for their saves
        if not again:
            sweeps = self._sweep_screens()
            views = [s for s in self.screen_stack if isinstance(s, PairScreen) or s in sweeps]
            if any([view.stop_now() for view in views]):
                return  # the pair view exits once the partial pair is saved
        self.exit(code, return_code=code)

    def panic(self, *renderables: RenderableType) -> None:
        """Textual's end on an error nobody caught; its input thread calls it when reading the
        terminal fails, as it does once the terminal has hung up. Then this is the hang-up
        (its SIGHUP may come before or after): the live pairs are stopped and saved as on the
        signal (`on_signal`), never dropped by an app that ends first."""
        if not self._hung_up and not self.is_headless and not terminal_alive():
            self.on_signal(signal.SIGHUP)
        if self._hung_up:
            return  # `_exit_once_saved` ends the process once every pair is saved
        super().panic(*renderables)

    def _exit_once_saved(self, code: int) -> None:
        """(thread) The terminal is gone: exit as soon as every pair is saved (or given up)."""
        deadline = time.monotonic() + NO_TERMINAL_WAIT
        while time.monotonic() < deadline and not all(s.ended for s in self.sessions):
            time.sleep(0.05)
        terminate_leftovers(self.sessions)
        if self.make_session is not None and self.sessions:  # a pair view: its verdict's code
            code = _verdict_code(self.sessions, explain=False)
        os._exit(code)

    def _sweep_screens(self) -> list[SweepScreen]:
        """The sweep's screens on the stack, bottom first (none without a sweep: its module is
        imported only then)."""
        if self.sweep is None:
            return []
        from tuimon.ui.sweep_screen import SweepScreen

        return [s for s in self.screen_stack if isinstance(s, SweepScreen)]

    def on_session_started(self, message: SessionStarted) -> None:
        """Keep each session a pair view starts (see `terminate_leftovers`)."""
        self.sessions.append(message.session)

    async def action_quit(self) -> None:
        """Quit (ctrl+q, ctrl+c, the palette): a running live pair or sweep asks first."""
        for sweep_screen in self._sweep_screens():
            sweep_screen.request_quit()
            return
        for screen in reversed(self.screen_stack):
            if isinstance(screen, PairScreen):
                screen.request_quit()
                return
        self.exit(0)

    def action_help(self) -> None:
        """F1 (and ? in the pair view): the keys of the screen shown."""
        screen = self.screen
        if isinstance(screen, KeyedScreen):  # every key of its table that works there
            text = HELP_TEXT if isinstance(screen, PairScreen) else ""
            self.push_screen(HelpScreen(screen.help_rows(), text))

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
    confirm: list[str] | None = None,
) -> int:
    """Run the app until the user quits; the exit code: a pair view's verdict's (0/1/3, as
    headless: a pair stopped early is INCOMPLETE, 3), a sweep's, 2 when its commands were refused.

    With `explain`, a pair that ended DIVERGED is explained after the app closes (`pair
    --explain`): progress and the one-line answer go to the terminal, the result to pair.json.
    With `confirm` (a resumed sweep's command lines), a modal asks before anything runs.
    """
    app = TuimonApp(store=store, make_session=make_session, title=title, replay=replay, sweep=sweep)
    app.confirm_lines = confirm
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLD)
    try:
        result = app.run()
    finally:
        gc.set_threshold(*thresholds)
        terminate_leftovers(app.sessions + (list(sweep.sessions.values()) if sweep else []))
    if app.crashed:  # textual printed the traceback: an internal error is never 0 or 1
        return 2
    # the alternate screen is gone: the shell keeps the sweep's table or the pair's summary
    if app.refused or app.confirm_lines is not None:  # no yes (n, Esc, or quit at the modal)
        print("\n".join(confirm or []), file=sys.stderr)
        print(f"tuimon: {REFUSED}", file=sys.stderr)
        if sweep is not None:
            sweep.release()
        return 2
    if sweep is not None:
        from tuimon.report.sweep import print_result

        sweep.abandon()  # a pair still running when the app quit without waiting
        print_result(sweep, sys.stdout)
    else:
        for line in app.summary_lines:
            print(line)
    for session in app.sessions:  # a pair that could not be saved is said after the screen
        writer = session.writer
        if writer is not None and writer.save_error and not writer.finished:
            print(f"tuimon: pair NOT saved: {writer.save_error}", file=sys.stderr)
            return 3
    if make_session is not None and app.sessions:  # a pair view: its verdict's code, as headless
        return _verdict_code(app.sessions, explain=explain)
    if sweep is not None:  # as headless: 3 when a pair was stopped (q, Ctrl-C, a signal)
        return sweep.exit_code()
    if app.signalled is not None:
        return 128 + app.signalled
    if isinstance(result, int):
        return result
    return app.return_code or 0


def _verdict_code(sessions: list[PairSession], *, explain: bool) -> int:
    """The exit code of the pair the view showed: its verdict's (0 IDENTICAL or CLOSE,
    1 DIVERGED, 3 INCOMPLETE: stopped, a run failed, or no verdict), as headless gives it."""
    from tuimon.engine.judge.seed_check import pair_exit_code
    from tuimon.engine.judge.verdict import exit_code

    session = sessions[-1]
    summary = getattr(session, "summary", None)
    if explain:
        from tuimon.engine.analyses.explain import describe, explain_after

        if (done := explain_after(session, print)) is not None:
            print(describe(done))
    if summary is None:
        return 3
    meta = getattr(getattr(session, "options", None), "meta", None) or {}
    return pair_exit_code(exit_code(summary), meta, summary.verdict)  # `--seeds A,B`


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

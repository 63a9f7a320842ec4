"""The sweep view: one row per pair (seed, repeat), filling in live; Enter opens a pair.

Each running pair feeds a `PairFeed` from its first batch, so Enter on it opens its live view
with everything seen so far; Esc comes back and the pair runs on. A pair's batches only mark its
row; the rows marked are redrawn together once a second (`ROW_REFRESH`), each cell only
when its text changed, so a sweep of many live pairs leaves the event loop free for keys.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Header, Static

from tuimon.engine.runs.sweep import COLUMNS, Sweep, hint_lines, row, seed_lines
from tuimon.engine.sources.session import Batch, merge_batches
from tuimon.store import is_pair_dir
from tuimon.ui.command_palette import ScreenActions
from tuimon.ui.keymap import Key, KeyedScreen, KeyFooter
from tuimon.ui.line_table import MOVES
from tuimon.ui.modals import ConfirmScreen
from tuimon.ui.pair_model import PairFeed
from tuimon.ui.pair_screen import MAX_LINES, PairScreen
from tuimon.ui.sweep_table import SweepTable
from tuimon.ui.text import clean
from tuimon.ui.workers import ReportsWorkerErrors

VERDICT_COLOURS = {
    "IDENTICAL": "success",
    "CLOSE": "warning",
    "DIVERGED": "error",
    "INCOMPLETE": "warning",
}
FEED_EVERY = 16
"""Batches of a running pair nobody watches that wait to be taken by its feed together (one
model update, not eight); a pair opened, watched or ended is taken at once."""
ROW_REFRESH = 1.0
"""Seconds between two redraws of the rows that changed (and of the status line): with 64
pairs running, 4 a second cost the monitor ~0.15% of a core per pair for numbers nobody reads
that fast."""
STOP_QUESTION = "Stop the sweep? Running pairs are saved as interrupted; --resume runs the rest."


class SweepPairScreen(PairScreen):
    """A pair opened from a sweep, live (running) or saved: quitting goes through the sweep."""

    async def action_quit(self) -> None:  # type: ignore[override]
        """Quit as the app does: a running sweep asks first."""
        await self.app.action_quit()


SWEEP_KEYS = (
    Key("open", "enter", "select_cursor", "Open", "Open the pair", 20, view="table"),
    Key("stop", "s", "stop", "Stop", "Stop the sweep (running pairs are saved)", 20),
    *MOVES,
    Key("help", "question_mark", "app.help", "Help", "These keys (F1 too)", 20, "?"),
    Key("quit", "q", "quit", "Quit", "Quit tuimon (a running sweep asks)", 20),
)
"""The sweep screen's keys, one table (`keymap`)."""


class SweepScreen(KeyedScreen, ReportsWorkerErrors, Screen[None]):
    """Runs a sweep and shows its table; Enter opens a pair, Esc in it comes back."""

    KEYS = SWEEP_KEYS
    COMMANDS = {ScreenActions}  # noqa: RUF012

    def __init__(self, sweep: Sweep) -> None:
        super().__init__()
        self.sweep = sweep
        self.done = False
        self.quitting = False
        self.feeds: dict[int, PairFeed] = {}
        """The running pairs' models and rows, by job index (fed from each one's first batch)."""
        self._waiting: dict[int, list[Batch]] = {}
        """Batches of each running pair its feed has not taken yet (`FEED_EVERY`)."""
        self._status_lines: list[str] = []
        self._dirty: set[int] = set()
        """Jobs whose row may have changed since the last redraw."""

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="≈")
        yield SweepTable(COLUMNS, id="jobs")
        yield Static(Text(""), id="sweep-status")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        """Columns and rows now; the sweep runs in a worker on the app's loop."""
        self.sub_title = f"sweep {self.sweep.id}"
        table = self.query_one(SweepTable)
        for index in range(len(self.sweep.jobs)):
            table.add_row(self._cells(index))
        table.focus()

        def changed(index: int) -> None:
            self._feed(index)
            self._dirty.add(index)

        self.sweep.on_change = changed
        self._status()
        self.set_interval(ROW_REFRESH, self._redraw, name="sweep rows")
        self.run_worker(
            self._run(),
            name="sweep",
            group="sweep",
            exclusive=True,
            exit_on_error=False,
            description=f"sweep {self.sweep.id}",
        )

    async def _run(self) -> None:
        try:
            await self.sweep.run()
        finally:
            self.done = True
            self._redraw()
            self._status()
            self.refresh_bindings()
            if self.quitting:
                self.app.exit(130 if self.sweep.todo() else self.sweep.exit_code())

    def _feed(self, index: int) -> None:
        """A pair that starts gets a feed before its first batch; one that ended loses it."""
        session = self.sweep.sessions.get(index)
        if session is None:
            self.feeds.pop(index, None)
            self._waiting.pop(index, None)
            return
        if index in self.feeds:
            return
        self.feeds[index] = PairFeed(MAX_LINES)
        waiting = self._waiting[index] = []

        def take(batch: Batch) -> None:
            waiting.append(batch)
            if batch.done or len(waiting) >= FEED_EVERY or len(session.listeners) > 1:
                self._catch_up(index)  # ended, enough waited, or a view watches it

        session.listen(take)

    def _catch_up(self, index: int) -> None:
        """The feed of a pair takes the batches that waited, as one."""
        waiting, feed = self._waiting.get(index), self.feeds.get(index)
        if waiting and feed is not None:
            feed.take(merge_batches(waiting))
            waiting.clear()

    def _cells(self, index: int) -> list[Text]:
        job = self.sweep.jobs[index]
        cells = [Text(clean(cell, 120)) for cell in row(job)]
        colour = VERDICT_COLOURS.get(job.verdict or "")
        if colour and job.status != "running":
            cells[3].stylize(Style(color=self.app.theme_variables.get(colour), bold=True))
        cells[0].justify = cells[1].justify = "right"
        return cells

    def _redraw(self) -> None:
        """The rows marked since the last redraw (a row whose cells did not change is not
        drawn again), then the status line."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        table = self.query_one(SweepTable)
        for index in sorted(dirty):
            table.update_row(index, self._cells(index))
        self._status()

    def _status(self) -> None:
        jobs = self.sweep.jobs
        counts: dict[str, int] = {}
        for job in jobs:
            counts[job.status] = counts.get(job.status, 0) + 1
        parts = [f"{n} {status}" for status, n in counts.items()]
        text = f"{len(jobs)} pairs, {self.sweep.at_once} at a time: " + ", ".join(parts)
        if self.done:
            text += f" · exit code {self.sweep.exit_code()}"
            if self.sweep.todo():
                text += f" · `tuimon sweep --resume {self.sweep.id}` runs the rest"
        told = [*seed_lines(jobs, self.sweep.check_seeds), *hint_lines(jobs)][:3]
        lines = [clean(line, 400) for line in [text, *told]]
        if lines != self._status_lines:  # an update lays the screen out again: only a change
            self._status_lines = lines
            self.query_one("#sweep-status", Static).update(Text("\n").join(map(Text, lines)))

    # -- actions ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Stop only while the sweep runs."""
        if action == "stop":
            return not self.done and not self.sweep.stopping
        return super().check_action(action, parameters)

    @property
    def table(self) -> SweepTable:
        """The table of pairs (its moves are bound here: `line_table.MOVES`)."""
        return self.query_one(SweepTable)

    @on(SweepTable.RowSelected)
    def _row_selected(self, event: SweepTable.RowSelected) -> None:
        self.open_job(event.cursor_row)

    def open_job(self, index: int) -> None:
        """The pair of a job: live while it runs (Esc leaves it running), else saved."""
        if not 0 <= index < len(self.sweep.jobs):
            return
        job = self.sweep.jobs[index]
        session, feed = self.sweep.sessions.get(index), self.feeds.get(index)
        if session is not None and feed is not None:
            self._catch_up(index)
            self.app.push_screen(SweepPairScreen(watch=session, feed=feed, can_go_back=True))
            return
        path = self.sweep.pair_path(index)
        if path is None or not is_pair_dir(path):
            self.notify(f"{job.name} has not started yet", markup=False)
            return
        self.app.push_screen(SweepPairScreen(saved=path, can_go_back=True))

    def action_stop(self) -> None:
        """Ask, then stop the sweep."""
        self.app.push_screen(
            ConfirmScreen(STOP_QUESTION, yes="Stop", no="Keep running"), self._stop_answer
        )

    def _stop_answer(self, stop: bool | None) -> None:
        if stop:
            self.sweep.stop()
            self.refresh_bindings()
            self._status()

    def action_quit(self) -> None:
        """Quit; a running sweep asks first, stops its pairs and waits for their save."""
        self.request_quit()

    def stop_now(self) -> bool:
        """Stop the sweep without asking (a signal to tuimon); True while its pairs still save.

        The app exits once they are saved (see `_run`)."""
        if self.done:
            return False
        self.quitting = True
        self.sweep.stop()
        self._status()
        return True

    def request_quit(self) -> None:
        """Quit now, or (sweep running) confirm, stop, wait for the saves, exit."""
        if self.done:
            self.app.exit(self.sweep.exit_code())
            return
        if self.quitting:  # asked twice: do not wait
            self.app.exit(130, return_code=130)
            return

        def answer(stop: bool | None) -> None:
            if stop:
                self.quitting = True
                self.sweep.stop()
                self._status()

        self.app.push_screen(ConfirmScreen(STOP_QUESTION, yes="Stop", no="Keep running"), answer)

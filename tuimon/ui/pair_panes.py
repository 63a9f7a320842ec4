"""Both runs' panes as one view of a pair (`PairPanes`): the shared rows, following, the pager's
cursor, and the actions of the keys that move through them (the arrows, PgUp/PgDn, Home/End,
`g` first divergence, `f` follow, `w` digits, `:` step, `]` `[` divergence, `/` `n` `N` search,
`p` where each metric parts, `y` `Y` copy, `x` CSV, `i` everything known). `PairScreen`
composes it and binds its keys (`pair_keys.PAIR_KEYS`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.style import Style
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message

from tuimon.engine.sources.side_state import SideState
from tuimon.report.wording import metric_parts_line
from tuimon.steplog import Record
from tuimon.store import SIDES, SavedLogs, other_side
from tuimon.ui.modals import AskScreen, LinesScreen
from tuimon.ui.pager import Pager, export_rows, next_match, steps_matching, wrapped
from tuimon.ui.pair_info import info_lines
from tuimon.ui.pair_model import PairFeed, PairModel, PairRows
from tuimon.ui.panes import SideHeader, StepPane
from tuimon.ui.saved_view_model import window
from tuimon.ui.text import clean
from tuimon.ui.workers import ReportsWorkerErrors, read_then_show


class PairPanes(ReportsWorkerErrors, Horizontal):
    """Both sides (title, status, step pane), drawn from the feed's rows; the pager's cursor.

    The screen says where the two logs are (`logs`, for far jumps and the CSV), the pair's
    document (`doc`) and what the sparkline follows (`series`, what `Y` copies)."""

    class Followed(Message):
        """Following new lines started or stopped."""

    class FindDivergence(Message):
        """The first divergence is asked for and not known yet: the screen has a replay's
        controls look for it (`ReplayControls.find_and_jump`), or says what is known."""

    def __init__(
        self,
        feed: PairFeed,
        *,
        logs: Callable[[], SavedLogs | None],
        doc: Callable[[], dict[str, Any] | None],
        series: Callable[[], str],
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.feed = feed
        self.logs_on_disk = logs
        self.pair_doc = doc
        self._series = series
        self.follow = True
        self.pager = Pager(self)
        self._columns: list[str] = []

    @property
    def model(self) -> PairModel:
        """The pair's model (the feed's)."""
        return self.feed.model

    @property
    def rows(self) -> PairRows:
        """The rows of both panes, aligned by step (the feed's)."""
        return self.feed.rows

    @property
    def series(self) -> str:
        """What the sparkline follows."""
        return self._series()

    def compose(self) -> ComposeResult:
        for side in SIDES:
            with Vertical(classes="side", id=f"side-{side}"):
                yield SideHeader(side, id=f"header-{side}")
                yield StepPane(side, rows=self.rows, id=f"pane-{side}")

    def on_mount(self) -> None:
        """Link the panes (they scroll together); keys go to A."""
        a, b = self.pane("a"), self.pane("b")
        a.partner, b.partner = b, a
        a.focus()

    def pane(self, side: str) -> StepPane:
        """The step pane of a side."""
        return self.query_one(f"#pane-{side}", StepPane)

    def notify(self, message: str, **how: Any) -> None:
        """A note where the screen shows notes (its bottom line)."""
        self.screen.notify(message, **how)

    # -- drawing ------------------------------------------------------------------------------

    def show_headers(self, sides: dict[str, SideState], *, live: bool = True) -> None:
        """Each side's title and status line."""
        for side, state in sides.items():
            other = sides.get(other_side(side))
            self.query_one(f"#header-{side}", SideHeader).show(state, live=live, other=other)

    def show(self) -> None:
        """Draw the rows the feed took since the last draw, the first divergent step marked."""
        if self.model.columns != self._columns:
            self._columns = list(self.model.columns)
            for side in SIDES:
                self.pane(side).set_columns(self._columns)
        first = self.model.first_divergent_step
        dropped = self.feed.take_dropped()
        for side in SIDES:
            pane = self.pane(side)
            pane.marked = first
            pane.rows_added(dropped)

    def fill(
        self,
        records: dict[str, list[Record]],
        stderr: dict[str, list[str]],
        *,
        stderr_first: bool = False,
    ) -> None:
        """Rows read at once (a saved pair, a window of the logs), then drawn."""
        self.feed.add(records, stderr, stderr_first=stderr_first)
        self.show()

    # -- following and jumping ----------------------------------------------------------------

    def set_follow(self, follow: bool) -> None:
        """Follow new lines in both panes, or hold them where they are."""
        self.follow = follow
        for side in SIDES:
            pane = self.pane(side)
            pane.follow = follow
            if follow:
                pane.scroll_follow()
        self.post_message(self.Followed())

    @on(StepPane.UserScrolledUp)
    def _user_scrolled_up(self) -> None:
        if self.follow:
            self.set_follow(False)

    @on(StepPane.UserScrolledEnd)
    def _user_scrolled_end(self) -> None:
        self.set_follow(True)

    def holds(self, step: int) -> bool:
        """Both panes still hold the line of `step`."""
        return all(self.pane(s).buffer.index_of(step) is not None for s in SIDES)

    def scroll_to_step(self, step: int) -> bool:
        """Both panes on `step`, the cursor on it; False when they no longer hold it."""
        index = self.rows.index_of(step)
        if index is not None and self.holds(step):
            self.pager.put(index)
            return True
        return False

    def show_cursor(self, index: int) -> None:
        """The pager's cursor on a kept row, in the middle of both panes (following stops)."""
        self.set_follow(False)
        for side in SIDES:
            pane = self.pane(side)
            pane.cursor = self.pager.cursor
            pane.scroll_to_index(index)

    def jump_far(self, step: int) -> bool:
        """Read the lines around a step the panes no longer hold (logs on disk); False if none."""
        logs = self.logs_on_disk()
        if logs is None:
            return False
        max_lines = self.rows.max_lines
        read_then_show(
            self,
            lambda: window(logs, step, max_lines),
            lambda lines: self._show_window(step, lines),
            group="window",
            what=f"reading the lines around step {step}",
        )
        return True

    def search_far(self, needle: str, anchor: int | None, forward: bool) -> bool:
        """Search both whole logs for `needle` after (or before) the step `anchor`, wrapping
        at the end (a worker), then put the cursor on the match; False when there are no logs
        to read or the pair is still going (its rows are searched instead)."""
        logs = self.logs_on_disk()
        if logs is None or not self.model.done:
            return False
        read_then_show(
            self,
            lambda: next_match(steps_matching(logs, needle), anchor, forward),
            lambda found: self._show_match(found, needle, forward),
            group="search",
            what=f"searching the logs for {clean(needle, 40)}",
        )
        return True

    def _show_match(self, found: tuple[int, bool] | None, needle: str, forward: bool) -> None:
        if found is None:
            self.notify(f"not found: {clean(needle, 60)}", timeout=3)
            return
        step, went_round = found
        if not self.scroll_to_step(step):
            self.jump_far(step)
        if went_round:
            self.notify(wrapped(forward), timeout=2)

    def _show_window(self, step: int, lines: dict[str, list[Record]]) -> None:
        self.rows.clear()
        self.set_follow(False)
        self.fill(lines, {})
        self.call_after_refresh(self.scroll_to_step, step)
        self.notify(f"step {step} (lines around it loaded)")

    # -- keys ---------------------------------------------------------------------------------

    def action_first_divergence(self) -> None:
        """Scroll both panes to the first divergent step (fast-forward a replay to it)."""
        step = self.model.first_divergent_step
        if step is not None:
            if self.scroll_to_step(step):
                self.notify(f"first divergence: step {step}", timeout=2)
            elif not self.jump_far(step):
                self.notify(
                    f"step {step} is no longer in the panes (the last {self.rows.max_lines} "
                    f"lines of each run are kept); {self.model.first_line()}",
                    markup=False,
                )
            return
        self.post_message(self.FindDivergence())

    def action_line_up(self) -> None:
        """Scroll both panes up a row (they scroll together: pane A leads)."""
        self.pane("a").action_scroll_up()

    def action_line_down(self) -> None:
        """Scroll both panes down a row."""
        self.pane("a").action_scroll_down()

    def action_page_up(self) -> None:
        """Scroll both panes up a page."""
        self.pane("a").action_page_up()

    def action_page_down(self) -> None:
        """Scroll both panes down a page."""
        self.pane("a").action_page_down()

    def action_scroll_left(self) -> None:
        """Scroll the metrics of both panes left."""
        self.pane("a").action_scroll_left()

    def action_scroll_right(self) -> None:
        """Scroll the metrics of both panes right."""
        self.pane("a").action_scroll_right()

    def action_first_row(self) -> None:
        """Home: the cursor on the first row kept (following stops); at the top, the screen
        reads the lines before it from the logs."""
        if len(self.rows):
            self.pager.put(0)

    def action_last_row(self) -> None:
        """End: the cursor on the last row, and following again."""
        if len(self.rows):
            self.pager.put(len(self.rows) - 1)
        self.set_follow(True)

    def action_follow(self) -> None:
        """Pause or resume following new lines."""
        self.set_follow(not self.follow)

    def action_wide(self) -> None:
        """Every digit of every number, or what fits the panes."""
        for side in SIDES:
            pane = self.pane(side)
            pane.set_wide(not pane.wide)

    def action_jump(self) -> None:
        """Ask for a step, then put the cursor on it."""
        ask = AskScreen("Jump to step", placeholder="a step number, e.g. 1200")
        self.app.push_screen(ask, self._jump_answer)

    def _jump_answer(self, text: str | None) -> None:
        if text:
            self.pager.jump_to_step(text)

    def action_next_divergence(self) -> None:
        """The cursor on the next step whose values differ."""
        self.pager.divergence(forward=True)

    def action_previous_divergence(self) -> None:
        """The cursor on the previous step whose values differ."""
        self.pager.divergence(forward=False)

    def action_search(self) -> None:
        """Ask for text, then put the cursor on the next row that holds it."""
        ask = AskScreen(
            "Search: a step, a value as shown, or text (n next, N previous)",
            value=self.pager.query,
        )
        self.app.push_screen(ask, self._search_answer)

    def _search_answer(self, text: str | None) -> None:
        if text:
            self.pager.search(text)

    def action_search_next(self) -> None:
        """The next row that holds the search."""
        self.pager.search("", forward=True)

    def action_search_previous(self) -> None:
        """The previous row that holds the search."""
        self.pager.search("", forward=False)

    def action_parts(self) -> None:
        """Where each metric first parts, with both values in full and how far apart."""
        parts = self.model.parts
        if not parts:
            self.notify("no metric has parted yet (the values are bitwise equal)", timeout=3)
            return
        lines = [Text(metric_parts_line(n, s, d)) for n, (s, d) in parts.items()]
        self.app.push_screen(LinesScreen("Where each metric first parts", lines))

    def action_info(self) -> None:
        """Everything known of the pair: verdict, parts, artifacts, errors, hints, explain, env."""
        shows = getattr(self.screen, "shows", None)  # a replay or a saved pair: not saved here
        replayed = shows is not None and shows.name != "LIVE"
        lines = []
        for kind, text in info_lines(self.model, self.pair_doc(), replayed=replayed):
            style = Style(bold=True, underline=True) if kind == "head" else None
            lines.append(Text(text, style=style or ""))
        self.app.push_screen(LinesScreen("The pair", lines))

    def action_copy_row(self) -> None:
        """Copy the row under the cursor (OSC 52: the terminal's clipboard)."""
        self._copy(self.pager.row_text(), "row")

    def action_copy_value(self) -> None:
        """Copy the value under the cursor (the sparkline's metric), both sides and the diff."""
        self._copy(self.pager.value_text(), "value")

    def _copy(self, text: str | None, what: str) -> None:
        if text is None:
            self.notify("no row under the cursor: move to one first (: ] [ /)", timeout=3)
            return
        self.app.copy_to_clipboard(text)
        self.notify(f"copied the {what}: {clean(text, 200)}", timeout=4)

    def action_export(self) -> None:
        """Write the aligned rows as CSV next to the pair (else in the current folder), as
        `tuimon export` writes them."""
        logs = self.logs_on_disk()
        folder = self.model.pair_path or Path.cwd()
        target = Path(folder) / "aligned.csv"
        kept = tuple(
            {} if logs is not None else dict(self.rows.metrics.get(side, {})) for side in "ab"
        )
        read_then_show(
            self,
            lambda: export_rows(logs, kept, target),
            self._exported,
            group="export",
            what="exporting CSV",
        )

    def _exported(self, result: tuple[Path, int, str]) -> None:
        path, count, source = result
        self.notify(f"{count} aligned rows from {source} written to {clean(path, None)}", timeout=6)

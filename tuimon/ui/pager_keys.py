"""The pager keys of the pair view (`:` step, `]` `[` divergence, `/` `n` `N` search, `p` where
each metric parts, `y` `Y` copy, `x` CSV, `i` everything known): a mixin of `PairScreen`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding

from tuimon.report.wording import metric_parts_line
from tuimon.store import SavedLogs
from tuimon.ui.modals import AskScreen, LinesScreen
from tuimon.ui.pager import Pager, export_rows
from tuimon.ui.pair_info import info_lines
from tuimon.ui.pair_model import PairModel, PairRows
from tuimon.ui.text import clean
from tuimon.ui.workers import read_then_show

PAGER_BINDINGS = [
    Binding("colon", "jump", "Step", key_display=":", id="jump", tooltip="Jump to step N"),
    Binding(
        "right_square_bracket",
        "next_divergence",
        "Next div.",
        key_display="]",
        id="next-divergence",
        tooltip="Next step whose values differ",
    ),
    Binding(
        "left_square_bracket",
        "previous_divergence",
        "Prev. div.",
        key_display="[",
        id="previous-divergence",
        tooltip="Previous step whose values differ",
    ),
    Binding("p", "parts", "Parts", id="parts", tooltip="Where each metric first parts (a table)"),
    Binding("slash", "search", "Search", key_display="/", id="search", tooltip="Search the rows"),
    Binding("n", "search_next", "Next match", id="search-next", show=False, tooltip="Next match"),
    Binding(
        "N",
        "search_previous",
        "Prev. match",
        id="search-prev",
        show=False,
        tooltip="Previous match",
    ),
    Binding(
        "y", "copy_row", "Copy row", id="copy-row", tooltip="Copy the cursor's row (both sides)"
    ),
    Binding(
        "Y",
        "copy_value",
        "Copy value",
        id="copy-value",
        show=False,
        tooltip="Copy the cursor row's value of the sparkline's metric, both sides and their diff",
    ),
    Binding("x", "export", "CSV", id="export", tooltip="Export the aligned rows as CSV"),
    Binding(
        "i",
        "info",
        "Info",
        id="info",
        tooltip="Everything known of the pair (the whole bottom line)",
    ),
]


class PagerKeys:
    """Actions of the pager keys; the screen provides what `PagerHost` names."""

    pager: Pager
    model: PairModel
    app: Any

    if TYPE_CHECKING:  # the screen's own (stubs here would shadow Screen.notify)

        @property
        def rows(self) -> PairRows: ...
        def notify(self, message: str, *, timeout: float | None = None) -> None: ...
        def logs_on_disk(self) -> SavedLogs | None: ...
        def pair_doc(self) -> dict[str, Any] | None: ...

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
        ask = AskScreen("Search the rows (n next, N previous)", value=self.pager.query)
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
        lines = []
        for kind, text in info_lines(self.model, self.pair_doc()):
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
            self,  # type: ignore[arg-type]
            lambda: export_rows(logs, kept, target),
            self._exported,
            group="export",
            what="exporting CSV",
        )

    def _exported(self, result: tuple[Path, int, str]) -> None:
        path, count, source = result
        self.notify(f"{count} aligned rows from {source} written to {clean(path, None)}", timeout=6)

"""One side of a pair: its title and status, and its bounded, lazily drawn step lines."""

from __future__ import annotations

from collections.abc import Sequence

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from tuimon.session import SideState
from tuimon.steplog import Record
from tuimon.ui.pair_model import LineBuffer
from tuimon.ui.text import cell, clean, fit
from tuimon.wording import side_status

STEP_WIDTH = 8
MIN_COLUMN = 11
MAX_COLUMN = 18
WIDE_COLUMN = 25
"""Room for every digit of a float64: -1.2345678901234567e-305."""
MAX_TEXT_WIDTH = 1000


class StepPane(ScrollView, can_focus=True):
    """The last `max_lines` lines of one run, drawn only where visible (Line API).

    A sticky first row names the columns. In each number the first digit that differs from the
    other pane's value for the same step is highlighted from there on. Text lines from the run
    (stdout that is not a record, stderr) are drawn in their own styles, never as markup.
    """

    COMPONENT_CLASSES = {  # noqa: RUF012 - Textual's own declaration style
        "step-pane--header",
        "step-pane--step",
        "step-pane--mark",
        "step-pane--diff",
        "step-pane--text",
        "step-pane--stderr",
        "step-pane--note",
    }

    class UserScrolledUp(Message):
        """The user scrolled up: the view stops following new lines."""

    class UserScrolledEnd(Message):
        """The user went to the end: the view follows new lines again."""

    def __init__(self, side: str, *, max_lines: int = 2000, id: str | None = None) -> None:
        super().__init__(id=id)
        self.side = side
        self.buffer = LineBuffer(max_lines)
        self.columns: list[str] = []
        self.partner: StepPane | None = None
        self.follow = True
        self.marked: int | None = None
        """A step whose number is marked (the first divergence)."""
        self.wide = False
        """Every digit (wide columns, scroll sideways) instead of what fits."""

    # -- feeding ------------------------------------------------------------------------------

    def set_columns(self, columns: Sequence[str]) -> None:
        """The metrics shown, in order."""
        if list(columns) != self.columns:
            self.columns = list(columns)
            self._resize_virtual()
            self.refresh()

    def add(self, records: Sequence[Record], stderr: Sequence[str] = ()) -> None:
        """Append one batch of a side's records and stderr lines."""
        dropped = self.buffer.add(records, stderr)
        self._resize_virtual()
        if self.follow:  # now (forced: scrollbars may not be laid out yet) and after layout
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
            self.call_after_refresh(self._keep_following)
        elif dropped:
            self.scroll_to(
                y=max(0, self.scroll_y - dropped), animate=False, immediate=True, force=True
            )
        self.refresh()

    def _keep_following(self) -> None:
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)

    def clear(self) -> None:
        """Forget every line."""
        self.buffer.clear()
        self._resize_virtual()
        self.refresh()

    def set_wide(self, wide: bool) -> None:
        """Show every digit, or what fits the pane."""
        self.wide = wide
        self._resize_virtual()
        self.refresh()

    def _column_width(self, width: int) -> int:
        if self.wide:
            return WIDE_COLUMN
        if not self.columns:
            return MIN_COLUMN
        fair = (width - STEP_WIDTH) // len(self.columns)
        return max(MIN_COLUMN, min(MAX_COLUMN, fair))

    def _table_width(self, width: int) -> int:
        return STEP_WIDTH + self._column_width(width) * len(self.columns)

    def _resize_virtual(self) -> None:
        width = self.scrollable_content_region.width or self.size.width
        wide = max(self._table_width(width), min(self.buffer.widest + 1, MAX_TEXT_WIDTH))
        self.virtual_size = Size(wide, len(self.buffer) + 1)

    def on_resize(self) -> None:
        """Column widths follow the pane's width."""
        self._resize_virtual()
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)

    # -- scrolling ----------------------------------------------------------------------------

    def scroll_to_step(self, step: int) -> bool:
        """Put a step's line in the middle of the pane; False when it is no longer kept."""
        index = self.buffer.index_of(step)
        if index is None:
            return False
        rows = max(1, self.size.height - 1)
        self.scroll_to(y=max(0, index - rows // 2), animate=False, immediate=True, force=True)
        return True

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        user_up = new_value < old_value and new_value < self.max_scroll_y  # not a resize clamp
        if user_up and self.follow and self.is_mounted:
            self.post_message(self.UserScrolledUp())

    def action_scroll_end(self) -> None:
        """End key: to the last line, and follow again."""
        self.post_message(self.UserScrolledEnd())
        self.scroll_end(animate=False, x_axis=False)

    # -- drawing ------------------------------------------------------------------------------

    def line_text(self, index: int) -> Text:
        """Entry `index` of the kept lines as styled text (also what tests read)."""
        kind, payload, metrics = self.buffer.entries[index]
        if kind != "step":
            style = self.get_component_rich_style(f"step-pane--{kind}")
            prefix = "! " if kind == "stderr" else ("· " if kind == "note" else "")
            return Text(prefix + payload, style=style, no_wrap=True, end="")
        return self._step_text(payload, metrics or {})

    def _step_text(self, step: int, metrics: dict[str, float]) -> Text:
        width = self.scrollable_content_region.width or self.size.width
        col = self._column_width(width)
        sig = 17 if self.wide else max(3, min(10, col - 6))
        diff_style = self.get_component_rich_style("step-pane--diff")
        mark = step == self.marked
        text = Text(no_wrap=True, end="")
        step_style = self.get_component_rich_style("step-pane--mark" if mark else "step-pane--step")
        text.append(f"{'▶' if mark else ' '}{step:>{STEP_WIDTH - 2}} ", step_style)
        other = self.partner.buffer.metrics_of(step) if self.partner is not None else None
        for name in self.columns:
            theirs = other.get(name) if other is not None else None
            shown, at = cell(metrics.get(name), theirs, col - 1, sig)
            if at is None:
                text.append(shown)
            else:
                text.append(shown[:at])
                text.append(shown[at:], diff_style)
            text.append(" " * (col - len(shown)))
        return text

    def _header_text(self) -> Text:
        width = self.scrollable_content_region.width or self.size.width
        col = self._column_width(width)
        text = Text(f"{'step':>{STEP_WIDTH - 1}} ", no_wrap=True, end="")
        for name in self.columns:
            label, _ = fit(clean(name), col - 1, None)
            text.append(label.ljust(col))
        return text

    def render_line(self, y: int) -> Strip:
        """Row 0 names the columns; the rows below show the kept lines from the scroll offset."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:
            text = self._header_text()
            text.stylize(self.get_component_rich_style("step-pane--header"))
        else:
            index = scroll_y + y - 1
            if index >= len(self.buffer):
                return Strip.blank(width, base)
            text = self.line_text(index)
        strip = Strip(list(text.render(self.app.console)), text.cell_len)
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)


class SideHeader(Vertical):
    """A side's title (side, device, command) and its status line."""

    def __init__(self, side: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="side-header")
        self.side = side
        self._status = "starting"
        self._state: SideState | None = None
        self._live = True

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{self.side.upper()} · …", no_wrap=True), classes="side-title")
        yield Static(Text("starting", no_wrap=True), classes="side-status status-starting")

    def show(self, state: SideState, *, live: bool = True) -> None:
        """Update the title and the status line from a side's state."""
        self._state, self._live = state, live
        title = Text(no_wrap=True, overflow="ellipsis", end="")
        title.append(f"{self.side.upper()} ", Style(bold=True))
        title.append(f"· {clean(state.device)} · ")
        title.append(clean(state.command), Style(italic=True))
        self.query_one(".side-title", Static).update(title)
        line, status = side_status(state, live=live)
        width = self.content_size.width
        for compact in (1, 2):
            if not width or len(line) <= width:
                break
            line, status = side_status(state, live=live, compact=compact)
        widget = self.query_one(".side-status", Static)
        widget.update(Text(line, no_wrap=True, overflow="ellipsis", end=""))
        if status != self._status:
            widget.remove_class(f"status-{self._status}")
            widget.add_class(f"status-{status}")
            self._status = status

    def on_resize(self) -> None:
        """The status line takes the compact form when the pane is narrow."""
        if self._state is not None:
            self.show(self._state, live=self._live)

    @property
    def status_text(self) -> str:
        """The status line as plain text."""
        return str(self.query_one(".side-status", Static).render())

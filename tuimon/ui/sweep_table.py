"""The sweep's table: one line per pair, drawn with Textual's Line API.

A row's line is drawn again only when its cells change, and a cursor move redraws two lines:
a sweep of many live pairs updating their rows a few times a second costs a few lines, not a
table (a DataTable measures and redraws every visible row on any change).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

RIGHT = 2
"""The first columns (seed, repeat) are numbers: right-justified."""


class SweepTable(ScrollView, can_focus=True):
    """Rows of cells under a header that stays; a cursor row; Enter (or a click on the cursor
    row) posts `SweepTable.Selected`."""

    BINDINGS = [  # noqa: RUF012
        Binding("enter", "select_cursor", "Open", id="open", tooltip="Open the pair"),
        Binding("down,j", "cursor_down", "Down", show=False, id="down"),
        Binding("up,k", "cursor_up", "Up", show=False, id="up"),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
    ]
    COMPONENT_CLASSES = {  # noqa: RUF012
        "sweep-table--header",
        "sweep-table--cursor",
        "sweep-table--even",
    }
    DEFAULT_CSS = """
    SweepTable { height: 1fr; background: $surface; }
    SweepTable > .sweep-table--header { background: $panel; color: $foreground; text-style: bold; }
    SweepTable > .sweep-table--cursor { background: $block-cursor-background; color: $block-cursor-foreground; }
    SweepTable > .sweep-table--even { background: $surface-lighten-1; }
    """  # noqa: E501

    class Selected(Message):
        """Enter on a row (or a click on the cursor row)."""

        def __init__(self, row: int) -> None:
            super().__init__()
            self.row = row

    def __init__(self, columns: Sequence[str], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.widths = [cell_len(c) for c in self.columns]
        self._rows: list[list[Text]] = []
        self._lines: dict[int, tuple[tuple[object, ...], Strip]] = {}
        """Drawn lines by row, with what they were drawn for (cursor, stripe, width)."""
        self.cursor_row = 0

    # -- the data --

    @property
    def row_count(self) -> int:
        """Rows in the table."""
        return len(self._rows)

    def add_row(self, cells: Sequence[Text]) -> None:
        """A row at the end."""
        self._rows.append(list(cells))
        self._widen(cells)
        self._resized()

    def get_row_at(self, index: int) -> list[Text]:
        """The cells of row `index`."""
        return list(self._rows[index])

    def update_row(self, index: int, cells: Sequence[Text]) -> bool:
        """New cells for row `index`; only its line is drawn again (all lines when a column
        must widen). False when nothing changed."""
        if self._rows[index] == list(cells):
            return False
        self._rows[index] = list(cells)
        if self._widen(cells):
            self._resized()
        else:
            self._lines.pop(index, None)
            self.refresh_line(index + 1)
        return True

    def _widen(self, cells: Sequence[Text]) -> bool:
        wider = False
        for i, cell in enumerate(cells):
            if cell.cell_len > self.widths[i]:
                self.widths[i], wider = cell.cell_len, True
        return wider

    def _resized(self) -> None:
        self._lines.clear()
        self.virtual_size = Size(sum(self.widths) + 2 * len(self.widths), len(self._rows) + 1)
        self.refresh()

    # -- the cursor --

    def move_cursor(self, *, row: int) -> None:
        """Put the cursor on `row` (clamped) and scroll it into view."""
        if not self._rows:
            return
        old, self.cursor_row = self.cursor_row, max(0, min(row, len(self._rows) - 1))
        if old != self.cursor_row:
            self.refresh_line(old + 1)
            self.refresh_line(self.cursor_row + 1)
        seen = max(1, self.size.height - 1)
        top = int(self.scroll_offset.y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + seen:
            self.scroll_to(y=self.cursor_row - seen + 1, animate=False, immediate=True)

    def action_cursor_down(self) -> None:
        """One row down."""
        self.move_cursor(row=self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        """One row up."""
        self.move_cursor(row=self.cursor_row - 1)

    def action_page_down(self) -> None:
        """A screen down."""
        self.move_cursor(row=self.cursor_row + max(1, self.size.height - 1))

    def action_page_up(self) -> None:
        """A screen up."""
        self.move_cursor(row=self.cursor_row - max(1, self.size.height - 1))

    def action_first(self) -> None:
        """The first row."""
        self.move_cursor(row=0)

    def action_last(self) -> None:
        """The last row."""
        self.move_cursor(row=len(self._rows) - 1)

    def action_select_cursor(self) -> None:
        """Open the row under the cursor."""
        if self._rows:
            self.post_message(self.Selected(self.cursor_row))

    def on_click(self, event: events.Click) -> None:
        """A click moves the cursor to the row; a click on the cursor row opens it."""
        if event.y < 1:
            return
        row = event.y - 1 + int(self.scroll_offset.y)
        if 0 <= row < len(self._rows):
            if row == self.cursor_row:
                self.action_select_cursor()
            else:
                self.move_cursor(row=row)

    # -- drawing --

    def on_resize(self) -> None:
        """Lines are drawn for a width: draw them again."""
        self._lines.clear()

    def notify_style_update(self) -> None:
        """A theme change: draw every line again."""
        super().notify_style_update()
        self._lines.clear()

    def render_line(self, y: int) -> Strip:
        """Screen line `y`: the header, or the row under it."""
        width = self.size.width
        x = int(self.scroll_offset.x)
        if y == 0:
            header = self.get_component_rich_style("sweep-table--header")
            return self._draw([Text(c) for c in self.columns], header).crop(x, x + width)
        index = y - 1 + int(self.scroll_offset.y)
        if index >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        kind = "cursor" if index == self.cursor_row else "even" if index % 2 else "odd"
        key = (kind, x, width, tuple(self.widths))
        got = self._lines.get(index)
        if got is None or got[0] != key:
            style = self.rich_style
            if kind != "odd":
                style += self.get_component_rich_style(f"sweep-table--{kind}")
            strip = self._draw(self._rows[index], style).crop(x, x + width)
            got = self._lines[index] = (key, strip)
        return got[1]

    def _draw(self, cells: Sequence[Text], style: Style) -> Strip:
        """One line of cells, each padded to its column's width, on `style`."""
        line = Text(no_wrap=True, end="")
        for i, cell in enumerate(cells):
            pad = " " * (self.widths[i] - cell.cell_len)
            line.append(" ")
            line.append_text(Text(pad) + cell if i < RIGHT else cell + Text(pad))
            line.append(" ")
        segments = Segment.apply_style(line.render(self.app.console), style)
        width = max(self.size.width, self.virtual_size.width)
        return Strip(segments).extend_cell_length(width, style)

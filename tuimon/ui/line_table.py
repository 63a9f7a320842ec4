"""A table that draws only the rows on screen (Line API), over an in-memory list of rows.

`DataTable` measures and stores every cell of every row it is given: 1,000 rows cost ~0.7 s
to add, and a filter that shows them again costs the same. This table holds only a list of
row keys; a row's cells are asked for (`cells(key)`) the first time the row is on screen, and
its drawn strip is kept per key and look (cursor, stripe, focus) until the theme changes.
Setting a new list of keys (a filter, a sort) draws nothing but the rows then visible.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tuimon.ui.keymap import Key

K = TypeVar("K", bound=Hashable)
PADDING = 1
"""Blank cells on each side of a column."""


@dataclass(frozen=True)
class Column:
    """A column: its header, its width in cells (without padding), and how cells align."""

    label: str
    width: int
    justify: Literal["left", "right"] = "left"


def fit_cell(text: Text, width: int, justify: str) -> Text:
    """`text` cut (with "…") or padded to exactly `width` cells."""
    cell = text.copy()
    cell.truncate(width, overflow="ellipsis")
    room = width - cell.cell_len
    if room > 0:
        if justify == "right":
            cell.pad_left(room)
        else:
            cell.pad_right(room)
    return cell


MOVES = (
    Key("up", "up,k", "cursor_up", "Up", "The row above", view="table"),
    Key("down", "down,j", "cursor_down", "Down", "The row below", view="table"),
    Key("page-up", "pageup", "page_up", "Page up", "A page up", view="table"),
    Key("page-down", "pagedown", "page_down", "Page down", "A page down", view="table"),
    Key("first-row", "home,ctrl+home", "first", "First row", "The first row", view="table"),
    Key("last-row", "end,ctrl+end", "last", "Last row", "The last row", view="table"),
    Key("left", "left", "scroll_left", "Left", "Scroll the columns left", view="table"),
    Key("right", "right", "scroll_right", "Right", "Scroll the columns right", view="table"),
)
"""The keys that move through a `LineTable`, for the table of the screen that shows one (as
its `table`)."""


class LineTable(ScrollView, Generic[K], can_focus=True, inherit_bindings=False):
    """Rows of cells under a sticky header row; one row is the cursor (Enter selects it).

    Rows are keys (`set_rows`); `cells(key)` gives a row's cells when it is first drawn. It
    binds no key: the screen's table does (`MOVES`, run on the screen's `table`).
    """

    COMPONENT_CLASSES = {  # noqa: RUF012
        "line-table--header",
        "line-table--cursor",
        "line-table--even-row",
    }
    DEFAULT_CSS = """
    LineTable {
        background: $surface;
        color: $foreground;
        &:focus {
            & > .line-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        &:dark > .line-table--even-row { background: $surface-darken-1 40%; }
        & > .line-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .line-table--even-row { background: $surface-lighten-1 50%; }
        & > .line-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    class RowHighlighted(Message):
        """The cursor moved to another row (or the rows changed under it)."""

        def __init__(self, table: LineTable[K], cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row

    class RowSelected(Message):
        """Enter, or a click on the cursor's row."""

        def __init__(self, table: LineTable[K], cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row

    def __init__(
        self,
        columns: Sequence[Column],
        cells: Callable[[K], Sequence[Text]],
        *,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.columns = list(columns)
        self.cells = cells
        self.keys: list[K] = []
        self._cursor = 0
        self._laid_out: tuple[Size, ...] = ()
        self._frame_style: Style | None = None
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(1024)
        """Drawn rows (full width, not scrolled) by key and look."""
        self._segments: LRUCache[object, list[Segment]] = LRUCache(4096)
        """A row's cells fitted to their columns, as segments, by key (None: the header)."""

    # -- rows and columns -----------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        """How many rows the table holds (not only those on screen)."""
        return len(self.keys)

    @property
    def cursor_row(self) -> int:
        """The index of the cursor's row (0 when there is none)."""
        return self._cursor

    def set_columns(self, columns: Sequence[Column]) -> None:
        """New columns (other widths): every row is drawn again when shown."""
        if list(columns) != self.columns:
            self.columns = list(columns)
            self.forget()
            self._resize()

    def set_rows(self, keys: Sequence[K], cursor: int | None = None) -> None:
        """Show these rows, in this order; the cursor goes to row `cursor` (else stays put,
        within the rows). Only the rows then on screen are drawn."""
        self.keys = list(keys)
        self._resize()
        self.move_cursor(row=self._cursor if cursor is None else cursor, force=True)
        self.refresh_rows()

    def forget(self, key: K | None = None) -> None:
        """Draw a row (or every row) again from its cells (they changed)."""
        if key is None:
            self._strips.clear()
            self._segments.clear()
        else:
            self._segments.discard(key)
            self._strips.clear()
        self.refresh_rows()

    def redraw_row(self, row: int) -> None:
        """Draw row `row` again from its cells (they changed): only its line."""
        key = self.keys[row]
        self._segments.discard(key)
        for look in ("line-table--cursor", "line-table--even-row", ""):
            for focus in (False, True):
                self._strips.discard((key, look, focus))
        self.refresh_line(row + 1)

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        """A layout of the screen that changed none of this table's sizes changes nothing
        (ScrollView would draw its scrollbars again: as much work as the rows)."""
        sizes = (size, virtual_size, container_size, self.virtual_size)
        if sizes == self._laid_out:
            return False
        self._laid_out = sizes
        return super()._size_updated(size, virtual_size, container_size, layout)

    def refresh_rows(self) -> None:
        """Draw every row on screen again, not the scrollbars (drawing them costs as much)."""
        self.refresh(self.size.region)

    def get_row_at(self, row: int) -> list[Text]:
        """The cells of row `row` (as `cells` gives them)."""
        return list(self.cells(self.keys[row]))

    def _total_width(self) -> int:
        return sum(c.width + 2 * PADDING for c in self.columns)

    def _resize(self) -> None:
        """The rows' size; no layout of the screen when the scrollbars stay as they are."""
        size, old, view = (
            Size(self._total_width(), len(self.keys) + 1),
            self.virtual_size,
            self.size,
        )
        if size == old:
            return
        same_bars = (old.width > view.width) == (size.width > view.width) and (
            old.height > view.height
        ) == (size.height > view.height)
        if same_bars and self.is_mounted and view.area:
            self.set_reactive(LineTable.virtual_size, size)
            self._scroll_update(size)
        else:
            self.virtual_size = size

    # -- the cursor -----------------------------------------------------------------------------

    def move_cursor(self, *, row: int, force: bool = False) -> None:
        """Put the cursor on row `row` (clamped), scroll it into view, tell who listens."""
        row = max(0, min(row, len(self.keys) - 1)) if self.keys else 0
        if row == self._cursor and not force:
            return
        old, self._cursor = self._cursor, row
        if not self._scroll_to_cursor():  # only the two rows whose look changed are drawn
            self.refresh_line(old + 1)
            self.refresh_line(row + 1)
        self.post_message(self.RowHighlighted(self, row))

    def _scroll_to_cursor(self) -> bool:
        """Scroll the cursor's row into view; True when that scrolled (all is drawn again)."""
        height = max(1, self.scrollable_content_region.height - 1)  # below the header
        top = round(self.scroll_y)
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True, force=True)
        elif self._cursor >= top + height:
            self.scroll_to(y=self._cursor - height + 1, animate=False, immediate=True, force=True)
        else:
            return False
        return True

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 2)

    def action_cursor_up(self) -> None:
        """One row up."""
        self.move_cursor(row=self._cursor - 1)

    def action_cursor_down(self) -> None:
        """One row down."""
        self.move_cursor(row=self._cursor + 1)

    def action_page_up(self) -> None:
        """A screenful up."""
        self.move_cursor(row=self._cursor - self._page())

    def action_page_down(self) -> None:
        """A screenful down."""
        self.move_cursor(row=self._cursor + self._page())

    def action_first(self) -> None:
        """The first row."""
        self.move_cursor(row=0)

    def action_last(self) -> None:
        """The last row."""
        self.move_cursor(row=len(self.keys) - 1)

    def action_select_cursor(self) -> None:
        """Enter: the cursor's row is selected."""
        if self.keys:
            self.post_message(self.RowSelected(self, self._cursor))

    def on_click(self, event: events.Click) -> None:
        """A click moves the cursor to a row; a click on the cursor's row selects it."""
        y = event.get_content_offset(self)
        if y is None or y.y < 1:
            return
        row = round(self.scroll_y) + y.y - 1
        if not 0 <= row < len(self.keys):
            return
        event.stop()
        if row == self._cursor:
            self.action_select_cursor()
        else:
            self.move_cursor(row=row)

    # -- drawing --------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        """A theme or focus change: draw the rows again (their cells too: colours may change)."""
        super().notify_style_update()
        self._strips.clear()
        self._segments.clear()

    def on_focus(self) -> None:
        """The cursor's row takes its focused look."""
        self.refresh_rows()

    def on_blur(self) -> None:
        """The cursor's row takes its unfocused look."""
        self.refresh_rows()

    def _cells_segments(self, cells: Sequence[Text]) -> list[Segment]:
        """Cells fitted to their columns, padded, as segments (no style of the row yet)."""
        console = self.app.console
        pad = Segment(" " * PADDING)
        segments: list[Segment] = []
        for column, cell in zip(self.columns, cells, strict=False):
            segments.append(pad)
            plain, width = cell.plain, column.width
            if not cell.spans and plain.isascii() and plain.isprintable() and len(plain) <= width:
                room = " " * (width - len(plain))  # the common case, without Rich's layout
                text = room + plain if column.justify == "right" else plain + room
                style = cell.style
                segments.append(Segment(text, console.get_style(style) if style else None))
            else:
                fitted = fit_cell(cell, width, column.justify)
                segments.extend(fitted.render(console, end=""))
            segments.append(pad)
        return segments

    def _strip(self, key: object, look: str, cells: Callable[[], Sequence[Text]]) -> Strip:
        """A row's full-width strip in `look` (its component class), drawn once."""
        cache_key = (key, look, self.has_focus)
        strip = self._strips.get(cache_key)
        if strip is None:
            segments = self._segments.get(key)
            if segments is None:
                segments = self._segments[key] = self._cells_segments(cells())
            base = self._base()
            over = None  # the cursor's colours win over a cell's (as in DataTable)
            if look == "line-table--cursor":
                over = self.get_component_rich_style(look)
            elif look:
                base += self.get_component_rich_style(look)
            strip = Strip(list(Segment.apply_style(segments, base, over)), self._total_width())
            self._strips[cache_key] = strip
        return strip

    def render_lines(self, crop: Region) -> list[Strip]:
        """One frame: the table's style is looked up once (a DOM walk per row otherwise)."""
        self._frame_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def _base(self) -> Style:
        """The table's own style (the frame's, while one is drawn)."""
        return self._frame_style if self._frame_style is not None else self.rich_style

    def render_line(self, y: int) -> Strip:
        """Screen row `y`: the header at 0, then the rows from the scroll position."""
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        base = self._base()
        if y == 0:
            strip = self._strip(
                None, "line-table--header", lambda: [Text(c.label) for c in self.columns]
            )
            return strip.crop_extend(scroll_x, scroll_x + width, base)
        row = scroll_y + y - 1
        if row >= len(self.keys):
            return Strip.blank(width, base)
        key = self.keys[row]
        if row == self._cursor:
            look = "line-table--cursor"
        else:
            look = "" if row % 2 else "line-table--even-row"
        strip = self._strip(key, look, lambda: self.cells(key))
        return strip.crop_extend(scroll_x, scroll_x + width, base)

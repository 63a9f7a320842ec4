"""The sweep's table of rows: a DataTable that also moves with j / k (the browser, which may
hold 10,000 pairs, draws only the rows on screen: `line_table.LineTable`)."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import DataTable


class RowTable(DataTable[Text]):
    """Rows of pairs (the sweep); j / k move the cursor as in a pager, Enter opens a row."""

    BINDINGS = [  # noqa: RUF012
        Binding("j", "cursor_down", show=False, id="down"),
        Binding("k", "cursor_up", show=False, id="up"),
    ]

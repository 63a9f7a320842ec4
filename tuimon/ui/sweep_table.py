"""The sweep's table: one line per pair, a `LineTable` whose rows are the sweep's jobs.

A row's line is drawn again only when its cells change, and a cursor move redraws two lines:
a sweep of many live pairs updating their rows a few times a second costs a few lines, not a
table (a DataTable measures and redraws every visible row on any change).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from tuimon.ui.line_table import Column, LineTable

RIGHT = 2
"""The first columns (seed, repeat) are numbers: right-justified."""


class SweepTable(LineTable[int]):
    """Rows of cells under a header that stays, one per job (its index is its key); a column
    widens to its widest cell; Enter (or a click on the cursor row) posts `RowSelected`."""

    DEFAULT_CSS = "SweepTable { height: 1fr; }"

    def __init__(self, labels: Sequence[str], *, id: str | None = None) -> None:
        self.labels = list(labels)
        self.widths = [len(label) for label in self.labels]
        self._rows: list[list[Text]] = []
        super().__init__(self._columns(), self._rows.__getitem__, id=id)

    def _columns(self) -> list[Column]:
        return [
            Column(label, width, "right" if i < RIGHT else "left")
            for i, (label, width) in enumerate(zip(self.labels, self.widths, strict=True))
        ]

    def add_row(self, cells: Sequence[Text]) -> None:
        """A row at the end."""
        self._rows.append(list(cells))
        self._widen(cells)
        self.set_rows(range(len(self._rows)))

    def update_row(self, index: int, cells: Sequence[Text]) -> bool:
        """New cells for row `index`; only its line is drawn again (every line when a column
        must widen). False when nothing changed."""
        if self._rows[index] == list(cells):
            return False
        self._rows[index] = list(cells)
        if not self._widen(cells):
            self.redraw_row(index)
        return True

    def _widen(self, cells: Sequence[Text]) -> bool:
        """Widen the columns a cell no longer fits (True when one did)."""
        wider = False
        for i, cell in enumerate(cells):
            if cell.cell_len > self.widths[i]:
                self.widths[i], wider = cell.cell_len, True
        if wider:
            self.set_columns(self._columns())
        return wider

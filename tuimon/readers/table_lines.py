"""A table of numbers under a header line of names, told by content and read a line at a time
(a live stream and a saved file alike, through `tuimon.readers.lines.LineParser`): its
delimiter (comma, tab, runs of two spaces or more, or single spaces when every cell of its
rows is a number), its step column by name (`step`, `iter`, `update`, `tick`, `epoch`,
`batch` in the column's name: `time/total_timesteps`, `Epoch`; an `N/M` cell is N), else the
row number, said in a note. A header may be a comment (`# step  loss  acc`, as `np.savetxt`
and gnuplot data write it). Rows of numbers with no header at all are a table too: its
columns named `col1`, `col2` ... by position, the first column of integers the step.
SB3's `progress.csv` and `monitor.csv`, spinning-up's `progress.txt`, fastai's printed table,
YOLO's epoch rows, whitespace data files.
"""

from __future__ import annotations

import csv
import re
from typing import Any

from tuimon.readers.rows_to_steps import as_float, as_int

ROW = "row"
"""The step column a table without one is given: the row's number (1 = the first row)."""
_SPACES = re.compile(r"\s{2,}|\t")
WORDS = "w"
"""The delimiter of a table whose cells are split at any run of spaces (its rows all numbers)."""
_PREFERRED = ("step", "iter", "update", "tick", "epoch", "batch")
"""Words that name a step column, best first."""
_OF = re.compile(r"(\d+)\s*/\s*\d+")


def split(line: str, delimiter: str) -> list[str]:
    """A line's cells, stripped (runs of two spaces or more, or tabs, for `" "`; any run of
    spaces for `WORDS`); [] when it is no row (an open quote)."""
    if delimiter == " ":
        return [c for c in _SPACES.split(line.strip()) if c]
    if delimiter == WORDS:
        return line.split()
    try:
        return [c.strip() for c in next(csv.reader([line], delimiter=delimiter))]
    except (csv.Error, StopIteration):
        return []


_NAME = re.compile(r"[A-Za-z_%][\w./%@()\[\]+-]*(?: [A-Za-z_(][\w./%()\[\]+-]*){0,2}")
"""A column's name: a word (`train/box_loss`, `AverageEpRet`, `val_acc(%)`), up to three
(`Average Return`), never a timestamp, a sentence or a number."""


def _is_name(cell: str) -> bool:
    return len(cell) <= 64 and as_float(cell) is None and _NAME.fullmatch(cell) is not None


def _step_cell(cell: str) -> int | None:
    """A step column's cell as its step: an integer, or N of `N/M` (YOLO's `3/99`)."""
    if (n := as_int(cell)) is not None:
        return n
    m = _OF.fullmatch(cell.strip())
    return int(m.group(1)) if m and len(m.group(1)) < 19 else None


class TableRows:
    """Lines -> rows of a table (a dict per row with its step column), once a header line of
    names is followed by a line of as many cells, half of them numbers or more (all of them
    for a table split at single spaces), or once a line is all numbers with no header."""

    def __init__(self, key: str | None = None) -> None:
        self.key = key
        """`--step-key`: the step column (a table without it is not read as one)."""
        self._headers: list[tuple[str, list[str]]] = []
        """The ways the line before may be a header: a delimiter and names each."""
        self._header: tuple[str, list[str]] | None = None
        """The delimiter and names of the table being read."""
        self.step: str | None = None
        """The step column of the table being read (`ROW`: the row number)."""
        self.note: str | None = None
        """How the first table was read, once (taken by the parser)."""
        self._rows = 0

    def feed(self, text: str) -> dict[str, Any] | None:
        """The row a line is (its step under `self.step`), or None when it is not one."""
        if self._header is not None:
            delimiter, names = self._header
            cells = split(text, delimiter)
            if self._fits(cells, names, delimiter):
                return self._row(names, cells)
            self._header = None
        for delimiter, names in self._headers:
            cells = split(text, delimiter)
            if self._fits(cells, names, delimiter) and self._start(delimiter, names, cells):
                return self._row(names, cells)
        if (bare := self._bare(text)) is not None:
            return bare
        self._headers = self._headers_of(text)
        return None

    @staticmethod
    def _fits(cells: list[str], names: list[str], delimiter: str) -> bool:
        if len(cells) != len(names):
            return False
        if delimiter == WORDS:
            return all(as_float(c) is not None for c in cells)
        filled = [c for c in cells if c]  # an empty cell: a metric not logged in this row
        return bool(filled) and sum(as_float(c) is not None for c in filled) * 2 >= len(filled)

    def _headers_of(self, text: str) -> list[tuple[str, list[str]]]:
        """The ways a line may be a header (a `#` before it is a comment's mark)."""
        body = text.strip()
        body = body.lstrip("#").strip() if body.startswith("#") else body
        found: list[tuple[str, list[str]]] = []
        for delimiter in (",", "\t", " ", WORDS):
            if delimiter in (",", "\t") and delimiter not in body:
                continue
            names = split(body, delimiter)
            least = 3 if delimiter == " " else 2
            if len(names) >= least and all(map(_is_name, names)) and len(set(names)) == len(names):
                found.append((delimiter, names))
        return found

    def _bare(self, text: str) -> dict[str, Any] | None:
        """The first row of a table without a header: a line of two numbers or more, all of
        them, one an integer (the step column: the first such); None for any other line."""
        if self.key is not None or not text.strip():
            return None
        for delimiter in (",", "\t", WORDS):
            if delimiter != WORDS and delimiter not in text:
                continue
            cells = split(text, delimiter)
            if len(cells) < 2 or len(cells) > 256 or any(as_float(c) is None for c in cells):
                continue
            step = next((i for i, c in enumerate(cells) if _integer(c)), None)
            if step is None:
                return None
            names = [f"col{i}" for i in range(1, len(cells) + 1)]
            self._header, self.step, self._rows = (delimiter, names), names[step], 0
            if self.note is None:
                kind = {",": "comma", "\t": "tab", WORDS: "space"}[delimiter]
                self.note = (
                    f"a {kind}-separated table without a header: columns col1..col{len(names)}; "
                    f"step column {names[step]!r} (the first of integers) is the step"
                )
            return self._row(names, cells)
        return None

    def _start(self, delimiter: str, names: list[str], cells: list[str]) -> bool:
        """A table begins: its step column by name (with a step in this row), else the row
        number; False when `--step-key` names no column of it."""
        if self.key is not None:
            if self.key not in names:
                return False
            step: str | None = self.key
        else:
            step = next(
                (n for word in _PREFERRED for n, c in zip(names, cells, strict=True)
                 if word in n.lower() and _step_cell(c) is not None),
                None,
            )  # fmt: skip
        self.step = step or (ROW if ROW not in names else "_" + ROW)
        self._header, self._rows = (delimiter, names), 0
        if self.note is None:
            kind = {",": "comma", "\t": "tab", " ": "space", WORDS: "space"}[delimiter]
            how = f"step column {step!r}" if step else "no step column: the row number"
            self.note = f"a {kind}-separated table; {how} is the step"
        return True

    def _row(self, names: list[str], cells: list[str]) -> dict[str, Any]:
        self._rows += 1
        row: dict[str, Any] = dict(zip(names, cells, strict=True))
        if self.step in row:
            row[self.step] = _step_cell(row[self.step])
        else:
            row[self.step or ROW] = self._rows
        return row


def _integer(cell: str) -> bool:
    """A cell that is a whole number as written (`12`, not `12.0`), not negative."""
    return cell.isdecimal() and len(cell) <= 18
